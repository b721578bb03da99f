// The allocator defaults of a run on a GPU (train/cuda_memory.h): which settings are applied
// for which environment, and, on a GPU, that picking the device applies them.
#include <c10/core/AllocatorConfig.h>
#include <gtest/gtest.h>
#include <torch/torch.h>

#include <cstdlib>

#include "train/config/options_map.h"
#include "train/cuda_memory.h"

namespace monoflow::train {
namespace {

TEST(CudaMemory, ExpandableSegmentsWhenTheUserSetNothing) {
  EXPECT_EQ(default_cuda_allocator_settings(nullptr, nullptr), "expandable_segments:True");
  EXPECT_EQ(default_cuda_allocator_settings("", ""), "expandable_segments:True");  // set but empty: unset
}

TEST(CudaMemory, TheUsersOwnSettingsStand) {
  EXPECT_EQ(default_cuda_allocator_settings("expandable_segments:False", nullptr), "");
  EXPECT_EQ(default_cuda_allocator_settings(nullptr, "max_split_size_mb:128"), "");
  EXPECT_EQ(default_cuda_allocator_settings("garbage_collection_threshold:0.6", "expandable_segments:False"), "");
}

TEST(CudaMemory, ResolvingAGpuTurnsExpandableSegmentsOnGpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const char* cuda_conf = std::getenv("PYTORCH_CUDA_ALLOC_CONF");
  const char* conf = std::getenv("PYTORCH_ALLOC_CONF");
  if ((cuda_conf != nullptr && *cuda_conf) || (conf != nullptr && *conf)) {
    GTEST_SKIP() << "the allocator is configured through the environment";
  }
  EXPECT_TRUE(resolve_device("cuda").is_cuda());
  EXPECT_TRUE(c10::CachingAllocator::AcceleratorAllocatorConfig::use_expandable_segments());
  // The allocator works with them: a tensor made, written and read back.
  const torch::Tensor t = torch::arange(1 << 20, torch::TensorOptions().device(torch::kCUDA)).sum();
  EXPECT_EQ(t.item<int64_t>(), (int64_t{1} << 20) * ((1 << 20) - 1) / 2);
}

}  // namespace
}  // namespace monoflow::train
