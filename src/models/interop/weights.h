// Weight exchange with the official Glow-TTS (PyTorch) in its own naming: our parameter
// names are the official state_dict keys (encoder.encoder.attn_layers.0.conv_q.weight,
// decoder.flows.2.wn.in_layers.0.weight_v, ...), so checkpoints move both ways unchanged.
#pragma once

#include <torch/torch.h>

#include <string>
#include <utility>
#include <vector>

namespace monoflow::models {

class GlowTTSImpl;
struct GlowTTSOptions;

// An ordered state dict: (key, tensor) in the module's registration order.
using StateDict = std::vector<std::pair<std::string, torch::Tensor>>;

// The parameters of `module` by name (detached views, not copies).
StateDict state_dict(const torch::nn::Module& module);

// Reads a file written by Python's torch.save (zip or legacy format): either a state_dict
// (OrderedDict or dict of tensors) or the official checkpoint dict (utils.save_checkpoint's
// G_*.pth, init.py's ddi_G.pth), whose "model" entry holds the state_dict; of the rest
// ("optimizer", "learning_rate") only "iteration" is kept, into *iteration (0 when absent).
// A "module." prefix (DataParallel) is removed. Tensors come back on the CPU, in the saved dtype.
StateDict read_state_dict(const std::string& path, int64_t* iteration = nullptr);

// Copies `weights` into the module's parameters (converting dtype and device). Every
// parameter must be present with the same shape; with `strict`, keys the module does not
// have are errors too. Throws monoflow::UserError naming `source` and the offending keys.
void load_state_dict(torch::nn::Module& module, const StateDict& weights, const std::string& source,
                     bool strict = true);

// read_state_dict + load_state_dict; the ActNorms count as initialised afterwards (no DDI).
void import_official_weights(GlowTTSImpl& model, const std::string& path, bool strict = true);

// The hyper-parameters a state dict implies (vocabulary, mel channels, widths, depths,
// kernels, heads, window, n_sqz, n_split, prenet, mean_only, speakers). Not recoverable
// from shapes, so taken from `base`: dilation_rate, dropouts, sigmoid_scale, block_length.
// Throws monoflow::UserError naming `source` when a key it needs is absent.
GlowTTSOptions infer_options(const StateDict& weights, const GlowTTSOptions& base, const std::string& source);

// Writes the model's parameters (float32 unless keep_dtype, on the CPU) with torch.save's zip
// format so that Python's torch.load reads them. as_checkpoint: the official checkpoint dict
// {"model": state_dict, "iteration": iteration, "learning_rate": learning_rate}, which the
// official utils.load_checkpoint accepts; else the bare state_dict (a dict).
void export_official_weights(const GlowTTSImpl& model, const std::string& path, bool as_checkpoint = false,
                             int64_t iteration = 0, double learning_rate = 1.0, bool keep_dtype = false);

}  // namespace monoflow::models
