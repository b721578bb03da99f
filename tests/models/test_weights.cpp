// Weight exchange: reading official torch.save files (OrderedDict state_dicts inside the
// checkpoint dict), export/import round trips, options inferred from shapes, and the errors.
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "model_test_util.h"
#include "models/glow_tts.h"
#include "models/interop/pickle_compat.h"
#include "models/interop/weights.h"

namespace monoflow::models {
namespace {

using testing::data_path;

std::string temp_path(const std::string& name) {
  return (std::filesystem::temp_directory_path() / ("monoflow_models_" + std::to_string(::getpid()) + "_" + name))
      .string();
}

TEST(Weights, ReadsOfficialCheckpointDictWithOrderedDictStateDict) {
  auto sd = read_state_dict(data_path("tiny_official_checkpoint.pt"));
  GlowTTS model(testing::tiny_reference_options());
  auto ours = state_dict(*model);
  ASSERT_EQ(sd.size(), ours.size());
  for (size_t i = 0; i < sd.size(); ++i) {
    EXPECT_EQ(sd[i].first, ours[i].first);  // same keys in the same order
    EXPECT_EQ(sd[i].second.sizes(), ours[i].second.sizes()) << sd[i].first;
  }
  // Values as written by make_reference.py (torch.randn * 0.3 from seed 1234): spot-check the
  // file's first tensor against a copy loaded into the model.
  import_official_weights(*model, data_path("tiny_official_checkpoint.pt"));
  EXPECT_TRUE(torch::equal(model->encoder->named_parameters()["emb.weight"], sd[0].second));
  EXPECT_GT(sd[0].second.abs().sum().item<double>(), 1.0);
  EXPECT_FALSE(model->ddi_pending());
}

// The same checkpoint written in torch's legacy (pre-1.6) format, as older official
// checkpoints are: same keys, same values.
TEST(Weights, ReadsLegacyFormatCheckpoint) {
  auto zip = read_state_dict(data_path("tiny_official_checkpoint.pt"));
  auto legacy = read_state_dict(data_path("tiny_official_checkpoint_legacy.pt"));
  ASSERT_EQ(zip.size(), legacy.size());
  for (size_t i = 0; i < zip.size(); ++i) {
    EXPECT_EQ(zip[i].first, legacy[i].first);
    EXPECT_TRUE(torch::equal(zip[i].second, legacy[i].second)) << zip[i].first;
  }
  GlowTTS model(testing::tiny_reference_options());
  import_official_weights(*model, data_path("tiny_official_checkpoint_legacy.pt"));
}

TEST(Weights, InfersOptionsFromShapes) {
  auto sd = read_state_dict(data_path("tiny_official_checkpoint.pt"));
  auto o = infer_options(sd, GlowTTSOptions(1, 1).dilation_rate(2), "tiny");
  auto e = testing::tiny_reference_options();
  EXPECT_EQ(o.n_vocab(), e.n_vocab());
  EXPECT_EQ(o.out_channels(), e.out_channels());
  EXPECT_EQ(o.hidden_channels(), e.hidden_channels());
  EXPECT_EQ(o.filter_channels(), e.filter_channels());
  EXPECT_EQ(o.filter_channels_dp(), e.filter_channels_dp());
  EXPECT_EQ(o.n_layers_enc(), e.n_layers_enc());
  EXPECT_EQ(o.n_heads(), e.n_heads());
  EXPECT_EQ(o.window_size(), e.window_size());
  EXPECT_EQ(o.n_blocks_dec(), e.n_blocks_dec());
  EXPECT_EQ(o.n_block_layers(), e.n_block_layers());
  EXPECT_EQ(o.kernel_size_dec(), e.kernel_size_dec());
  EXPECT_EQ(o.n_sqz(), e.n_sqz());
  EXPECT_EQ(o.n_split(), e.n_split());
  EXPECT_EQ(o.mean_only(), e.mean_only());
  EXPECT_EQ(o.prenet(), e.prenet());
  EXPECT_EQ(o.n_speakers(), 3);
  EXPECT_EQ(o.gin_channels(), 4);
  // and the ljspeech model's own state dict gives back the ljspeech options
  GlowTTS lj(GlowTTSOptions(148, 80));
  auto ol = infer_options(state_dict(*lj), GlowTTSOptions(1, 1), "lj");
  EXPECT_EQ(GlowTTS(ol)->parameter_count(), 28623889);
  EXPECT_EQ(ol.n_heads(), 2);
  EXPECT_EQ(ol.window_size(), 4);
  EXPECT_TRUE(ol.mean_only());
}

TEST(Weights, ExportImportRoundTripIsIdentity) {
  torch::manual_seed(11);
  GlowTTS a(testing::tiny_reference_options());
  testing::randomize(*a);
  for (bool as_checkpoint : {false, true}) {
    const auto path = temp_path(as_checkpoint ? "ck.pt" : "sd.pt");
    export_official_weights(*a, path, as_checkpoint, /*iteration=*/5);
    GlowTTS b(testing::tiny_reference_options());
    import_official_weights(*b, path);
    auto pa = state_dict(*a), pb = state_dict(*b);
    ASSERT_EQ(pa.size(), pb.size());
    for (size_t i = 0; i < pa.size(); ++i) {
      EXPECT_EQ(pa[i].first, pb[i].first);
      EXPECT_TRUE(torch::equal(pa[i].second, pb[i].second)) << pa[i].first;
    }
    if (as_checkpoint) {
      std::ifstream in(path, std::ios::binary);
      std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      auto d = read_torch_save(bytes, path).toGenericDict();
      EXPECT_EQ(d.at("iteration").toInt(), 5);
      EXPECT_TRUE(d.at("model").isGenericDict());
    }
    std::remove(path.c_str());
  }
  // Official file -> our export -> re-import: the same tensors as the official file.
  GlowTTS c(testing::tiny_reference_options());
  import_official_weights(*c, data_path("tiny_official_checkpoint.pt"));
  const auto path = temp_path("re.pt");
  export_official_weights(*c, path);
  auto original = read_state_dict(data_path("tiny_official_checkpoint.pt"));
  auto again = read_state_dict(path);
  ASSERT_EQ(original.size(), again.size());
  for (size_t i = 0; i < original.size(); ++i) {
    EXPECT_EQ(original[i].first, again[i].first);
    EXPECT_TRUE(torch::equal(original[i].second, again[i].second)) << original[i].first;
  }
  std::remove(path.c_str());
}

TEST(Weights, MismatchesAreUserErrorsNamingTheKey) {
  GlowTTS other(testing::tiny_reference_options().filter_channels(32));
  try {
    import_official_weights(*other, data_path("tiny_official_checkpoint.pt"));
    FAIL() << "expected a shape mismatch";
  } catch (const UserError& e) {
    EXPECT_NE(std::string(e.what()).find("encoder.encoder.ffn_layers.0.conv_1.weight"), std::string::npos) << e.what();
  }
  GlowTTS single(testing::tiny_options());  // no speaker embedding / cond layers
  EXPECT_THROW(import_official_weights(*single, data_path("tiny_official_checkpoint.pt")), UserError);
  EXPECT_THROW(read_state_dict(temp_path("does_not_exist.pt")), UserError);
  const auto junk = temp_path("junk.pt");
  { std::ofstream(junk) << "not a zip"; }
  EXPECT_THROW(read_state_dict(junk), UserError);
  std::remove(junk.c_str());
}

}  // namespace
}  // namespace monoflow::models
