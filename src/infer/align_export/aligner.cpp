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
#include "infer/align_export/frame_grids.h"
#include "infer/align_export/recentre.h"
#include "infer/align_export/utterance_files.h"
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

}  // namespace

Junction word_tier_junction(const AlignOptions& o) {
  return o.recentre && o.junction == Junction::kCentre ? Junction::kMiddle : o.junction;
}

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
        std::vector<int64_t> frames;
        for (const AlignedToken& token : u.tokens) frames.push_back(token.frames);
        frames.back() -= u.frames - seen;  // the frames past the model's multiple of n_sqz
        const torch::Tensor durations = torch::tensor(frames, torch::kInt64);
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
