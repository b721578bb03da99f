// The dev/cpu harnesses' timer: the median wall-clock milliseconds of `reps` calls of f after
// `warmups` untimed ones.
#pragma once

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

inline double median_ms(int reps, const std::function<void()>& f, int warmups = 3) {
  for (int i = 0; i < warmups; ++i) f();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}
