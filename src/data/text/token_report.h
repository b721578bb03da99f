// What the front-end makes of a text, for users checking their config (tools/tokens):
//   cleaned: dr. smith paid five dollars.
//   tokens (27): d|r|.| |s|m|i|t|h| |...
//   ids: 31 45 7 11 ...
// (Characters without a symbol are dropped; the processor's unknown_report() names them.)
#pragma once

#include <string>

#include "data/text/text_processor.h"

namespace monoflow::text {

std::string token_report(const TextProcessor& processor, const std::string& utf8_text);

}  // namespace monoflow::text
