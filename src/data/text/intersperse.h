// The original commons.intersperse: [a, b] -> [blank, a, blank, b, blank].
#pragma once

#include <cstdint>
#include <vector>

namespace monoflow::text {

inline std::vector<int64_t> intersperse(const std::vector<int64_t>& ids, int64_t blank) {
  std::vector<int64_t> out(ids.size() * 2 + 1, blank);
  for (size_t i = 0; i < ids.size(); ++i) out[2 * i + 1] = ids[i];
  return out;
}

}  // namespace monoflow::text
