#include "train/config/config_io.h"

#include <yaml-cpp/yaml.h>

#include <fstream>
#include <set>
#include <sstream>

#include "common/error.h"
#include "common/input_file.h"
#include "train/config/config_schema.h"
#include "train/config/library_options.h"

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
                    const std::vector<std::string>& overrides) {
  Config config;
  config.source = source;
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::ParserException& e) {
    throw FileError(source, e.mark.line + 1, "YAML syntax error: " + e.msg);
  }
  read_document(config, root, source);
  for (const auto& o : overrides) apply_override(config, o);
  validate(config);
  return config;
}

Config load_config(const std::string& path, const std::vector<std::string>& overrides) {
  std::string text;  // a FIFO or a folder is refused, not waited on (common/input_file.h)
  if (!read_input_file(path, "--config takes a YAML file", text)) {
    throw FileError(path, 0, "cannot open the config file (does it exist and is it readable?)");
  }
  return parse_config(text, path, overrides);
}

void apply_override(Config& config, const std::string& assignment) {
  const size_t eq = assignment.find('=');
  if (eq == std::string::npos || eq == 0)
    throw UserError("--set " + assignment + ": expected section.key=value, e.g. train.batch_size=16");
  const std::string key = assignment.substr(0, eq);
  const std::string text = assignment.substr(eq + 1);
  const schema::Field* field = schema::find(key);
  if (!field) throw UserError("--set " + key + ": " + unknown_key_message(key));
  YAML::Node value;
  try {
    value = YAML::Load(text);
  } catch (const YAML::ParserException& e) {
    throw UserError("--set " + key + ": cannot parse value '" + text + "': " + e.msg);
  }
  std::string err = field->assign(config, value);
  if (!err.empty()) throw UserError("--set " + key + ": " + err);
  config.origin[key] = "--set";
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
