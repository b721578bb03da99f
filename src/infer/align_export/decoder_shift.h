// How far the flow decoder moves sound in time, measured on the model itself.
//
// MAS aligns the text with z, the decoder's image of the mel, not with the mel. Each z frame t
// depends on the mel frames around some centre t + s: the decoder's convolutions may learn any
// such shift s, a fraction of a frame to a few, and each training run learns its own. A word
// boundary that MAS places at z frame b then sits at mel frame b + s. The shift is read from the
// decoder's Jacobian: for frames t of z, the centroid over mel frames k of |dz_t/dy_k|^2, minus t,
// averaged over frames and utterances. Nothing is fitted to a voice or its word timings.
#pragma once

#include <torch/torch.h>

#include <cstdint>

#include "models/glow_tts.h"

namespace monoflow::train {

class DecoderShift {
 public:
  // One batch: mel [B, n_mels, S] and mel_lengths [B] on the model's device, g the speaker
  // conditioning or undefined. Probes each utterance at frames around a quarter, half and three
  // quarters of its length, an even frame and the next (n_sqz pairs frames: one of each parity).
  void add(models::GlowTTS& model, const torch::Tensor& mel, const torch::Tensor& mel_lengths,
           const torch::Tensor& g);
  // The mean shift s in mel frames (positive: z frame t hears mel frames after t); 0 if nothing
  // was added.
  double frames() const { return probes_ > 0 ? sum_ / static_cast<double>(probes_) : 0.0; }
  int64_t probes() const { return probes_; }

 private:
  double sum_ = 0;
  int64_t probes_ = 0;
};

}  // namespace monoflow::train
