// Validation: losses over the whole validation set, plus one utterance synthesised from its
// text (alignment from the forward pass and from inference, target and generated mel, and a
// Griffin-Lim rendering). Runs in eval mode without gradients and leaves every RNG as it was.
#pragma once

#include <torch/torch.h>

#include "data/loader.h"
#include "models/glow_tts.h"
#include "train/config/config.h"
#include "train/griffin_lim.h"
#include "train/train_step.h"

namespace monoflow::train {

struct ValidationResult {
  double loss_mle = 0, loss_dur = 0;  // averaged over batches weighted by utterances
  int64_t utterances = 0;
  std::string example_id;
  torch::Tensor align_forward;  // [T, S] MAS path of the example (CPU float)
  torch::Tensor align_infer;    // [T, S'] path used by inference
  torch::Tensor target_mel;     // [n_mels, S]
  torch::Tensor generated_mel;  // [n_mels, S']
  torch::Tensor audio;          // 1-D, Griffin-Lim of generated_mel (empty without mel_basis)
};

struct ValidationOptions {
  StepOptions step;
  double noise_scale = 0.667;  // the official inference default
  double length_scale = 1.0;
  torch::Tensor mel_basis;     // [n_mels, n_fft/2+1]; undefined: no audio
  GriffinLimOptions griffin_lim;
};

// The trainer's validation: its step's options without the finite check, Griffin-Lim with
// the config's STFT and seed, the validation set's filterbank `mel_basis`.
ValidationOptions validation_options(const Config& config, const StepOptions& step, const torch::Tensor& mel_basis);

ValidationResult validate(models::GlowTTS& model, data::DataLoader& loader, const torch::Device& device,
                          const ValidationOptions& options);

}  // namespace monoflow::train
