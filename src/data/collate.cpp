#include <algorithm>
#include <numeric>

#include "data/batch.h"

namespace monoflow::data {

Batch collate(std::vector<Sample> samples) {
  TORCH_CHECK(!samples.empty(), "collate: empty batch");
  const int64_t b = static_cast<int64_t>(samples.size());
  std::vector<int64_t> order(samples.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t x, int64_t y) {
    return samples[x].text.size(0) > samples[y].text.size(0);
  });
  int64_t t_max = 0, s_max = 0;
  const int64_t n_mels = samples[0].mel.size(0);
  bool multi = false;
  for (const auto& s : samples) {
    TORCH_CHECK(s.mel.dim() == 2 && s.mel.size(0) == n_mels, "collate: mel shape mismatch");
    t_max = std::max(t_max, s.text.size(0));
    s_max = std::max(s_max, s.mel.size(1));
    multi = multi || s.speaker >= 0;
  }
  Batch out;
  out.text = torch::zeros({b, t_max}, torch::kInt64);
  out.text_lengths = torch::empty({b}, torch::kInt64);
  out.mel = torch::zeros({b, n_mels, s_max}, torch::kFloat32);
  out.mel_lengths = torch::empty({b}, torch::kInt64);
  if (multi) out.speakers = torch::empty({b}, torch::kInt64);
  auto tl = out.text_lengths.accessor<int64_t, 1>();
  auto ml = out.mel_lengths.accessor<int64_t, 1>();
  for (int64_t i = 0; i < b; ++i) {
    Sample& s = samples[order[i]];
    const int64_t t = s.text.size(0), f = s.mel.size(1);
    if (t > 0) out.text[i].narrow(0, 0, t).copy_(s.text);
    out.mel[i].narrow(1, 0, f).copy_(s.mel);
    tl[i] = t;
    ml[i] = f;
    if (multi) out.speakers[i] = s.speaker;
    out.ids.push_back(std::move(s.id));
  }
  return out;
}

Batch pin(Batch batch) {
  if (!torch::cuda::is_available()) return batch;
  for (torch::Tensor* t : {&batch.text, &batch.text_lengths, &batch.mel, &batch.mel_lengths,
                           &batch.speakers}) {
    if (t->defined()) *t = t->pin_memory();
  }
  return batch;
}

}  // namespace monoflow::data
