#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <vector>

#include "common/error.h"
#include "data/datasets.h"
#include "data/loader.h"
#include "data/text/text_processor.h"
#include "models/glow_tts.h"
#include "align/mas_compare.h"
#include "train/atomic_file.h"
#include "train/bucket_lengths.h"
#include "train/checkpoint.h"
#include "train/distributed/distributed.h"
#include "train/distributed/gradient_reducer.h"
#include "train/fused_adam.h"
#include "train/graphed_step.h"
#include "train/log/image.h"
#include "train/log/plot.h"
#include "train/log/metrics_log.h"
#include "train/lr_schedule.h"
#include "train/config/options_map.h"
#include "train/precision.h"
#include "train/log/progress.h"
#include "train/rng_state.h"
#include "train/run_dir.h"
#include "train/resume_check.h"
#include "train/signals.h"
#include "train/threads.h"
#include "train/log/tensorboard.h"
#include "train/train_step.h"
#include "train/validation.h"
#include "train/weights_file.h"
#include "train/wav.h"

namespace monoflow::train {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;
// Alignment pictures: frames across, tokens up, rows repeated to at least 240 pixels; a title.
PlotLabels alignment_axes(const std::string& title) { return PlotLabels{"frame", "token", 240, title}; }

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

std::string encode_position(const data::LoaderPosition& p) {
  return std::to_string(p.epoch) + " " + std::to_string(p.batch);
}

data::LoaderPosition decode_position(const std::string& text, const std::string& path) {
  std::istringstream in(text);
  data::LoaderPosition p;
  if (!(in >> p.epoch >> p.batch) || p.epoch < 0 || p.batch < 0) {
    throw FileError(path, 0, "the checkpoint's data-loader position is unreadable ('" + text +
                                 "'); resume from another checkpoint");
  }
  return p;
}

std::string step_tag(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%09" PRId64, step);
  return buf;
}

// Everything the loop writes besides checkpoints.
struct RunOutputs {
  std::unique_ptr<EventWriter> tb;
  std::unique_ptr<MetricsLog> metrics;
  fs::path images, samples;
};

void log_image(RunOutputs& out, const std::string& tag, const std::string& file, const Png& png, int64_t step) {
  if (out.tb) out.tb->image(tag, png.bytes, png.height, png.width, png.channels, step);
  write_file((out.images / file).string(), png.bytes);
}

class Trainer {
 public:
  Trainer(const Config& config, const RunOptions& options) : c_(config), o_(options), progress_(stderr) {}

  RunSummary run();
  void set_threads_note(std::string note) { threads_note_ = std::move(note); }

 private:
  void setup();
  void claim_run_directory();
  std::string find_resume_checkpoint();
  void set_damaged_aside();
  void restore_or_initialise();
  void drop_metrics_after(int64_t step);
  void log_step(double mle, double dur, double grad_norm, int64_t step, int64_t epoch);
  void validate_now();
  void save(const std::string& why);
  void say(const std::string& text) {
    if (!o_.quiet && main_) progress_.message(text);
  }
  bool any_rank(bool flag) { return dist_->any_rank(flag); }  // host only: no GPU wait
  int signal_of_any_rank();
  void save_rank_debug_copy();
  CheckpointState checkpoint_state() const;
  bool graphs_wanted() const;  // run.cuda_graphs, and graphs can run here
  void start_graphs();
  void poll_graphs();
  void note_graph_status(const GraphStatus& s);
  void finish_graph_log();
  // The parts of run(), in order.
  std::string start_line() const;
  std::optional<data::Batch> initialise_actnorms();
  bool stop_now(RunSummary& summary);
  StepResult take_step(const data::Batch& host, const data::LoaderPosition& position, data::Batch& device_batch);
  void note_skipped(const data::LoaderPosition& position, const std::vector<std::string>& ids);
  void compare_align(const StepResult& r, const data::Batch& batch, const data::LoaderPosition& position);
  void after_step(const StepResult& r, const data::Batch& batch, const data::LoaderPosition& position);
  void finish(RunSummary& summary);
  void stop_if_nonfinite_run(int64_t in_row) const;

  const Config& c_;
  const RunOptions& o_;
  ProgressLine progress_;
  std::unique_ptr<RunDirLock> lock_;  // rank 0; declared early: released after everything else

  torch::Device device_{torch::kCPU};
  std::unique_ptr<Distributed> dist_;  // world_size 1: every call is a no-op
  bool main_ = true;                   // rank 0: the one that writes
  align::Backend backend_ = align::Backend::kCpu;
  bool bf16_ = false;
  fs::path dir_, ckpt_dir_;
  std::unique_ptr<text::TextProcessor> text_;
  data::Datasets datasets_;
  std::string dataset_identity_;  // saved in checkpoints, compared on --resume (resume_check.h)
  std::unique_ptr<data::DataLoader> loader_, val_loader_;
  models::GlowTTS model_{nullptr};
  std::unique_ptr<FusedAdam> optimizer_;
  std::unique_ptr<GradientReducer> reducer_;  // world_size > 1; declared after model_: its hooks go first
  std::unique_ptr<GraphedTrainStep> graphed_;  // run.cuda_graphs on a GPU: the step as CUDA graphs
  std::unique_ptr<LrSchedule> schedule_;
  RunOutputs out_;
  StepOptions step_options_;

  int64_t step_ = 0, skipped_ = 0, nonfinite_in_row_ = 0;
  bool ddi_pending_ = false;
  std::string last_checkpoint_;
  std::string resume_path_;
  DatasetChanges data_changes_;  // --resume: what differs from the checkpoint's data
  std::string threads_note_ = "?";  // how many intra-op threads, and why (threads.h)
  // --resume (latest): newer checkpoints found damaged, with why; moved aside by rank 0.
  std::vector<std::pair<std::string, std::string>> damaged_;
  std::string run_id_;  // this run's id, in its checkpoints: pruning deletes only those
  int64_t last_checkpoint_step_ = -1;
  int64_t last_validation_step_ = -1;

  // Logging accumulators since the last log line.
  Clock::time_point last_log_time_;
  Clock::time_point run_start_;  // for the ETA under --max-minutes
  int64_t last_log_step_ = 0;
  std::map<align::Backend, std::pair<double, int>> mas_ms_;  // backend -> (sum, count)
  // Graphed steps: the log step whose readback is under way (0: none), and its epoch.
  int64_t readback_step_ = 0, readback_epoch_ = 0;
  double last_mas_ms_ = 0;
};

void Trainer::setup() {
  device_ = c_.train.use_cuda ? resolve_device(c_.run.device)
                              : (c_.run.device == "auto" ? torch::Device(torch::kCPU) : resolve_device(c_.run.device));
  const DistributedOptions dist_options = distributed_options_from_env();
  if (dist_options.world_size > 1 && device_.is_cuda()) {
    // One GPU per process: rank r of this host trains on cuda:LOCAL_RANK.
    if (dist_options.local_rank >= static_cast<int>(torch::cuda::device_count())) {
      throw UserError("LOCAL_RANK=" + std::to_string(dist_options.local_rank) + " but only " +
                      std::to_string(torch::cuda::device_count()) +
                      " GPU(s) are visible; start at most that many processes");
    }
    device_ = torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(dist_options.local_rank));
  }
  dist_ = std::make_unique<Distributed>(dist_options, device_);
  main_ = dist_->is_main();
  set_allow_tf32(c_.train.allow_tf32);
  bf16_ = c_.train.fp16_run && device_.is_cuda();
  backend_ = resolve_backend(c_.run.align_backend, device_);

  dir_ = c_.run.dir;
  ckpt_dir_ = dir_ / "checkpoints";
  std::error_code ec;
  fs::create_directories(dir_, ec);
  if (!fs::is_directory(dir_)) {
    throw FileError(dir_.string(), 0, "cannot create the run directory; check run.dir and permissions");
  }
  if (main_) {
    claim_run_directory();
    set_damaged_aside();
  }
  for (const auto& d : {ckpt_dir_, dir_ / "images", dir_ / "samples"}) {
    fs::create_directories(d, ec);
    if (!fs::is_directory(d)) {
      throw FileError(d.string(), 0, "cannot create the run directory; check run.dir and permissions");
    }
  }
  out_.images = dir_ / "images";
  out_.samples = dir_ / "samples";

  text_ = std::make_unique<text::TextProcessor>(c_.text);
  const text::TextProcessor* tp = text_.get();
  datasets_ = data::load_datasets(data_options(c_), [tp](const std::string& s) { return tp->encode(s); });
  // Characters the symbol set lacks were dropped while encoding: say so once, with counts.
  if (const std::string unknown = tp->unknown_report(); !unknown.empty())
    std::fprintf(stderr, "warning: %s\n", unknown.c_str());
  if (!datasets_.train || datasets_.train->size() == 0) {
    throw UserError(c_.source + ": no training utterances (data.dataset_dir / data.training_files); "
                    "check the dataset path");
  }
  // Every rank draws from the same (seed, epoch) batch list and takes batches r, r + W, ...
  auto lo = loader_options(c_, true);
  lo.rank = dist_->rank();
  lo.world_size = dist_->world_size();
  dataset_identity_ = dataset_identity(*datasets_.train, datasets_.validation.get());
  loader_ = std::make_unique<data::DataLoader>(datasets_.train, lo);
  if (datasets_.validation && datasets_.validation->size() > 0) {
    auto vo = loader_options(c_, false);
    vo.num_workers = 0;
    val_loader_ = std::make_unique<data::DataLoader>(datasets_.validation, vo);
  }

  torch::manual_seed(static_cast<uint64_t>(c_.train.seed));
  model_ = models::GlowTTS(model_options(c_, static_cast<int64_t>(text_->vocab_size())));
  model_->to(device_);
  model_->train();
  optimizer_ = std::make_unique<FusedAdam>(
      model_->parameters(), torch::optim::AdamOptions(c_.train.learning_rate)
                                .betas({c_.train.betas[0], c_.train.betas[1]})
                                .eps(c_.train.eps));
  schedule_ = std::make_unique<LrSchedule>(c_.train.scheduler, c_.train.learning_rate, c_.model.hidden_channels(),
                                           c_.train.warmup_steps);

  step_options_.mas.backend = backend_;
  step_options_.mas.neg_inf = static_cast<float>(c_.run.mas_neg_inf);
  step_options_.grad_clip_value = c_.train.grad_clip_value;
  step_options_.bf16 = bf16_;
  step_options_.check_finite = true;
  step_options_.distributed = dist_.get();
  if (dist_->world_size() > 1) {
    reducer_ = std::make_unique<GradientReducer>(*dist_, model_->parameters());
    step_options_.reducer = reducer_.get();
  }
}

// Rank 0 only (the one that writes): one trainer per run directory, and a fresh run never
// overwrites the run a directory holds (docs/reliability.md).
void Trainer::claim_run_directory() {
  if (o_.force_new && !o_.resume.empty()) throw UserError("--force-new and --resume exclude each other");
  lock_ = std::make_unique<RunDirLock>(dir_.string());
  const std::vector<std::string> evidence = run_evidence(dir_.string());
  if (evidence.empty() || !o_.resume.empty()) return;
  if (o_.force_new) {
    const std::string aside = move_run_aside(dir_.string());
    // Said even when quiet: the user must be able to find the old run.
    progress_.message("--force-new: the previous run in " + dir_.string() + " moved to " + aside);
    return;
  }
  throw FileError(dir_.string(), 0, holds_run_advice(dir_.string(), evidence));
}

// The signal that stopped the run, known on every rank (a rank that got none takes its
// peers'): the mean over the ranks that got one. Called by all ranks together.
int Trainer::signal_of_any_rank() {
  const double got = dist_->average(stop_requested() ? 1.0 : 0.0);
  const double sum = dist_->average(static_cast<double>(stop_signal()));
  return got > 0 ? static_cast<int>(std::lround(sum / got)) : SIGTERM;
}

// Everything besides the model and optimizer that an exact resume needs, as of now.
CheckpointState Trainer::checkpoint_state() const {
  CheckpointState s;
  s.step = step_;
  s.epoch = loader_->position().epoch;
  s.nonfinite_total = skipped_;
  s.scheduler = c_.train.scheduler;
  s.loader_position = encode_position(loader_->position());
  s.config_yaml = o_.config_yaml;
  s.run_id = run_id_;
  s.dataset = dataset_identity_;
  s.rng = capture_rng();
  return s;
}

// MONOFLOW_DEBUG_RANK_CHECKPOINTS=1 (tests): ranks other than 0 also write their final
// weights, as <run.dir>/rank<r>_final.pt, so that a test can compare them with rank 0's.
void Trainer::save_rank_debug_copy() {
  const char* flag = std::getenv("MONOFLOW_DEBUG_RANK_CHECKPOINTS");
  if (main_ || flag == nullptr || std::string(flag) != "1") return;
  optimizer_->sync_steps_from_device();  // graphed steps count Adam's steps on the device
  save_checkpoint((dir_ / ("rank" + std::to_string(dist_->rank()) + "_final.pt")).string(), *model_, *optimizer_,
                  checkpoint_state());
}

// Which checkpoint --resume means, checked before the (possibly long) dataset scan. Plain
// --resume takes the newest sound checkpoint: a damaged newer one (disk or copy damage; a
// killed writer leaves none, writes are atomic) is passed over, kept and reported
// (set_damaged_aside), so that an unattended resume loop does not stop for good at it; what
// is lost is the steps since the checkpoint taken. --resume PATH takes that file or stops.
std::string Trainer::find_resume_checkpoint() {
  if (o_.resume.empty()) return "";
  if (o_.resume == "latest") {
    const fs::path dir = fs::path(c_.run.dir) / "checkpoints";
    const std::vector<std::string> all = list_checkpoints(dir.string());
    // The way out depends on why there is none: a trainer still before its first checkpoint
    // (the lock's message), a run that stopped before one (--force-new), or no run at all.
    if (all.empty()) throw FileError(c_.run.dir, 0, no_checkpoint_advice(c_.run.dir));
    damaged_.clear();
    for (auto it = all.rbegin(); it != all.rend(); ++it) {
      try {
        read_checkpoint_state(*it);
        return *it;
      } catch (const DamagedCheckpoint& e) {
        damaged_.emplace_back(*it, e.what());
      }
    }
    throw FileError(dir.string(), 0, "--resume: every checkpoint here is damaged, the newest: " +
                                         damaged_.front().second);
  }
  if (!fs::is_regular_file(o_.resume)) {
    throw FileError(o_.resume, 0, "--resume: no such checkpoint file; check the path");
  }
  check_checkpoint_file(o_.resume);  // an official file is named as one before the dataset scan
  // Going back to an older checkpoint while newer ones are here: the run would overwrite them
  // as it reaches their steps, and pruning would rank them above its own. They are the user's
  // to keep or drop, so say which and stop.
  const int64_t step = read_checkpoint_state(o_.resume).step;
  const fs::path dir = fs::path(c_.run.dir) / "checkpoints";
  std::string newer;
  for (const auto& other : list_checkpoints(dir.string())) {
    if (std::stoll(fs::path(other).filename().string().substr(5, 9)) > step) newer += (newer.empty() ? "" : ", ") + other;
  }
  if (!newer.empty()) {
    throw FileError(o_.resume, 0, "--resume: this checkpoint is at step " + std::to_string(step) +
                                      ", but the run directory holds newer ones (" + newer +
                                      "), which the resumed run would overwrite; move them out of " + dir.string() +
                                      " to go back to step " + std::to_string(step) +
                                      ", or resume the newest with --resume alone");
  }
  return o_.resume;
}

// Rank 0, holding the run directory: each damaged checkpoint passed over goes to
// <name>.damaged (never deleted: it may be repairable, or evidence), out of the way of
// --resume, pruning and the resumed run's own checkpoint of that step; said even when quiet.
void Trainer::set_damaged_aside() {
  for (const auto& [path, why] : damaged_) {
    std::string aside = path + ".damaged";
    for (int n = 2; fs::exists(aside); ++n) aside = path + ".damaged-" + std::to_string(n);
    std::error_code ec;
    fs::rename(path, aside, ec);
    if (ec) {
      throw FileError(path, 0, "damaged (" + why + "), and it cannot be moved aside to " + aside + " (" +
                                   ec.message() + "); move it out of the checkpoints folder, or pass --resume " +
                                   resume_path_);
    }
    progress_.message("warning: --resume: " + why + "\nwarning: --resume: kept as " + aside +
                      "; resuming from the newest sound checkpoint, " + resume_path_);
  }
}

void Trainer::restore_or_initialise() {
  const std::string& path = resume_path_;
  const bool resuming = !path.empty();
  if (resuming) {
    const CheckpointState s = load_checkpoint(path, *model_, optimizer_.get());
    if (s.scheduler != c_.train.scheduler) {
      say("warning: the checkpoint was trained with train.scheduler " + s.scheduler + ", continuing with " +
          c_.train.scheduler);
    }
    step_ = s.step;
    skipped_ = s.nonfinite_total;
    run_id_ = s.run_id.empty() ? new_run_id() : s.run_id;  // older files carry none
    loader_->set_position(decode_position(s.loader_position, path));
    restore_rng(s.rng);
    model_->set_ddi(false);  // ActNorm parameters come from the checkpoint
    last_checkpoint_ = path;
    last_checkpoint_step_ = step_;
    if (!s.config_yaml.empty() && s.config_yaml != o_.config_yaml) {
      std::string keys;
      for (const auto& change : config_changes(s.config_yaml, o_.config_yaml)) keys += (keys.empty() ? "" : ", ") + change;
      say("note: the config differs from the one the checkpoint was trained with in " + keys + " (its snapshot is in " +
          path + "; the run directory's config.yaml is replaced by the current one)");
    }
    data_changes_ = dataset_changes(s.dataset, dataset_identity_);
    // Said even when quiet: a run that continues on other data should not look like one run.
    if (main_ && !data_changes_.training.empty()) {
      progress_.message("warning: --resume: the training set differs from the checkpoint's: " +
                        data_changes_.training + "; training goes on with the current one");
    }
    if (main_ && !data_changes_.validation.empty()) {
      progress_.message("warning: --resume: the validation set differs from the checkpoint's: " +
                        data_changes_.validation + "; validation losses from step " + std::to_string(step_ + 1) +
                        " on are not comparable with earlier ones (recorded in metrics.jsonl)");
    }
    say("resumed from " + path + " at step " + std::to_string(step_) + ", epoch " +
        std::to_string(loader_->position().epoch + 1));
  } else if (!o_.init_from.empty()) {
    run_id_ = new_run_id();
    // Fine-tuning: the weights only; optimizer, schedule and step start afresh, and no DDI
    // (the ActNorms are trained already).
    const LoadedWeights w = load_model_weights(o_.init_from, *model_);
    say("initialised from " + o_.init_from + " (" + (w.official ? "official Glow-TTS" : "monoflow") +
        " checkpoint at step " + std::to_string(w.step) + "): weights only; a new run from step 0");
  } else {
    run_id_ = new_run_id();
    ddi_pending_ = c_.train.ddi;
    model_->set_ddi(c_.train.ddi);
  }
  if (dist_->world_size() > 1) {
    // Every rank starts from rank 0's weights (a resumed run loaded the same file everywhere).
    dist_->broadcast_module(*model_);
    // Different dropout on each rank; rank 0 keeps its own stream (the one its checkpoints save).
    if (!main_) torch::manual_seed(static_cast<uint64_t>(c_.train.seed) + 1000003ULL * dist_->rank() +
                                   static_cast<uint64_t>(step_));
  }
  if (!main_) return;  // only rank 0 writes
  if (resuming) drop_metrics_after(step_);
  write_file_atomically((dir_ / "config.yaml").string(), o_.config_yaml);
  if (c_.run.tensorboard) {
    out_.tb = std::make_unique<EventWriter>((dir_ / "tensorboard").string());
    if (resuming) out_.tb->purge_from(step_ + 1);  // as metrics.jsonl: nothing past the checkpoint
  }
  out_.metrics = std::make_unique<MetricsLog>((dir_ / "metrics.jsonl").string(), resuming);
  // The curves' reader learns where the data changed (scripts that plot skip "event" lines).
  if (!data_changes_.training.empty()) {
    out_.metrics->event(step_, "training set changed", {{"change", data_changes_.training}, {"checkpoint", path}});
  }
  if (!data_changes_.validation.empty()) {
    out_.metrics->event(step_, "validation set changed", {{"change", data_changes_.validation}, {"checkpoint", path}});
  }
}

// A run that went on past its last checkpoint (crash, kill -9) left metrics lines for steps
// the resumed run will redo: keep only those up to the checkpoint's step.
void Trainer::drop_metrics_after(int64_t step) {
  const std::string path = (dir_ / "metrics.jsonl").string();
  std::ifstream in(path);
  if (!in) return;
  std::string kept, line;
  bool dropped = false;
  while (std::getline(in, line)) {
    long long line_step = 0;
    if (std::sscanf(line.c_str(), "{\"step\":%lld", &line_step) == 1 && line_step > step) {
      dropped = true;
      continue;
    }
    kept += line + "\n";
  }
  if (dropped) write_file_atomically(path, kept);
}

void Trainer::save(const std::string& why) {
  if (step_ == last_checkpoint_step_) return;
  const std::string path = (ckpt_dir_ / checkpoint_filename(step_)).string();
  if (!main_) {  // rank 0 writes it
    last_checkpoint_ = path;
    last_checkpoint_step_ = step_;
    return;
  }
  poll_graphs();
  optimizer_->sync_steps_from_device();
  save_checkpoint(path, *model_, *optimizer_, checkpoint_state());
  prune_checkpoints(ckpt_dir_.string(), c_.train.keep_checkpoints, run_id_);
  last_checkpoint_ = path;
  last_checkpoint_step_ = step_;
  say("checkpoint (" + why + "): " + path);
}

// With run.cuda_graphs on a GPU (and a CUDA MAS backend), steps replay as CUDA graphs from here on.
bool Trainer::graphs_wanted() const {
  return c_.run.cuda_graphs && device_.is_cuda() && GraphedTrainStep::supported(device_, step_options_);
}

void Trainer::start_graphs() {
  if (!c_.run.cuda_graphs || !device_.is_cuda()) return;
  if (!graphs_wanted()) {
    say("note: CUDA graphs are not used with the cpu MAS backend; the steps run eagerly");
    return;
  }
  const GraphBuckets buckets;
  const std::vector<int64_t> extra = BucketLengthOptions().extra_frames();
  const int64_t most_extra_frames = *std::max_element(extra.begin(), extra.end()) * c_.model.n_sqz();
  // The graphs average the gradients themselves (all-reduces inside each): not these hooks.
  step_options_.reducer = nullptr;
  reducer_.reset();
  graphed_ = std::make_unique<GraphedTrainStep>(model_, *optimizer_, step_options_, buckets, skipped_);
  say("CUDA graphs: each batch shape (text padded to a multiple of " + std::to_string(buckets.text_multiple) +
      " tokens, mel to " + std::to_string(buckets.mel_multiple) +
      " frames, then up to " + std::to_string(most_extra_frames) + " more where cuDNN measures faster) is recorded once, then replayed");
}

// What the graphed steps left on the device since the last look: skipped updates (counted
// as steps: the host could not know), and MAS errors with the step that raised them.
void Trainer::poll_graphs() {
  if (graphed_) note_graph_status(graphed_->status());
}

void Trainer::note_graph_status(const GraphStatus& s) {
  if (s.bad_lengths_step > 0) {
    throw UserError("step " + std::to_string(s.bad_lengths_step) + ": item " + std::to_string(s.bad_lengths_item) +
                    " of the batch has more text tokens than mel frames (MAS found no monotonic alignment); "
                    "check the dataset's lengths");
  }
  TORCH_CHECK(s.timeout_step == 0, "step ", s.timeout_step, ": the cuda-fast MAS hand-over between warps timed out");
  if (s.skipped > skipped_) {
    say("warning: " + std::to_string(s.skipped - skipped_) + " update(s) skipped for a non-finite loss by step " +
        std::to_string(step_) + " (" + std::to_string(s.skipped) + " in total)");
    skipped_ = s.skipped;
  }
  stop_if_nonfinite_run(s.longest_nonfinite_run);
}

// Eager and graphed steps alike: this many non-finite steps in a row end the run.
void Trainer::stop_if_nonfinite_run(int64_t in_row) const {
  if (in_row < c_.train.max_nonfinite_steps) return;
  throw UserError("training stopped: the loss was non-finite for " + std::to_string(in_row) +
                  " steps in a row (train.max_nonfinite_steps); lower train.learning_rate, check the "
                  "data, or resume from an earlier checkpoint" +
                  (last_checkpoint_.empty() ? std::string() : " (last: " + last_checkpoint_ + ")"));
}

// The log line of `step` (its losses averaged over ranks) in `epoch` (1-based). Rank 0 only.
void Trainer::log_step(double mle, double dur, double grad_norm, int64_t step, int64_t epoch) {
  const double elapsed = seconds_since(last_log_time_);
  const int64_t steps = step - last_log_step_;
  const double lr = schedule_->lr(step);
  const double steps_per_s = elapsed > 0 ? steps / elapsed : 0.0;

  std::vector<std::pair<std::string, double>> values{
      {"loss/mle", mle}, {"loss/dur", dur}, {"loss/total", mle + dur}, {"lr", lr}, {"grad_norm", grad_norm},
      {"time/step_ms", steps > 0 ? 1000.0 * elapsed / steps : 0.0}, {"skipped", static_cast<double>(skipped_)}};
  for (const auto& [backend, acc] : mas_ms_) {
    if (acc.second > 0) values.emplace_back("time/mas_ms/" + align::backend_name(backend), acc.first / acc.second);
  }
  const auto own = mas_ms_.find(backend_);
  if (own != mas_ms_.end() && own->second.second > 0) last_mas_ms_ = own->second.first / own->second.second;
  mas_ms_.clear();

  if (out_.tb) {
    for (const auto& [k, v] : values) out_.tb->scalar(k, v, step);
    out_.tb->flush();
  }
  out_.metrics->write(step, epoch, values);

  ProgressInfo p;
  p.step = step;
  p.total_steps = c_.train.max_steps > 0 ? c_.train.max_steps
                                         : static_cast<int64_t>(c_.train.epochs) * loader_->batches_per_epoch();
  p.epoch = epoch;
  p.loss_mle = mle;
  p.loss_dur = dur;
  p.lr = lr;
  p.steps_per_s = steps_per_s;
  p.mas_ms = last_mas_ms_;
  p.skipped = skipped_;
  if (o_.max_minutes > 0) p.seconds_left = std::max(0.0, o_.max_minutes * 60 - seconds_since(run_start_));
  if (!o_.quiet) progress_.update(p);
  last_log_time_ = Clock::now();
  last_log_step_ = step;
}

void Trainer::validate_now() {
  if (!val_loader_) return;
  last_validation_step_ = step_;
  if (!main_) {  // rank 0 validates on the whole validation set; the others wait for it
    dist_->barrier();
    return;
  }

  ValidationOptions vo;
  vo.step = step_options_;
  vo.step.check_finite = false;
  vo.mel_basis = datasets_.validation->mel_spectrogram().filterbank();
  vo.griffin_lim = GriffinLimOptions(c_.data.mel).seed(static_cast<uint64_t>(c_.train.seed));
  const auto start = Clock::now();
  const ValidationResult v = validate(model_, *val_loader_, device_, vo);
  const int64_t epoch = loader_->position().epoch + 1;
  out_.metrics->write(step_, epoch,
                      {{"val/loss/mle", v.loss_mle}, {"val/loss/dur", v.loss_dur}, {"val/loss/total", v.loss_mle + v.loss_dur}});
  if (out_.tb) {
    out_.tb->scalar("val/loss/mle", v.loss_mle, step_);
    out_.tb->scalar("val/loss/dur", v.loss_dur, step_);
    out_.tb->scalar("val/loss/total", v.loss_mle + v.loss_dur, step_);
  }
  const std::string tag = step_tag(step_);
  if (v.align_forward.defined()) {
    const std::string at = " (" + v.example_id + ", step " + std::to_string(step_) + ")";
    log_image(out_, "val/align_mas", "val_align_" + tag + ".png",
              render_plot(v.align_forward, alignment_axes("MAS alignment" + at)), step_);
    log_image(out_, "val/align_infer", "val_align_infer_" + tag + ".png",
              render_plot(v.align_infer, alignment_axes("predicted durations" + at)), step_);
    log_image(out_, "val/mel_target_vs_generated", "val_mel_" + tag + ".png",
              render_panels({{v.target_mel, "target mel" + at}, {v.generated_mel, "generated mel" + at}},
                            PlotLabels{"frame", "mel channel", 0, ""}),
              step_);
  }
  if (v.audio.defined() && v.audio.numel() > 0) {
    const double peak = v.audio.abs().max().item<double>();
    const torch::Tensor audio = peak > 0 ? v.audio * (0.9 / peak) : v.audio;
    const std::string wav = encode_wav16(audio, c_.data.mel.sampling_rate);
    if (out_.tb) out_.tb->audio("val/audio_griffin_lim", wav, c_.data.mel.sampling_rate, audio.numel(), step_);
    write_file((out_.samples / ("val_" + tag + ".wav")).string(), wav);
  }
  if (out_.tb) out_.tb->flush();
  char buf[200];
  std::snprintf(buf, sizeof buf, "validation at step %" PRId64 ": mle %.4f dur %.4f over %" PRId64
                " utterances (%.1f s); example %s",
                step_, v.loss_mle, v.loss_dur, v.utterances, seconds_since(start), v.example_id.c_str());
  say(buf);
  dist_->barrier();
}

// What the run is about to do, in one line.
std::string Trainer::start_line() const {
  std::string line = "training on " + device_.str() + " with MAS backend " + align::backend_name(backend_) +
                     (bf16_ ? ", bf16 autocast" : "") + (c_.run.compare_align ? ", comparing all MAS backends" : "") +
                     "; " + std::to_string(datasets_.train->size()) + " training utterances, " +
                     std::to_string(loader_->batches_per_epoch()) + " batches per epoch; " +
                     std::to_string(model_->parameter_count()) + " parameters; " + threads_note_ +
                     " intra-op threads; run directory " + dir_.string();
  if (dist_->world_size() == 1) return line;
  return line + "; " + std::to_string(dist_->world_size()) + " processes (" + dist_->backend() + "), batch_size " +
         std::to_string(c_.train.batch_size) + " each, gradients averaged " +
         (graphs_wanted() ? std::string("inside each step's CUDA graph")
                          : "in " + std::to_string(reducer_->buckets()) + " buckets during backward");
}

// Data-dependent initialisation of every ActNorm from the first batch, without an update (the
// official init.py); returns that batch, which then trains the first step.
std::optional<data::Batch> Trainer::initialise_actnorms() {
  if (!ddi_pending_) return std::nullopt;
  std::optional<data::Batch> first = loader_->next();
  if (first) {
    torch::NoGradGuard no_grad;
    const data::Batch b = to_device(*first, device_);
    model_->forward(b.text, b.text_lengths, b.mel, b.mel_lengths, b.speakers, step_options_.mas);
    say("data-dependent initialisation (DDI) done on the first batch");
  }
  // Each rank initialised its ActNorms from its own batch: all take rank 0's.
  dist_->broadcast_module(*model_);
  ddi_pending_ = false;
  return first;
}

// Whether the run ends before the next step, and why (in `summary`). With several ranks, a
// stop that any rank sees stops them all at this same step.
bool Trainer::stop_now(RunSummary& summary) {
  if (c_.train.max_steps > 0 && step_ >= c_.train.max_steps) {
    summary.stop_reason = "max_steps";
  } else if (any_rank(stop_requested())) {
    summary.stop_reason = "signal";
    summary.interrupted = true;
    summary.signal = signal_of_any_rank();
  } else if (o_.max_minutes > 0 && any_rank(seconds_since(run_start_) > o_.max_minutes * 60)) {
    summary.stop_reason = "time limit";
  } else if (loader_->position().epoch >= c_.train.epochs) {
    summary.stop_reason = "epochs";
  }
  return !summary.stop_reason.empty();
}

// One update from a host batch, eager or graphed; a user error names the step and its utterances.
// `device_batch` receives the eager step's device copy.
StepResult Trainer::take_step(const data::Batch& host, const data::LoaderPosition& position,
                              data::Batch& device_batch) {
  try {
    if (graphed_) return graphed_->step(host, schedule_->lr(step_ + 1), step_ + 1);
    device_batch = to_device(host, device_);
    return train_step(model_, *optimizer_, device_batch, schedule_->lr(step_ + 1), step_options_);
  } catch (const UserError& e) {
    std::string ids;
    for (size_t i = 0; i < host.ids.size() && i < 8; ++i) ids += (i ? ", " : "") + host.ids[i];
    if (host.ids.size() > 8) ids += ", ...";
    throw UserError("step " + std::to_string(step_ + 1) + " (epoch " + std::to_string(position.epoch + 1) +
                    ", batch " + std::to_string(position.batch) + "; utterances " + ids + "): " + e.what());
  }
}

// An eager step whose loss was not finite: counted, said, and the run ends after too many in a row.
void Trainer::note_skipped(const data::LoaderPosition& position, const std::vector<std::string>& ids) {
  ++skipped_;
  ++nonfinite_in_row_;
  std::string names;  // the batch's utterances, so that a bad one can be found
  for (size_t i = 0; i < ids.size() && i < 8; ++i) names += (i ? ", " : "") + ids[i];
  if (ids.size() > 8) names += ", ... (" + std::to_string(ids.size()) + " in all)";
  say("warning: non-finite loss at step " + std::to_string(step_ + 1) + " (epoch " +
      std::to_string(position.epoch + 1) + ", batch " + std::to_string(position.batch) + "; utterances " + names +
      "): update skipped (" + std::to_string(nonfinite_in_row_) + " in a row, " + std::to_string(skipped_) +
      " in total)");
  stop_if_nonfinite_run(nonfinite_in_row_);
}

// --compare-align: MAS on this step's log-likelihood again with every backend, checked against
// the step's own path and timed. (Only then: a second MAS costs a host wait.)
void Trainer::compare_align(const StepResult& r, const data::Batch& batch, const data::LoaderPosition& position) {
  align::StepAlignment step;
  step.logp = models::compute_logp(r.out.x_m.detach(), r.out.x_logs.detach(), r.out.z.detach()).to(torch::kFloat32);
  step.text_lengths = batch.text_lengths;
  step.mel_lengths = r.out.y_lengths;
  step.durations = r.out.durations;
  step.backend = backend_;
  step.label = "step " + std::to_string(step_) + " (epoch " + std::to_string(position.epoch + 1) + ", batch " +
               std::to_string(position.batch) + ")";
  step.ids = batch.ids;
  for (const auto& t : align::compare_backends(step, available_backends(device_), step_options_.mas.neg_inf)) {
    mas_ms_[t.backend].first += t.ms;
    mas_ms_[t.backend].second += 1;
  }
}

// What a finished step owes at its intervals: the log line, the alignment image, validation,
// a checkpoint. `batch` is the step's device batch.
void Trainer::after_step(const StepResult& r, const data::Batch& batch, const data::LoaderPosition& position) {
  if (c_.run.compare_align) compare_align(r, batch, position);
  const bool log_due = step_ % std::max(1, c_.train.log_interval) == 0 || step_ == 1;
  if (graphed_) {
    // The last log step's line, now that this step is queued behind it: waiting for that one
    // alone leaves the GPU busy (waiting for this one, and meeting the other ranks on the host
    // then, drained the queue: ~6 ms a log step on two GPUs). Its losses are already the
    // ranks' mean (averaged inside the graph), and every rank reads the same status at the same step.
    finish_graph_log();
    if (log_due) {
      graphed_->start_readback();
      readback_step_ = step_;
      readback_epoch_ = loader_->position().epoch + 1;  // as the eager line says it
    }
  } else if (log_due) {
    const double mle = dist_->average(r.loss_mle.item<double>());
    const double dur = dist_->average(r.loss_dur.item<double>());
    const double grad_norm = r.grad_norm.defined() ? r.grad_norm.item<double>() : 0.0;
    if (main_) log_step(mle, dur, grad_norm, step_, loader_->position().epoch + 1);
  }
  const bool val_due = c_.train.val_interval > 0 && step_ % c_.train.val_interval == 0;
  const bool image_due = c_.run.image_interval > 0 ? step_ % c_.run.image_interval == 0 : val_due;
  if (image_due && main_) {
    const int64_t t = batch.text_lengths[0].item<int64_t>(), s = r.out.y_lengths[0].item<int64_t>();
    log_image(out_, "train/align", "align_" + step_tag(step_) + ".png",
              render_plot(r.out.attn[0].slice(0, 0, t).slice(1, 0, s),
                          alignment_axes("MAS alignment (" + (batch.ids.empty() ? "" : batch.ids[0] + ", ") +
                                         "training step " + std::to_string(step_) + ")")),
              step_);
  }
  if (val_due) validate_now();
  if (c_.train.checkpoint_interval > 0 && step_ % c_.train.checkpoint_interval == 0) {
    save("every " + std::to_string(c_.train.checkpoint_interval) + " steps");
  }
}

// The log line of the readback under way, if any (graphed steps), and what the device counted.
void Trainer::finish_graph_log() {
  if (readback_step_ == 0) return;
  const GraphReadback r = graphed_->finish_readback();
  const int64_t step = readback_step_;
  readback_step_ = 0;
  note_graph_status(r.status);
  if (main_) log_step(r.loss_mle, r.loss_dur, r.grad_norm, step, readback_epoch_);
}

// The end of a run: the last validation and checkpoint, the ranks' rendezvous, the summary.
void Trainer::finish(RunSummary& summary) {
  finish_graph_log();
  // A run that ends normally also leaves the validation pictures and audio of its last step.
  if (!summary.interrupted && step_ > 0 && c_.train.val_interval > 0 && last_validation_step_ != step_) {
    validate_now();
  }
  if (step_ > 0) save(summary.stop_reason);
  save_rank_debug_copy();
  dist_->barrier();  // the others end once rank 0's checkpoint is written
  if (!o_.quiet && main_) progress_.finish();
  if (summary.interrupted) {
    // Before the first step (data scan, DDI) there is no checkpoint and no metrics line: the
    // directory holds no run, so the way out is the same command, not --resume.
    say("stopped by signal " + std::to_string(summary.signal) + " at step " + std::to_string(step_) +
        (last_checkpoint_.empty() ? ", before any checkpoint: nothing to resume; start it again without --resume"
                                  : "; resume with --resume"));
  }
  summary.step = step_;
  summary.epoch = loader_->position().epoch;
  summary.skipped = skipped_;
  summary.checkpoint = last_checkpoint_;
  summary.main_rank = main_;
}

RunSummary Trainer::run() {
  if (!o_.init_from.empty() && !o_.resume.empty()) {
    throw UserError("--init-from and --resume exclude each other: --resume continues a run, --init-from starts a "
                    "new one from a checkpoint's weights");
  }
  resume_path_ = find_resume_checkpoint();
  if (!o_.init_from.empty()) check_weights_file(o_.init_from, "--init-from");
  setup();
  restore_or_initialise();
  say(start_line());
  install_stop_handlers();
  RunSummary summary;
  run_start_ = last_log_time_ = Clock::now();
  last_log_step_ = step_;
  std::optional<data::Batch> pending = initialise_actnorms();
  start_graphs();

  while (!stop_now(summary)) {
    const data::LoaderPosition position = loader_->position();
    std::optional<data::Batch> host = pending ? std::move(pending) : loader_->next();
    pending.reset();
    if (!host) continue;  // end of an epoch
    data::Batch device_batch;
    const StepResult r = take_step(*host, position, device_batch);
    if (!r.finite) {
      note_skipped(position, host->ids);
      continue;
    }
    nonfinite_in_row_ = 0;
    ++step_;
    after_step(r, graphed_ ? graphed_->inputs() : device_batch, position);
  }
  finish(summary);
  return summary;
}

}  // namespace

RunSummary train(const Config& config, const RunOptions& options) {
  // Before any tensor op: LibTorch's pool is one thread per core, which fights the loader.
  const std::string threads = set_intra_op_threads(config.run.threads, config.loader.num_workers);
  Trainer trainer(config, options);
  trainer.set_threads_note(threads);
  return trainer.run();
}

}  // namespace monoflow::train
