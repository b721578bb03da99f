// convert_weights: the command line of src/train/convert_weights.h, which moves Glow-TTS weights
// between the official PyTorch implementation and monoflow. Both sides use the same state_dict keys.
//   In:  convert_weights IN.pth [OUT.pt] [--checkpoint] [--dilation-rate N] [--keys]
//        reads an official file (torch.save'd state_dict, or utils.save_checkpoint's dict with
//        "model"), works out the model's hyper-parameters from the shapes, loads it into
//        monoflow's GlowTTS (strictly: every key, every shape) and optionally writes it back out.
//   Out: convert_weights --to-official ckpt_*.pt OUT.pth [--checkpoint]
//        writes a monoflow checkpoint's model as the official state_dict (or, with --checkpoint,
//        the dict utils.load_checkpoint reads: {'model', 'iteration', 'learning_rate'}, where
//        iteration is the epochs the run had completed, as the official train.py reads it).
#include <c10/util/ArrayRef.h>

#include <iostream>
#include <string>

#include "cli_main.h"
#include "train/convert_weights.h"

using namespace monoflow;

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
    // Everything it does lives in src/train/convert_weights.h (monoflow.convert_weights too).
    const train::ConvertReport r = train::convert_weights({in, out, to_official, checkpoint, dilation_rate});
    std::cout << r.summary << "\n";
    if (print_keys && !to_official) {
      for (const auto& [key, shape] : r.keys) std::cout << key << " " << c10::IntArrayRef(shape) << "\n";
    }
    if (!r.wrote.empty()) std::cout << r.wrote << "\n";
    return 0;
  });
}
