// Fuzzes the config reader (train/config/config_io.h): YAML text, --set overrides, and the
// round trip through to_yaml. Every malformed input must be a UserError naming the place.
#include <filesystem>
#include <stdexcept>

#include "fuzz_driver.h"
#include "train/config/config_io.h"

using namespace monoflow;

namespace {

std::string first_line(const std::string& s) { return s.substr(0, s.find('\n')); }

void run(const std::string& input) {
  // The whole input as a config file; what it accepts must print and read back the same.
  const train::Config c = train::parse_config(input, "fuzz.yaml");
  const std::string printed = train::to_yaml(c);
  if (train::to_yaml(train::parse_config(printed, "printed.yaml")) != printed) {
    throw std::logic_error("to_yaml does not read back to the same config:\n" + printed);
  }
}

void run_override(const std::string& input) {
  // The first line as a --set assignment on a valid config.
  train::parse_config("train:\n  batch_size: 4\n", "fuzz.yaml", {first_line(input)});
}

}  // namespace

int main(int argc, char** argv) {
  fuzz::Target t;
  t.name = "fuzz_config";
  const std::string source = MONOFLOW_SOURCE_DIR;
  for (const char* f : {"configs/ljspeech.yaml", "configs/ljspeech_blank.yaml", "configs/quickstart.yaml",
                        "configs/aligner.yaml"}) {
    t.seeds.push_back(fuzz::read_bytes(source + "/" + f));
  }
  t.seeds.push_back(
      "train:\n  seed: 1234\n  batch_size: 4\n  betas: [0.9, 0.98]\n  max_steps: 6\n"
      "data:\n  dataset_dir: corpus\n  text_cleaners: [english_cleaners]\n  add_blank: true\n"
      "model:\n  hidden_channels: 16\n  n_heads: 2\n"
      "run:\n  dir: runs/x\n  device: cpu\n");
  t.valid_seeds = t.seeds.size();
  // Inputs that once broke or are easy to get wrong: a BOM, tabs, anchors and merges, flow
  // maps, wrong types, a section that is a list, invalid UTF-8, an empty document, two documents.
  t.seeds.insert(t.seeds.end(), {"\xEF\xBB\xBFtrain:\n  batch_size: 4\n", "train:\n\tbatch_size: 4\n",
                                 "base: &b {batch_size: 4}\ntrain:\n  <<: *b\n",
                                 "train: {batch_size: [1, 2], learning_rate: .nan, betas: [1e400, -0]}\n",
                                 "train:\n  - batch_size\n", "data:\n  dataset_dir: \"\\xff\xff\xfe\"\n", "",
                                 "train: {}\n---\ntrain: {}\n", "train.batch_size=16\n",
                                 "data.text_cleaners=[english_cleaners, basic_cleaners]\n",
                                 "train.betas=[0.9, 0.98, 0.7]\n"});
  t.dictionary = {"train:", "data:", "model:", "run:", "\n  ", ": ", "- ", "[", "]", "{", "}", ",", "&a ", "*a",
                  "<<: ", "!!binary ", "!!str ", "!!int ", "~", "null", "true", "1e309", "-1", "0x7fffffff",
                  "99999999999999999999", ".inf", ".nan", "\"", "'", "#", "|\n", ">\n", "---\n", "...\n", "=",
                  "\xEF\xBB\xBF", "\xC3\x28", "\t"};
  for (const std::string& key : train::config_keys()) {
    t.dictionary.push_back(key.substr(key.find('.') + 1) + ": ");
    t.dictionary.push_back(key + "=");
  }
  // A first line like "key=value" makes the input an override, anything else a file.
  t.run = [](const std::string& input) {
    const std::string line = first_line(input);
    if (line.find('=') != std::string::npos && line.find(':') == std::string::npos) {
      run_override(input);
    } else {
      run(input);
    }
  };
  t.fixed_cases = fuzz::unreadable_path_cases([](const std::string& path) { train::load_config(path); },
                                              [] { return fuzz::temp_dir("fuzz_config"); }, "missing.yaml",
                                              "config file");
  return fuzz::fuzz_main(argc, argv, t);
}
