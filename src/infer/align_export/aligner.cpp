#include "infer/align_export/aligner.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>
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

Config alignment_config(const AlignOptions& o) {
  if (o.checkpoints.empty()) throw UserError("give --checkpoint FILE (one or more)");
  if (!o.config.empty()) return load_config(o.config, o.overrides);
  const std::string& first = o.checkpoints.front();
  check_weights_file(first, "--checkpoint");
  if (checkpoint_format(first) == CheckpointFormat::kTorchSave) {
    throw FileError(first, 0, "an official Glow-TTS checkpoint carries no config; give the model's config with --config");
  }
  const CheckpointState state = read_checkpoint_state(first);
  if (state.config_yaml.empty()) {
    throw FileError(first, 0, "the checkpoint carries no config snapshot; give the run's config with --config");
  }
  return parse_config(state.config_yaml, first + " (config snapshot)", o.overrides);
}

data::DataOptions alignment_data_options(const Config& c, const AlignOptions& o) {
  if (o.dataset_dir.empty() && o.filelist.empty()) throw UserError("give --dataset-dir DIR or --filelist FILE");
  if (o.out_dir.empty()) throw UserError("give --out DIR");
  if (o.batch_size < 0) throw UserError("--batch-size " + std::to_string(o.batch_size) + ": must be positive");
  if (!(o.min_pause_ms >= 0)) throw UserError("--min-pause-ms: must be >= 0");
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

}  // namespace

AlignReport align_dataset(const AlignOptions& o) {
  const auto start = Clock::now();
  const Config c = alignment_config(o);
  const data::DataOptions d = alignment_data_options(c, o);
  const torch::Device device = resolve_device(o.device, "--device");
  align::MasOptions mas;
  mas.backend = resolve_backend("auto", device);  // cuda-fast on a GPU (else cuda); cpu on the CPU

  auto tp = std::make_shared<const text::TextProcessor>(c.text);
  data::BadLines bad(d.on_bad_line);
  const std::vector<data::Utterance> utterances = read_utterances(d, bad);
  const auto dataset = std::make_shared<const data::TtsDataset>(utterances, d, data::text_encoder(tp), bad);
  if (dataset->size() == 0) {
    throw UserError("no utterance left to align (" + std::to_string(bad.skipped()) + " bad line(s) skipped)");
  }
  std::map<std::string, size_t> index_of;
  for (size_t i = 0; i < dataset->size(); ++i) index_of[dataset->item(i).utterance.id] = i;

  data::LoaderOptions lo = loader_options(c, /*training=*/false);
  if (o.batch_size > 0) lo.batch_size = o.batch_size;
  lo.pin_memory = device.is_cuda();
  set_intra_op_threads(c.run.threads, lo.num_workers);  // one per core would fight the loader
  data::DataLoader loader(dataset, lo);

  std::vector<models::GlowTTS> models;  // one per checkpoint, all of the config's architecture
  for (const std::string& checkpoint : o.checkpoints) {
    models::GlowTTS model(model_options(c, static_cast<int64_t>(tp->vocab_size())));
    model->to(device);
    load_model_weights(checkpoint, *model);  // monoflow's or an official Glow-TTS file
    model->set_ddi(false);
    model->eval();
    models.push_back(model);
  }

  for (const char* sub : {"durations", "textgrids"}) make_dirs(o.out_dir + "/" + sub);
  if (o.images) make_dirs(o.out_dir + "/images");
  const FrameTiming timing{c.data.mel.hop_length, c.data.mel.sampling_rate, c.data.mel.win_length};
  WordSpanOptions spans;
  spans.junction = o.junction;
  spans.min_pause_frames =
      static_cast<int64_t>(std::ceil(o.min_pause_ms / 1000.0 * c.data.mel.sampling_rate / c.data.mel.hop_length - 1e-9));
  const double silence_edge_s = o.silence_edge_ms >= 0 ? o.silence_edge_ms / 1000.0
                                                   : c.data.mel.win_length / 2.0 / c.data.mel.sampling_rate;

  AlignReport report;
  report.bad_lines = bad.skipped();
  report.backend = align::backend_name(mas.backend);
  report.device = device.str();
  std::vector<SummaryRow> rows(dataset->size());
  ProgressLine progress(stderr);
  CountProgress shown;
  shown.total = static_cast<int64_t>(dataset->size());
  shown.unit = "utterances";
  if (o.progress) {
    progress.message("align: " + std::to_string(dataset->size()) + " utterances in batches of " +
                     std::to_string(lo.batch_size) + " on " + report.device + " (MAS " + report.backend + "); " +
                     std::to_string(report.bad_lines) + " bad line(s) skipped");
  }
  auto last_plain = Clock::now();
  const auto loop_start = Clock::now();

  std::vector<std::pair<std::string, TextGrid>> grids;  // written at the end, recentred
  JunctionChange change;
  torch::NoGradGuard no_grad;
  while (auto host_batch = loader.next()) {
    const data::Batch batch = to_device(*host_batch, device);
    std::vector<torch::Tensor> each;  // every model's durations
    torch::Tensor model_frames, mle, attn;
    for (auto& model : models) {
      const models::GlowTTSOutput out =
          model->forward(batch.text, batch.text_lengths, batch.mel, batch.mel_lengths, batch.speakers, mas);
      each.push_back(out.durations.to(torch::kCPU, torch::kInt64));
      model_frames = out.y_lengths.to(torch::kCPU);  // the same in every model: the config's n_sqz
      const torch::Tensor m = per_utterance_mle(out);
      mle = mle.defined() ? mle + m : m;
      if (o.images && models.size() == 1) attn = out.attn.to(torch::kCPU, torch::kFloat32);
    }
    const torch::Tensor durations = median_durations(each);
    mle = mle / static_cast<double>(models.size());
    const auto mel_lengths = host_batch->mel_lengths.accessor<int64_t, 1>();
    for (int64_t b = 0; b < static_cast<int64_t>(host_batch->ids.size()); ++b) {
      const size_t index = index_of.at(host_batch->ids[b]);
      const data::DatasetItem& item = dataset->item(index);
      const int64_t seen = model_frames[b].item<int64_t>();
      const UtteranceAlignment u = utterance_alignment(item, *tp, durations[b], seen, mel_lengths[b]);
      const WordIntervals words = word_intervals(u.tokens, words_of(u.cleaned_text), spans);
      const int64_t tokens = static_cast<int64_t>(item.text.size());
      torch::Tensor path;  // the model's MAS path; the median's own path for several models
      if (o.images) {
        path = attn.defined() ? attn[b].slice(0, 0, tokens).slice(1, 0, seen)
                              : models::generate_path(durations[b].slice(0, 0, tokens).unsqueeze(0),
                                                      torch::ones({1, tokens, seen}))[0];
      }
      write_utterance(o.out_dir, u, timing, path);
      if (o.on_utterance) o.on_utterance(u);
      grids.push_back({u.id, alignment_textgrid(u, words, timing, silence_edge_s)});
      if (o.recentre) change.add(host_batch->mel[b].slice(1, 0, mel_lengths[b]), word_junctions(words));

      SummaryRow& row = rows[index];
      row.id = u.id;
      row.source = item.utterance.source + ":" + std::to_string(item.utterance.line);
      row.tokens = static_cast<int64_t>(u.tokens.size());
      row.words = words.words;
      row.frames = u.frames;
      row.seconds = timing.seconds(u.frames);
      row.mle = mle[b].item<double>();
      row.labels_from_text = words.labels_from_text;
      ++report.utterances;
      report.words += words.words;
      report.word_label_fallbacks += words.labels_from_text ? 0 : 1;
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
  for (auto& [id, grid] : grids) {
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
