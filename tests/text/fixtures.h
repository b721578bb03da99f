// Paths of the text fixtures (tests/data/fixtures/text).
#pragma once

#include <cstdlib>
#include <string>

namespace monoflow::text::testing {

inline std::string fixture(const std::string& name) {
  if (const char* src = std::getenv("MONOFLOW_SOURCE_DIR")) {
    return std::string(src) + "/tests/data/fixtures/text/" + name;
  }
  return std::string(MONOFLOW_TEXT_FIXTURES) + "/" + name;
}

}  // namespace monoflow::text::testing
