// The configs/ folder: every shipped config loads and builds its model, and the aligner's
// decoder acts frame by frame, which is what its comments (and docs/accuracy.md's figures)
// rest on.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "model_test_util.h"
#include "models/decoder.h"
#include "models/glow_tts.h"
#include "train/config/config_io.h"
#include "train/config/library_options.h"

namespace monoflow::train {
namespace {

std::string configs_dir() {
  const char* dir = std::getenv("MONOFLOW_SOURCE_DIR");
  return std::string(dir ? dir : ".") + "/configs";
}

// How far a change of the decoder's input at frame `frame` reaches: the frames of z (other than
// `frame`) that change, over a random input of `frames` frames with every parameter random.
int64_t frames_reached(const models::GlowTTSOptions& options, int64_t frames, int64_t frame) {
  torch::manual_seed(3);
  models::FlowSpecDecoder decoder(options);
  models::testing::randomize(*decoder);
  decoder->eval();
  torch::NoGradGuard no_grad;
  const auto y = torch::randn({1, options.out_channels(), frames});
  const auto mask = torch::ones({1, 1, frames});
  auto y_changed = y.clone();
  y_changed.select(2, frame).add_(1.0);
  const auto z = decoder->forward(y, mask).first, z_changed = decoder->forward(y_changed, mask).first;
  const auto changed = ((z_changed - z).abs().amax(1) > 1e-6).squeeze(0);  // [frames]
  EXPECT_TRUE(changed[frame].item<bool>()) << "the frame itself must change";
  return changed.sum().item<int64_t>() - 1;
}

TEST(ShippedConfigs, EveryConfigLoadsAndBuildsItsModel) {
  int found = 0;
  for (const auto& entry : std::filesystem::directory_iterator(configs_dir())) {
    if (entry.path().extension() != ".yaml") continue;
    ++found;
    SCOPED_TRACE(entry.path().string());
    const Config config = load_config(entry.path().string());
    const auto options = model_options(config, /*n_vocab=*/40);
    EXPECT_NO_THROW(models::GlowTTS{options}) << entry.path();
  }
  EXPECT_GE(found, 4);  // ljspeech, ljspeech_blank, quickstart, aligner
}

TEST(ShippedConfigs, TheAlignersDecoderActsFrameByFrame) {
  const Config aligner = load_config(configs_dir() + "/aligner.yaml");
  EXPECT_EQ(aligner.model.n_sqz(), 1);
  EXPECT_EQ(aligner.model.kernel_size_dec(), 1);
  // A change at one frame of the mel changes z at that frame only, wherever it is.
  const auto options = model_options(aligner, 40);
  for (int64_t frame : {0, 7, 15}) EXPECT_EQ(frames_reached(options, 16, frame), 0) << "frame " << frame;
  // The quick-start model it derives from reaches its neighbours (so the measure can fail): its
  // frame pairs and kernel-5 couplings spread a change over several frames.
  const auto quickstart = model_options(load_config(configs_dir() + "/quickstart.yaml"), 40);
  EXPECT_GE(frames_reached(quickstart, 16, 7), 4);
}

}  // namespace
}  // namespace monoflow::train
