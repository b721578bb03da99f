// convert_weights: moves Glow-TTS weights between the official PyTorch implementation and
// monoflow. Both sides use the same state_dict keys; this tool reads an official file
// (torch.save'd state_dict, or the checkpoint dict with "model"), works out the model's
// hyper-parameters from the shapes, loads it into monoflow's GlowTTS (strictly: every key,
// every shape) and writes it back out as a plain state_dict or an official checkpoint dict.
//
//   convert_weights IN.pth [OUT.pt] [--checkpoint] [--dilation-rate N] [--keys]
#include <cstdlib>
#include <iostream>
#include <string>

#include "common/error.h"
#include "models/glow_tts.h"
#include "models/interop/weights.h"

int main(int argc, char** argv) {
  using namespace monoflow;
  std::string in, out;
  bool checkpoint = false, print_keys = false;
  int64_t dilation_rate = 1;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    if (a == "--checkpoint") {
      checkpoint = true;
    } else if (a == "--keys") {
      print_keys = true;
    } else if (a == "--dilation-rate" && i + 1 < argc) {
      dilation_rate = std::atoll(argv[++i]);
    } else if (a == "-h" || a == "--help" || a.rfind("--", 0) == 0) {
      std::cerr << "usage: convert_weights IN.pth [OUT.pt] [--checkpoint] [--dilation-rate N] [--keys]\n"
                   "  Reads an official Glow-TTS state_dict/checkpoint, checks it against monoflow's\n"
                   "  model, and optionally writes it (OUT.pt) as a state_dict or, with --checkpoint,\n"
                   "  as {'model', 'iteration', 'learning_rate'}. dilation_rate is not visible in the\n"
                   "  shapes (ljspeech: 1).\n";
      return a == "-h" || a == "--help" ? 0 : 2;
    } else if (in.empty()) {
      in = a;
    } else if (out.empty()) {
      out = a;
    } else {
      std::cerr << "convert_weights: unexpected argument '" << a << "'\n";
      return 2;
    }
  }
  if (in.empty()) {
    std::cerr << "convert_weights: no input file (see --help)\n";
    return 2;
  }
  try {
    auto weights = models::read_state_dict(in);
    auto options = models::infer_options(weights, models::GlowTTSOptions(1, 1).dilation_rate(dilation_rate), in);
    models::GlowTTS model(options);
    models::load_state_dict(*model, weights, in, /*strict=*/true);
    model->set_ddi(false);
    std::cout << in << ": " << weights.size() << " tensors, " << model->parameter_count()
              << " parameters; n_vocab " << options.n_vocab() << ", n_mels " << options.out_channels()
              << ", hidden " << options.hidden_channels() << ", enc layers " << options.n_layers_enc()
              << ", heads " << options.n_heads() << ", window " << options.window_size() << ", flow blocks "
              << options.n_blocks_dec() << ", n_sqz " << options.n_sqz() << ", prenet " << options.prenet()
              << ", mean_only " << options.mean_only() << ", speakers " << options.n_speakers() << "\n";
    if (print_keys) {
      for (const auto& [key, t] : models::state_dict(*model)) std::cout << key << " " << t.sizes() << "\n";
    }
    if (!out.empty()) {
      models::export_official_weights(*model, out, checkpoint);
      std::cout << "wrote " << out << (checkpoint ? " (checkpoint dict)" : " (state_dict)") << "\n";
    }
  } catch (const UserError& e) {
    std::cerr << "convert_weights: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
