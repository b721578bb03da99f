#include "models/interop/weights.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>

#include "common/error.h"
#include "models/glow_tts.h"
#include "models/interop/pickle_compat.h"

namespace monoflow::models {

namespace {

std::string shape_str(at::IntArrayRef s) {
  std::ostringstream o;
  o << s;
  return o.str();
}

std::string list_keys(const std::vector<std::string>& keys) {
  std::string s;
  for (size_t i = 0; i < keys.size() && i < 8; ++i) s += (i ? ", " : "") + keys[i];
  if (keys.size() > 8) s += ", ... (" + std::to_string(keys.size()) + " in all)";
  return s;
}

bool starts_with(const std::string& s, const std::string& p) { return s.compare(0, p.size(), p) == 0; }

}  // namespace

StateDict state_dict(const torch::nn::Module& module) {
  StateDict out;
  for (const auto& item : module.named_parameters(/*recurse=*/true)) out.emplace_back(item.key(), item.value());
  for (const auto& item : module.named_buffers(/*recurse=*/true)) out.emplace_back(item.key(), item.value());
  return out;
}

StateDict read_state_dict(const std::string& path, int64_t* iteration) {
  // (An ifstream opens a directory, and reading it then throws a bare std::ios failure.)
  if (std::filesystem::is_directory(path)) {
    throw FileError(path, 0, "is a directory; pass the weights file (a torch.save .pt/.pth file) itself");
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) throw FileError(path, 0, "cannot open the weights file");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  auto root = read_torch_save(bytes, path);
  if (!root.isGenericDict()) throw FileError(path, 0, "expected a state_dict or a checkpoint dict, found " + root.tagKind());
  auto dict = root.toGenericDict();
  if (iteration != nullptr) *iteration = 0;
  for (const auto& kv : dict) {
    if (iteration != nullptr && kv.key().isString() && kv.key().toStringRef() == "iteration" && kv.value().isInt()) {
      *iteration = kv.value().toInt();
    }
  }
  for (const auto& kv : dict) {
    if (kv.key().isString() && kv.key().toStringRef() == "model") {
      if (!kv.value().isGenericDict()) throw FileError(path, 0, "the checkpoint's \"model\" entry is not a dict");
      dict = kv.value().toGenericDict();
      break;
    }
  }
  StateDict out;
  for (const auto& kv : dict) {
    if (!kv.key().isString()) throw FileError(path, 0, "state_dict key is not a string");
    std::string key = kv.key().toStringRef();
    if (key == "__state__" || key == "_metadata") continue;  // OrderedDict attributes, not weights
    if (!kv.value().isTensor()) {
      throw FileError(path, 0, "entry '" + key + "' is not a tensor (" +
                                   (kv.value().isNone() ? std::string("None, or a Python object without a counterpart here")
                                                        : kv.value().tagKind()) +
                                   "); expected a state_dict of tensors, or a checkpoint dict with one under \"model\"");
    }
    if (starts_with(key, "module.")) key = key.substr(7);
    out.emplace_back(key, kv.value().toTensor());
  }
  if (out.empty()) throw FileError(path, 0, "no tensors in this file");
  return out;
}

void load_state_dict(torch::nn::Module& module, const StateDict& weights, const std::string& source, bool strict) {
  std::map<std::string, torch::Tensor> given(weights.begin(), weights.end());
  auto own = state_dict(module);
  std::vector<std::string> missing, mismatched, unexpected;
  for (const auto& [key, t] : own) {
    auto it = given.find(key);
    if (it == given.end()) {
      missing.push_back(key);
    } else if (!it->second.sizes().equals(t.sizes())) {
      mismatched.push_back(key + " " + shape_str(it->second.sizes()) + " vs ours " + shape_str(t.sizes()));
    }
  }
  std::map<std::string, bool> own_keys;
  for (const auto& [key, t] : own) own_keys[key] = true;
  for (const auto& [key, t] : weights) {
    if (!own_keys.count(key)) unexpected.push_back(key);
  }
  std::string problems;
  if (!missing.empty()) problems += " missing: " + list_keys(missing) + ".";
  if (!mismatched.empty()) problems += " shape mismatch: " + list_keys(mismatched) + ".";
  if (strict && !unexpected.empty()) problems += " unexpected: " + list_keys(unexpected) + ".";
  if (!problems.empty()) {
    // The embedding's rows are the symbol set: a mismatch there is the text front-end's.
    const bool vocabulary = std::any_of(mismatched.begin(), mismatched.end(),
                                        [](const std::string& m) { return starts_with(m, "encoder.emb.weight "); });
    throw FileError(source, 0, "weights do not fit this model (check the model section of the config against "
                               "the checkpoint's hyper-parameters" +
                                   std::string(vocabulary ? "; encoder.emb.weight has a row per symbol: the config's "
                                                            "symbol set (data.symbols, add_blank) must be the one it "
                                                            "was trained with" : "") +
                                   "):" + problems);
  }
  torch::NoGradGuard no_grad;
  for (auto& [key, t] : own) t.copy_(given.at(key));
}

GlowTTSOptions infer_options(const StateDict& weights, const GlowTTSOptions& base, const std::string& source) {
  std::map<std::string, torch::Tensor> w(weights.begin(), weights.end());
  auto get = [&](const std::string& key) -> const torch::Tensor& {
    auto it = w.find(key);
    if (it == w.end()) throw FileError(source, 0, "not a Glow-TTS state_dict: no '" + key + "'");
    return it->second;
  };
  auto count = [&](const std::string& prefix, const std::string& suffix) {
    int64_t n = 0;
    while (w.count(prefix + std::to_string(n) + suffix)) ++n;
    return n;
  };
  GlowTTSOptions o = base;
  const auto& emb = get("encoder.emb.weight");
  o.n_vocab(emb.size(0));
  const int64_t hidden = emb.size(1);
  o.hidden_channels(hidden).hidden_channels_enc(hidden);
  o.out_channels(get("encoder.proj_m.weight").size(0));
  o.mean_only(!w.count("encoder.proj_s.weight"));
  o.prenet(w.count("encoder.pre.proj.weight") > 0);
  o.n_layers_enc(count("encoder.encoder.attn_layers.", ".conv_q.weight"));
  if (o.n_layers_enc() > 0) {
    const auto& ffn = get("encoder.encoder.ffn_layers.0.conv_1.weight");
    o.filter_channels(ffn.size(0)).kernel_size(ffn.size(2));
    auto rel = w.find("encoder.encoder.attn_layers.0.emb_rel_k");
    if (rel != w.end()) {
      o.window_size((rel->second.size(1) - 1) / 2).n_heads(hidden / rel->second.size(2));
    } else {
      o.window_size(0);  // n_heads cannot be read off the shapes: kept from base
    }
  }
  const auto& dp = get("encoder.proj_w.conv_1.weight");
  o.filter_channels_dp(dp.size(0)).kernel_size(dp.size(2));
  int64_t blocks = 0;  // flows 3b (ActNorm), 3b+1 (InvConvNear), 3b+2 (CouplingBlock)
  while (w.count("decoder.flows." + std::to_string(3 * blocks) + ".logs")) ++blocks;
  o.n_blocks_dec(blocks);
  const int64_t dec_channels = get("decoder.flows.0.logs").size(1);
  o.n_sqz(dec_channels / o.out_channels());
  o.n_split(get("decoder.flows.1.weight").size(0));
  o.hidden_channels_dec(get("decoder.flows.2.start.weight_v").size(0));
  o.n_block_layers(count("decoder.flows.2.wn.in_layers.", ".weight_v"));
  o.kernel_size_dec(get("decoder.flows.2.wn.in_layers.0.weight_v").size(2));
  auto spk = w.find("emb_g.weight");
  if (spk != w.end()) {
    o.n_speakers(spk->second.size(0)).gin_channels(spk->second.size(1));
  } else {
    o.n_speakers(0).gin_channels(0);
  }
  return o;
}

void import_official_weights(GlowTTSImpl& model, const std::string& path, bool strict) {
  load_state_dict(model, read_state_dict(path), path, strict);
  model.set_ddi(false);
}

void export_official_weights(const GlowTTSImpl& model, const std::string& path, bool as_checkpoint,
                             int64_t iteration, double learning_rate, bool keep_dtype) {
  c10::Dict<std::string, at::Tensor> sd;
  for (const auto& [key, t] : state_dict(model)) {
    auto v = t.detach().to(torch::kCPU);
    if (!keep_dtype && v.is_floating_point()) v = v.to(torch::kFloat);
    sd.insert(key, v.contiguous().clone());
  }
  std::vector<char> bytes;
  if (as_checkpoint) {
    c10::impl::GenericDict ck(c10::StringType::get(), c10::AnyType::get());
    ck.insert("model", sd);
    ck.insert("iteration", iteration);
    ck.insert("learning_rate", learning_rate);
    bytes = write_torch_save(ck);
  } else {
    bytes = write_torch_save(sd);
  }
  std::ofstream out(path, std::ios::binary);
  if (!out) throw FileError(path, 0, "cannot write the weights file");
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw FileError(path, 0, "write failed");
}

}  // namespace monoflow::models
