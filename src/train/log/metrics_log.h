// JSON-lines metrics for scripts: one object per logged step,
//   {"step":120,"epoch":3,"loss/mle":1.234,...}
// Non-finite values are written as null (JSON has no NaN).
#pragma once

#include <cstdint>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

namespace monoflow::train {

class MetricsLog {
 public:
  // append: keep existing lines (resume); otherwise start a new file.
  MetricsLog(const std::string& path, bool append);
  void write(int64_t step, int64_t epoch, const std::vector<std::pair<std::string, double>>& values);
  // A line that is not a measurement: {"step":N,"event":"...", "<key>":"<text>", ...}.
  void event(int64_t step, const std::string& event, const std::vector<std::pair<std::string, std::string>>& texts);
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::ofstream out_;
};

std::string json_escape(const std::string& s);
std::string json_number(double v);  // shortest round-trip text, "null" when not finite

}  // namespace monoflow::train
