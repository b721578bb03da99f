#include "train/log/metrics_log.h"

#include <cmath>
#include <cstdio>

#include "common/error.h"

namespace monoflow::train {

std::string json_escape(const std::string& s) {
  std::string out;
  for (const char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  return out;
}

std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  // Prefer the shortest representation that reads back to the same double.
  for (int precision = 6; precision < 17; ++precision) {
    char shorter[32];
    std::snprintf(shorter, sizeof shorter, "%.*g", precision, v);
    if (std::strtod(shorter, nullptr) == v) return shorter;
  }
  return buf;
}

MetricsLog::MetricsLog(const std::string& path, bool append) : path_(path) {
  out_.open(path, append ? std::ios::app : std::ios::trunc);
  if (!out_) throw FileError(path, 0, "cannot open the metrics log for writing; check the run directory");
}

void MetricsLog::write(int64_t step, int64_t epoch,
                       const std::vector<std::pair<std::string, double>>& values) {
  out_ << "{\"step\":" << step << ",\"epoch\":" << epoch;
  for (const auto& [key, value] : values) {
    out_ << ",\"" << json_escape(key) << "\":" << json_number(value);
  }
  out_ << "}\n";
  out_.flush();
}

void MetricsLog::event(int64_t step, const std::string& event,
                       const std::vector<std::pair<std::string, std::string>>& texts) {
  out_ << "{\"step\":" << step << ",\"event\":\"" << json_escape(event) << "\"";
  for (const auto& [key, text] : texts) out_ << ",\"" << json_escape(key) << "\":\"" << json_escape(text) << "\"";
  out_ << "}\n";
  out_.flush();
}

}  // namespace monoflow::train
