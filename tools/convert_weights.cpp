// convert_weights: moves Glow-TTS weights between the official PyTorch implementation and
// monoflow. Both sides use the same state_dict keys; this tool reads an official file
// (torch.save'd state_dict, or the checkpoint dict with "model"), works out the model's
// hyper-parameters from the shapes, loads it into monoflow's GlowTTS (strictly: every key,
// every shape) and writes it back out as a plain state_dict or an official checkpoint dict.
//
//   convert_weights IN.pth [OUT.pt] [--checkpoint] [--dilation-rate N] [--keys]
#include <iostream>
#include <string>

#include "cli_main.h"
#include "models/glow_tts.h"
#include "models/interop/weights.h"

int main(int argc, char** argv) {
  using namespace monoflow;
  std::string in, out;
  bool checkpoint = false, print_keys = false;
  int64_t dilation_rate = 1;
  CLI::App app{"Reads an official Glow-TTS state_dict/checkpoint, checks it against monoflow's model, and\n"
               "optionally writes it (OUT.pt) as a state_dict or, with --checkpoint, as\n"
               "{'model', 'iteration', 'learning_rate'}. dilation_rate is not visible in the shapes\n"
               "(ljspeech: 1)."};
  app.add_option("in", in, "official state_dict or checkpoint (IN.pth)")->required();
  app.add_option("out", out, "write the weights here (OUT.pt)");
  app.add_flag("--checkpoint", checkpoint, "write the official checkpoint dict instead of a bare state_dict");
  app.add_option("--dilation-rate", dilation_rate, "the model's dilation_rate (not visible in the shapes)");
  app.add_flag("--keys", print_keys, "print every key and shape");
  return cli_main(app, argc, argv, CliStyle("convert_weights").user_label("").usage_exit_code(2), [&] {
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
    return 0;
  });
}
