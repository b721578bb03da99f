#include "train/weights_file.h"

#include <filesystem>

#include "common/error.h"
#include "models/interop/weights.h"
#include "train/checkpoint.h"

namespace monoflow::train {

void check_weights_file(const std::string& path, const std::string& flag) {
  namespace fs = std::filesystem;
  if (!fs::exists(path)) throw FileError(path, 0, flag + ": no such file; check the path");
  if (fs::is_directory(path)) {
    throw FileError(path, 0, flag + ": is a directory; pass a checkpoint file (a monoflow ckpt_*.pt, or an official "
                                    "Glow-TTS G_*.pth)");
  }
  if (checkpoint_format(path) == CheckpointFormat::kUnknown) {
    throw FileError(path, 0, flag + ": corrupt or not a checkpoint: neither a monoflow checkpoint (ckpt_*.pt) nor "
                                    "a Python torch.save file (an official Glow-TTS G_*.pth); if it was copied "
                                    "from elsewhere, copy it again");
  }
}

LoadedWeights load_model_weights(const std::string& path, models::GlowTTSImpl& model) {
  LoadedWeights out;
  if (checkpoint_format(path) == CheckpointFormat::kTorchSave) {
    out.official = true;
    const models::StateDict weights = models::read_state_dict(path, &out.step);
    models::load_state_dict(model, weights, path, /*strict=*/true);
  } else {
    out.step = load_checkpoint(path, model, nullptr).step;
  }
  model.set_ddi(false);
  return out;
}

}  // namespace monoflow::train
