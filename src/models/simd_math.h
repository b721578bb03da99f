// Float vector math for the CPU kernels (winograd_conv1d.cpp, gate_cpu.cpp): exp, tanh, the
// logistic sigmoid and the WaveNet gate over eight AVX2 lanes, and the gate for one value. Each
// vector function carries MONOFLOW_AVX2, so that a file compiled for baseline x86-64 can call it
// from functions that carry it too, where cpu_has_avx2_fma() says the CPU runs them.
//
// Why not torch's: ATen's CPU tanh (Sleef's tanhf, u10) takes ~2.6 ns an element on the
// project's machine, six times its sigmoid, and was most of the WaveNet gate's time in a CPU
// training step (docs/benchmarks.md, "Training step", "On the CPU").
#pragma once

#include <cmath>

namespace monoflow::models::simd {

// The gate for one value, as the vector bodies' remainders and CPUs without AVX2 compute it.
inline float gate(float a, float b) { return std::tanh(a) / (1.0f + std::exp(-b)); }

}  // namespace monoflow::models::simd

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define MONOFLOW_SIMD_X86 1
#define MONOFLOW_AVX2 __attribute__((target("avx2,fma")))
// 16-lane registers (winograd_conv1d.cpp's GEMM blocks), where cpu_has_avx512f() too.
#define MONOFLOW_AVX512 __attribute__((target("avx2,fma,avx512f")))

namespace monoflow::models::simd {

// What the CPU runs, asked once: MONOFLOW_AVX2 code needs AVX2 and FMA, MONOFLOW_AVX512 code
// AVX-512F besides.
inline bool cpu_has_avx2_fma() {
  static const bool yes = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return yes;
}
inline bool cpu_has_avx512f() {
  static const bool yes = cpu_has_avx2_fma() && __builtin_cpu_supports("avx512f");
  return yes;
}

// exp: Cody-Waite range reduction by ln 2 and the Cephes polynomial (a few ulp, as Sleef's u10
// that torch uses); inputs clamped to [-87.3, 88.3], whose 2^n is normal.
MONOFLOW_AVX2 inline __m256 exp_avx2(__m256 x) {
  x = _mm256_min_ps(_mm256_max_ps(x, _mm256_set1_ps(-87.3f)), _mm256_set1_ps(88.3f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 y = _mm256_set1_ps(1.9875691500e-4f);
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.3981999507e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(8.3334519073e-3f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(4.1665795894e-2f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(1.6666665459e-1f));
  y = _mm256_fmadd_ps(y, r, _mm256_set1_ps(5.0000001201e-1f));
  y = _mm256_fmadd_ps(y, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

// tanh(a) = sign(a) (1 - e) / (1 + e), e = exp(-2 |a|) <= 1: no overflow. Near 0 the
// difference 1 - e loses relative precision (absolute error ~1e-7, as the gate below has).
MONOFLOW_AVX2 inline __m256 tanh_avx2(__m256 a) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = exp_avx2(_mm256_mul_ps(_mm256_andnot_ps(sign, a), _mm256_set1_ps(-2.0f)));
  const __m256 magnitude = _mm256_div_ps(_mm256_sub_ps(one, e), _mm256_add_ps(one, e));
  return _mm256_or_ps(magnitude, _mm256_and_ps(sign, a));
}

// sigmoid(b) = 1 / (1 + exp(-b)); exp's clamp keeps the sum finite.
MONOFLOW_AVX2 inline __m256 sigmoid_avx2(__m256 b) {
  const __m256 one = _mm256_set1_ps(1.0f);
  return _mm256_div_ps(one, _mm256_add_ps(one, exp_avx2(_mm256_xor_ps(b, _mm256_set1_ps(-0.0f)))));
}

// tanh(a) * sigmoid(b) = sign(a) (1 - e) / ((1 + e) (1 + f)) with e = exp(-2 |a|) and
// f = exp(-b): one division. No overflow: e <= 1 and f <= exp(87.3), so the denominator stays
// below 2 exp(87.3) < FLT_MAX.
MONOFLOW_AVX2 inline __m256 gate_avx2(__m256 a, __m256 b) {
  const __m256 sign = _mm256_set1_ps(-0.0f);
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 e = exp_avx2(_mm256_mul_ps(_mm256_andnot_ps(sign, a), _mm256_set1_ps(-2.0f)));
  const __m256 f = exp_avx2(_mm256_xor_ps(b, sign));
  const __m256 num = _mm256_or_ps(_mm256_sub_ps(one, e), _mm256_and_ps(sign, a));
  return _mm256_div_ps(num, _mm256_mul_ps(_mm256_add_ps(one, e), _mm256_add_ps(one, f)));
}

}  // namespace monoflow::models::simd

#endif  // x86-64
