// dev/cuda/bias_act_dev.cu: the text encoder's convolution epilogue (src/models/kernels/bias_act.cu,
// through its launchers) beside a float64 CPU reference and a benchmark, in the manner of
// column_sums_dev.cu. No torch (its headers only, for the Philox state's plain struct).
//
//   v0 (here): the chain as ATen ran it, one pass per op: the bias, ReLU, dropout and the mask
//      forward; back, the mask's product, dropout's and ReLU's gradients and the bias's gradient
//      as sums over time, then over the batch.
//   v1 (production, through launch_bias_act_forward / _backward and launch_column_sums): one
//      kernel each way, a warp per [item, channel] row, the bias's row sums written by the
//      backward kernel and added over the batch by column_sums.cu.
// The training step's calls: [B, C, T] float32, B = 32, T = 180 (the synthetic batch's text
// length in its bucket), C = 768 (the FFN's hidden layer: bias, ReLU, dropout, mask) and 192
// (its output and the attention's: bias, dropout, mask).
//
//   build/bin/bias_act_dev [--batch B] [--channels 768,192] [--time T] [--repeats N]
// Checks, without dropout, every version's output, input gradient and bias gradient against
// the reference (float rounding); with dropout (p = 0.1), that each output is 0 or the
// reference's value / keep, that about keep of them survive, and that v0 and v1 keep the same
// elements (both draw element e's uniform from Philox block e / 4, lane e % 4) and give the same
// gradients. Exit status: 0, or 1 when a check fails, 77 without a GPU (ctest bias_act_dev_checks
// skips).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <tuple>  // before ATen's UnpackRaw.cuh (philox_dropout.cuh), which uses it
#include <vector>

#include <cuda_runtime.h>

#include "graph_timing.cuh"
#include "models/kernels/bias_act_kernels.h"
#include "models/kernels/column_sums_kernels.h"
#include "models/kernels/philox_dropout.cuh"

namespace {

namespace k = monoflow::models::kernels;

// v0: one pass per op, as ATen's element-wise kernels do them.
__global__ void add_bias(const float* y, const float* bias, float* out, int64_t n, int64_t c, int64_t t) {
  const int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (e < n) out[e] = y[e] + bias[(e / t) % c];
}
__global__ void relu_in_place(float* x, int64_t n) {
  const int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (e < n) x[e] = x[e] <= 0.0f ? 0.0f : x[e];
}
__global__ void dropout(float* x, uint8_t* kept, int64_t n, k::PhiloxDropout state) {
  const int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (e >= n) return;
  const k::Dropout d = k::unpack(state);
  kept[e] = k::keeps(d, static_cast<uint64_t>(e));
  x[e] = kept[e] ? x[e] * d.scale : 0.0f;
}
__global__ void times_mask(float* x, const float* mask, int64_t n, int64_t c, int64_t t) {
  const int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (e < n) x[e] *= mask[(e / (c * t)) * t + e % t];
}
// Back: the mask's product, then dropout's and ReLU's gradients (ReLU's from its output).
__global__ void backward_chain(const float* grad_out, const float* out, const uint8_t* kept, const float* mask,
                               float* grad_y, int64_t n, int64_t c, int64_t t, bool relu, float scale) {
  const int64_t e = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (e >= n) return;
  float g = grad_out[e] * mask[(e / (c * t)) * t + e % t];
  if (kept) g = kept[e] ? g * scale : 0.0f;
  if (relu && !(out[e] > 0.0f)) g = 0.0f;
  grad_y[e] = g;
}
// The bias's gradient as ATen's reductions: over time per row, then over the batch per channel.
__global__ void sum_over_time(const float* g, float* rows, int64_t n_rows, int64_t t) {
  const int64_t r = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (r >= n_rows) return;
  float s = 0.0f;
  for (int64_t i = 0; i < t; ++i) s += g[r * t + i];
  rows[r] = s;
}

int blocks(int64_t n) { return static_cast<int>((n + 255) / 256); }

struct Case {
  int64_t b, c, t;
  bool relu;
};

// The reference without dropout in float64: out, grad_y and the bias's gradient.
void reference(const Case& k_, const std::vector<float>& y, const std::vector<float>& bias,
               const std::vector<float>& mask, const std::vector<float>& g, std::vector<double>& out,
               std::vector<double>& grad_y, std::vector<double>& grad_bias) {
  const int64_t n = k_.b * k_.c * k_.t;
  out.assign(n, 0.0);
  grad_y.assign(n, 0.0);
  grad_bias.assign(k_.c, 0.0);
  for (int64_t e = 0; e < n; ++e) {
    const int64_t c = (e / k_.t) % k_.c, m = (e / (k_.c * k_.t)) * k_.t + e % k_.t;
    const double v = static_cast<double>(y[e]) + bias[c];
    const bool pass = !k_.relu || v > 0.0;
    out[e] = (pass ? v : 0.0) * mask[m];
    grad_y[e] = pass ? static_cast<double>(g[e]) * mask[m] : 0.0;
    grad_bias[c] += grad_y[e];
  }
}


}  // namespace

int main(int argc, char** argv) {
  int64_t batch = 32, time = 180;
  std::vector<int64_t> channels{768, 192};
  int repeats = 100;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--batch")) batch = std::stoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--channels")) channels = parse_list(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--time")) time = std::stoll(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--repeats")) repeats = std::atoi(argv[i + 1]);
    else { std::fprintf(stderr, "unknown option %s\n", argv[i]); return 2; }
  }
  if (!has_cuda_device()) {
    std::printf("no CUDA device\n");
    return 77;
  }
  std::mt19937_64 rng(1234);
  std::normal_distribution<float> normal;
  bool ok = true;
  std::printf("%5s %5s %5s %5s %8s %8s %10s %10s %12s\n", "B", "C", "T", "relu", "dropout", "version", "fwd us",
              "bwd us", "max rel err");
  for (const int64_t c : channels) {
    for (const bool relu : {true, false}) {
      const Case cs{batch, c, time, relu};
      const int64_t n = batch * c * time, rows = batch * c;
      std::vector<float> y(n), g(n), bias(c), mask(batch * time);
      for (auto& v : y) v = normal(rng);
      for (auto& v : g) v = normal(rng);
      for (auto& v : bias) v = 0.1f * normal(rng);
      for (int64_t b = 0; b < batch; ++b) {
        const int64_t length = time - (b * 7) % time;  // every item shorter by a few frames
        for (int64_t i = 0; i < time; ++i) mask[b * time + i] = i < length ? 1.0f : 0.0f;
      }
      std::vector<double> want_out, want_grad, want_bias;
      reference(cs, y, bias, mask, g, want_out, want_grad, want_bias);
      float *d_y, *d_g, *d_bias, *d_mask, *d_out, *d_grad, *d_rows, *d_partials, *d_bias_grad;
      uint8_t* d_kept;
      CHECK(cudaMalloc(&d_y, sizeof(float) * n));
      CHECK(cudaMalloc(&d_g, sizeof(float) * n));
      CHECK(cudaMalloc(&d_out, sizeof(float) * n));
      CHECK(cudaMalloc(&d_grad, sizeof(float) * n));
      CHECK(cudaMalloc(&d_kept, n));
      CHECK(cudaMalloc(&d_bias, sizeof(float) * c));
      CHECK(cudaMalloc(&d_mask, sizeof(float) * batch * time));
      CHECK(cudaMalloc(&d_rows, sizeof(float) * rows));
      CHECK(cudaMalloc(&d_partials, sizeof(float) * k::column_sum_blocks(batch) * c));
      CHECK(cudaMalloc(&d_bias_grad, sizeof(float) * c));
      CHECK(cudaMemcpy(d_y, y.data(), sizeof(float) * n, cudaMemcpyHostToDevice));
      CHECK(cudaMemcpy(d_g, g.data(), sizeof(float) * n, cudaMemcpyHostToDevice));
      CHECK(cudaMemcpy(d_bias, bias.data(), sizeof(float) * c, cudaMemcpyHostToDevice));
      CHECK(cudaMemcpy(d_mask, mask.data(), sizeof(float) * batch * time, cudaMemcpyHostToDevice));
      std::vector<float> kept_out[2], kept_grad[2];
      for (const double p : {0.0, 0.1}) {
        k::PhiloxDropout state;
        if (p > 0) {
          state.enabled = true;
          state.keep = static_cast<float>(1.0 - p);
          state.rng = at::PhiloxCudaState(4321, 8);
        }
        for (const int version : {0, 1}) {
          const auto forward = [&](cudaStream_t s) {
            if (version == 1) {
              CHECK(k::launch_bias_act_forward(d_y, d_bias, d_mask, d_out, batch, c, time, relu, state, s));
              return;
            }
            add_bias<<<blocks(n), 256, 0, s>>>(d_y, d_bias, d_out, n, c, time);
            if (relu) relu_in_place<<<blocks(n), 256, 0, s>>>(d_out, n);
            if (state.enabled) dropout<<<blocks(n), 256, 0, s>>>(d_out, d_kept, n, state);
            times_mask<<<blocks(n), 256, 0, s>>>(d_out, d_mask, n, c, time);
          };
          const auto backward = [&](cudaStream_t s) {
            if (version == 1) {
              CHECK(k::launch_bias_act_backward(d_g, relu ? d_out : nullptr, d_mask, d_grad, d_rows, batch, c, time,
                                                relu, state, s));
            } else {
              backward_chain<<<blocks(n), 256, 0, s>>>(d_g, d_out, state.enabled ? d_kept : nullptr, d_mask, d_grad,
                                                       n, c, time, relu, 1.0f / state.keep);
              sum_over_time<<<blocks(rows), 256, 0, s>>>(d_grad, d_rows, rows, time);
            }
            CHECK(k::launch_column_sums(d_rows, batch, c, d_partials, d_bias_grad, s));
          };
          forward(nullptr);
          backward(nullptr);
          CHECK(cudaDeviceSynchronize());
          const auto out = host_copy(d_out, n), grad = host_copy(d_grad, n), bias_grad = host_copy(d_bias_grad, c);
          double err = 0.0;
          if (p == 0.0) {
            err = std::max({max_rel_error(out, want_out), max_rel_error(grad, want_grad),
                            max_rel_error(bias_grad, want_bias)});
            if (!(err < 1e-4)) ok = false;
          } else {
            // Each output 0 or the reference's / keep; about keep of the nonzero ones survive.
            int64_t nonzero = 0, survived = 0;
            for (int64_t e = 0; e < n; ++e) {
              if (want_out[e] == 0.0) continue;
              ++nonzero;
              if (out[e] == 0.0f) continue;
              ++survived;
              err = std::max(err, std::fabs(out[e] - want_out[e] / state.keep) / std::max(1.0, std::fabs(want_out[e])));
            }
            const double share = nonzero ? static_cast<double>(survived) / nonzero : 0.0;
            if (!(err < 1e-4) || std::fabs(share - state.keep) > 0.01) ok = false;
            kept_out[version] = out;
            kept_grad[version] = grad;
          }
          const double fwd_us = repeats > 0 ? graph_us(repeats, forward) : 0.0;
          const double bwd_us = repeats > 0 ? graph_us(repeats, backward) : 0.0;
          std::printf("%5lld %5lld %5lld %5s %8.2f %8s %10.2f %10.2f %12.2e\n", static_cast<long long>(batch),
                      static_cast<long long>(c), static_cast<long long>(time), relu ? "yes" : "no", p,
                      version == 0 ? "v0" : "v1", fwd_us, bwd_us, err);
        }
      }
      // With dropout both versions keep the same elements and pass the same gradients.
      if (max_rel_error(kept_out[1], kept_out[0]) > 1e-6 || max_rel_error(kept_grad[1], kept_grad[0]) > 1e-6) {
        std::printf("v0 and v1 differ with dropout\n");
        ok = false;
      }
      for (void* ptr : {static_cast<void*>(d_y), static_cast<void*>(d_g), static_cast<void*>(d_out),
                        static_cast<void*>(d_grad), static_cast<void*>(d_kept), static_cast<void*>(d_bias),
                        static_cast<void*>(d_mask), static_cast<void*>(d_rows), static_cast<void*>(d_partials),
                        static_cast<void*>(d_bias_grad)}) {
        CHECK(cudaFree(ptr));
      }
    }
  }
  return ok ? 0 : 1;
}
