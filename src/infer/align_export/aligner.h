// Forced alignment of a dataset with a trained model (tools/align): the model's forward pass
// with MAS over every utterance, in batches, and per utterance the durations (JSON and .npy), a
// Praat TextGrid (token and word tiers) and optionally the MAS path as a PNG; one summary.tsv.
//
//   AlignOptions o;  o.checkpoints = {"runs/x/checkpoints/ckpt_000004000.pt"};
//   o.dataset_dir = "data/monoflow-corpus";  o.out_dir = "aligned";
//   AlignReport r = align_dataset(o);
//
// Files under out_dir (<id>: the utterance id):
//   durations/<id>.json   id, cleaned text, tokens, token ids, durations, frame timing
//   durations/<id>.npy    int32 [tokens]: frames per token
//   textgrids/<id>.TextGrid
//   images/<id>.png       with `images`: the MAS path, tokens up, frames across
//   summary.tsv           one line per utterance (dataset order), see align_dataset
// Durations sum to the utterance's mel frames (1 + samples / hop_length, the recipe's count):
// the model sees only a multiple of n_sqz frames, and the up to n_sqz - 1 frames it does not see
// are added to the last token. TextGrid times: FrameTiming::boundary (utterance_files.h), moved by
// the run's offset (recentre.h), so TextGrids are written when every utterance has been seen.
#pragma once

#include "infer/align_export/word_spans.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "infer/align_export/utterance_files.h"

namespace monoflow::train {

struct AlignOptions {
  // A monoflow checkpoint (train's ckpt_*.pt), or several: runs of one text front-end, combined by
  // their median. Runs of one frame grid (data.mel: hop, window, ...): each token boundary's median
  // in frames (ensemble.h). Runs of several grids, each on its own mels: each word edge's and token
  // boundary's median in seconds (time_ensemble.h), the durations on the first checkpoint's frames.
  std::vector<std::string> checkpoints;
  std::string config;       // a config file for every checkpoint instead of each one's snapshot ("": the snapshots)
  std::vector<std::string> overrides;  // key=value applied to that config (data.on_bad_line=error)
  std::string dataset_dir;  // LJSpeech layout (metadata.csv + wavs/); with a filelist, its base folder
  std::string filelist;     // path|text (or path|speaker|text) lines, as data.training_files
  std::string out_dir;
  std::string device = "auto";  // auto | cpu | cuda | cuda:N; MAS runs there (cuda-fast on a GPU)
  int batch_size = 0;           // 0: the config's train.batch_size
  std::string cache_dir;        // feature cache; "": the config's (data.cache_dir, else <run dir>/cache)
  bool images = false;
  // Pause threshold of the word tier (WordSpanOptions::min_pause_frames, in milliseconds).
  double min_pause_ms = 40.0;
  // Where touching words meet (WordSpanOptions::junction).
  Junction junction = WordSpanOptions{}.junction;
  // How far the word edges at the leading and trailing silence move into their words
  // (pull_edges_from_silence); < 0: half the analysis window (data.win_length / 2 samples,
  // 23.2 ms in the LJSpeech recipe); 0: not at all.
  double silence_edge_ms = -1;
  // Move the run's boundaries by its offset as the mel's spectral change at word junctions tells
  // it (recentre.h); the TextGrids move, the durations stay MAS's frames. Not below
  // `recentre_min_junctions` junctions in the dataset (too few to tell). Opt-in: the offset rests
  // on a constant calibrated on one voice's word events (recentre.h), which on another voice
  // becomes a bias of its own. It was calibrated with Junction::kMiddle, which it then uses in
  // place of kCentre. Checkpoints of one frame grid only (UserError otherwise).
  bool recentre = false;
  int64_t recentre_min_junctions = 200;
  bool progress = true;  // the progress line on stderr
  // Called with each utterance's alignment as its files are written (monoflow.align in Python
  // collects the durations through it); empty: not called.
  std::function<void(const UtteranceAlignment&)> on_utterance;
};

struct AlignReport {
  int64_t utterances = 0;       // aligned and written
  int64_t bad_lines = 0;        // skipped under on_bad_line: skip
  int64_t words = 0;
  int64_t word_label_fallbacks = 0;  // utterances whose word labels came from tokens (word_intervals)
  double audio_seconds = 0;
  double mean_mle = 0;          // mean over utterances of the per-utterance mle (and over the models)
  int64_t junctions = 0;        // word junctions the recentring measured
  double recentred_ms = 0;      // how far the TextGrids' boundaries moved earlier (negative: later)
  double elapsed_s = 0;
  std::string backend;          // the MAS backend used
  std::string device;
  std::string summary_path;
};

// Runs everything above. The data section of the config (on_bad_line, the mel recipe, the text
// front-end, n_speakers) applies; max_mel_frames does not (every utterance is aligned). With
// several frame grids, the first grid's dataset decides which lines are bad; an utterance that a
// later grid cannot use (too few of its frames for the tokens) is a bad line of that grid.
// Bad lines (missing audio, malformed lines, unencodable text, too short audio, duplicate
// ids) follow data.on_bad_line: skip reports each as "warning: file:line: ... (skipped)", error
// throws a FileError naming file:line. UserError / FileError for options, config or checkpoint.
AlignReport align_dataset(const AlignOptions& options);

// The rule the word tier splits touching words by: options.junction, but kMiddle in place of
// kCentre under recentre, the rule recentring's constant was calibrated with (recentre.h).
Junction word_tier_junction(const AlignOptions& options);

}  // namespace monoflow::train
