#include "train/trainer.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <optional>

#include "align/mas_compare.h"
#include "common/error.h"
#include "models/glow_tts.h"
#include "train/atomic_file.h"
#include "train/checkpoint.h"
#include "train/checkpoint_snapshot.h"
#include "train/checkpoint_writer.h"
#include "train/config/options_map.h"
#include "train/nonfinite.h"
#include "train/resume.h"
#include "train/run_dir.h"
#include "train/run_log.h"
#include "train/run_parts.h"
#include "train/signals.h"
#include "train/threads.h"
#include "train/train_graphs.h"
#include "train/train_step.h"
#include "train/validation.h"
#include "train/weights_file.h"

namespace monoflow::train {
namespace fs = std::filesystem;

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The loop. It owns the run's state (model, optimizer, loader, step) and decides what each
// step owes; the run directory and resume choice (run_dir.h, resume.h), the graphs
// (train_graphs.h), the non-finite policy (nonfinite.h), what is written for people
// (run_log.h) and validation (validation.h) each live in a file of their own.
class Trainer {
 public:
  // `threads`: how many intra-op threads, and why (threads.h), for the start line.
  Trainer(const Config& config, const RunOptions& options, std::string threads)
      : c_(config), o_(options), threads_note_(std::move(threads)) {}

  RunSummary run();

 private:
  // The parts of run(), in order.
  void setup();
  void restore_or_initialise();
  std::optional<data::Batch> initialise_actnorms();
  void start_graphs();
  bool stop_now(RunSummary& summary);
  StepResult take_step(const data::Batch& host, const data::LoaderPosition& position, data::Batch& device_batch);
  void after_step(const StepResult& r, const data::Batch& batch, const data::LoaderPosition& position);
  void finish(RunSummary& summary);
  // What they share.
  void say(const std::string& text) { log_->say(text); }
  bool any_rank(bool flag) { return p_.dist->any_rank(flag); }  // host only: no GPU wait
  void log_line(double mle, double dur, double grad_norm, int64_t step, int64_t epoch);
  void finish_graph_log();
  void note_graph_status(const GraphStatus& s);
  void compare_align(const StepResult& r, const data::Batch& batch, const data::LoaderPosition& position);
  void validate_now();
  CheckpointState checkpoint_state() const;
  void save(const std::string& why);
  void note_written(const std::string& path);
  void save_rank_debug_copy();

  const Config& c_;
  const RunOptions& o_;
  const std::string threads_note_;
  std::unique_ptr<RunDirLock> lock_;  // rank 0; declared early: released after everything else
  std::unique_ptr<RunLog> log_;

  RunParts p_;
  fs::path dir_, ckpt_dir_;
  std::unique_ptr<TrainGraphs> graphs_;       // run.cuda_graphs on a GPU: the step as CUDA graphs
  GraphRecording logged_recording_;           // graphs_' recording as of the last log line
  CheckpointWriter writer_;                   // rank 0's checkpoints, written beside the steps
  std::string writing_why_;                   // why the checkpoint in writer_ was taken
  NonfiniteSteps nonfinite_{0, 0};

  int64_t step_ = 0;
  bool ddi_pending_ = false;
  ResumeChoice resume_;
  std::string last_checkpoint_;  // the newest on disk (rank 0: whose write has finished)
  std::string run_id_;  // this run's id, in its checkpoints: pruning deletes only those
  int64_t last_checkpoint_step_ = -1;
  int64_t last_validation_step_ = -1;
  Clock::time_point run_start_;  // for --max-minutes
};

// The run's parts (run_parts.h), with the run directory claimed between the ranks and the
// data scan, and the folders the run writes into.
void Trainer::setup() {
  choose_devices(c_, p_);
  log_ = std::make_unique<RunLog>(p_.main, o_.quiet, p_.backend);
  dir_ = c_.run.dir;
  ckpt_dir_ = dir_ / "checkpoints";
  create_run_folder(dir_.string());
  if (p_.main) {
    const auto tell = [this](const std::string& text) { log_->tell(text); };
    lock_ = claim_run_directory(dir_.string(), o_.resume, o_.force_new, tell);
    set_damaged_aside(resume_, tell);
  }
  for (const auto& d : {ckpt_dir_, dir_ / "images", dir_ / "samples"}) create_run_folder(d.string());
  build_data_and_model(c_, p_);
}

CheckpointState Trainer::checkpoint_state() const {
  return run_state(step_, p_.loader->position(), nonfinite_.skipped(), c_, o_.config_yaml, run_id_,
                   p_.dataset_identity);
}

// MONOFLOW_DEBUG_RANK_CHECKPOINTS=1 (tests): ranks other than 0 also write their final
// weights, as <run.dir>/rank<r>_final.pt, so that a test can compare them with rank 0's.
void Trainer::save_rank_debug_copy() {
  const char* flag = std::getenv("MONOFLOW_DEBUG_RANK_CHECKPOINTS");
  if (p_.main || flag == nullptr || std::string(flag) != "1") return;
  p_.optimizer->sync_steps_from_device();  // graphed steps count Adam's steps on the device
  save_checkpoint((dir_ / ("rank" + std::to_string(p_.dist->rank()) + "_final.pt")).string(), *p_.model, *p_.optimizer,
                  checkpoint_state());
}

void Trainer::restore_or_initialise() {
  const std::string& path = resume_.path;
  const bool resuming = !path.empty();
  DatasetChanges data_changes;  // --resume: what differs from the checkpoint's data
  if (resuming) {
    const Resumed r = resume_from(path, c_, o_.config_yaml, p_.dataset_identity, *p_.model, *p_.optimizer,
                                  *p_.loader, [this](const std::string& text) { say(text); },
                                  [this](const std::string& text) { log_->tell(text); });
    data_changes = r.data_changes;
    step_ = r.step;
    nonfinite_ = NonfiniteSteps(c_.train.max_nonfinite_steps, r.skipped);
    run_id_ = r.run_id;
    last_checkpoint_ = path;
    last_checkpoint_step_ = step_;
  } else if (!o_.init_from.empty()) {
    run_id_ = new_run_id();
    // Fine-tuning: the weights only; optimizer, schedule and step start afresh, and no DDI
    // (the ActNorms are trained already).
    const LoadedWeights w = load_model_weights(o_.init_from, *p_.model);
    say("initialised from " + o_.init_from + " (" + (w.official ? "official Glow-TTS" : "monoflow") +
        " checkpoint at step " + std::to_string(w.step) + "): weights only; a new run from step 0");
  } else {
    run_id_ = new_run_id();
    ddi_pending_ = c_.train.ddi;
    p_.model->set_ddi(c_.train.ddi);
  }
  if (p_.dist->world_size() > 1) {
    // Every rank starts from rank 0's weights (a resumed run loaded the same file everywhere).
    p_.dist->broadcast_module(*p_.model);
    // Different dropout on each rank; rank 0 keeps its own stream (the one its checkpoints save).
    if (!p_.main) torch::manual_seed(static_cast<uint64_t>(c_.train.seed) + 1000003ULL * p_.dist->rank() +
                                     static_cast<uint64_t>(step_));
  }
  if (!p_.main) return;  // only rank 0 writes
  write_file_atomically((dir_ / "config.yaml").string(), o_.config_yaml);
  log_->open(dir_, c_.run.tensorboard, resuming, step_);
  log_->data_changed(data_changes, step_, path);
}

void Trainer::save(const std::string& why) {
  if (step_ == last_checkpoint_step_) return;
  const std::string path = (ckpt_dir_ / checkpoint_filename(step_)).string();
  last_checkpoint_step_ = step_;
  if (!p_.main) {  // rank 0 writes it
    last_checkpoint_ = path;
    return;
  }
  if (graphs_) note_graph_status(graphs_->status());
  p_.optimizer->sync_steps_from_device();
  note_written(writer_.wait());  // one write at a time
  writing_why_ = why;
  writer_.write(path, checkpoint_snapshot(*p_.model, *p_.optimizer, checkpoint_state()),
                [dir = ckpt_dir_.string(), keep = c_.train.keep_checkpoints, id = run_id_] {
                  prune_checkpoints(dir, keep, id);
                });
}

// A checkpoint write has finished (path "" : none has): it is now the one to resume from.
void Trainer::note_written(const std::string& path) {
  if (path.empty()) return;
  last_checkpoint_ = path;
  say("checkpoint (" + writing_why_ + "): " + path);
}

// With run.cuda_graphs on a GPU (and a CUDA MAS backend), steps replay as CUDA graphs from here on.
void Trainer::start_graphs() {
  if (!c_.run.cuda_graphs || !p_.device.is_cuda()) return;
  if (!TrainGraphs::wanted(c_.run.cuda_graphs, p_.device, p_.step_options)) {
    say("note: CUDA graphs are not used with the cpu MAS backend; the steps run eagerly");
    return;
  }
  // The graphs average the gradients themselves (all-reduces inside each): not these hooks.
  p_.step_options.reducer = nullptr;
  p_.reducer.reset();
  graphs_ = std::make_unique<TrainGraphs>(p_.model, *p_.optimizer, p_.step_options, nonfinite_.skipped(),
                                          parse_cudnn_search(c_.run.cudnn_search));
  say(graphs_->description(c_.model.n_sqz()));
}

// What the graphed steps left on the device since the last look: MAS errors with the step that
// raised them, and skipped updates (counted as steps: the host could not know).
void Trainer::note_graph_status(const GraphStatus& s) {
  TrainGraphs::check_errors(s);
  if (const std::string warning = nonfinite_.device_counts(s, step_); !warning.empty()) say(warning);
  nonfinite_.stop_at_limit(last_checkpoint_);
}

// The log line of `step` (its losses averaged over ranks) in `epoch` (1-based). Rank 0 only.
void Trainer::log_line(double mle, double dur, double grad_norm, int64_t step, int64_t epoch) {
  const int64_t total_steps = c_.train.max_steps > 0 ? c_.train.max_steps
                                                     : static_cast<int64_t>(c_.train.epochs) * p_.loader->batches_per_epoch();
  const double seconds_left =
      o_.max_minutes > 0 ? std::max(0.0, o_.max_minutes * 60 - seconds_since(run_start_)) : -1.0;
  StepLine line{step, epoch, mle, dur, grad_norm, p_.schedule->lr(step), nonfinite_.skipped(), total_steps,
                seconds_left};
  if (graphs_) {  // what recording graphs cost since the last line
    const GraphRecording now = graphs_->recording();
    line.graphs_recorded = now.graphs - logged_recording_.graphs;
    line.recording_s = (now.total_ms() - logged_recording_.total_ms()) / 1000.0;
    logged_recording_ = now;
  }
  log_->step_line(line);
}

// The log line of the readback under way, if any (graphed steps), and what the device counted.
void Trainer::finish_graph_log() {
  if (!graphs_) return;
  const std::optional<TrainGraphs::Readback> r = graphs_->finish_readback();
  if (!r) return;
  note_graph_status(r->values.status);
  if (p_.main) log_line(r->values.loss_mle, r->values.loss_dur, r->values.grad_norm, r->step, r->epoch);
}

void Trainer::validate_now() {
  if (!p_.val_loader) return;
  last_validation_step_ = step_;
  if (p_.main) {  // rank 0 validates on the whole validation set; the others wait for it
    const auto start = Clock::now();
    const ValidationOptions vo =
        validation_options(c_, p_.step_options, p_.datasets.validation->mel_spectrogram().filterbank());
    const ValidationResult v = validate(p_.model, *p_.val_loader, p_.device, vo);
    log_->validation(v, step_, p_.loader->position().epoch + 1, c_.data.mel.sampling_rate, start);
  }
  p_.dist->barrier();
}

// Data-dependent initialisation of every ActNorm from the first batch, without an update (the
// official init.py); returns that batch, which then trains the first step.
std::optional<data::Batch> Trainer::initialise_actnorms() {
  if (!ddi_pending_) return std::nullopt;
  std::optional<data::Batch> first = p_.loader->next();
  if (first) {
    torch::NoGradGuard no_grad;
    const data::Batch b = to_device(*first, p_.device);
    p_.model->forward(b.text, b.text_lengths, b.mel, b.mel_lengths, b.speakers, p_.step_options.mas);
    say("data-dependent initialisation (DDI) done on the first batch");
  }
  // Each rank initialised its ActNorms from its own batch: all take rank 0's.
  p_.dist->broadcast_module(*p_.model);
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
    summary.signal = signal_of_any_rank(*p_.dist);
  } else if (o_.max_minutes > 0 && any_rank(seconds_since(run_start_) > o_.max_minutes * 60)) {
    summary.stop_reason = "time limit";
  } else if (p_.loader->position().epoch >= c_.train.epochs) {
    summary.stop_reason = "epochs";
  }
  return !summary.stop_reason.empty();
}

// One update from a host batch, eager or graphed; a user error names the step and its utterances.
// `device_batch` receives the eager step's device copy.
StepResult Trainer::take_step(const data::Batch& host, const data::LoaderPosition& position,
                              data::Batch& device_batch) {
  try {
    if (graphs_) return graphs_->step(host, p_.schedule->lr(step_ + 1), step_ + 1);
    device_batch = to_device(host, p_.device);
    return train_step(p_.model, *p_.optimizer, device_batch, p_.schedule->lr(step_ + 1), p_.step_options);
  } catch (const UserError& e) {
    std::string ids;
    for (size_t i = 0; i < host.ids.size() && i < 8; ++i) ids += (i ? ", " : "") + host.ids[i];
    if (host.ids.size() > 8) ids += ", ...";
    throw UserError("step " + std::to_string(step_ + 1) + " (epoch " + std::to_string(position.epoch + 1) +
                    ", batch " + std::to_string(position.batch) + "; utterances " + ids + "): " + e.what());
  }
}

// --compare-align: MAS on this step's log-likelihood again with every backend, checked against
// the step's own path and timed. (Only then: a second MAS costs a host wait.)
void Trainer::compare_align(const StepResult& r, const data::Batch& batch, const data::LoaderPosition& position) {
  const std::string label = "step " + std::to_string(step_) + " (epoch " + std::to_string(position.epoch + 1) +
                            ", batch " + std::to_string(position.batch) + ")";
  const align::StepAlignment step = step_alignment(r, batch, p_.backend, label);
  for (const auto& t : align::compare_backends(step, available_backends(p_.device), p_.step_options.mas.neg_inf)) {
    log_->add_mas_time(t.backend, t.ms);
  }
}

// What a finished step owes at its intervals: the log line, the alignment image, validation,
// a checkpoint. `batch` is the step's device batch.
void Trainer::after_step(const StepResult& r, const data::Batch& batch, const data::LoaderPosition& position) {
  if (c_.run.compare_align) compare_align(r, batch, position);
  const bool log_due = step_ % std::max(1, c_.train.log_interval) == 0 || step_ == 1;
  const int64_t epoch = p_.loader->position().epoch + 1;
  if (graphs_) {
    // The last log step's line, now that this step is queued behind it: waiting for that one
    // alone leaves the GPU busy (waiting for this one, and meeting the other ranks on the host
    // then, drained the queue: ~6 ms a log step on two GPUs). Its losses are already the
    // ranks' mean (averaged inside the graph), and every rank reads the same status at the same step.
    finish_graph_log();
    if (log_due) graphs_->start_readback(step_, epoch);  // the epoch as the eager line says it
  } else if (log_due) {
    const double mle = p_.dist->average(r.loss_mle.item<double>());
    const double dur = p_.dist->average(r.loss_dur.item<double>());
    const double grad_norm = r.grad_norm.defined() ? r.grad_norm.item<double>() : 0.0;
    if (p_.main) log_line(mle, dur, grad_norm, step_, epoch);
  }
  const bool val_due = c_.train.val_interval > 0 && step_ % c_.train.val_interval == 0;
  const bool image_due = c_.run.image_interval > 0 ? step_ % c_.run.image_interval == 0 : val_due;
  if (image_due && p_.main) {
    const int64_t t = batch.text_lengths[0].item<int64_t>(), s = r.out.y_lengths[0].item<int64_t>();
    log_->train_alignment(r.out.attn[0].slice(0, 0, t).slice(1, 0, s), batch.ids.empty() ? "" : batch.ids[0], step_);
  }
  if (val_due) validate_now();
  if (c_.train.checkpoint_interval > 0 && step_ % c_.train.checkpoint_interval == 0) {
    save("every " + std::to_string(c_.train.checkpoint_interval) + " steps");
  }
  if (p_.main) note_written(writer_.poll());
}

// The end of a run: the last validation and checkpoint, the ranks' rendezvous, the summary.
void Trainer::finish(RunSummary& summary) {
  finish_graph_log();
  if (graphs_) say(graphs_->recording_summary());
  // A run that ends normally also leaves the validation pictures and audio of its last step.
  if (!summary.interrupted && step_ > 0 && c_.train.val_interval > 0 && last_validation_step_ != step_) {
    validate_now();
  }
  if (step_ > 0) save(summary.stop_reason);
  if (p_.main) note_written(writer_.wait());
  save_rank_debug_copy();
  p_.dist->barrier();  // the others end once rank 0's checkpoint is written
  log_->finish();
  if (summary.interrupted) {
    // Before the first step (data scan, DDI) there is no checkpoint and no metrics line: the
    // directory holds no run, so the way out is the same command, not --resume.
    say("stopped by signal " + std::to_string(summary.signal) + " at step " + std::to_string(step_) +
        (last_checkpoint_.empty() ? ", before any checkpoint: nothing to resume; start it again without --resume"
                                  : "; resume with --resume"));
  }
  summary.step = step_;
  summary.epoch = p_.loader->position().epoch;
  summary.skipped = nonfinite_.skipped();
  summary.checkpoint = last_checkpoint_;
  summary.main_rank = p_.main;
}

RunSummary Trainer::run() {
  if (!o_.init_from.empty() && !o_.resume.empty()) {
    throw UserError("--init-from and --resume exclude each other: --resume continues a run, --init-from starts a "
                    "new one from a checkpoint's weights");
  }
  resume_ = choose_resume_checkpoint(c_.run.dir, o_.resume);
  if (!o_.init_from.empty()) check_weights_file(o_.init_from, "--init-from");
  nonfinite_ = NonfiniteSteps(c_.train.max_nonfinite_steps, 0);
  setup();
  restore_or_initialise();
  say(describe_run(c_, p_, dir_.string(), TrainGraphs::wanted(c_.run.cuda_graphs, p_.device, p_.step_options),
                   threads_note_));
  install_stop_handlers();
  RunSummary summary;
  run_start_ = Clock::now();
  log_->restart_clock(step_);
  std::optional<data::Batch> pending = initialise_actnorms();
  start_graphs();

  while (!stop_now(summary)) {
    const data::LoaderPosition position = p_.loader->position();
    std::optional<data::Batch> host = pending ? std::move(pending) : p_.loader->next();
    pending.reset();
    if (!host) continue;  // end of an epoch
    data::Batch device_batch;
    const StepResult r = take_step(*host, position, device_batch);
    if (!r.finite) {
      say(nonfinite_.eager_skip(step_ + 1, position.epoch, position.batch, host->ids));
      nonfinite_.stop_at_limit(last_checkpoint_);
      continue;
    }
    nonfinite_.finite();
    ++step_;
    after_step(r, graphs_ ? graphs_->inputs() : device_batch, position);
  }
  finish(summary);
  return summary;
}

}  // namespace

RunSummary train(const Config& config, const RunOptions& options) {
  // Before any tensor op: LibTorch's pool is one thread per core, which fights the loader.
  Trainer trainer(config, options, set_intra_op_threads(config.run.threads, config.loader.num_workers));
  return trainer.run();
}

}  // namespace monoflow::train
