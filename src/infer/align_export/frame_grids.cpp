#include "infer/align_export/frame_grids.h"

#include <cmath>
#include <utility>

#include "common/error.h"
#include "infer/align_export/ensemble.h"
#include "infer/align_export/time_ensemble.h"
#include "models/modules.h"
#include "train/checkpoint.h"
#include "train/config/config_io.h"
#include "train/config/library_options.h"
#include "train/train_step.h"
#include "train/weights_file.h"

namespace monoflow::train {
namespace {

// The config snapshot of one checkpoint, with the overrides.
Config checkpoint_config(const std::string& checkpoint, const AlignOptions& o) {
  check_weights_file(checkpoint, "--checkpoint");
  if (checkpoint_format(checkpoint) == CheckpointFormat::kTorchSave) {
    throw FileError(checkpoint, 0, "an official Glow-TTS checkpoint carries no config; give the model's config with --config");
  }
  const CheckpointState state = read_checkpoint_state(checkpoint);
  if (state.config_yaml.empty()) {
    throw FileError(checkpoint, 0, "the checkpoint carries no config snapshot; give the run's config with --config");
  }
  return parse_config(state.config_yaml, checkpoint + " (config snapshot)", o.overrides);
}

// Per-utterance mle: models::mle_loss of each utterance alone, [B] (CPU double).
torch::Tensor per_utterance_mle(const models::GlowTTSOutput& out) {
  const torch::Tensor mask = out.z_mask.to(torch::kFloat32);
  const torch::Tensor z = out.z.to(torch::kFloat32), z_m = out.z_m.to(torch::kFloat32),
                      z_logs = out.z_logs.to(torch::kFloat32);
  const torch::Tensor terms =
      ((z_logs + 0.5 * torch::exp(-2 * z_logs) * (z - z_m).pow(2)) * mask).sum({1, 2}) - out.logdet.to(torch::kFloat32);
  const torch::Tensor elements = mask.sum({1, 2}) * z.size(1);
  return (terms / elements + 0.5 * std::log(2 * M_PI)).to(torch::kCPU, torch::kFloat64);
}

// One utterance's tokens, their frames still 0 (set_durations gives them).
UtteranceAlignment utterance_tokens(const data::DatasetItem& item, const text::TextProcessor& tp) {
  UtteranceAlignment u;
  u.id = item.utterance.id;
  u.cleaned_text = tp.clean(item.utterance.text);
  u.token_ids = item.text;
  const int64_t space_id = tp.id_of(" ");
  for (const int64_t id : item.text) u.tokens.push_back({tp.symbol(id), tp.spoken(id), id == space_id, 0});
  return u;
}

// A run's MAS durations on u's tokens (`durations`: [T_max] int64, CPU), the frames past the
// model's multiple of n_sqz on the last token (aligner.h), so they sum to mel_frames.
void set_durations(UtteranceAlignment& u, const torch::Tensor& durations, int64_t model_frames, int64_t mel_frames) {
  const auto dur = durations.accessor<int64_t, 1>();
  for (size_t t = 0; t < u.tokens.size(); ++t) u.tokens[t].frames = dur[static_cast<int64_t>(t)];
  u.tokens.back().frames += mel_frames - model_frames;
  u.frames = mel_frames;
}

// The grid of config c: its frame timing and the word tier's rules in its frames.
FrameGrid frame_grid(const Config& c, const AlignOptions& o) {
  FrameGrid g;
  g.config = c;
  g.timing = FrameTiming{c.data.mel.hop_length, c.data.mel.sampling_rate, c.data.mel.win_length};
  g.spans.junction = word_tier_junction(o);
  g.spans.min_pause_frames =
      static_cast<int64_t>(std::ceil(o.min_pause_ms / 1000.0 * c.data.mel.sampling_rate / c.data.mel.hop_length - 1e-9));
  g.silence_edge_s = o.silence_edge_ms >= 0 ? o.silence_edge_ms / 1000.0
                                            : c.data.mel.win_length / 2.0 / c.data.mel.sampling_rate;
  return g;
}

}  // namespace

std::vector<Config> checkpoint_configs(const AlignOptions& o) {
  std::optional<Config> given;
  if (!o.config.empty()) given = load_config(o.config, o.overrides);
  std::vector<Config> configs;
  for (const std::string& checkpoint : o.checkpoints) {
    configs.push_back(given ? *given : checkpoint_config(checkpoint, o));
    const Config &c = configs.back(), &first = configs.front();
    if (c.text.settings_key() != first.text.settings_key() || c.data.n_speakers != first.data.n_speakers) {
      throw UserError("--checkpoint " + checkpoint + ": its text front-end or speakers (data.*) differ from " +
                      o.checkpoints.front() + "'s; align combines runs that encode the text alike");
    }
  }
  return configs;
}

std::vector<FrameGrid> frame_grids(const AlignOptions& o, const std::vector<Config>& configs, int64_t vocab_size,
                                   const torch::Device& device) {
  std::vector<FrameGrid> grids;
  std::map<std::string, size_t> grid_of;  // settings key -> grids index
  for (size_t i = 0; i < configs.size(); ++i) {
    const Config& c = configs[i];
    const auto [at, fresh] = grid_of.emplace(c.data.mel.settings_key(), grids.size());
    if (fresh) grids.push_back(frame_grid(c, o));
    models::GlowTTS model(model_options(c, vocab_size));
    model->to(device);
    load_model_weights(o.checkpoints[i], *model);  // monoflow's or an official Glow-TTS file
    model->set_ddi(false);
    model->eval();
    models::cache_inference_weights(*model);  // its weights no longer change
    grids[at->second].models.push_back(model);
  }
  return grids;
}

GridOutputs run_models(FrameGrid& grid, const data::Batch& host_batch, const torch::Device& device,
                       const align::MasOptions& mas, bool keep_attn) {
  GridOutputs g;
  const data::Batch batch = to_device(host_batch, device);
  for (auto& model : grid.models) {
    const models::GlowTTSOutput out =
        model->forward(batch.text, batch.text_lengths, batch.mel, batch.mel_lengths, batch.speakers, mas);
    g.durations.push_back(out.durations.to(torch::kCPU, torch::kInt64));
    g.model_frames = out.y_lengths.to(torch::kCPU);  // the same in every model: the config's n_sqz
    const torch::Tensor m = per_utterance_mle(out);
    g.mle_sum = g.mle_sum.defined() ? g.mle_sum + m : m;
    if (keep_attn && !g.attn.defined()) g.attn = out.attn.to(torch::kCPU, torch::kFloat32);
  }
  for (size_t b = 0; b < host_batch.ids.size(); ++b) g.row_of[host_batch.ids[b]] = static_cast<int64_t>(b);
  g.mel_lengths = host_batch.mel_lengths;
  return g;
}

std::optional<CombinedAlignment> combined_alignment(const std::string& id, const std::vector<FrameGrid>& grids,
                                                    const std::vector<GridOutputs>& outputs,
                                                    const text::TextProcessor& tp, double min_pause_s) {
  // Every grid holds the same tokens (one text front-end): they are cleaned and split once.
  UtteranceAlignment u = utterance_tokens(grids[0].dataset->item(grids[0].index_of.at(id)), tp);
  const std::vector<std::string> labels = words_of(u.cleaned_text);
  const auto set_run = [&](size_t g, const torch::Tensor& durations, int64_t b) {
    set_durations(u, durations[b], outputs[g].model_frames[b].item<int64_t>(), outputs[g].mel_lengths[b].item<int64_t>());
  };
  CombinedAlignment a;
  if (grids.size() == 1) {  // its runs' durations are their median already
    set_run(0, outputs[0].durations.front(), outputs[0].row_of.at(id));
    a.utterance = std::move(u);
    a.words = word_intervals(a.utterance.tokens, labels, grids[0].spans);
    a.grid = alignment_textgrid(a.utterance, a.words, grids[0].timing, grids[0].silence_edge_s);
    return a;
  }
  std::vector<TextGridTier> word_tiers, token_tiers;
  for (size_t g = 0; g < grids.size(); ++g) {
    const auto row = outputs[g].row_of.find(id);
    if (row == outputs[g].row_of.end()) return std::nullopt;
    for (const torch::Tensor& durations : outputs[g].durations) {
      set_run(g, durations, row->second);
      const WordIntervals words = word_intervals(u.tokens, labels, grids[g].spans);
      TextGrid run = alignment_textgrid(u, words, grids[g].timing, grids[g].silence_edge_s);
      word_tiers.push_back(std::move(run.tiers.at(0)));
      token_tiers.push_back(std::move(run.tiers.at(1)));
      if (g == 0 && word_tiers.size() == 1) {
        a.utterance = u;
        a.words = words;
      }
    }
  }
  const FrameTiming& timing = grids[0].timing;
  const std::vector<int64_t> frames = median_token_frames(token_tiers, timing, a.utterance.frames);
  for (size_t t = 0; t < frames.size(); ++t) a.utterance.tokens[t].frames = frames[t];
  a.grid = alignment_textgrid(a.utterance, median_word_tier(word_tiers, timing.seconds(a.utterance.frames), min_pause_s),
                              timing);
  return a;
}

}  // namespace monoflow::train
