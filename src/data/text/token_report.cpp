#include "data/text/token_report.h"

#include <sstream>

namespace monoflow::text {

std::string token_report(const TextProcessor& processor, const std::string& utf8_text) {
  const auto symbols = processor.tokens(utf8_text);
  const auto ids = processor.encode(utf8_text);
  std::ostringstream out;
  out << "cleaned: " << processor.clean(utf8_text) << "\n";
  out << "tokens (" << symbols.size() << "): ";
  for (size_t i = 0; i < symbols.size(); ++i) out << (i ? "|" : "") << symbols[i];
  out << "\nids:";
  for (const int64_t id : ids) out << " " << id;
  out << "\n";
  return out.str();
}

}  // namespace monoflow::text
