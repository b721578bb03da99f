// The checkpoints of one align run grouped by frame grid (data.mel: hop, window, rate, ...): their
// configs, models and outputs over a batch, and one utterance's alignment combined over every run.
// Runs of one grid are combined in frames (ensemble.h), runs of several in seconds
// (time_ensemble.h); aligner.cpp drives the batches and writes the files.
#pragma once

#include <torch/torch.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "align/mas.h"
#include "data/batch.h"
#include "data/dataset.h"
#include "data/text/text_processor.h"
#include "infer/align_export/aligner.h"
#include "infer/align_export/textgrid.h"
#include "infer/align_export/utterance_files.h"
#include "infer/align_export/word_spans.h"
#include "models/glow_tts.h"
#include "train/config/config.h"

namespace monoflow::train {

// One frame grid with the checkpoints trained on it and the dataset of the mels they read.
struct FrameGrid {
  Config config;  // its first checkpoint's
  std::shared_ptr<const data::TtsDataset> dataset;  // set by the caller
  std::map<std::string, size_t> index_of;           // utterance id -> dataset index (the caller's too)
  std::vector<models::GlowTTS> models;
  FrameTiming timing;
  WordSpanOptions spans;  // the word tier's rules in this grid's frames
  double silence_edge_s = 0;
};

// Each checkpoint's config: --config (read once) for all, else each one's snapshot, with the
// overrides. UserError / FileError for a checkpoint without a snapshot (an official file without
// --config), and for one whose text front-end or speakers differ from the first's: the runs of an
// ensemble must encode the text alike.
std::vector<Config> checkpoint_configs(const AlignOptions& o);

// The checkpoints' models (evaluation mode, on `device`) grouped by frame grid
// (MelOptions::settings_key), the first checkpoint's grid first: its frames are the durations
// files'. The datasets are left to the caller.
std::vector<FrameGrid> frame_grids(const AlignOptions& o, const std::vector<Config>& configs, int64_t vocab_size,
                                   const torch::Device& device);

// A grid's models over one batch of its dataset.
struct GridOutputs {
  std::vector<torch::Tensor> durations;   // [B, T] int64 on the CPU, one per model
  torch::Tensor model_frames;             // [B]: the frames the models see (a multiple of n_sqz)
  torch::Tensor mle_sum;                  // [B] double: per-utterance mle summed over the models
  torch::Tensor attn;                     // the first model's MAS path, when asked
  std::map<std::string, int64_t> row_of;  // utterance id -> batch row
  torch::Tensor mel_lengths;              // [B] on the CPU
};

GridOutputs run_models(FrameGrid& grid, const data::Batch& host_batch, const torch::Device& device,
                       const align::MasOptions& mas, bool keep_attn);

// One utterance as align writes it: the durations (on the first grid's frames), the word
// intervals of its first run (for the counts and the recentring) and the TextGrid.
struct CombinedAlignment {
  UtteranceAlignment utterance;
  WordIntervals words;
  TextGrid grid;
};

// Every run of every grid over utterance `id`, combined. One grid: outputs[0].durations must hold
// one tensor, the runs' median in frames taken over the batch (median_durations). Several: each
// run's word and token tiers in seconds, their medians (time_ensemble.h), gaps under
// `min_pause_s` split. nullopt where a later grid's dataset left the utterance out.
std::optional<CombinedAlignment> combined_alignment(const std::string& id, const std::vector<FrameGrid>& grids,
                                                    const std::vector<GridOutputs>& outputs,
                                                    const text::TextProcessor& tp, double min_pause_s);

}  // namespace monoflow::train
