// dev/cuda/column_sums_dev.cu: the bias gradients' column sums (src/models/kernels/column_sums.cu,
// through its launcher) beside a plain CPU reference and a benchmark, in the manner of
// mas_fast.cu. No torch.
//
//   v0 (here): one thread per column, down all N rows: the simplest kernel, the timing floor
//      that a kernel without parallelism over the rows reaches.
//   v1 (production, through launch_column_sums): blocks of kColumnSumRows rows into partial
//      rows, then the partial rows in order (column_sums.cu's header).
// The training step's calls: [B * T, C] bf16 rows, B = 32, T = 512 (the synthetic batch's
// 1,000 mel frames in 1,024-frame buckets, squeezed by 2), C = 384 (a WN layer's gate and
// res_skip), 192 (the last res_skip, the start layer), 160 (the end layer).
//
//   build/bin/column_sums_dev [--rows N] [--columns 384,192,160] [--repeats N]
// Exit status: 0, or 1 when a version differs from the reference beyond float rounding, 77
// without a GPU (ctest column_sums_dev_vs_cpu skips).
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "graph_timing.cuh"
#include "models/kernels/column_sums_kernels.h"

namespace {

__global__ void column_sums_v0(const __nv_bfloat16* rows, int64_t n, int64_t c, float* out) {
  const int64_t j = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (j >= c) return;
  float s = 0.0f;
  for (int64_t i = 0; i < n; ++i) s += __bfloat162float(rows[i * c + j]);
  out[j] = s;
}

std::vector<double> reference(const std::vector<__nv_bfloat16>& rows, int64_t n, int64_t c) {
  std::vector<double> out(c, 0.0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < c; ++j) out[j] += static_cast<double>(__bfloat162float(rows[i * c + j]));
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t n = 32 * 512;
  std::vector<int64_t> columns{384, 192, 160};
  int repeats = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rows")) n = std::stoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--columns")) columns = parse_list(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeats")) repeats = std::atoi(argv[i + 1]);
    else { std::fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
  }
  if (!has_cuda_device()) {
    std::printf("no CUDA device\n");
    return 77;
  }
  using monoflow::models::kernels::column_sum_blocks;
  using monoflow::models::kernels::launch_column_sums;
  std::mt19937_64 rng(1234);
  std::normal_distribution<float> normal;
  bool ok = true;
  std::printf("%8s %6s %10s %12s %12s\n", "rows", "cols", "version", "us/call", "max rel err");
  for (const int64_t c : columns) {
    std::vector<__nv_bfloat16> host(n * c);
    for (auto& v : host) v = __float2bfloat16(normal(rng));
    const auto want = reference(host, n, c);
    __nv_bfloat16* rows;
    float *partials, *out;
    CHECK(cudaMalloc(&rows, sizeof(__nv_bfloat16) * n * c));
    CHECK(cudaMalloc(&partials, sizeof(float) * column_sum_blocks(n) * c));
    CHECK(cudaMalloc(&out, sizeof(float) * c));
    CHECK(cudaMemcpy(rows, host.data(), sizeof(__nv_bfloat16) * n * c, cudaMemcpyHostToDevice));
    for (const int version : {0, 1}) {
      const auto run = [&](cudaStream_t stream) {
        if (version == 0) column_sums_v0<<<(c + 127) / 128, 128, 0, stream>>>(rows, n, c, out);
        else CHECK(launch_column_sums(rows, n, c, partials, out, stream));
      };
      run(nullptr);
      CHECK(cudaDeviceSynchronize());
      std::vector<float> got(c);
      CHECK(cudaMemcpy(got.data(), out, sizeof(float) * c, cudaMemcpyDeviceToHost));
      const double err = max_rel_error(got, want);
      if (!(err < 1e-4)) ok = false;
      // Timed as the training step runs them: the repeats captured in one CUDA graph.
      const double us = repeats > 0 ? graph_us(repeats, run) : 0.0;
      std::printf("%8lld %6lld %10s %12.2f %12.2e\n", static_cast<long long>(n), static_cast<long long>(c),
                  version == 0 ? "v0" : "v1", us, err);
    }
    CHECK(cudaFree(rows));
    CHECK(cudaFree(partials));
    CHECK(cudaFree(out));
  }
  return ok ? 0 : 1;
}
