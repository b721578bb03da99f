#include "train/resume_check.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <iterator>
#include <set>
#include <sstream>

#include "data/dataset.h"

namespace monoflow::train {
namespace {

// A value as one line of YAML.
std::string flow(const YAML::Node& n) {
  if (!n.IsDefined() || n.IsNull()) return "(not set)";
  YAML::Emitter out;
  out << YAML::Flow << n;
  return out.c_str();
}

// The same, cut to stay readable in a message.
std::string shown(const std::string& s) { return s.size() > 60 ? s.substr(0, 57) + "..." : s; }

// FNV-1a over the sorted ids: the same set hashes the same in any order.
std::string id_hash(std::vector<std::string> ids) {
  std::sort(ids.begin(), ids.end());
  uint64_t h = 1469598103934665603ULL;
  for (const auto& id : ids) {
    for (const char c : id + '\n') h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ULL;
  }
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016" PRIx64, h);
  return buf;
}

std::vector<std::string> ids_of(const data::TtsDataset& d) {
  std::vector<std::string> ids;
  for (size_t i = 0; i < d.size(); ++i) ids.push_back(d.item(i).utterance.id);
  return ids;
}

struct Identity {
  int64_t training = 0;
  std::string training_hash;
  std::vector<std::string> validation;  // sorted
};

// The text dataset_identity writes: "training <n> <hash>\nvalidation <n>\n<id>\n...".
bool parse(const std::string& text, Identity& out) {
  std::istringstream in(text);
  std::string word;
  int64_t n_val = 0;
  if (!(in >> word >> out.training >> out.training_hash) || word != "training") return false;
  if (!(in >> word >> n_val) || word != "validation" || n_val < 0) return false;
  std::string line;
  std::getline(in, line);
  while (std::getline(in, line)) out.validation.push_back(line);
  std::sort(out.validation.begin(), out.validation.end());
  return static_cast<int64_t>(out.validation.size()) == n_val;
}

// "TINY-101, TINY-102 and 3 more"
std::string some(const std::vector<std::string>& ids) {
  std::string s;
  const size_t shown_ids = std::min<size_t>(ids.size(), 5);
  for (size_t i = 0; i < shown_ids; ++i) s += (i ? ", " : "") + ids[i];
  if (ids.size() > shown_ids) s += " and " + std::to_string(ids.size() - shown_ids) + " more";
  return s;
}

}  // namespace

std::vector<std::string> config_changes(const std::string& before_yaml, const std::string& after_yaml) {
  YAML::Node before, after;
  try {
    before = YAML::Load(before_yaml);
    after = YAML::Load(after_yaml);
  } catch (const YAML::Exception&) {
    return {"config"};
  }
  if (!before.IsMap() || !after.IsMap()) return {"config"};
  // Keys in the order of the current snapshot, then those only the checkpoint's has.
  std::vector<std::string> keys;
  std::set<std::string> seen;
  for (const YAML::Node& root : {after, before}) {
    for (const auto& section : root) {
      if (!section.second.IsMap()) continue;
      for (const auto& entry : section.second) {
        const std::string key = section.first.Scalar() + "." + entry.first.Scalar();
        if (seen.insert(key).second) keys.push_back(key);
      }
    }
  }
  std::vector<std::string> changes;
  for (const auto& key : keys) {
    const size_t dot = key.find('.');
    const std::string section = key.substr(0, dot), name = key.substr(dot + 1);
    const YAML::Node b = before[section] ? before[section][name] : YAML::Node();
    const YAML::Node a = after[section] ? after[section][name] : YAML::Node();
    const std::string bs = flow(b), as = flow(a);
    if (bs != as) changes.push_back(key + " (" + shown(bs) + " -> " + shown(as) + ")");
  }
  return changes;
}

std::string dataset_identity(const data::TtsDataset& train, const data::TtsDataset* validation) {
  std::vector<std::string> val = validation ? ids_of(*validation) : std::vector<std::string>{};
  std::sort(val.begin(), val.end());
  std::string out = "training " + std::to_string(train.size()) + " " + id_hash(ids_of(train)) + "\nvalidation " +
                    std::to_string(val.size()) + "\n";
  for (const auto& id : val) out += id + "\n";
  return out;
}

DatasetChanges dataset_changes(const std::string& before_text, const std::string& after_text) {
  DatasetChanges changes;
  Identity before, after;
  if (before_text.empty() || !parse(before_text, before) || !parse(after_text, after)) return changes;
  if (before.training_hash != after.training_hash) {
    changes.training = before.training == after.training
                           ? std::to_string(after.training) + " utterances as before, but other ids (hash " +
                                 before.training_hash + " -> " + after.training_hash + ")"
                           : std::to_string(before.training) + " -> " + std::to_string(after.training) + " utterances";
  }
  if (before.validation != after.validation) {
    std::vector<std::string> left, joined;
    std::set_difference(before.validation.begin(), before.validation.end(), after.validation.begin(),
                        after.validation.end(), std::back_inserter(left));
    std::set_difference(after.validation.begin(), after.validation.end(), before.validation.begin(),
                        before.validation.end(), std::back_inserter(joined));
    changes.validation = std::to_string(before.validation.size()) + " -> " + std::to_string(after.validation.size()) +
                         " utterances";
    if (!left.empty()) changes.validation += "; left it: " + some(left);
    if (!joined.empty()) changes.validation += "; joined it: " + some(joined);
  }
  return changes;
}

}  // namespace monoflow::train
