#include "train/config/config_io.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/input_file.h"
#include "train/config/config_schema.h"
#include "train/config/library_options.h"
#include "train/config/yaml_bounds.h"

namespace monoflow::train {
namespace {

const char* const kSections[] = {"train", "data", "model", "run"};

std::string unknown_key_message(const std::string& key) {
  std::string m = "unknown key '" + key + "'";
  std::string near = schema::closest_key(key);
  if (!near.empty()) m += " (did you mean '" + near + "'?)";
  return m;
}

// Walks one YAML document into `config`, naming file and line in every error.
void read_document(Config& config, const YAML::Node& root, const std::string& source) {
  auto line_of = [](const YAML::Node& n) { return n.Mark().line + 1; };
  if (root.IsNull()) return;
  if (!root.IsMap())
    throw FileError(source, line_of(root), "expected a mapping with sections train, data, model, run");
  std::set<std::string> seen;
  for (const auto& section : root) {
    const std::string name = section.first.Scalar();
    const int section_line = line_of(section.first);
    if (std::find(std::begin(kSections), std::end(kSections), name) == std::end(kSections))
      throw FileError(source, section_line,
                      "unknown section '" + name + "' (expected train, data, model or run)");
    if (section.second.IsNull()) continue;
    if (!section.second.IsMap())
      throw FileError(source, section_line, name + ": expected a mapping of keys");
    for (const auto& entry : section.second) {
      const std::string key = name + "." + entry.first.Scalar();
      const int line = line_of(entry.first);
      if (!seen.insert(key).second) throw FileError(source, line, key + ": set twice");
      const schema::Field* field = schema::find(key);
      if (!field) throw FileError(source, line, unknown_key_message(key));
      std::string err = field->assign(config, entry.second);
      if (!err.empty()) throw FileError(source, line, key + ": " + err);
      config.origin[key] = source + ":" + std::to_string(line);
    }
  }
}

std::string where(const Config& config, const std::string& key) {
  auto it = config.origin.find(key);
  if (it != config.origin.end()) return it->second;
  return config.source.empty() ? "config" : config.source + " (default value)";
}

[[noreturn]] void invalid(const Config& config, const std::string& key, const std::string& what) {
  throw UserError(where(config, key) + ": " + key + ": " + what);
}

}  // namespace

Config parse_config(const std::string& yaml_text, const std::string& source,
                    const std::vector<std::string>& overrides, const std::vector<FlagOverride>& flags) {
  Config config;
  config.source = source;
  check_yaml_bounds(yaml_text, source);
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    throw FileError(source, e.mark.line + 1, "YAML syntax error: " + e.msg);
  }
  read_document(config, root, source);
  for (const auto& o : overrides) apply_override(config, o);
  for (const auto& f : flags) apply_override(config, f.assignment, f.flag);
  validate(config);
  return config;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides,
                   const std::vector<FlagOverride>& flags) {
  check_config_file_size(path);
  // A FIFO or a folder is refused, not waited on (common/input_file.h). Read at most one byte
  // past the bound: the file may have grown since it was measured.
  std::string text;
  if (!read_input_file(path, "--config takes a YAML file", text, static_cast<size_t>(YamlBounds::kMaxFileBytes) + 1)) {
    throw FileError(path, 0, "cannot open the config file (does it exist and is it readable?)");
  }
  if (static_cast<int64_t>(text.size()) > YamlBounds::kMaxFileBytes)
    throw FileError(path, 0, "the config file grew past " + std::to_string(YamlBounds::kMaxFileBytes) +
                                 " bytes while it was read; a config is a few KB of keys");
  return parse_config(text, path, overrides, flags);
}

void apply_override(Config& config, const std::string& assignment, const std::string& flag) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UserError("--set " + assignment + ": expected section.key=value, e.g. train.batch_size=16");
  const std::string key = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  // "--set train.batch_size", or the tool's flag that stands for the key: "--run-dir (run.dir)"
  const std::string named = flag.empty() ? "--set " + key : flag + " (" + key + ")";
  const schema::Field* field = schema::find(key);
  if (!field) throw UserError(named + ": " + unknown_key_message(key));
  // A value is one key's: a long text is refused before it is parsed (a flow list at the top
  // of a YAML text is scanned to its end before its first item is seen).
  if (static_cast<int64_t>(text.size()) > YamlBounds::kMaxTextBytes) {
    throw UserError(named + ": a value of " + std::to_string(text.size()) + " bytes (at most " +
                    std::to_string(YamlBounds::kMaxTextBytes) + " are read)");
  }
  check_yaml_bounds(text, "--set", key);
  YAML::Node value;
  try {
    value = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw UserError(named + ": cannot parse value '" + text + "': " + e.msg);
  }
  std::string err = field->assign(config, value);
  if (!err.empty()) throw UserError(named + ": " + err);
  config.origin[key] = flag.empty() ? "--set" : flag;
}

void validate(const Config& c) {
  // Each record checks its own values (and those other sections give it: library_options.h);
  // an OptionError names the key, and here the key gets its place. The model comes before the
  // dataset, so that a bad model value is reported even when no dataset is set yet.
  try {
    c.text.validate();
    model_options(c, /*n_vocab: the text front-end's, known later; any count checks the rest*/ 1).validate();
    data_options(c).validate();
    loader_options(c, /*training=*/true).validate();
  } catch (const OptionError& e) {
    invalid(c, e.key(), e.problem());
  }
}

std::string to_yaml(const Config& config) {
  YAML::Node root(YAML::NodeType::Map);
  for (const auto& f : schema::fields()) {
    const size_t dot = f.key.find('.');
    root[f.key.substr(0, dot)][f.key.substr(dot + 1)] = f.emit(config);
  }
  YAML::Emitter out;
  out << root;
  return std::string(out.c_str()) + "\n";
}

std::vector<std::string> config_keys() {
  std::vector<std::string> keys;
  for (const auto& f : schema::fields()) keys.push_back(f.key);
  return keys;
}

}  // namespace monoflow::train
