// convert_weights: moves Glow-TTS weights between the official PyTorch implementation and
// monoflow. Both sides use the same state_dict keys.
//   In:  convert_weights IN.pth [OUT.pt] [--checkpoint] [--dilation-rate N] [--keys]
//        reads an official file (torch.save'd state_dict, or utils.save_checkpoint's dict with
//        "model"), works out the model's hyper-parameters from the shapes, loads it into
//        monoflow's GlowTTS (strictly: every key, every shape) and optionally writes it back out.
//   Out: convert_weights --to-official ckpt_*.pt OUT.pth [--checkpoint]
//        writes a monoflow checkpoint's model as the official state_dict (or, with --checkpoint,
//        the dict utils.load_checkpoint reads: {'model', 'iteration', 'learning_rate'}, where
//        iteration is the epochs the run had completed, as the official train.py reads it).
#include <iostream>
#include <string>

#include "cli_main.h"
#include "common/error.h"
#include "models/glow_tts.h"
#include "models/interop/weights.h"
#include "train/checkpoint.h"
#include "train/config/config_io.h"

namespace {

using namespace monoflow;

void print_summary(const std::string& in, const models::StateDict& weights, models::GlowTTS& model) {
  const auto& o = model->options();
  std::cout << in << ": " << weights.size() << " tensors, " << model->parameter_count() << " parameters; n_vocab "
            << o.n_vocab() << ", n_mels " << o.out_channels() << ", hidden " << o.hidden_channels()
            << ", enc layers " << o.n_layers_enc() << ", heads " << o.n_heads() << ", window " << o.window_size()
            << ", flow blocks " << o.n_blocks_dec() << ", n_sqz " << o.n_sqz() << ", prenet " << o.prenet()
            << ", mean_only " << o.mean_only() << ", speakers " << o.n_speakers() << "\n";
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
double snapshot_learning_rate(const train::CheckpointState& state, const std::string& in) {
  try {
    return train::parse_config(state.config_yaml, in + " (config snapshot)").train.learning_rate;
  } catch (const UserError&) {
    return 1.0;
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string in, out;
  bool checkpoint = false, print_keys = false, to_official = false;
  int64_t dilation_rate = 1;
  CLI::App app{"Reads an official Glow-TTS state_dict/checkpoint, checks it against monoflow's model, and\n"
               "optionally writes it (OUT.pt) as a state_dict or, with --checkpoint, as\n"
               "{'model', 'iteration', 'learning_rate'}. dilation_rate is not visible in the shapes\n"
               "(ljspeech: 1). With --to-official, reads a monoflow checkpoint (ckpt_*.pt) instead and\n"
               "writes its model in the official format, for FlowGenerator.load_state_dict(strict=True).\n"
               "The official 'iteration' is an epoch count (train.py saves G_<epoch>.pth and resumes at epoch\n"
               "iteration + 1, learning-rate step iteration x len(train_loader)): --to-official --checkpoint\n"
               "writes the epochs the monoflow run had completed, not its step."};
  app.add_option("in", in, "official state_dict or checkpoint (IN.pth); with --to-official a monoflow ckpt_*.pt")
      ->required();
  app.add_option("out", out, "write the weights here (OUT.pt / OUT.pth)");
  app.add_flag("--to-official", to_official,
               "IN is a monoflow checkpoint: write its model as an official Glow-TTS state_dict (OUT required)");
  app.add_flag("--checkpoint", checkpoint,
               "write the official checkpoint dict ({'model', 'iteration', 'learning_rate'}, what the official "
               "utils.load_checkpoint reads; iteration = epochs completed) instead of a bare state_dict");
  app.add_option("--dilation-rate", dilation_rate, "the model's dilation_rate (not visible in the shapes)");
  app.add_flag("--keys", print_keys, "print every key and shape");
  return cli_main(app, argc, argv, CliStyle("convert_weights").user_label("").usage_exit_code(2), [&] {
    const auto format = train::checkpoint_format(in);
    if (to_official) {
      if (out.empty()) throw UserError("--to-official needs OUT: convert_weights --to-official IN.pt OUT.pth");
      if (format == train::CheckpointFormat::kTorchSave) {
        throw FileError(in, 0, "is a Python torch.save file (official format) already; --to-official converts "
                               "monoflow checkpoints (ckpt_*.pt); to check this one, drop --to-official");
      }
      train::CheckpointState state;
      const models::StateDict weights = train::read_checkpoint_weights(in, &state);
      auto model = model_of(weights, dilation_rate, in);
      print_summary(in, weights, model);
      const int64_t epochs = train::completed_epochs(state);
      models::export_official_weights(*model, out, checkpoint, epochs, snapshot_learning_rate(state, in));
      std::cout << "wrote " << out << " (official "
                << (checkpoint ? "checkpoint dict, iteration " + std::to_string(epochs) + ": the " +
                                     std::to_string(epochs) + " epoch(s) completed by step " +
                                     std::to_string(state.step) + "; the official train.py resumes at epoch " +
                                     std::to_string(epochs + 1)
                               : std::string("state_dict"))
                << ")\n";
      return 0;
    }
    if (format == train::CheckpointFormat::kMonoflow) {
      throw FileError(in, 0, "is a monoflow checkpoint; to write it in the official format: convert_weights "
                             "--to-official " + in + " OUT.pth");
    }
    const auto weights = models::read_state_dict(in);
    auto model = model_of(weights, dilation_rate, in);
    print_summary(in, weights, model);
    if (print_keys) {
      for (const auto& [key, t] : models::state_dict(*model)) std::cout << key << " " << t.sizes() << "\n";
    }
    if (!out.empty()) {
      models::export_official_weights(*model, out, checkpoint);
      std::cout << "wrote " << out << (checkpoint ? " (checkpoint dict)" : " (state_dict)") << "\n";
    }
    return 0;
  });
}
