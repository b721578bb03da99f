// Glow-TTS weights between the official PyTorch implementation and monoflow (tools/convert_weights
// and monoflow.convert_weights in Python). Both sides use the same state_dict keys.
//   In:  an official file (torch.save'd state_dict, or utils.save_checkpoint's dict with "model"):
//        the model's hyper-parameters from the shapes, loaded strictly into monoflow's GlowTTS
//        (every key, every shape), and optionally written back out (state_dict or checkpoint dict).
//   Out: a monoflow checkpoint's model as the official state_dict, or with `checkpoint` the dict
//        utils.load_checkpoint reads: {'model', 'iteration', 'learning_rate'}, where iteration is
//        the epochs the run had completed, as the official train.py reads it.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace monoflow::train {

struct ConvertOptions {
  std::string in;            // official file; with to_official a monoflow ckpt_*.pt
  std::string out;           // "": only check (not allowed with to_official)
  bool to_official = false;  // in is a monoflow checkpoint, out the official file
  bool checkpoint = false;   // write the official checkpoint dict instead of a bare state_dict
  int64_t dilation_rate = 1; // not visible in the shapes (ljspeech: 1)
};

struct ConvertReport {
  std::string summary;  // "<in>: N tensors, P parameters; n_vocab ..., speakers S"
  int64_t tensors = 0;
  int64_t parameters = 0;
  // Every key of the model with its shape, in the model's order.
  std::vector<std::pair<std::string, std::vector<int64_t>>> keys;
  std::string wrote;     // "wrote OUT (...)", "" when nothing was written
  int64_t step = -1;     // to_official: the monoflow checkpoint's step
  int64_t iteration = -1;  // to_official with checkpoint: the 'iteration' written (epochs completed)
};

// FileError naming `in` for a file of the other direction's format (with the command that
// converts it), for an unreadable file or a key or shape the model does not have; UserError
// for to_official without out.
ConvertReport convert_weights(const ConvertOptions& options);

}  // namespace monoflow::train
