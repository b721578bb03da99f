// dev/cuda/wn_backward_dev.cu: the WN layer's two backward kernels with their bias gradients
// (src/models/kernels/wn_fused.cu, compiled in, through its launchers), two ways, in the manner
// of column_sums_dev.cu. No torch (its headers only, for the Philox state's plain struct).
//
//   v1: the backward kernel, then launch_column_sums over the gradient it wrote (the bias's
//       gradient read back from memory: what every dtype ran before wn_fused.cu's v6).
//   v2: the backward kernel that sums the bias's gradient as it writes it (blocks of
//       kBiasSumRows rows into partial rows), then column_sums' second pass.
// The gate runs without dropout (tests/models/test_wn_fused.cpp covers it). Both versions must
// write the same gradient bit for bit, and their bias sums must lie within one rounding of the
// gradient's dtype of a float64 sum (v1 sums the rounded values, v2 the values before rounding).
// The training step's shapes: [B * T, 2 * H] rows, B = 32, T = 500 (the synthetic batch's
// squeezed frames), H = 192.
//
//   build/bin/wn_backward_dev [--rows N] [--channels H] [--repeats N]
// Exit status: 0, or 1 when a check fails, 77 without a GPU.
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
#include "models/kernels/wn_kernels.h"

namespace {

namespace k = monoflow::models::kernels;

template <typename T>
T from_float_host(float v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else return __float2bfloat16(v);
}
template <typename T>
double to_double_host(T v) {
  if constexpr (std::is_same_v<T, float>) return v;
  else return static_cast<double>(__bfloat162float(v));
}

// Checks one version's outputs against v1's gradient bits and a float64 sum of it; prints a row.
template <typename G>
bool report(const char* kernel, const char* dtype, int version, double us, const std::vector<G>& grad,
            const std::vector<G>& grad_v1, const std::vector<float>& bias_sum, int64_t rows, int64_t columns,
            double rounding) {
  const bool same = std::memcmp(grad.data(), grad_v1.data(), sizeof(G) * grad.size()) == 0;
  double worst = 0;
  for (int64_t j = 0; j < columns; ++j) {
    double sum = 0, abs_sum = 0;
    for (int64_t i = 0; i < rows; ++i) {
      const double g = to_double_host(grad[i * columns + j]);
      sum += g;
      abs_sum += std::fabs(g);
    }
    worst = std::max(worst, std::fabs(bias_sum[j] - sum) / std::max(abs_sum, 1e-30));
  }
  const bool ok = same && worst <= rounding;
  std::printf("%-14s %-5s v%d %10.2f %14.2e %6s%s\n", kernel, dtype, version, us, worst, same ? "yes" : "NO",
              ok ? "" : "  FAILED");
  return ok;
}

template <typename T>
bool run_dtype(const char* name, int64_t rows, int64_t h, int repeats, std::mt19937_64& rng) {
  std::normal_distribution<float> normal;
  const double rounding = std::is_same_v<T, float> ? 1e-6 : std::ldexp(1.0, -8);
  const int64_t c = 2 * h;
  bool ok = true;
  const k::PhiloxDropout no_dropout{};
  const int64_t blocks = std::max(k::column_sum_blocks(rows), k::bias_sum_blocks(rows));
  float* partials = device<float>(blocks * c);
  float* bias_sum = device<float>(c);

  {  // The gate: in [rows, 2H], grad_acts [rows, H] -> grad_in [rows, 2H], bias [2H].
    std::vector<T> in(rows * c), grad_acts(rows * h);
    std::vector<float> bias(c);
    for (auto& v : in) v = from_float_host<T>(2 * normal(rng));
    for (auto& v : grad_acts) v = from_float_host<T>(normal(rng));
    for (auto& v : bias) v = 0.5f * normal(rng);
    T *d_in = device_copy(in), *d_grad_acts = device_copy(grad_acts), *d_grad_in = device<T>(rows * c);
    float* d_bias = device_copy(bias);
    std::vector<T> grad_v1;
    for (const int version : {1, 2}) {
      const auto run = [&](cudaStream_t stream) {
        if (version == 1) {
          CHECK(k::launch_tanh_sigmoid_gate_backward<T>(d_in, d_bias, d_grad_acts, nullptr, d_grad_in, nullptr, nullptr,
                                                        rows, h, 1, no_dropout, stream));
          CHECK(k::launch_column_sums<T>(d_grad_in, rows, c, partials, bias_sum, stream));
        } else {
          CHECK(k::launch_tanh_sigmoid_gate_backward<T>(d_in, d_bias, d_grad_acts, nullptr, d_grad_in, partials,
                                                        bias_sum, rows, h, 1, no_dropout, stream));
        }
      };
      run(nullptr);
      CHECK(cudaDeviceSynchronize());
      const auto grad = host_copy(d_grad_in, rows * c);
      if (version == 1) grad_v1 = grad;
      const auto sums = host_copy(bias_sum, c);
      ok &= report("gate", name, version, repeats > 0 ? graph_us(repeats, run) : 0.0, grad, grad_v1, sums, rows, c,
                   rounding);
    }
    CHECK(cudaFree(d_in));
    CHECK(cudaFree(d_grad_acts));
    CHECK(cudaFree(d_grad_in));
    CHECK(cudaFree(d_bias));
  }

  {  // The residual and skip update: float gradients [rows, H] -> grad_res_skip [rows, 2H] in T.
    std::vector<float> grad_x_out(rows * h), grad_skip_out(rows * h), mask(rows);
    std::vector<T> grad_x_low(rows * h);
    for (auto& v : grad_x_out) v = normal(rng);
    for (auto& v : grad_skip_out) v = normal(rng);
    for (auto& v : grad_x_low) v = from_float_host<T>(normal(rng));
    for (int64_t i = 0; i < rows; ++i) mask[i] = i % 7 == 3 ? 0.0f : 1.0f;  // some padded frames
    float *d_gx = device_copy(grad_x_out), *d_gs = device_copy(grad_skip_out), *d_mask = device_copy(mask);
    T* d_low = std::is_same_v<T, float> ? nullptr : device_copy(grad_x_low);
    float* d_grad_x = device<float>(rows * h);
    T* d_grad_rs = device<T>(rows * c);
    std::vector<T> grad_v1;
    for (const int version : {1, 2}) {
      const auto run = [&](cudaStream_t stream) {
        if (version == 1) {
          CHECK(k::launch_residual_skip_backward<T>(d_gx, d_gs, d_low, d_mask, d_grad_x, d_grad_rs, nullptr, nullptr,
                                                    rows, h, 1, stream));
          CHECK(k::launch_column_sums<T>(d_grad_rs, rows, c, partials, bias_sum, stream));
        } else {
          CHECK(k::launch_residual_skip_backward<T>(d_gx, d_gs, d_low, d_mask, d_grad_x, d_grad_rs, partials, bias_sum,
                                                    rows, h, 1, stream));
        }
      };
      run(nullptr);
      CHECK(cudaDeviceSynchronize());
      const auto grad = host_copy(d_grad_rs, rows * c);
      if (version == 1) grad_v1 = grad;
      const auto sums = host_copy(bias_sum, c);
      ok &= report("residual_skip", name, version, repeats > 0 ? graph_us(repeats, run) : 0.0, grad, grad_v1, sums,
                   rows, c, rounding);
    }
    CHECK(cudaFree(d_gx));
    CHECK(cudaFree(d_gs));
    CHECK(cudaFree(d_mask));
    if (d_low) CHECK(cudaFree(d_low));
    CHECK(cudaFree(d_grad_x));
    CHECK(cudaFree(d_grad_rs));
  }
  CHECK(cudaFree(partials));
  CHECK(cudaFree(bias_sum));
  return ok;
}

}  // namespace

int main(int argc, char** argv) {
  int64_t rows = 32 * 500, h = 192;
  int repeats = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--rows")) rows = std::stoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--channels")) h = std::stoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeats")) repeats = std::atoi(argv[i + 1]);
    else { std::fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
  }
  if (!has_cuda_device()) {
    std::printf("no CUDA device\n");
    return 77;
  }
  // The summing kernels' conditions (wn_kernels.h): packs of 16 bytes across a row.
  if (h % 8 != 0 || h / 4 > 256) {
    std::fprintf(stderr, "--channels must be a multiple of 8 and at most 1024\n");
    return 2;
  }
  std::mt19937_64 rng(1234);
  std::printf("rows %lld, H %lld\n%-14s %-5s %2s %10s %14s %6s\n", static_cast<long long>(rows),
              static_cast<long long>(h), "kernel", "dtype", "v", "us/call", "bias rel err", "same");
  bool ok = run_dtype<float>("fp32", rows, h, repeats, rng);
  ok &= run_dtype<__nv_bfloat16>("bf16", rows, h, repeats, rng);
  return ok ? 0 : 1;
}
