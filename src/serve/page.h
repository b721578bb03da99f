// The page serve answers at / (page.html, compiled into the binary by CMake: page.cpp.in).
#pragma once

#include <string>

namespace monoflow::serve {

const std::string& index_page();

}  // namespace monoflow::serve
