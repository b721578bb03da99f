#include "train/convert_weights.h"

#include <sstream>

#include "common/error.h"
#include "models/glow_tts.h"
#include "models/interop/weights.h"
#include "train/checkpoint.h"
#include "train/config/config_io.h"

namespace monoflow::train {
namespace {

std::string summary_of(const std::string& in, const models::StateDict& weights, models::GlowTTS& model) {
  const auto& o = model->options();
  std::ostringstream s;
  s << in << ": " << weights.size() << " tensors, " << model->parameter_count() << " parameters; n_vocab "
    << o.n_vocab() << ", n_mels " << o.out_channels() << ", hidden " << o.hidden_channels() << ", enc layers "
    << o.n_layers_enc() << ", heads " << o.n_heads() << ", window " << o.window_size() << ", flow blocks "
    << o.n_blocks_dec() << ", n_sqz " << o.n_sqz() << ", prenet " << o.prenet() << ", mean_only " << o.mean_only()
    << ", speakers " << o.n_speakers();
  return s.str();
}

// The model a state dict describes, loaded from it strictly.
models::GlowTTS model_of(const models::StateDict& weights, int64_t dilation_rate, const std::string& source) {
  auto options = models::infer_options(weights, models::GlowTTSOptions(1, 1).dilation_rate(dilation_rate), source);
  models::GlowTTS model(options);
  models::load_state_dict(*model, weights, source, /*strict=*/true);
  model->set_ddi(false);
  return model;
}

// The learning rate the official checkpoint dict records (hps.train.learning_rate): the run's
// config snapshot's, or the official default 1.0 when the snapshot cannot be read.
double snapshot_learning_rate(const CheckpointState& state, const std::string& in) {
  try {
    return parse_config(state.config_yaml, in + " (config snapshot)").train.learning_rate;
  } catch (const UserError&) {
    return 1.0;
  }
}

ConvertReport report_of(const std::string& in, const models::StateDict& weights, models::GlowTTS& model) {
  ConvertReport r;
  r.summary = summary_of(in, weights, model);
  r.tensors = static_cast<int64_t>(weights.size());
  r.parameters = model->parameter_count();
  for (const auto& [key, t] : models::state_dict(*model)) r.keys.push_back({key, t.sizes().vec()});
  return r;
}

}  // namespace

ConvertReport convert_weights(const ConvertOptions& o) {
  const auto format = checkpoint_format(o.in);
  if (o.to_official) {
    if (o.out.empty()) throw UserError("--to-official needs OUT: convert_weights --to-official IN.pt OUT.pth");
    if (format == CheckpointFormat::kTorchSave) {
      throw FileError(o.in, 0, "is a Python torch.save file (official format) already; --to-official converts "
                               "monoflow checkpoints (ckpt_*.pt); to check this one, drop --to-official");
    }
    CheckpointState state;
    const models::StateDict weights = read_checkpoint_weights(o.in, &state);
    auto model = model_of(weights, o.dilation_rate, o.in);
    ConvertReport r = report_of(o.in, weights, model);
    const int64_t epochs = completed_epochs(state);
    models::export_official_weights(*model, o.out, o.checkpoint, epochs, snapshot_learning_rate(state, o.in));
    r.step = state.step;
    if (o.checkpoint) r.iteration = epochs;
    r.wrote = "wrote " + o.out + " (official " +
              (o.checkpoint ? "checkpoint dict, iteration " + std::to_string(epochs) + ": the " +
                                  std::to_string(epochs) + " epoch(s) completed by step " + std::to_string(state.step) +
                                  "; the official train.py resumes at epoch " + std::to_string(epochs + 1)
                            : std::string("state_dict")) +
              ")";
    return r;
  }
  if (format == CheckpointFormat::kMonoflow) {
    throw FileError(o.in, 0, "is a monoflow checkpoint; to write it in the official format: convert_weights "
                             "--to-official " + o.in + " OUT.pth");
  }
  const auto weights = models::read_state_dict(o.in);
  auto model = model_of(weights, o.dilation_rate, o.in);
  ConvertReport r = report_of(o.in, weights, model);
  if (!o.out.empty()) {
    models::export_official_weights(*model, o.out, o.checkpoint);
    r.wrote = "wrote " + o.out + (o.checkpoint ? " (checkpoint dict)" : " (state_dict)");
  }
  return r;
}

}  // namespace monoflow::train
