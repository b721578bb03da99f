// The contents of one utterance's alignment files (aligner.h lists them): the durations JSON
// and the TextGrid; the .npy comes from infer/npy.h and the image from log/image.h.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "infer/align_export/textgrid.h"
#include "infer/align_export/word_spans.h"

namespace monoflow::train {

// Frame counts to seconds: a length is frames * hop_length / sampling_rate; a boundary, see boundary().
// win_length (samples) is how far around its centre a frame hears: the durations files say it, so
// that tools reading them know how far a boundary can sit from the sound that placed it.
struct FrameTiming {
  int hop_length = 256;
  int sampling_rate = 22050;
  int win_length = 1024;
  double seconds(int64_t frames) const {
    return static_cast<double>(frames) * hop_length / sampling_rate;
  }
  // Where the boundary between frames `frame` - 1 and `frame` lies in time, of an utterance of
  // `total` frames. The STFT is centred, so frame s stands for the audio around s * hop, and the
  // boundary falls half a hop before it; the first boundary is 0 and the last the TextGrid's end.
  // A boundary half a frame into frame s (s + 0.5, Junction::kCentre) lies at s * hop.
  double boundary(double frame, int64_t total) const {
    if (frame <= 0) return 0.0;
    if (frame >= static_cast<double>(total)) return seconds(total);
    return (frame - 0.5) * hop_length / sampling_rate;
  }
};

struct UtteranceAlignment {
  std::string id;
  std::string cleaned_text;
  std::vector<int64_t> token_ids;
  std::vector<AlignedToken> tokens;  // their frames are the durations
  int64_t frames = 0;                // the durations' sum: the mel's frames
};

// {"id": ..., "text": cleaned, "tokens": [...], "token_ids": [...], "durations": [...],
//  "frames": N, "hop_length": 256, "sampling_rate": 22050, "win_length": 1024}
std::string durations_json(const UtteranceAlignment& u, const FrameTiming& timing);

// A mel frame is computed from win_length samples around its centre, so the frames just after
// the speech still see its tail, up to half a window away, and MAS gives them to the last word
// (and likewise the frames before the first word, where a silence leads): measured against the
// wavs' energy, the last word ended a median 23 ms late (docs/accuracy.md, "Word edges at the
// silence"). The first word's start, where a pause ("" interval) precedes it, and the last word's
// end, where one follows it, move into the word by `seconds`, at most a quarter of the word's
// length; the pause grows by as much. Pauses inside the utterance are left alone: there a pause
// interval may be a long space token in connected speech, not a silence, and moving its edges
// cost as much as it gained.
void pull_edges_from_silence(TextGridTier& words, double seconds);

// Tiers "words" (word_intervals' result, its edges at the silence pulled by `silence_edge_s`)
// and "tokens" (one interval per token, labelled with its symbol), over [0, frames * hop / rate].
TextGrid alignment_textgrid(const UtteranceAlignment& u, const WordIntervals& words, const FrameTiming& timing,
                            double silence_edge_s = 0);
// The same with a word tier already in seconds (time_ensemble.h's median over runs of several
// frame grids); the token tier is u's.
TextGrid alignment_textgrid(const UtteranceAlignment& u, TextGridTier words, const FrameTiming& timing);

}  // namespace monoflow::train
