#include "train/run_log.h"

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <fstream>
#include <vector>

#include "train/atomic_file.h"
#include "train/log/plot.h"
#include "train/wav.h"

namespace monoflow::train {
namespace fs = std::filesystem;

namespace {

// Alignment pictures: frames across, tokens up, rows repeated to at least 240 pixels; a title.
PlotLabels alignment_axes(const std::string& title) { return PlotLabels{"frame", "token", 240, title}; }

std::string step_tag(int64_t step) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%09" PRId64, step);
  return buf;
}

// A run that went on past its last checkpoint (crash, kill -9) left metrics lines for steps
// the resumed run will redo: keep only those up to the checkpoint's step.
void drop_metrics_after(const std::string& path, int64_t step) {
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

}  // namespace

RunLog::RunLog(bool writes, bool quiet, align::Backend backend)
    : writes_(writes), quiet_(quiet), backend_(backend), progress_(stderr) {}

void RunLog::say(const std::string& text) {
  if (!quiet_ && writes_) progress_.message(text);
}

void RunLog::tell(const std::string& text) {
  if (writes_) progress_.message(text);
}

void RunLog::open(const fs::path& dir, bool tensorboard, bool resuming, int64_t step) {
  if (!writes_) return;
  images_ = dir / "images";
  samples_ = dir / "samples";
  if (resuming) drop_metrics_after((dir / "metrics.jsonl").string(), step);
  if (tensorboard) {
    tb_ = std::make_unique<EventWriter>((dir / "tensorboard").string());
    if (resuming) tb_->purge_from(step + 1);  // as metrics.jsonl: nothing past the checkpoint
  }
  metrics_ = std::make_unique<MetricsLog>((dir / "metrics.jsonl").string(), resuming);
}

void RunLog::data_changed(const DatasetChanges& changes, int64_t step, const std::string& checkpoint) {
  if (!writes_) return;
  // The curves' reader learns where the data changed (scripts that plot skip "event" lines).
  if (!changes.training.empty()) {
    metrics_->event(step, "training set changed", {{"change", changes.training}, {"checkpoint", checkpoint}});
  }
  if (!changes.validation.empty()) {
    metrics_->event(step, "validation set changed", {{"change", changes.validation}, {"checkpoint", checkpoint}});
  }
}

void RunLog::restart_clock(int64_t step) {
  last_time_ = Clock::now();
  last_step_ = step;
}

void RunLog::add_mas_time(align::Backend backend, double ms) {
  mas_ms_[backend].first += ms;
  mas_ms_[backend].second += 1;
}

void RunLog::step_line(const StepLine& l) {
  if (!writes_) return;
  const double elapsed = std::chrono::duration<double>(Clock::now() - last_time_).count();
  const int64_t steps = l.step - last_step_;
  std::vector<std::pair<std::string, double>> values{
      {"loss/mle", l.loss_mle}, {"loss/dur", l.loss_dur}, {"loss/total", l.loss_mle + l.loss_dur}, {"lr", l.lr},
      {"grad_norm", l.grad_norm}, {"time/step_ms", steps > 0 ? 1000.0 * elapsed / steps : 0.0},
      {"skipped", static_cast<double>(l.skipped)}};
  if (l.graphs_recorded > 0) values.emplace_back("time/graph_recording_s", l.recording_s);
  for (const auto& [backend, acc] : mas_ms_) {
    if (acc.second > 0) values.emplace_back("time/mas_ms/" + align::backend_name(backend), acc.first / acc.second);
  }
  const auto own = mas_ms_.find(backend_);
  if (own != mas_ms_.end() && own->second.second > 0) last_mas_ms_ = own->second.first / own->second.second;
  mas_ms_.clear();

  if (tb_) {
    for (const auto& [k, v] : values) tb_->scalar(k, v, l.step);
    tb_->flush();
  }
  metrics_->write(l.step, l.epoch, values);

  ProgressInfo p;
  p.step = l.step;
  p.total_steps = l.total_steps;
  p.epoch = l.epoch;
  p.loss_mle = l.loss_mle;
  p.loss_dur = l.loss_dur;
  p.lr = l.lr;
  const double stepping = elapsed - l.recording_s;  // the steps' own time
  p.steps_per_s = stepping > 0 ? steps / stepping : 0.0;
  p.graphs_recorded = l.graphs_recorded;
  p.recording_s = l.recording_s;
  p.mas_ms = last_mas_ms_;
  p.skipped = l.skipped;
  p.seconds_left = l.seconds_left;
  if (!quiet_) progress_.update(p);
  restart_clock(l.step);
}

void RunLog::image(const std::string& tag, const std::string& file, const Png& png, int64_t step) {
  if (tb_) tb_->image(tag, png.bytes, png.height, png.width, png.channels, step);
  write_file((images_ / file).string(), png.bytes);
}

void RunLog::train_alignment(const torch::Tensor& attn, const std::string& id, int64_t step) {
  if (!writes_) return;
  image("train/align", "align_" + step_tag(step) + ".png",
        render_plot(attn, alignment_axes("MAS alignment (" + (id.empty() ? "" : id + ", ") + "training step " +
                                         std::to_string(step) + ")")),
        step);
}

void RunLog::validation(const ValidationResult& v, int64_t step, int64_t epoch, int sample_rate,
                        Clock::time_point start) {
  if (!writes_) return;
  metrics_->write(step, epoch,
                  {{"val/loss/mle", v.loss_mle}, {"val/loss/dur", v.loss_dur}, {"val/loss/total", v.loss_mle + v.loss_dur}});
  if (tb_) {
    tb_->scalar("val/loss/mle", v.loss_mle, step);
    tb_->scalar("val/loss/dur", v.loss_dur, step);
    tb_->scalar("val/loss/total", v.loss_mle + v.loss_dur, step);
  }
  const std::string tag = step_tag(step);
  if (v.align_forward.defined()) {
    const std::string at = " (" + v.example_id + ", step " + std::to_string(step) + ")";
    image("val/align_mas", "val_align_" + tag + ".png",
          render_plot(v.align_forward, alignment_axes("MAS alignment" + at)), step);
    image("val/align_infer", "val_align_infer_" + tag + ".png",
          render_plot(v.align_infer, alignment_axes("predicted durations" + at)), step);
    image("val/mel_target_vs_generated", "val_mel_" + tag + ".png",
          render_panels({{v.target_mel, "target mel" + at}, {v.generated_mel, "generated mel" + at}},
                        PlotLabels{"frame", "mel channel", 0, ""}),
          step);
  }
  if (v.audio.defined() && v.audio.numel() > 0) {
    const double peak = v.audio.abs().max().item<double>();
    const torch::Tensor audio = peak > 0 ? v.audio * (0.9 / peak) : v.audio;
    const std::string wav = encode_wav16(audio, sample_rate);
    if (tb_) tb_->audio("val/audio_griffin_lim", wav, sample_rate, audio.numel(), step);
    write_file((samples_ / ("val_" + tag + ".wav")).string(), wav);
  }
  if (tb_) tb_->flush();
  char buf[200];
  std::snprintf(buf, sizeof buf, "validation at step %" PRId64 ": mle %.4f dur %.4f over %" PRId64
                " utterances (%.1f s); example %s",
                step, v.loss_mle, v.loss_dur, v.utterances,
                std::chrono::duration<double>(Clock::now() - start).count(), v.example_id.c_str());
  say(buf);
}

void RunLog::finish() {
  if (!quiet_ && writes_) progress_.finish();
}

}  // namespace monoflow::train
