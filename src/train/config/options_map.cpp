#include "train/config/options_map.h"

#include <filesystem>

#include "common/error.h"

namespace monoflow::train {

text::TextOptions text_options(const Config& c) {
  text::TextOptions t;
  t.cleaners = c.data.text_cleaners;
  t.symbols = c.data.symbols;
  t.cmudict_path = c.data.cmudict_path;
  t.add_space = c.data.add_space;
  t.add_blank = c.data.add_blank;
  t.espeak_voice = c.data.espeak_voice;
  t.error_on_unknown = c.data.on_unknown_char == "error";
  return t;
}

data::DataOptions data_options(const Config& c) {
  data::DataOptions d;
  d.load_mel_from_disk = c.data.load_mel_from_disk;
  d.training_files = c.data.training_files;
  d.validation_files = c.data.validation_files;
  d.max_wav_value = c.data.max_wav_value;
  d.sampling_rate = c.data.sampling_rate;
  d.filter_length = c.data.filter_length;
  d.hop_length = c.data.hop_length;
  d.win_length = c.data.win_length;
  d.n_mel_channels = c.data.n_mel_channels;
  d.mel_fmin = c.data.mel_fmin;
  d.mel_fmax = c.data.mel_fmax;
  d.add_noise = c.data.add_noise;
  d.n_speakers = c.data.n_speakers;
  d.dataset_dir = c.data.dataset_dir;
  d.validation_size = c.data.validation_size;
  d.on_bad_line = c.data.on_bad_line;
  d.on_rate_mismatch = c.data.on_rate_mismatch;
  d.cache_dir = c.data.cache_dir.empty() ? (std::filesystem::path(c.run.dir) / "cache").string()
                                         : c.data.cache_dir;
  d.max_mel_frames = c.data.max_mel_frames;
  d.split_seed = c.train.seed;
  d.n_sqz = c.model.n_sqz;
  return d;
}

data::LoaderOptions loader_options(const Config& c, bool training) {
  data::LoaderOptions l;
  l.batch_size = c.train.batch_size;
  l.seed = c.train.seed;
  l.shuffle = training;
  l.drop_last = false;
  l.num_workers = c.data.num_workers;
  l.prefetch_batches = c.data.prefetch_batches;
  l.pin_memory = c.train.use_cuda;
  return l;
}

models::GlowTTSOptions model_options(const Config& c, int64_t n_vocab) {
  const auto& m = c.model;
  models::GlowTTSOptions o(n_vocab, c.data.n_mel_channels);
  o.hidden_channels(m.hidden_channels)
      .filter_channels(m.filter_channels)
      .filter_channels_dp(m.filter_channels_dp)
      .kernel_size(m.kernel_size)
      .p_dropout(m.p_dropout)
      .n_blocks_dec(m.n_blocks_dec)
      .n_layers_enc(m.n_layers_enc)
      .n_heads(m.n_heads)
      .p_dropout_dec(m.p_dropout_dec)
      .dilation_rate(m.dilation_rate)
      .kernel_size_dec(m.kernel_size_dec)
      .n_block_layers(m.n_block_layers)
      .n_sqz(m.n_sqz)
      .prenet(m.prenet)
      .mean_only(m.mean_only)
      .hidden_channels_enc(m.hidden_channels_enc)
      .hidden_channels_dec(m.hidden_channels_dec)
      .window_size(m.window_size)
      .n_split(m.n_split)
      .sigmoid_scale(m.sigmoid_scale)
      .block_length(m.block_length)
      .n_speakers(c.data.n_speakers)
      .gin_channels(m.gin_channels);
  return o;
}

torch::Device resolve_device(const std::string& name) {
  const bool cuda = torch::cuda::is_available();
  if (name == "auto") return cuda ? torch::Device(torch::kCUDA, 0) : torch::Device(torch::kCPU);
  if (name == "cpu") return torch::kCPU;
  if (name == "cuda" || name.rfind("cuda:", 0) == 0) {
    if (!cuda) {
      throw UserError("run.device: '" + name + "' but no CUDA GPU is visible (or this build has no "
                      "CUDA); use run.device: cpu or auto");
    }
    const torch::Device d(name);
    if (d.has_index() && d.index() >= static_cast<int>(torch::cuda::device_count())) {
      throw UserError("run.device: '" + name + "' but only " +
                      std::to_string(torch::cuda::device_count()) + " GPU(s) are visible");
    }
    return d.has_index() ? d : torch::Device(torch::kCUDA, 0);
  }
  throw UserError("run.device: unknown device '" + name + "'; use auto, cpu, cuda or cuda:N");
}

align::Backend resolve_backend(const std::string& name, const torch::Device& device) {
  using align::Backend;
  if (name == "auto") {
    if (device.is_cuda()) {
      if (align::backend_available(Backend::kCudaFast)) return Backend::kCudaFast;
      if (align::backend_available(Backend::kCuda)) return Backend::kCuda;
    }
    return Backend::kCpu;
  }
  Backend b;
  try {
    b = align::parse_backend(name);
  } catch (const UserError&) {
    throw UserError("run.align_backend (--align-backend): unknown backend '" + name +
                    "'; use auto, cpu, cuda or cuda-fast");
  }
  if (b != Backend::kCpu && !device.is_cuda()) {
    throw UserError("run.align_backend (--align-backend): '" + name + "' needs the model on a GPU, "
                    "but training runs on the CPU; use cpu (or auto)");
  }
  if (!align::backend_available(b)) {
    throw UserError("run.align_backend (--align-backend): '" + name + "' is not available in this "
                    "build or on this machine (CUDA backends need a CUDA build and a GPU); use cpu");
  }
  return b;
}

std::vector<align::Backend> available_backends(const torch::Device& device) {
  std::vector<align::Backend> out{align::Backend::kCpu};
  if (device.is_cuda()) {
    for (const auto b : {align::Backend::kCuda, align::Backend::kCudaFast}) {
      if (align::backend_available(b)) out.push_back(b);
    }
  }
  return out;
}

}  // namespace monoflow::train
