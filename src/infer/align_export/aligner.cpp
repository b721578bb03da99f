#include "infer/align_export/aligner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <sstream>

#include "common/contained_path.h"
#include "common/error.h"
#include "data/dataset.h"
#include "data/datasets.h"
#include "data/loader.h"
#include "data/manifest.h"
#include "data/posix_fs.h"
#include "data/text_encoder.h"
#include "models/glow_tts.h"
#include "infer/align_export/ensemble.h"
#include "infer/align_export/recentre.h"
#include "infer/align_export/time_ensemble.h"
#include "infer/align_export/utterance_files.h"
#include "train/checkpoint.h"
#include "train/weights_file.h"
#include "train/config/config_io.h"
#include "train/config/options_map.h"
#include "train/log/image.h"
#include "train/log/plot.h"
#include "train/log/metrics_log.h"
#include "train/log/progress.h"
#include "infer/npy.h"
#include "train/train_step.h"
#include "train/threads.h"

namespace monoflow::train {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The config of one checkpoint: --config (for every checkpoint) or its own snapshot.
Config checkpoint_config(const std::string& checkpoint, const AlignOptions& o) {
  if (!o.config.empty()) return load_config(o.config, o.overrides);
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

void check_options(const AlignOptions& o) {
  if (o.checkpoints.empty()) throw UserError("give --checkpoint FILE (one or more)");
  if (o.dataset_dir.empty() && o.filelist.empty()) throw UserError("give --dataset-dir DIR or --filelist FILE");
  if (o.out_dir.empty()) throw UserError("give --out DIR");
  if (o.batch_size < 0) throw UserError("--batch-size " + std::to_string(o.batch_size) + ": must be positive");
  if (!(o.min_pause_ms >= 0)) throw UserError("--min-pause-ms: must be >= 0");
}

data::DataOptions alignment_data_options(const Config& c, const AlignOptions& o) {
  data::DataOptions d = data_options(c);
  d.dataset_dir = o.dataset_dir;
  d.training_files = o.filelist;
  d.validation_files.clear();
  if (!o.cache_dir.empty()) d.cache_dir = o.cache_dir;
  d.max_mel_frames = 0;  // align everything
  d.validate();
  return d;
}

// The manifest's utterances; a repeated id (its files would overwrite the first's) is a bad line.
std::vector<data::Utterance> read_utterances(const data::DataOptions& d, data::BadLines& bad) {
  const std::vector<data::Utterance> all = data::read_manifest(d.training_files, d, bad);
  std::map<std::string, const data::Utterance*> first;
  std::vector<data::Utterance> out;
  for (const data::Utterance& u : all) {
    const auto [at, fresh] = first.emplace(u.id, &u);
    if (!fresh) {
      bad.report(u.source, u.line,
                 "utterance id '" + u.id + "' repeats " + at->second->source + ":" +
                     std::to_string(at->second->line) + " (its files would overwrite the first's)");
      continue;
    }
    out.push_back(u);
  }
  return out;
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

struct SummaryRow {
  std::string id, source;
  int64_t tokens = 0, words = 0, frames = 0;
  double seconds = 0, mle = 0;
  bool labels_from_text = true;
};

std::string summary_tsv(const std::vector<SummaryRow>& rows) {
  std::ostringstream o;
  o << "id\tsource\ttokens\twords\tframes\tseconds\tmle\tword_labels\n";
  for (const SummaryRow& r : rows) {
    char seconds[32];
    std::snprintf(seconds, sizeof seconds, "%.3f", r.seconds);
    o << r.id << "\t" << r.source << "\t" << r.tokens << "\t" << r.words << "\t" << r.frames << "\t" << seconds
      << "\t" << json_number(r.mle) << "\t" << (r.labels_from_text ? "text" : "tokens") << "\n";
  }
  return o.str();
}

void make_dirs(const std::string& path) {
  const std::string e = data::posix::make_dirs(path);
  if (!e.empty()) throw FileError(path, 0, "cannot create the folder: " + e);
}

// One utterance's tokens with their MAS durations (`durations`: [T_max] int64, CPU), the frames
// past the model's multiple of n_sqz on the last token (aligner.h), so they sum to mel_frames.
UtteranceAlignment utterance_alignment(const data::DatasetItem& item, const text::TextProcessor& tp,
                                       const torch::Tensor& durations, int64_t model_frames, int64_t mel_frames) {
  UtteranceAlignment u;
  u.id = item.utterance.id;
  u.cleaned_text = tp.clean(item.utterance.text);
  u.token_ids = item.text;
  u.frames = mel_frames;
  const int64_t space_id = tp.id_of(" ");
  const auto dur = durations.accessor<int64_t, 1>();
  for (size_t t = 0; t < item.text.size(); ++t) {
    const int64_t id = item.text[t];
    u.tokens.push_back({tp.symbol(id), tp.spoken(id), id == space_id, dur[static_cast<int64_t>(t)]});
  }
  u.tokens.back().frames += mel_frames - model_frames;
  return u;
}

// durations/<id>.json and .npy, and images/<id>.png when `path` (the MAS path [T, model
// frames]) is defined. The TextGrid comes once the whole run has been seen (recentre.h). Every
// file stays inside its folder of out_dir (child_path), whatever the id holds.
void write_utterance(const std::string& out_dir, const UtteranceAlignment& u, const FrameTiming& timing,
                     const torch::Tensor& path) {
  write_file(child_path(out_dir + "/durations", u.id, ".json", "utterance id"), durations_json(u, timing));
  torch::Tensor frames = torch::empty({static_cast<int64_t>(u.tokens.size())}, torch::kInt32);
  auto frames_at = frames.accessor<int32_t, 1>();
  for (size_t t = 0; t < u.tokens.size(); ++t) {
    frames_at[static_cast<int64_t>(t)] = static_cast<int32_t>(u.tokens[t].frames);
  }
  write_file(child_path(out_dir + "/durations", u.id, ".npy", "utterance id"), encode_npy_int32(frames));
  if (path.defined()) {
    write_file(child_path(out_dir + "/images", u.id, ".png", "utterance id"),
               render_plot(path, PlotLabels{"frame", "token", 240, "MAS alignment (" + u.id + ")"}).bytes);
  }
}

// One frame grid (data.mel: hop, window, rate, ...) with the checkpoints trained on it and the
// dataset of the mels they read. Checkpoints of one config share a grid; several grids are
// combined in time (time_ensemble.h).
struct FrameGrid {
  Config config;  // its first checkpoint's
  std::shared_ptr<const data::TtsDataset> dataset;
  std::map<std::string, size_t> index_of;  // utterance id -> dataset index
  std::vector<models::GlowTTS> models;
  FrameTiming timing;
  WordSpanOptions spans;
  double silence_edge_s = 0;
};

FrameGrid frame_grid(const Config& c, const AlignOptions& o) {
  FrameGrid g;
  g.config = c;
  g.timing = FrameTiming{c.data.mel.hop_length, c.data.mel.sampling_rate, c.data.mel.win_length};
  g.spans.junction = o.junction;
  g.spans.min_pause_frames =
      static_cast<int64_t>(std::ceil(o.min_pause_ms / 1000.0 * c.data.mel.sampling_rate / c.data.mel.hop_length - 1e-9));
  g.silence_edge_s = o.silence_edge_ms >= 0 ? o.silence_edge_ms / 1000.0
                                            : c.data.mel.win_length / 2.0 / c.data.mel.sampling_rate;
  return g;
}

// Each checkpoint's config: --config (read once) for all, else each one's snapshot. Every one must
// share the first's text front-end and speakers, as the runs of an ensemble encode the text alike.
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

// The checkpoints' models grouped by frame grid (MelOptions::settings_key), the first
// checkpoint's grid first: its frames are the durations files'.
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
    grids[at->second].models.push_back(model);
  }
  return grids;
}

// A grid's models over one batch: each model's durations, the frames the models see, the mle summed
// over the models, and the first model's MAS path (when asked).
struct GridOutputs {
  std::vector<torch::Tensor> durations;  // [B, T] int64 on the CPU, one per model
  torch::Tensor model_frames;            // [B]
  torch::Tensor mle_sum;                 // [B] double
  torch::Tensor attn;
  std::map<std::string, int64_t> row_of;  // utterance id -> batch row
  torch::Tensor mel_lengths;             // [B] on the CPU
};

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

// One utterance as align writes it: the durations (on the first grid), the word intervals of
// its first run (for the counts and the recentring) and the TextGrid.
struct CombinedAlignment {
  UtteranceAlignment utterance;
  WordIntervals words;
  TextGrid grid;
};

// Every run of every grid over utterance `id` combined: one grid, the median of the token
// boundaries in frames (ensemble.h, taken over the batch before); several, each run's word and token tiers in seconds, their
// medians (time_ensemble.h). nullopt where a later grid's dataset left the utterance out.
std::optional<CombinedAlignment> combined_alignment(const std::string& id, const std::vector<FrameGrid>& grids,
                                                    const std::vector<GridOutputs>& outputs,
                                                    const text::TextProcessor& tp, double min_pause_s) {
  const auto utterance_of = [&](size_t g, const torch::Tensor& durations, int64_t b) {
    const data::DatasetItem& item = grids[g].dataset->item(grids[g].index_of.at(id));
    const int64_t seen = outputs[g].model_frames[b].item<int64_t>();
    return utterance_alignment(item, tp, durations[b], seen, outputs[g].mel_lengths[b].item<int64_t>());
  };
  const int64_t b0 = outputs[0].row_of.at(id);
  CombinedAlignment a;
  if (grids.size() == 1) {  // its runs' durations are their median already
    a.utterance = utterance_of(0, outputs[0].durations.front(), b0);
    a.words = word_intervals(a.utterance.tokens, words_of(a.utterance.cleaned_text), grids[0].spans);
    a.grid = alignment_textgrid(a.utterance, a.words, grids[0].timing, grids[0].silence_edge_s);
    return a;
  }
  std::vector<TextGridTier> word_tiers, token_tiers;
  for (size_t g = 0; g < grids.size(); ++g) {
    const auto row = outputs[g].row_of.find(id);
    if (row == outputs[g].row_of.end()) return std::nullopt;
    for (const torch::Tensor& durations : outputs[g].durations) {
      const UtteranceAlignment u = utterance_of(g, durations, row->second);
      const WordIntervals words = word_intervals(u.tokens, words_of(u.cleaned_text), grids[g].spans);
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

}  // namespace

AlignReport align_dataset(const AlignOptions& o) {
  const auto start = Clock::now();
  check_options(o);
  const std::vector<Config> configs = checkpoint_configs(o);
  const Config& c = configs.front();
  auto tp = std::make_shared<const text::TextProcessor>(c.text);
  const torch::Device device = resolve_device(o.device, "--device");
  std::vector<FrameGrid> grids = frame_grids(o, configs, static_cast<int64_t>(tp->vocab_size()), device);
  if (o.recentre && grids.size() > 1) {
    throw UserError("--recentre: the checkpoints are on " + std::to_string(grids.size()) +
                    " frame grids (data.hop_length, data.win_length, ...); recentring measures one");
  }
  align::MasOptions mas;
  mas.backend = resolve_backend("auto", device);  // cuda-fast on a GPU (else cuda); cpu on the CPU

  const data::DataOptions d = alignment_data_options(c, o);
  data::BadLines bad(d.on_bad_line);
  grids[0].dataset =
      std::make_shared<const data::TtsDataset>(read_utterances(d, bad), d, data::text_encoder(tp), bad);
  const data::TtsDataset& dataset = *grids[0].dataset;
  if (dataset.size() == 0) {
    throw UserError("no utterance left to align (" + std::to_string(bad.skipped()) + " bad line(s) skipped)");
  }
  std::vector<data::Utterance> kept;  // the later grids check what the first kept, each on its own frames
  for (size_t i = 0; i < dataset.size(); ++i) kept.push_back(dataset.item(i).utterance);
  int64_t bad_elsewhere = 0;
  for (size_t g = 1; g < grids.size(); ++g) {
    data::BadLines grid_bad(d.on_bad_line);
    grids[g].dataset = std::make_shared<const data::TtsDataset>(kept, alignment_data_options(grids[g].config, o),
                                                                data::text_encoder(tp), grid_bad);
    bad_elsewhere += grid_bad.skipped();
  }
  for (FrameGrid& grid : grids) {
    for (size_t i = 0; i < grid.dataset->size(); ++i) grid.index_of[grid.dataset->item(i).utterance.id] = i;
  }

  data::LoaderOptions lo = loader_options(c, /*training=*/false);
  if (o.batch_size > 0) lo.batch_size = o.batch_size;
  lo.pin_memory = device.is_cuda();
  set_intra_op_threads(c.run.threads, lo.num_workers);  // one per core would fight the loader
  data::DataLoader loader(grids[0].dataset, lo);
  int64_t model_count = 0;
  for (const FrameGrid& grid : grids) model_count += static_cast<int64_t>(grid.models.size());

  for (const char* sub : {"durations", "textgrids"}) make_dirs(o.out_dir + "/" + sub);
  if (o.images) make_dirs(o.out_dir + "/images");
  const FrameTiming& timing = grids[0].timing;

  AlignReport report;
  report.bad_lines = bad.skipped() + bad_elsewhere;
  report.backend = align::backend_name(mas.backend);
  report.device = device.str();
  std::vector<SummaryRow> rows(dataset.size());
  ProgressLine progress(stderr);
  CountProgress shown;
  shown.total = static_cast<int64_t>(dataset.size());
  shown.unit = "utterances";
  if (o.progress) {
    std::string hops;
    for (const FrameGrid& grid : grids) hops += (hops.empty() ? "" : ", ") + std::to_string(grid.timing.hop_length);
    progress.message("align: " + std::to_string(dataset.size()) + " utterances in batches of " +
                     std::to_string(lo.batch_size) + " on " + report.device + " (MAS " + report.backend + "), " +
                     std::to_string(model_count) + " checkpoint(s) on " + std::to_string(grids.size()) +
                     " frame grid(s) (hop " + hops + "); " + std::to_string(report.bad_lines) +
                     " bad line(s) skipped");
  }
  auto last_plain = Clock::now();
  const auto loop_start = Clock::now();

  std::vector<std::pair<std::string, TextGrid>> textgrids;  // written at the end, recentred
  JunctionChange change;
  torch::NoGradGuard no_grad;
  const bool run_attn = o.images && model_count == 1;
  while (auto host_batch = loader.next()) {
    std::vector<GridOutputs> outputs{run_models(grids[0], *host_batch, device, mas, run_attn)};
    if (grids.size() == 1) outputs[0].durations = {median_durations(outputs[0].durations)};  // ensemble.h
    for (size_t g = 1; g < grids.size(); ++g) {
      std::vector<int64_t> indices;  // the batch's utterances that this grid's dataset kept
      for (const std::string& id : host_batch->ids) {
        const auto at = grids[g].index_of.find(id);
        if (at != grids[g].index_of.end()) indices.push_back(static_cast<int64_t>(at->second));
      }
      if (indices.empty()) {
        outputs.emplace_back();
        continue;
      }
      outputs.push_back(run_models(grids[g], data::build_batch(*grids[g].dataset, indices, lo, 0), device, mas, false));
    }
    for (const std::string& id : host_batch->ids) {
      std::optional<CombinedAlignment> a = combined_alignment(id, grids, outputs, *tp, o.min_pause_ms / 1000.0);
      if (!a) continue;
      const UtteranceAlignment& u = a->utterance;
      const size_t index = grids[0].index_of.at(id);
      const data::DatasetItem& item = dataset.item(index);
      const int64_t b = outputs[0].row_of.at(id);
      const int64_t seen = outputs[0].model_frames[b].item<int64_t>();
      const int64_t tokens = static_cast<int64_t>(item.text.size());
      torch::Tensor path;  // the model's MAS path; the combined durations' own path for several models
      if (o.images) {
        torch::Tensor durations = torch::zeros({tokens}, torch::kInt64);
        for (int64_t t = 0; t < tokens; ++t) durations[t] = u.tokens[static_cast<size_t>(t)].frames;
        durations[tokens - 1] -= u.frames - seen;  // the frames past the model's multiple of n_sqz
        path = run_attn ? outputs[0].attn[b].slice(0, 0, tokens).slice(1, 0, seen)
                        : models::generate_path(durations.unsqueeze(0), torch::ones({1, tokens, seen}))[0];
      }
      write_utterance(o.out_dir, u, timing, path);
      if (o.on_utterance) o.on_utterance(u);
      if (o.recentre) {
        change.add(host_batch->mel[b].slice(1, 0, outputs[0].mel_lengths[b].item<int64_t>()), word_junctions(a->words));
      }
      textgrids.push_back({u.id, std::move(a->grid)});

      double mle = 0;
      for (size_t g = 0; g < grids.size(); ++g) mle += outputs[g].mle_sum[outputs[g].row_of.at(id)].item<double>();
      SummaryRow& row = rows[index];
      row.id = u.id;
      row.source = item.utterance.source + ":" + std::to_string(item.utterance.line);
      row.tokens = tokens;
      row.words = a->words.words;
      row.frames = u.frames;
      row.seconds = timing.seconds(u.frames);
      row.mle = mle / static_cast<double>(model_count);
      row.labels_from_text = a->words.labels_from_text;
      ++report.utterances;
      report.words += a->words.words;
      report.word_label_fallbacks += a->words.labels_from_text ? 0 : 1;
      report.audio_seconds += row.seconds;
      report.mean_mle += row.mle;
    }
    shown.done = report.utterances;
    shown.per_s = report.utterances / std::max(seconds_since(loop_start), 1e-9);
    // Live: every batch; in a log: every 10 s and at the end.
    if (o.progress && (progress.live() || shown.done == shown.total || seconds_since(last_plain) >= 10)) {
      progress.update(shown);
      last_plain = Clock::now();
    }
  }
  if (o.progress) progress.finish();

  report.junctions = change.junctions();
  const double offset_s = o.recentre ? run_offset_frames(change, o.recentre_min_junctions) * timing.hop_length /
                                           timing.sampling_rate
                                     : 0.0;
  report.recentred_ms = offset_s * 1000;
  for (auto& [id, grid] : textgrids) {
    if (offset_s != 0) shift_boundaries(grid, offset_s);
    write_file(child_path(o.out_dir + "/textgrids", id, ".TextGrid", "utterance id"), format_textgrid(grid));
  }

  std::vector<SummaryRow> written;  // dataset order
  for (const SummaryRow& row : rows) {
    if (!row.id.empty()) written.push_back(row);
  }
  report.summary_path = o.out_dir + "/summary.tsv";
  write_file(report.summary_path, summary_tsv(written));
  if (report.utterances > 0) report.mean_mle /= static_cast<double>(report.utterances);
  report.elapsed_s = seconds_since(start);
  return report;
}

}  // namespace monoflow::train
