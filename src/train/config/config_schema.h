// The table of configuration fields: for each dotted key, the member it fills (the train and run
// sections of config.h, or a field of the libraries' option records), how to read it from a YAML
// node (its type checked; train and run also their range) and how to write it back.
// config_io.cpp walks this table; a new option needs one line in config_schema.cpp: its key.
#pragma once

#include <yaml-cpp/yaml.h>

#include <functional>
#include <string>
#include <vector>

#include "train/config/config.h"

namespace monoflow::train::schema {

struct Field {
  std::string key;   // "train.batch_size"
  std::string type;  // in words, for messages: "an integer", "a number", ...
  // Stores the node's value; returns an error text ("" when fine).
  std::function<std::string(Config&, const YAML::Node&)> assign;
  std::function<YAML::Node(const Config&)> emit;
};

const std::vector<Field>& fields();
const Field* find(const std::string& key);

// The known key closest to `key` by edit distance, or "" when nothing is close.
std::string closest_key(const std::string& key);

}  // namespace monoflow::train::schema
