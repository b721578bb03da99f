// Value checks shared by the config schema and the option records' validate(): each returns ""
// when the value is fine, else what is wrong ("must be > 0, got 0"), so a message reads the same
// wherever the value came from. require() turns a problem into an OptionError naming the key.
#pragma once

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "common/error.h"

namespace monoflow::check {

template <class T> std::string positive(const T& v) {
  std::ostringstream m;
  if (!(v > 0)) m << "must be > 0, got " << v;
  return m.str();
}

template <class T> std::string at_least(const T& v, const T& lo) {
  std::ostringstream m;
  if (v < lo) m << "must be >= " << lo << ", got " << v;
  return m.str();
}

inline std::string probability(double v) {
  std::ostringstream m;
  if (v < 0.0 || v >= 1.0) m << "must be in [0, 1), got " << v;
  return m.str();
}

inline std::string one_of(const std::string& v, const std::vector<std::string>& allowed) {
  if (std::find(allowed.begin(), allowed.end(), v) != allowed.end()) return "";
  std::string m = "must be one of";
  for (const auto& a : allowed) m += " '" + a + "'";
  return m + ", got '" + v + "'";
}

// Throws OptionError(key, problem) unless `problem` is empty.
inline void require(const std::string& key, const std::string& problem) {
  if (!problem.empty()) throw OptionError(key, problem);
}
inline void require(bool ok, const std::string& key, const std::string& what) {
  if (!ok) throw OptionError(key, what);
}

}  // namespace monoflow::check
