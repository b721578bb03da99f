// Recording CUDA graphs (src/train/graph_capture.h), on a GPU (skipped without one): graphs of one
// CapturePool reuse each other's temporaries, and the warm-ups' cached blocks, because they are
// all recorded on the pool's one stream (the caching allocator hands a free block only to its
// own stream), and each replay still computes its own result.
#include <gtest/gtest.h>
#include <torch/torch.h>

#ifdef MONOFLOW_HAS_CUDA
#include <c10/cuda/CUDACachingAllocator.h>

#include "train/graph_capture.h"
#endif

namespace monoflow::train {
namespace {

#ifdef MONOFLOW_HAS_CUDA
int64_t reserved_bytes(int device) {
  using c10::CachingAllocator::StatType;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device);
  return stats.reserved_bytes[static_cast<size_t>(StatType::AGGREGATE)].current;
}

TEST(GraphCapture, GraphsOfOnePoolReuseEachOthersMemory) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const torch::Device device(torch::kCUDA, 0);
  constexpr int64_t kValues = 16 << 20;  // 64 MiB of float32 per temporary
  const auto x = torch::ones({kValues}, torch::TensorOptions().device(device));
  torch::cuda::synchronize();
  const CapturePool pool(device);
  torch::Tensor first, second;
  // Two temporaries of 64 MiB each, freed inside the capture; the result stays.
  const auto record = [&](torch::Tensor& result, double scale) {
    const auto body = [&] {
      const auto a = x * scale;
      const auto b = a + 1;
      result = b.amax();
    };
    return record_graph(pool, body, body, /*search=*/false);
  };
  const int64_t before = reserved_bytes(device.index());
  const auto graph1 = record(first, 2.0);
  const int64_t after_first = reserved_bytes(device.index());
  const auto graph2 = record(second, 3.0);
  const int64_t after_second = reserved_bytes(device.index());
  const int64_t mib = 1 << 20;
  // The first graph's temporaries and its warm-up's: 128 MiB each at least.
  EXPECT_GE(after_first - before, 256 * mib);
  // The second reuses both (on streams of their own it took as much again).
  EXPECT_LT(after_second - after_first, 16 * mib) << "first graph took " << (after_first - before) / mib
                                                  << " MiB, the second " << (after_second - after_first) / mib;
  x.fill_(5.0);
  graph1->replay();
  graph2->replay();
  torch::cuda::synchronize();
  EXPECT_EQ(first.item<float>(), 11.0f);
  EXPECT_EQ(second.item<float>(), 16.0f);
}
#endif

}  // namespace
}  // namespace monoflow::train
