// dev/cuda/mas_fast.cu: standalone harness for the cuda-fast MAS kernels (in the manner of
// llm.c's dev/cuda): a plain CPU reference, every forward variant of
// src/align/kernels/mas_fast_forward.cu run on the same inputs, exact comparison of the
// durations, and CUDA-event timings of the forward kernel alone and of the whole chain
// (resets, forward, walk). No torch: it builds in seconds with nvcc, for quick iteration on
// the GPU machine.
//
//   build/bin/mas_fast_dev (built with the project where CUDA is enabled), or by hand:
//   nvcc -O3 -std=c++17 -arch=sm_90 -Isrc dev/cuda/mas_fast.cu -o mas_fast
//   ./mas_fast [--shape training|B,T,S] [--variants 1,2,3,4] [--k 2|4|8] [--repeats N] [--seed N]
// (v1 needs K=4 and S % 4 == 0, v2/v3 K=4 or 8, v4 K=2 or 4 and a block that fits.)
//
// Built with -DMONOFLOW_MAS_TRACE it also prints clock64() cycles per 32-column chunk of
// item 0 (mas_fast_common.cuh), which splits a column step's cost by chunk kind.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "align/kernels/mas_fast_forward.cu"
#include "align/kernels/mas_fast_walk.cu"
#include "align/kernels/mas_fast_fused.cu"

namespace {

using monoflow::align::kernels::DeviceLengths;
using monoflow::align::kernels::FastMasLayout;

void check(cudaError_t e, const char* what) {
  if (e != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(e));
    std::exit(1);
  }
}

struct Batch {
  int batch = 0, max_text = 0, max_mel = 0;
  std::vector<long long> text, mel;
  std::vector<float> logp;  // [B, T, S]
};

// LJSpeech-shaped lengths as bench_mas's training batch: text U[60,180], mel round(5.6 T
// U(0.85,1.15)) capped at 1000; or full lengths B,T,S.
Batch make_batch(const std::string& shape, unsigned seed) {
  std::mt19937 rng(seed);
  Batch b;
  if (shape == "training") {
    b.batch = 32;
    std::uniform_int_distribution<int> t(60, 180);
    std::uniform_real_distribution<double> u(0.85, 1.15);
    for (int i = 0; i < b.batch; ++i) {
      const long long x = t(rng);
      b.text.push_back(x);
      b.mel.push_back(std::min<long long>(1000, std::llround(x * 5.6 * u(rng))));
    }
    b.max_text = static_cast<int>(*std::max_element(b.text.begin(), b.text.end()));
    b.max_mel = static_cast<int>(*std::max_element(b.mel.begin(), b.mel.end()));
  } else {
    std::stringstream list(shape);
    std::string n;
    std::vector<int> v;
    while (std::getline(list, n, ',')) v.push_back(std::stoi(n));
    if (v.size() != 3) throw std::runtime_error("--shape takes training or B,T,S");
    b.batch = v[0], b.max_text = v[1], b.max_mel = v[2];
    b.text.assign(b.batch, b.max_text);
    b.mel.assign(b.batch, b.max_mel);
  }
  std::normal_distribution<float> normal(0.0f, 1.0f);
  b.logp.resize(static_cast<size_t>(b.batch) * b.max_text * b.max_mel);
  for (float& v : b.logp) v = normal(rng);
  return b;
}

// The original Cython MAS on one item (forward over the band, backtracking with its tie
// rule), in float32 with neg_inf as the stand-in for log(0): durations per token.
std::vector<int> reference_durations(const Batch& b, int item, float neg_inf) {
  const int T = static_cast<int>(b.text[item]), S = static_cast<int>(b.mel[item]), W = S - T;
  std::vector<float> q(b.logp.begin() + static_cast<size_t>(item) * b.max_text * b.max_mel,
                       b.logp.begin() + static_cast<size_t>(item + 1) * b.max_text * b.max_mel);
  auto at = [&](int x, int y) -> float& { return q[static_cast<size_t>(x) * b.max_mel + y]; };
  for (int x = 0; x < T; ++x) {
    for (int y = x; y <= x + W; ++y) {
      const float stay = y == x ? neg_inf : at(x, y - 1);
      const float diag = x == 0 ? (y == 0 ? 0.0f : neg_inf) : at(x - 1, y - 1);
      at(x, y) = std::max(stay, diag) + at(x, y);
    }
  }
  std::vector<int> d(b.max_text, 0);
  int index = T - 1;
  for (int y = S - 1; y >= 0; --y) {
    ++d[index];
    if (index != 0 && (index == y || at(index, y - 1) < at(index - 1, y - 1))) --index;
  }
  return d;
}

struct Device {
  float* logp = nullptr;
  long long *text = nullptr, *mel = nullptr;
  int32_t* ws = nullptr;
  int* durations = nullptr;
  FastMasLayout layout{};
};

Device upload(const Batch& b, int rows_per_lane) {
  Device d;
  d.layout = monoflow::align::kernels::fast_mas_layout(b.batch, b.max_text, b.max_mel, rows_per_lane);
  check(cudaMalloc(&d.logp, b.logp.size() * sizeof(float)), "malloc logp");
  check(cudaMemcpy(d.logp, b.logp.data(), b.logp.size() * sizeof(float), cudaMemcpyHostToDevice), "copy");
  check(cudaMalloc(&d.text, b.batch * sizeof(long long)), "malloc");
  check(cudaMalloc(&d.mel, b.batch * sizeof(long long)), "malloc");
  check(cudaMemcpy(d.text, b.text.data(), b.batch * sizeof(long long), cudaMemcpyHostToDevice), "copy");
  check(cudaMemcpy(d.mel, b.mel.data(), b.batch * sizeof(long long), cudaMemcpyHostToDevice), "copy");
  check(cudaMalloc(&d.ws, d.layout.total_ints * sizeof(int32_t)), "malloc ws");
  check(cudaMalloc(&d.durations, static_cast<size_t>(b.batch) * b.max_text * sizeof(int)), "malloc");
  return d;
}

void release(Device& d) {
  cudaFree(d.logp), cudaFree(d.text), cudaFree(d.mel), cudaFree(d.ws), cudaFree(d.durations);
}

constexpr float kNegInf = -1e32f;

// The chain maximum_path_cuda_fast launches, less the path: resets, forward, walk.
void reset(const Device& d, cudaStream_t s) {
  check(cudaMemsetAsync(d.ws, 0, d.layout.zeroed_ints * sizeof(int32_t), s), "memset");
  check(cudaMemsetAsync(d.ws + d.layout.boundary_offset, 0, d.layout.boundary_ints * sizeof(int32_t), s),
        "memset");
}
void forward(const Batch& b, const Device& d, int variant, cudaStream_t s) {
  check(monoflow::align::kernels::launch_fast_mas_forward(
            d.logp, b.max_text, b.max_mel, DeviceLengths{d.text, true}, DeviceLengths{d.mel, true},
            kNegInf, d.layout, d.ws, variant, s),
        "forward");
}
void fused(const Batch& b, const Device& d, cudaStream_t s) {
  check(monoflow::align::kernels::launch_fast_mas_fused(
            d.logp, b.max_text, b.max_mel, DeviceLengths{d.text, true}, DeviceLengths{d.mel, true},
            kNegInf, d.layout, d.ws, d.durations, s),
        "fused");
}
// Variants 1-3: forward then walk; 4: the fused kernel (mas_fast_fused.cu).
void run(const Batch& b, const Device& d, int variant, cudaStream_t s);
void walk(const Batch& b, const Device& d, cudaStream_t s) {
  check(monoflow::align::kernels::launch_fast_mas_walk(b.max_text, b.max_mel,
                                                       DeviceLengths{d.text, true},
                                                       DeviceLengths{d.mel, true}, d.layout, d.ws,
                                                       d.durations, s),
        "walk");
}

void run(const Batch& b, const Device& d, int variant, cudaStream_t s) {
  if (variant == 4) return fused(b, d, s);
  forward(b, d, variant, s), walk(b, d, s);
}

float median(std::vector<float> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// Median microseconds between two events around `body` over `repeats` runs (after 3
// warm-ups); `before` runs first each time, outside the events.
template <typename Before, typename Body>
float time_us(int repeats, Before before, Body body) {
  cudaEvent_t a, z;
  cudaEventCreate(&a), cudaEventCreate(&z);
  std::vector<float> us;
  for (int i = 0; i < repeats + 3; ++i) {
    before();
    cudaEventRecord(a);
    body();
    cudaEventRecord(z);
    cudaEventSynchronize(z);
    float ms = 0;
    cudaEventElapsedTime(&ms, a, z);
    if (i >= 3) us.push_back(ms * 1000.0f);
  }
  cudaEventDestroy(a), cudaEventDestroy(z);
  return median(us);
}

#ifdef MONOFLOW_MAS_TRACE
void print_trace(const Batch& b, const Device& d) {
  using monoflow::align::kernels::kTraceChunks;
  std::vector<long long> t(monoflow::align::kernels::kTraceWarps * kTraceChunks);
  check(cudaMemcpyFromSymbol(t.data(), monoflow::align::kernels::mas_trace, t.size() * sizeof(long long)),
        "trace");
  const int warps = std::min(d.layout.warps_per_item, monoflow::align::kernels::kTraceWarps);
  for (int w = 0; w < warps; ++w) {
    std::printf("  trace item 0 warp %d (T=%lld S=%lld): cycles per chunk:", w, b.text[0], b.mel[0]);
    for (int c = 1; c < monoflow::align::kernels::kTraceArrival && t[w * kTraceChunks + c] > t[w * kTraceChunks + c - 1]; ++c) {
      std::printf(" %lld", t[w * kTraceChunks + c] - t[w * kTraceChunks + c - 1]);
    }
    std::printf("\n");
    using monoflow::align::kernels::kTraceArrival;
    if (t[w * kTraceChunks + kTraceArrival] != 0) {
      std::printf("  trace item 0 warp %d: cycles from chunk start to its tile's arrival:", w);
      for (int c = 0; c < kTraceArrival && t[w * kTraceChunks + kTraceArrival + c] != 0; ++c) {
        std::printf(" %lld", t[w * kTraceChunks + kTraceArrival + c] - t[w * kTraceChunks + c]);
      }
      std::printf("\n");
    }
  }
  const long long walk = t[kTraceChunks - 1] - t[kTraceChunks - 2];
  if (t[kTraceChunks - 2] != 0) std::printf("  trace item 0 walk: %lld cycles\n", walk);
  check(cudaMemset(d.ws, 0, 0), "noop");
}
#endif

}  // namespace

int main(int argc, char** argv) {
  std::string shape = "training";
  std::vector<int> variants = {1, 2, 3, 4};
  int rows_per_lane = 4, repeats = 50;
  unsigned seed = 1234;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string arg = argv[i], value = argv[i + 1];
    if (arg == "--shape") shape = value;
    else if (arg == "--k") rows_per_lane = std::stoi(value);
    else if (arg == "--repeats") repeats = std::stoi(value);
    else if (arg == "--seed") seed = static_cast<unsigned>(std::stoul(value));
    else if (arg == "--variants") {
      variants.clear();
      std::stringstream list(value);
      for (std::string n; std::getline(list, n, ',');) variants.push_back(std::stoi(n));
    } else {
      std::fprintf(stderr, "unknown argument %s\n", arg.c_str());
      return 1;
    }
  }
  const Batch b = make_batch(shape, seed);
  std::vector<std::vector<int>> expected(b.batch);
  for (int i = 0; i < b.batch; ++i) expected[i] = reference_durations(b, i, kNegInf);
  Device d = upload(b, rows_per_lane);
  cudaStream_t s = nullptr;
  std::printf("shape %s: B=%d T=%d S=%d, K=%d, %d warps per item\n", shape.c_str(), b.batch,
              b.max_text, b.max_mel, rows_per_lane, d.layout.warps_per_item);
  std::printf("%-8s %12s %12s %12s  %s\n", "variant", "forward us", "chain us", "ns/column", "durations");
  for (const int v : variants) {
    check(cudaMemset(d.durations, 0xff, static_cast<size_t>(b.batch) * b.max_text * sizeof(int)), "poison");
    reset(d, s), run(b, d, v, s);
    check(cudaDeviceSynchronize(), "run");
    int flags[3];
    check(cudaMemcpy(flags, d.ws, sizeof flags, cudaMemcpyDeviceToHost), "flags");
    std::vector<int> got(static_cast<size_t>(b.batch) * b.max_text);
    check(cudaMemcpy(got.data(), d.durations, got.size() * sizeof(int), cudaMemcpyDeviceToHost), "copy back");
    int wrong = 0;
    for (int i = 0; i < b.batch; ++i) {
      wrong += !std::equal(expected[i].begin(), expected[i].end(), got.begin() + static_cast<size_t>(i) * b.max_text);
    }
#ifdef MONOFLOW_MAS_TRACE
    print_trace(b, d);
    std::vector<long long> zero(monoflow::align::kernels::kTraceWarps * monoflow::align::kernels::kTraceChunks, 0);
    check(cudaMemcpyToSymbol(monoflow::align::kernels::mas_trace, zero.data(), zero.size() * sizeof(long long)), "trace reset");
#endif
    const float forward_us = time_us(repeats, [&] { reset(d, s); }, [&] { v == 4 ? fused(b, d, s) : forward(b, d, v, s); });
    const float chain_us = time_us(repeats, [] {}, [&] { reset(d, s), run(b, d, v, s); });
    std::string verdict = wrong ? std::to_string(wrong) + " items DIFFER" : "identical to the CPU reference";
    if (flags[0] || flags[1] || flags[2]) {
      verdict += " (flags " + std::to_string(flags[0]) + " " + std::to_string(flags[1]) + " " +
                 std::to_string(flags[2]) + ")";
    }
    std::printf("v%-7d %12.1f %12.1f %12.1f  %s\n", v, forward_us, chain_us, 1000.0f * forward_us / b.max_mel,
                verdict.c_str());
  }
  release(d);
  return 0;
}
