#include "models/dropout.h"

#include <ATen/CPUGeneratorImpl.h>
#include <ATen/Parallel.h>
#include <ATen/record_function.h>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>
#include <mutex>

namespace monoflow::models {
namespace detail {
namespace {

constexpr uint32_t kM0 = 0xD2511F53, kM1 = 0xCD9E8D57;  // the round multipliers
constexpr uint32_t kW0 = 0x9E3779B9, kW1 = 0xBB67AE85;  // the key's increments between rounds
constexpr int64_t kChunk = 4 * kDropoutLanes;            // elements per chunk

// Ten Philox rounds over kDropoutLanes counters c[word][lane] under key (k0, k1), in place.
inline void philox_rounds(uint32_t (&c)[4][kDropoutLanes], uint32_t k0, uint32_t k1) {
  for (int round = 0; round < 10; ++round) {
    for (int l = 0; l < kDropoutLanes; ++l) {
      const uint64_t p0 = uint64_t{kM0} * c[0][l];
      const uint64_t p1 = uint64_t{kM1} * c[2][l];
      const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c[1][l] ^ k0;
      const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c[3][l] ^ k1;
      c[1][l] = static_cast<uint32_t>(p1);
      c[3][l] = static_cast<uint32_t>(p0);
      c[0][l] = n0;
      c[2][l] = n2;
    }
    k0 += kW0;
    k1 += kW1;
  }
}

// Chunks [begin, end) of any length n, one lane at a time.
void mask_chunks(const float* x, float* y, uint8_t* bits, int64_t n, int64_t begin, int64_t end, uint32_t k0,
                 uint32_t k1, uint64_t threshold, float scale) {
  uint32_t c[4][kDropoutLanes];
  for (int64_t q = begin; q < end; ++q) {
    const auto block0 = static_cast<uint64_t>(q) * kDropoutLanes;
    for (int l = 0; l < kDropoutLanes; ++l) {
      c[0][l] = c[1][l] = 0;
      c[2][l] = static_cast<uint32_t>(block0 + l);
      c[3][l] = static_cast<uint32_t>((block0 + l) >> 32);
    }
    philox_rounds(c, k0, k1);
    const int64_t e0 = q * kChunk, count = std::min(kChunk, n - e0);
    if (bits) std::memset(bits + e0 / 8, 0, static_cast<size_t>((count + 7) / 8));
    for (int64_t r = 0; r < count; ++r) {
      const uint32_t word = c[r / kDropoutLanes][r % kDropoutLanes];
      const bool kept = word < threshold;
      y[e0 + r] = kept ? x[e0 + r] * scale : 0.0f;
      if (bits && kept) bits[(e0 + r) / 8] |= static_cast<uint8_t>(1u << (r % 8));
    }
  }
}

#if defined(__x86_64__)
#define MONOFLOW_DROPOUT_AVX2 1
// Whole chunks [begin, end) with AVX2: the eight lanes' products as two vpmuludq each (even and
// odd 32-bit lanes, the odd ones' words blended in: 0xAA), each word's eight elements one vector.
__attribute__((target("avx2"))) void mask_chunks_avx2(const float* x, float* y, uint8_t* bits, int64_t begin,
                                                       int64_t end, uint32_t k0, uint32_t k1, uint64_t threshold,
                                                       float scale) {
  const __m256i m0 = _mm256_set1_epi64x(kM0), m1 = _mm256_set1_epi64x(kM1);
  const __m256i sign = _mm256_set1_epi32(static_cast<int>(0x80000000u));
  // Unsigned word < threshold as a signed comparison of both with the sign bit flipped; a
  // threshold of 2^32 (keep 1) keeps all.
  const uint32_t below = static_cast<uint32_t>(std::min<uint64_t>(threshold, 0xffffffffu));
  const __m256i bound = _mm256_set1_epi32(static_cast<int>(below ^ 0x80000000u));
  const bool keep_all = threshold > 0xffffffffu;
  const __m256 scale_v = _mm256_set1_ps(scale);
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  for (int64_t q = begin; q < end; ++q) {
    const auto block0 = static_cast<uint64_t>(q) * kDropoutLanes;
    // block0 + lane never carries into the high word within a chunk: block0 is a multiple of 8.
    __m256i c0 = _mm256_setzero_si256(), c1 = _mm256_setzero_si256();
    __m256i c2 = _mm256_add_epi32(_mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(block0))), lane);
    __m256i c3 = _mm256_set1_epi32(static_cast<int>(static_cast<uint32_t>(block0 >> 32)));
    uint32_t r0 = k0, r1 = k1;
    for (int round = 0; round < 10; ++round) {
      const __m256i e0 = _mm256_mul_epu32(c0, m0), o0 = _mm256_mul_epu32(_mm256_srli_epi64(c0, 32), m0);
      const __m256i e1 = _mm256_mul_epu32(c2, m1), o1 = _mm256_mul_epu32(_mm256_srli_epi64(c2, 32), m1);
      const __m256i hi0 = _mm256_blend_epi32(_mm256_srli_epi64(e0, 32), o0, 0xAA);
      const __m256i lo0 = _mm256_blend_epi32(e0, _mm256_slli_epi64(o0, 32), 0xAA);
      const __m256i hi1 = _mm256_blend_epi32(_mm256_srli_epi64(e1, 32), o1, 0xAA);
      const __m256i lo1 = _mm256_blend_epi32(e1, _mm256_slli_epi64(o1, 32), 0xAA);
      c0 = _mm256_xor_si256(_mm256_xor_si256(hi1, c1), _mm256_set1_epi32(static_cast<int>(r0)));
      c2 = _mm256_xor_si256(_mm256_xor_si256(hi0, c3), _mm256_set1_epi32(static_cast<int>(r1)));
      c1 = lo1;
      c3 = lo0;
      r0 += kW0;
      r1 += kW1;
    }
    const __m256i words[4] = {c0, c1, c2, c3};
    const int64_t e0 = q * kChunk;
    for (int w = 0; w < 4; ++w) {
      const __m256i kept = keep_all ? _mm256_set1_epi32(-1)
                                    : _mm256_cmpgt_epi32(bound, _mm256_xor_si256(words[w], sign));
      const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + e0 + 8 * w), scale_v);
      _mm256_storeu_ps(y + e0 + 8 * w, _mm256_and_ps(v, _mm256_castsi256_ps(kept)));
      if (bits) bits[(e0 + 8 * w) / 8] = static_cast<uint8_t>(_mm256_movemask_ps(_mm256_castsi256_ps(kept)));
    }
  }
}
#endif

// y[e] = x[e] * scale where bit e of `bits` is set, else 0, for bytes [begin, end) (elements
// 8 * begin .. 8 * end, the last byte's cut at n).
void apply_bits_scalar(const float* x, float* y, const uint8_t* bits, int64_t n, int64_t begin, int64_t end,
                       float scale) {
  for (int64_t i = begin; i < end; ++i) {
    for (int64_t e = 8 * i; e < std::min(8 * i + 8, n); ++e) y[e] = (bits[i] >> (e % 8)) & 1 ? x[e] * scale : 0.0f;
  }
}

#ifdef MONOFLOW_DROPOUT_AVX2
// Whole bytes [begin, end): each byte's eight bits as a lane mask, the same products as the
// forward's (x * scale, then the mask).
__attribute__((target("avx2"))) void apply_bits_avx2(const float* x, float* y, const uint8_t* bits, int64_t begin,
                                                      int64_t end, float scale) {
  const __m256i lane_bit = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  const __m256 scale_v = _mm256_set1_ps(scale);
  for (int64_t i = begin; i < end; ++i) {
    const __m256i b = _mm256_and_si256(_mm256_set1_epi32(bits[i]), lane_bit);
    const __m256i kept = _mm256_cmpeq_epi32(b, lane_bit);
    const __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + 8 * i), scale_v);
    _mm256_storeu_ps(y + 8 * i, _mm256_and_ps(v, _mm256_castsi256_ps(kept)));
  }
}
#endif

}  // namespace

void apply_kept_bits(const float* x, float* y, const uint8_t* bits, int64_t n, float scale) {
  const int64_t bytes = (n + 7) / 8, whole = n / 8;
#ifdef MONOFLOW_DROPOUT_AVX2
  static const bool avx2 = __builtin_cpu_supports("avx2");
#else
  constexpr bool avx2 = false;
#endif
  at::parallel_for(0, bytes, /*grain_size=*/2048, [&](int64_t begin, int64_t end) {
#ifdef MONOFLOW_DROPOUT_AVX2
    if (avx2) {
      const int64_t vector_end = std::min(end, whole);
      if (begin < vector_end) apply_bits_avx2(x, y, bits, begin, vector_end, scale);
      begin = std::max(begin, vector_end);
    }
#endif
    apply_bits_scalar(x, y, bits, n, begin, end, scale);
  });
}

std::array<uint32_t, 4> philox4x32_10(std::array<uint32_t, 4> counter, std::array<uint32_t, 2> key) {
  uint32_t c[4][kDropoutLanes] = {};
  for (int w = 0; w < 4; ++w) c[w][0] = counter[w];
  philox_rounds(c, key[0], key[1]);
  return {c[0][0], c[1][0], c[2][0], c[3][0]};
}

void apply_dropout_mask(const float* x, float* y, int64_t n, uint64_t seed, double keep, float scale,
                        uint8_t* bits) {
  // Kept when the word is below keep * 2^32: a share of keep to within 2^-32.
  const uint64_t threshold = static_cast<uint64_t>(std::clamp(keep, 0.0, 1.0) * 4294967296.0);
  const auto k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  const int64_t chunks = (n + kChunk - 1) / kChunk, whole = n / kChunk;
#ifdef MONOFLOW_DROPOUT_AVX2
  static const bool avx2 = __builtin_cpu_supports("avx2");
#else
  constexpr bool avx2 = false;
#endif
  at::parallel_for(0, chunks, /*grain_size=*/256, [&](int64_t begin, int64_t end) {
#ifdef MONOFLOW_DROPOUT_AVX2
    if (avx2) {
      const int64_t vector_end = std::min(end, whole);
      if (begin < vector_end) mask_chunks_avx2(x, y, bits, begin, vector_end, k0, k1, threshold, scale);
      begin = std::max(begin, vector_end);
    }
#endif
    mask_chunks(x, y, bits, n, begin, end, k0, k1, threshold, scale);
  });
}

}  // namespace detail

namespace {

// One 64-bit draw of the default CPU generator: the mask's key.
uint64_t draw_key() {
  at::Generator generator = at::detail::getDefaultCPUGenerator();
  std::lock_guard<std::mutex> lock(generator.mutex());
  return generator.get<at::CPUGeneratorImpl>()->random64();
}

// The forward keeps one bit per element (which survived) for the backward: a pass over the
// gradient and those bits, where drawing the mask again cost as much as the forward's Philox
// (~2 ns an element back, on machine D, against ~1 forward).
struct CpuDropout : torch::autograd::Function<CpuDropout> {
  static torch::Tensor forward(torch::autograd::AutogradContext* ctx, const torch::Tensor& x_in, double keep) {
    RECORD_FUNCTION("monoflow::CpuDropout", std::vector<c10::IValue>({x_in}));
    const torch::Tensor x = x_in.contiguous();
    torch::Tensor y = torch::empty_like(x);
    torch::Tensor bits = torch::empty({(x.numel() + 7) / 8}, x.options().dtype(torch::kUInt8));
    const float scale = static_cast<float>(1.0 / keep);
    detail::apply_dropout_mask(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), draw_key(), keep, scale,
                               bits.data_ptr<uint8_t>());
    ctx->save_for_backward({bits});
    ctx->saved_data["scale"] = static_cast<double>(scale);
    return y;
  }
  static torch::autograd::tensor_list backward(torch::autograd::AutogradContext* ctx,
                                               torch::autograd::tensor_list grads) {
    const torch::Tensor bits = ctx->get_saved_variables()[0];
    const torch::Tensor g = grads[0].to(torch::kFloat).contiguous();
    torch::Tensor out = torch::empty_like(g);
    detail::apply_kept_bits(g.data_ptr<float>(), out.data_ptr<float>(), bits.data_ptr<uint8_t>(), g.numel(),
                            static_cast<float>(ctx->saved_data["scale"].toDouble()));
    return {out, torch::Tensor()};
  }
};

}  // namespace

torch::Tensor dropout(const torch::Tensor& x, double p, bool training) {
  if (!training || p <= 0) return x;
  if (x.device().is_cpu() && x.scalar_type() == torch::kFloat32 && p < 1) return CpuDropout::apply(x, 1.0 - p);
  return torch::dropout(x, p, training);
}

}  // namespace monoflow::models
