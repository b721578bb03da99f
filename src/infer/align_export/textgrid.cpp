#include "infer/align_export/textgrid.h"

#include <cstdlib>
#include <sstream>

#include "common/error.h"
#include "common/strings.h"
#include "train/log/metrics_log.h"

namespace monoflow::train {
namespace {

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"') {
      out += "\"\"";
    } else if (c == '\n' || c == '\r') {
      out += ' ';
    } else {
      out += c;
    }
  }
  return out + "\"";
}

std::string number(double v) { return json_number(v); }

// Line-by-line reader of "key = value" lines; each expect_* names source:line when it fails.
class Reader {
 public:
  Reader(const std::string& text, std::string source) : source_(std::move(source)) {
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
      if (!line.empty() && line.back() == '\r') line.pop_back();
      lines_.push_back(line);
    }
  }

  // The next non-blank line, trimmed; `what` names it in the error at the end of the file.
  std::string next(const std::string& what) {
    while (at_ < lines_.size()) {
      std::string line = trim(lines_[at_++]);
      if (!line.empty()) return line;
    }
    fail("the file ends where " + what + " was expected");
  }

  // "key = value" -> value (trimmed); the key must match.
  std::string value_of(const std::string& key) {
    const std::string line = next("'" + key + " = ...'");
    const size_t eq = line.find('=');
    if (eq == std::string::npos || trim(line.substr(0, eq)) != key) {
      fail("expected '" + key + " = ...', found '" + line + "'");
    }
    return trim(line.substr(eq + 1));
  }

  double number_of(const std::string& key) {
    const std::string v = value_of(key);
    char* end = nullptr;
    const double d = std::strtod(v.c_str(), &end);
    if (v.empty() || *end != '\0') fail(key + ": '" + v + "' is not a number");
    return d;
  }

  long count_of(const std::string& key) {
    const double d = number_of(key);
    if (d < 0 || d != static_cast<double>(static_cast<long>(d))) fail(key + ": not a count");
    return static_cast<long>(d);
  }

  std::string string_of(const std::string& key) {
    const std::string v = value_of(key);
    if (v.size() < 2 || v.front() != '"' || v.back() != '"') fail(key + ": expected a quoted string, found " + v);
    std::string out;
    for (size_t i = 1; i + 1 < v.size(); ++i) {
      if (v[i] == '"') {
        if (v[i + 1] != '"' || i + 2 >= v.size()) fail(key + ": a lone quote inside " + v);
        ++i;
      }
      out += v[i];
    }
    return out;
  }

  // A line that must read exactly `expected` (spaces inside ignored).
  void expect(const std::string& expected) {
    const std::string line = next("'" + expected + "'");
    if (squeeze(line) != squeeze(expected)) fail("expected '" + expected + "', found '" + line + "'");
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw FileError(source_, static_cast<int>(at_), what);
  }

 private:
  static std::string squeeze(const std::string& s) {
    std::string out;
    for (const char c : s) {
      if (c != ' ' && c != '\t') out += c;
    }
    return out;
  }

  std::string source_;
  std::vector<std::string> lines_;
  size_t at_ = 0;
};

}  // namespace

std::string format_textgrid(const TextGrid& g) {
  std::ostringstream o;
  o << "File type = \"ooTextFile\"\nObject class = \"TextGrid\"\n\n";
  o << "xmin = " << number(g.xmin) << " \nxmax = " << number(g.xmax) << " \ntiers? <exists> \n";
  o << "size = " << g.tiers.size() << " \nitem []: \n";
  for (size_t t = 0; t < g.tiers.size(); ++t) {
    const TextGridTier& tier = g.tiers[t];
    o << "    item [" << t + 1 << "]:\n";
    o << "        class = \"IntervalTier\" \n";
    o << "        name = " << quoted(tier.name) << " \n";
    o << "        xmin = " << number(g.xmin) << " \n        xmax = " << number(g.xmax) << " \n";
    o << "        intervals: size = " << tier.intervals.size() << " \n";
    for (size_t i = 0; i < tier.intervals.size(); ++i) {
      const TextGridInterval& in = tier.intervals[i];
      o << "        intervals [" << i + 1 << "]:\n";
      o << "            xmin = " << number(in.xmin) << " \n";
      o << "            xmax = " << number(in.xmax) << " \n";
      o << "            text = " << quoted(in.text) << " \n";
    }
  }
  return o.str();
}

TextGrid parse_textgrid(const std::string& text, const std::string& source) {
  Reader r(text, source);
  if (r.string_of("File type") != "ooTextFile") r.fail("not a Praat text file (File type must be \"ooTextFile\")");
  if (r.string_of("Object class") != "TextGrid") r.fail("not a TextGrid (Object class)");
  TextGrid g;
  g.xmin = r.number_of("xmin");
  g.xmax = r.number_of("xmax");
  r.expect("tiers? <exists>");
  const long tiers = r.count_of("size");
  r.expect("item []:");
  for (long t = 1; t <= tiers; ++t) {
    r.expect("item [" + std::to_string(t) + "]:");
    if (r.string_of("class") != "IntervalTier") r.fail("only interval tiers are read");
    TextGridTier tier;
    tier.name = r.string_of("name");
    r.number_of("xmin");
    r.number_of("xmax");
    const long n = r.count_of("intervals: size");
    for (long i = 1; i <= n; ++i) {
      r.expect("intervals [" + std::to_string(i) + "]:");
      TextGridInterval in;
      in.xmin = r.number_of("xmin");
      in.xmax = r.number_of("xmax");
      in.text = r.string_of("text");
      tier.intervals.push_back(std::move(in));
    }
    g.tiers.push_back(std::move(tier));
  }
  return g;
}

}  // namespace monoflow::train
