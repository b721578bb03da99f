// `cuda-fast` forward pass for the shapes v4 (mas_fast_fused.cu) cannot take: one decision bit
// per cell instead of rewritten float scores; logp is only read. The scheme, a pipeline of one
// warp per 32*K text rows, is in mas_fast_pipeline.cuh; the walk (mas_fast_walk.cu) follows it.
//
// This is version 3 of that pipeline, kept in production as the fallback; the versions before
// it (v1: the chunk fully unrolled; v2: a rolled chunk with a fenced hand-over) live in the
// dev harness, dev/cuda/mas_fast.cu, with what each changed and why. v3's hand-over between
// warps needs no fence: each published value carries its column in the upper half of a 64-bit
// entry (one single-copy-atomic access), so the writer needs no GPU-scope MEMBAR per chunk
// (which also waits for its in-flight tile loads) and the reader polls the entries themselves.
// The polling loads are volatile (plain ones got hoisted out of the loop on the first GPU
// run, which hung) and bounded (kMaxPolls). Its timings against v1 and v2:
// docs/benchmarks.md, "MAS".
//
// Rows per lane: K=4 gives twice the warps of K=8 and a column step half as long (mas_cuda.cpp
// picks K by shape). VEC=4: 16-byte copies (S % 4 == 0); VEC=1: 4-byte fallback.
#include "align/kernels/mas_fast_pipeline.cuh"

namespace monoflow::align::kernels {

FastMasLayout fast_mas_layout(int batch, int max_text, int max_mel, int rows_per_lane) {
  auto align64 = [](int64_t n) { return (n + 63) / 64 * 64; };
  FastMasLayout l;
  l.batch = batch;
  l.rows_per_lane = rows_per_lane;
  l.warps_per_item = (max_text + 32 * rows_per_lane - 1) / (32 * rows_per_lane);
  l.padded_text = l.warps_per_item * 32 * rows_per_lane;
  l.mel_blocks = (max_mel + 31) / 32;
  l.boundary_stride = l.mel_blocks * 32 + 64;  // room for the last chunk's 36-float reads
  l.zeroed_ints = 4 + static_cast<int64_t>(batch) * l.warps_per_item;
  l.starts_offset = align64(l.zeroed_ints);
  l.bits_offset = l.starts_offset + align64(static_cast<int64_t>(batch) * max_text);
  l.boundary_offset =
      l.bits_offset + align64(static_cast<int64_t>(batch) * l.mel_blocks * l.padded_text);
  // 64-bit entries (v3's tagged values; the dev harness's v1/v2 use the first half as floats).
  l.boundary_ints = align64(2 * static_cast<int64_t>(batch) * l.warps_per_item * l.boundary_stride);
  l.total_ints = l.boundary_offset + l.boundary_ints;
  return l;
}

namespace {

// Tagged boundary entry: the value's bits with (column + 1) above them, written and read as
// one 64-bit access, so that a reader can tell a published value from an old one without
// any fence (the buffer is zeroed before the run).
__device__ __forceinline__ unsigned long long tagged(float value, int column) {
  return (static_cast<unsigned long long>(column + 1) << 32) | __float_as_uint(value);
}

// The reader's copy: the tagged entries of columns y0-2 .. y0+31 of the previous warp's last
// row, loaded at the start of a chunk and checked at its end.
struct TaggedBoundary {
  ulonglong2 e[17];
};
__device__ __forceinline__ void load_tagged(TaggedBoundary& tb, const WarpTask& t, int y0) {
  const auto* src = reinterpret_cast<const ulonglong2*>(t.up_row) + (y0 - 2) / 2;
#pragma unroll
  for (int k = 0; k < 17; ++k) {  // volatile: a polling loop must not reuse earlier loads
    asm volatile("ld.relaxed.gpu.global.v2.u64 {%0, %1}, [%2];\n"
                 : "=l"(tb.e[k].x), "=l"(tb.e[k].y) : "l"(src + k) : "memory");
  }
}
// True when every needed entry (columns y0-1 .. min(y0+30, up_last)) carries its tag.
__device__ __forceinline__ bool tagged_ready(const TaggedBoundary& tb, const WarpTask& t, int y0) {
  bool ok = true;
#pragma unroll
  for (int k = 0; k < 17; ++k) {
    const int c0 = y0 - 2 + 2 * k;
    if (k > 0 && c0 <= t.up_last) ok = ok && (tb.e[k].x >> 32) == static_cast<unsigned>(c0 + 1);
    if (k < 16 && c0 + 1 <= t.up_last) ok = ok && (tb.e[k].y >> 32) == static_cast<unsigned>(c0 + 2);
  }
  return ok;
}
// Reloads until every needed entry carries its tag, or gives up (see kMaxPolls).
__device__ __forceinline__ void wait_tagged(TaggedBoundary& tb, WarpTask& t, int y0) {
  for (int polls = 0; !t.gave_up && !tagged_ready(tb, t, y0); ++polls) {
    if (polls == kMaxPolls) {
      atomicExch(t.stalled, 1);
      t.gave_up = true;
      return;
    }
    load_tagged(tb, t, y0);
  }
}

// up_s[j] = Q[x0-1][y0-1+j]: entry j+1 of the loaded run.
__device__ __forceinline__ void stage_tagged(float* up_s, const TaggedBoundary& tb) {
#pragma unroll
  for (int m = 0; m < 8; ++m) {
    // entries 4m+1 .. 4m+4: e[2m].y, e[2m+1].x, e[2m+1].y, e[2m+2].x
    reinterpret_cast<float4*>(up_s)[m] =
        make_float4(__uint_as_float(static_cast<unsigned>(tb.e[2 * m].y)),
                    __uint_as_float(static_cast<unsigned>(tb.e[2 * m + 1].x)),
                    __uint_as_float(static_cast<unsigned>(tb.e[2 * m + 1].y)),
                    __uint_as_float(static_cast<unsigned>(tb.e[2 * m + 2].x)));
  }
}

// v3's hand-over (forward_rolled's Handover): tagged entries, no progress counter.
struct TaggedHandover {
  float f[36];         // the first warp's virtual row
  TaggedBoundary tb;   // the other warps' loaded entries
  __device__ __forceinline__ void prefetch(WarpTask& t, int y0, float neg_inf) {
    if (t.w == 0) virtual_boundary(f, y0, neg_inf);
    else load_tagged(tb, t, y0);
  }
  __device__ __forceinline__ void stage(float* up_s, WarpTask& t, int y0) {
    if (t.w == 0) return stage_boundary(up_s, f);
    wait_tagged(tb, t, y0);
    stage_tagged(up_s, tb);
  }
  __device__ __forceinline__ void publish_group(const WarpTask& t, int y, const float4& out) {
    auto* dst = reinterpret_cast<ulonglong2*>(t.my_row) + y / 2;
    asm volatile("st.relaxed.gpu.global.v2.u64 [%0], {%1, %2};\n" ::"l"(dst),
                 "l"(tagged(out.x, y)), "l"(tagged(out.y, y + 1)) : "memory");
    asm volatile("st.relaxed.gpu.global.v2.u64 [%0], {%1, %2};\n" ::"l"(dst + 1),
                 "l"(tagged(out.z, y + 2)), "l"(tagged(out.w, y + 3)) : "memory");
  }
  __device__ __forceinline__ void publish_chunk(const WarpTask&, int, int) {}
};

}  // namespace

cudaError_t launch_fast_mas_forward(const float* logp, int max_text, int max_mel,
                                    DeviceLengths text_lengths, DeviceLengths mel_lengths,
                                    float neg_inf, const FastMasLayout& layout, int32_t* workspace,
                                    cudaStream_t stream) {
  if (layout.batch == 0) return cudaSuccess;
  const bool vec4 = max_mel % 4 == 0 && reinterpret_cast<uintptr_t>(logp) % 16 == 0;
  const int K = layout.rows_per_lane, smem = forward_rolled_smem(K);
  auto go = [&](auto kernel) {
    return launch_forward(kernel, smem, logp, max_text, max_mel, text_lengths, mel_lengths,
                          neg_inf, layout, workspace, stream);
  };
  if (K == 4) return vec4 ? go(forward_rolled<4, 4, TaggedHandover>) : go(forward_rolled<4, 1, TaggedHandover>);
  if (K == 8) return vec4 ? go(forward_rolled<8, 4, TaggedHandover>) : go(forward_rolled<8, 1, TaggedHandover>);
  return cudaErrorInvalidValue;
}

}  // namespace monoflow::align::kernels
