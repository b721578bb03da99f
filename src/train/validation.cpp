#include "train/validation.h"

#include "train/rng_state.h"

namespace monoflow::train {
namespace {

// Restores train/eval mode on scope exit.
class EvalMode {
 public:
  explicit EvalMode(models::GlowTTS& m) : model_(m), was_training_(m->is_training()) { model_->eval(); }
  ~EvalMode() { model_->train(was_training_); }

 private:
  models::GlowTTS& model_;
  bool was_training_;
};

}  // namespace

ValidationOptions validation_options(const Config& config, const StepOptions& step, const torch::Tensor& mel_basis) {
  ValidationOptions vo;
  vo.step = step;
  vo.step.check_finite = false;
  vo.mel_basis = mel_basis;
  vo.griffin_lim = GriffinLimOptions(config.data.mel).seed(static_cast<uint64_t>(config.train.seed));
  return vo;
}

ValidationResult validate(models::GlowTTS& model, data::DataLoader& loader, const torch::Device& device,
                          const ValidationOptions& o) {
  RngGuard rng;
  EvalMode eval(model);
  torch::NoGradGuard no_grad;
  ValidationResult r;
  loader.set_position({0, 0});
  double mle_sum = 0, dur_sum = 0;
  bool first = true;
  while (auto host_batch = loader.next()) {
    const data::Batch batch = to_device(*host_batch, device);
    const StepResult s = eval_step(model, batch, o.step);
    const auto n = batch.text.size(0);
    mle_sum += s.loss_mle.item<double>() * n;
    dur_sum += s.loss_dur.item<double>() * n;
    r.utterances += n;
    if (!first) continue;
    first = false;
    // The example: the batch's first utterance.
    const int64_t t = batch.text_lengths[0].item<int64_t>();
    const int64_t frames = s.out.y_lengths[0].item<int64_t>();
    r.example_id = batch.ids.empty() ? "" : batch.ids[0];
    r.align_forward = s.out.attn[0].slice(0, 0, t).slice(1, 0, frames).to(torch::kCPU, torch::kFloat32);
    r.target_mel = batch.mel[0].slice(1, 0, frames).to(torch::kCPU, torch::kFloat32);
    const auto text = batch.text.slice(0, 0, 1).slice(1, 0, t);
    const auto lengths = batch.text_lengths.slice(0, 0, 1);
    const auto speakers = batch.speakers.defined() ? batch.speakers.slice(0, 0, 1) : torch::Tensor();
    const auto syn = model->infer(text, lengths, speakers, o.noise_scale, o.length_scale);
    const int64_t gen_frames = syn.y_lengths[0].item<int64_t>();
    r.generated_mel = syn.y[0].slice(1, 0, gen_frames).to(torch::kCPU, torch::kFloat32);
    r.align_infer = syn.attn[0].slice(0, 0, t).slice(1, 0, gen_frames).to(torch::kCPU, torch::kFloat32);
    if (o.mel_basis.defined() && gen_frames > 1) {
      r.audio = griffin_lim(mel_to_magnitude(r.generated_mel, o.mel_basis), o.griffin_lim);
    }
  }
  if (r.utterances > 0) {
    r.loss_mle = mle_sum / r.utterances;
    r.loss_dur = dur_sum / r.utterances;
  }
  return r;
}

}  // namespace monoflow::train
