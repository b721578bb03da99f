// Reading, overriding, validating and printing the run configuration (config.h).
//
//   Config c = load_config("configs/ljspeech.yaml", {"train.batch_size=16"});
//   std::cout << to_yaml(c);
//
// Every mistake a user can make is a monoflow::UserError naming the place: a YAML syntax
// error or an unknown key, wrong type or out-of-range value in the file gives
// "<file>:<line>: <key>: <what>"; one from an override gives "--set <key>: <what>".
#pragma once

#include <string>
#include <vector>

#include "train/config/config.h"

namespace monoflow::train {

// A config key that a tool's own flag sets (train --run-dir DIR: run.dir=DIR). Every message
// about the key names the flag the user typed ("--run-dir: run.dir: ..."), not --set.
struct FlagOverride {
  std::string flag;        // "--run-dir"
  std::string assignment;  // "run.dir=DIR"
};

// Reads a YAML file (sections train, data, model, run; all optional, defaults as config.h),
// applies the `key=value` overrides in order (values in YAML syntax: 16, true, [0.9, 0.98]),
// then the flags' (they win over --set), then validates the whole.
Config load_config(const std::string& path, const std::vector<std::string>& overrides = {},
                   const std::vector<FlagOverride>& flags = {});

// Parses YAML text; `source` names it in messages.
Config parse_config(const std::string& yaml_text, const std::string& source,
                    const std::vector<std::string>& overrides = {}, const std::vector<FlagOverride>& flags = {});

// Applies one `section.key=value` assignment (no validation across fields); its messages name
// `flag` when given, else "--set <key>".
void apply_override(Config& config, const std::string& assignment, const std::string& flag = "");

// Cross-field and range checks; throws UserError naming the key (and its line when known).
void validate(const Config& config);

// Every field with its resolved value, as YAML that load_config reads back to the same Config.
std::string to_yaml(const Config& config);

// All dotted keys ("train.batch_size", ...), in declaration order.
std::vector<std::string> config_keys();

}  // namespace monoflow::train
