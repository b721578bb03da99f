// Helpers for the MAS suites: an independent brute-force MAS (enumerates every monotonic
// path), random inputs with padding, and the path invariants every backend must satisfy.
#pragma once

#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include <gtest/gtest.h>
#include <torch/torch.h>

namespace monoflow::align::testing {

// Best path of one utterance by enumerating all monotonic paths (small T, S only). Scores
// are summed in double; tests feed values whose sums are exact in float too (small
// multiples of a power of two), so ties are real ties. Among equal scores it prefers, reading
// columns from the last backwards, the larger text index at the first difference: the
// original backtracking's "stay unless the diagonal is strictly better". Returns the text
// index of each mel frame.
inline std::vector<int> brute_force_rows(const torch::Tensor& logp /*[T,S] float*/, int text_len,
                                         int mel_len) {
  auto a = logp.accessor<float, 2>();
  std::vector<int> rows(mel_len, 0), best;
  double best_score = 0;
  // rows[y] for y >= 1 decided recursively; rows[0] = 0, rows[S-1] must be T-1.
  std::function<void(int, double)> walk = [&](int y, double score) {
    if (y == mel_len) {
      if (rows[mel_len - 1] != text_len - 1) return;
      bool better = best.empty() || score > best_score;
      if (!better && score == best_score) {
        for (int k = mel_len - 1; k >= 0; --k) {
          if (rows[k] != best[k]) {
            better = rows[k] > best[k];
            break;
          }
        }
      }
      if (better) best = rows, best_score = score;
      return;
    }
    for (int step = 0; step <= 1; ++step) {
      const int r = rows[y - 1] + step;
      if (r >= text_len) continue;
      if (text_len - 1 - r > mel_len - 1 - y) continue;  // cannot reach the end any more
      rows[y] = r;
      walk(y + 1, score + a[r][y]);
    }
  };
  rows[0] = 0;
  walk(1, a[0][0]);
  return best;
}

// Random lengths and values for a padded batch; `exact` draws multiples of 1/4 in [-3, 3] so
// that float sums are exact and ties frequent, else N(0,1). Padding holds garbage (nan, inf,
// huge values) that every backend must ignore.
struct RandomBatch {
  torch::Tensor logp, text_lengths, mel_lengths;
};

inline RandomBatch random_batch(int64_t batch, int64_t max_text, int64_t max_mel, bool exact,
                                torch::Generator& gen, bool full_lengths = false) {
  RandomBatch r;
  if (exact) {
    r.logp = torch::randint(-12, 13, {batch, max_text, max_mel}, gen, torch::kFloat32) / 4.0;
  } else {
    r.logp = torch::randn({batch, max_text, max_mel}, gen, torch::kFloat32);
  }
  r.text_lengths = torch::empty({batch}, torch::kInt64);
  r.mel_lengths = torch::empty({batch}, torch::kInt64);
  for (int64_t b = 0; b < batch; ++b) {
    int64_t t = max_text, s = max_mel;
    if (!full_lengths && b > 0) {  // item 0 keeps the full shape
      t = torch::randint(1, max_text + 1, {1}, gen).item<int64_t>();
      const int64_t lo = std::max<int64_t>(t, 1);
      s = torch::randint(lo, max_mel + 1, {1}, gen).item<int64_t>();
    }
    r.text_lengths[b] = t;
    r.mel_lengths[b] = s;
    const float garbage[] = {NAN, INFINITY, -INFINITY, 3e38f};
    if (t < max_text) r.logp[b].slice(0, t).fill_(garbage[b % 4]);
    if (s < max_mel) r.logp[b].slice(1, s).fill_(garbage[(b + 1) % 4]);
  }
  return r;
}

// Path invariants for one utterance: zero outside the lengths, exactly one token per frame,
// monotonic with steps of 0 or 1, starting at (0,0) and ending at (T-1,S-1); durations
// match the path and sum to S.
inline void expect_valid_path(const torch::Tensor& path /*[T,S] float*/,
                              const torch::Tensor& durations /*[T] int32*/, int64_t text_len,
                              int64_t mel_len, int64_t item) {
  SCOPED_TRACE("item " + std::to_string(item));
  auto p = path.accessor<float, 2>();
  auto d = durations.accessor<int32_t, 1>();
  const int64_t max_text = path.size(0), max_mel = path.size(1);
  int64_t prev = 0, total = 0;
  std::vector<int64_t> counts(max_text, 0);
  for (int64_t y = 0; y < max_mel; ++y) {
    int64_t ones = 0, row = -1;
    for (int64_t x = 0; x < max_text; ++x) {
      ASSERT_TRUE(p[x][y] == 0.0f || p[x][y] == 1.0f);
      if (p[x][y] == 1.0f) ++ones, row = x, ++counts[x];
    }
    if (y >= mel_len) {
      ASSERT_EQ(ones, 0) << "frame " << y << " is padding";
      continue;
    }
    ASSERT_EQ(ones, 1) << "frame " << y;
    ASSERT_LT(row, text_len);
    if (y == 0) ASSERT_EQ(row, 0);
    if (y == mel_len - 1) ASSERT_EQ(row, text_len - 1);
    ASSERT_TRUE(row == prev || row == prev + 1) << "frame " << y;
    prev = row;
  }
  for (int64_t x = 0; x < max_text; ++x) {
    ASSERT_EQ(d[x], counts[x]) << "token " << x;
    if (x < text_len) ASSERT_GE(d[x], 1);
    total += d[x];
  }
  ASSERT_EQ(total, mel_len);
}

}  // namespace monoflow::align::testing
