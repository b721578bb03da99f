#include "train/config/yaml_bounds.h"

#include <sys/stat.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/exceptions.h>
#include <yaml-cpp/mark.h>
#include <yaml-cpp/parser.h>

#include <sstream>
#include <vector>

#include "common/error.h"

namespace monoflow::train {
namespace {

std::string mib(int64_t bytes) {
  std::ostringstream s;
  s.precision(3);
  s << static_cast<double>(bytes) / (1 << 20) << " MiB";
  return s.str();
}

// The bound that was passed: where (0-based line) and what.
struct Passed {
  int line;
  std::string what;
};

// Counts as the parser reads; throws Passed at the first bound passed, which ends the parse.
class Counter : public YAML::EventHandler {
 public:
  void OnDocumentStart(const YAML::Mark&) override {}
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark& m, YAML::anchor_t) override { item(m, nullptr); }
  void OnAlias(const YAML::Mark& m, YAML::anchor_t) override { item(m, nullptr); }
  void OnScalar(const YAML::Mark& m, const std::string&, YAML::anchor_t, const std::string& value) override {
    if (static_cast<int64_t>(value.size()) > YamlBounds::kMaxTextBytes)
      throw Passed{m.line, at() + "a text of " + std::to_string(value.size()) + " bytes (at most " +
                               std::to_string(YamlBounds::kMaxTextBytes) + " are read)"};
    item(m, &value);
  }
  void OnSequenceStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    open(m, false);
  }
  void OnMapStart(const YAML::Mark& m, const std::string&, YAML::anchor_t, YAML::EmitterStyle::value) override {
    open(m, true);
  }
  void OnSequenceEnd() override { close(); }
  void OnMapEnd() override { close(); }

 private:
  struct Frame {
    bool map;
    int line;
    int64_t items = 0;  // for a mapping, keys and values
    std::string key;    // a mapping's latest key
  };

  // "train.betas: " for a value under train: betas:, "" at the top; `outer` leaves out the
  // innermost frame (a mapping that is too large is named by its own key, not its last one).
  std::string at(bool outer = false) const {
    std::string path;
    const size_t frames = stack_.size() - (outer && !stack_.empty() ? 1 : 0);
    for (size_t i = 0; i < frames; ++i)
      if (stack_[i].map && !stack_[i].key.empty()) path += (path.empty() ? "" : ".") + stack_[i].key;
    return path.empty() ? "" : path + ": ";
  }

  void item(const YAML::Mark& m, const std::string* scalar) {
    if (++total_ > YamlBounds::kMaxItems)
      throw Passed{m.line, "more than " + std::to_string(YamlBounds::kMaxItems) + " values in all; a config holds at most a few hundred"};
    if (stack_.empty()) return;
    Frame& f = stack_.back();
    const int64_t n = ++f.items;
    if (f.map) {
      if (n % 2 == 1) f.key = scalar ? *scalar : "?";
      if ((n + 1) / 2 > YamlBounds::kMaxMapEntries)
        throw Passed{f.line, at(true) + "a mapping of more than " + std::to_string(YamlBounds::kMaxMapEntries) +
                                 " keys; a section of the config has fewer than 100"};
    } else if (n > YamlBounds::kMaxListItems) {
      throw Passed{f.line, at() + "a list of more than " + std::to_string(YamlBounds::kMaxListItems) +
                               " items; no key takes a list that long (train.betas takes 2 numbers, data.text_cleaners a few names)"};
    }
  }

  void open(const YAML::Mark& m, bool map) {
    item(m, nullptr);
    if (static_cast<int64_t>(stack_.size()) >= YamlBounds::kMaxDepth)
      throw Passed{m.line, at() + "nested more than " + std::to_string(YamlBounds::kMaxDepth) +
                               " levels deep; the config nests sections, keys and lists (3 levels)"};
    stack_.push_back(Frame{map, m.line});
  }
  void close() {
    if (!stack_.empty()) stack_.pop_back();
  }

  std::vector<Frame> stack_;
  int64_t total_ = 0;
};

}  // namespace

void check_config_file_size(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return;  // the reader says what is wrong
  if (S_ISDIR(st.st_mode)) throw FileError(path, 0, "is a directory, not a config file; pass a .yaml file");
  // A FIFO is refused by load_config's reader (common/input_file.h), not waited on.
  if (st.st_size > YamlBounds::kMaxFileBytes)
    throw FileError(path, 0, "the config file is " + mib(st.st_size) + "; a config is a few KB of keys, and files over " +
                                 mib(YamlBounds::kMaxFileBytes) + " are not read; check that this is the config you meant");
}

void check_yaml_bounds(const std::string& yaml, const std::string& source, const std::string& override_key) {
  std::istringstream in(yaml);
  Counter counter;
  try {
    YAML::Parser parser(in);
    while (parser.HandleNextDocument(counter)) {
    }
  } catch (const Passed& p) {
    if (!override_key.empty()) throw UserError("--set " + override_key + ": " + p.what);
    throw FileError(source, p.line + 1, p.what);
  } catch (const YAML::Exception&) {
    // A syntax error: YAML::Load reports it, with its line, as it always has.
  }
}

}  // namespace monoflow::train
