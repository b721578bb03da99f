// The table of configuration fields: for each dotted key, how to read it from a YAML node
// (with its type and range checked) and how to write it back. config_io.cpp walks this
// table; adding a field to config.h means adding one line to config_schema.cpp.
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
