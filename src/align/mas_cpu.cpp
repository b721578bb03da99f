#include "align/mas_cpu.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include <ATen/Parallel.h>

#include "align/mas_checks.h"
#include "align/path_format.h"
#include "common/error.h"

namespace monoflow::align {
namespace {

// Forward recursion over one utterance's band, in place: q[x][y] becomes the best score
// of a monotonic path from (0,0) to (x,y). Row x of the band spans columns
// [x, x + S - T]. Rows are swept in order rather than the original's columns: every cell
// reads only its left and upper-left neighbours, which both orders compute first, so the
// values are the same bits and memory is read contiguously. Returns false on a
// non-finite input value inside the band.
bool forward_item(float* q, int64_t ld, int64_t text_len, int64_t mel_len, float neg_inf) {
  const int64_t width = mel_len - text_len;
  bool finite = true;
  for (int64_t x = 0; x < text_len; ++x) {
    float* row = q + x * ld;
    const float* up = row - ld;  // only read when x > 0
    for (int64_t y = x; y <= x + width; ++y) {
      const float v = row[y];
      finite = finite && std::isfinite(v);
      const float stay = (y == x) ? neg_inf : row[y - 1];  // (x, y-1) lies outside the band
      const float diag = (x == 0) ? (y == 0 ? 0.0f : neg_inf) : up[y - 1];
      row[y] = std::max(stay, diag) + v;
    }
  }
  return finite;
}

// Backtracking with the original tie rule: step down when the diagonal predecessor is
// strictly better, or when the band forces it (index == y). Writes frames per token.
void backtrack_item(const float* q, int64_t ld, int64_t text_len, int64_t mel_len,
                    int32_t* durations) {
  std::fill(durations, durations + text_len, 0);
  int64_t index = text_len - 1;
  for (int64_t y = mel_len - 1; y >= 0; --y) {
    ++durations[index];
    if (index != 0 && (index == y || q[index * ld + y - 1] < q[(index - 1) * ld + y - 1])) {
      --index;
    }
  }
}

// Sets path[x][start_x, start_x + durations[x]) to one, in the dtype's bit pattern.
template <typename Word>
void fill_path_item(void* path, int64_t text_len, int64_t max_mel, const int32_t* durations,
                    uint64_t one) {
  Word* out = static_cast<Word*>(path);
  int64_t start = 0;
  for (int64_t x = 0; x < text_len; ++x) {
    std::fill(out + x * max_mel + start, out + x * max_mel + start + durations[x],
              static_cast<Word>(one));
    start += durations[x];
  }
}

void fill_path_item(const PathFormat& format, void* path, int64_t text_len, int64_t max_mel,
                    const int32_t* durations) {
  switch (format.bytes) {
    case 1: fill_path_item<uint8_t>(path, text_len, max_mel, durations, format.one); break;
    case 2: fill_path_item<uint16_t>(path, text_len, max_mel, durations, format.one); break;
    case 4: fill_path_item<uint32_t>(path, text_len, max_mel, durations, format.one); break;
    default: fill_path_item<uint64_t>(path, text_len, max_mel, durations, format.one); break;
  }
}

}  // namespace

MasResult maximum_path_cpu(const torch::Tensor& logp, const torch::Tensor& text_lengths,
                           const torch::Tensor& mel_lengths, const MasOptions& options) {
  const int64_t batch = logp.size(0), max_text = logp.size(1), max_mel = logp.size(2);
  const torch::Tensor text_len = text_lengths.to(torch::kCPU, torch::kInt64).contiguous();
  const torch::Tensor mel_len = mel_lengths.to(torch::kCPU, torch::kInt64).contiguous();
  const int64_t* tl = text_len.data_ptr<int64_t>();
  const int64_t* ml = mel_len.data_ptr<int64_t>();
  check_mas_lengths(tl, ml, batch, max_text, max_mel);

  // The working copy: a host float32 array, the caller's own tensor only when it already
  // is one and may be overwritten.
  torch::Tensor q = logp.to(torch::kCPU, torch::kFloat32).contiguous();
  if (options.keep_input && q.data_ptr() == logp.data_ptr()) q = q.clone();

  const PathFormat format = path_format(options.path_dtype);
  torch::Tensor durations = torch::zeros({batch, max_text}, torch::kInt32);
  torch::Tensor path;
  if (options.want_path) path = torch::zeros({batch, max_text, max_mel}, options.path_dtype);

  std::vector<char> finite(batch, 1);
  float* q_data = q.data_ptr<float>();
  int32_t* d_data = durations.data_ptr<int32_t>();
  char* p_data = options.want_path ? static_cast<char*>(path.data_ptr()) : nullptr;
  at::parallel_for(0, batch, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      float* item = q_data + b * max_text * max_mel;
      finite[b] = forward_item(item, max_mel, tl[b], ml[b], options.neg_inf);
      if (!finite[b]) continue;
      backtrack_item(item, max_mel, tl[b], ml[b], d_data + b * max_text);
      if (p_data) {
        fill_path_item(format, p_data + b * max_text * max_mel * format.bytes, tl[b], max_mel,
                       d_data + b * max_text);
      }
    }
  });
  for (int64_t b = 0; b < batch; ++b) {
    if (!finite[b]) throw NonFiniteError(b, nonfinite_message(b));
  }

  MasResult result;
  if (options.want_path) result.path = path.to(logp.device());
  if (options.want_durations) result.durations = durations.to(logp.device());
  return result;
}

}  // namespace monoflow::align
