#include "train/checkpoint.h"

#include <caffe2/serialize/inline_container.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <random>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "common/error.h"
#include "common/tensor_bounds.h"
#include "common/zip_integrity.h"
#include "models/interop/archive_check.h"
#include "models/interop/pickle_reader.h"
#include "train/atomic_file.h"

namespace monoflow::train {
namespace fs = std::filesystem;

namespace {

constexpr const char* kFormat = "monoflow-checkpoint";
constexpr int64_t kVersion = 1;

std::string shape_text(const torch::Tensor& t) {
  std::ostringstream s;
  s << t.sizes();
  return s.str();
}

// "name shape" per parameter and buffer, one a line: what a compatible model must match.
std::string model_signature(const torch::nn::Module& model) {
  std::string out;
  for (const auto& p : model.named_parameters(true)) out += "param " + p.key() + " " + shape_text(p.value()) + "\n";
  for (const auto& b : model.named_buffers(true)) out += "buffer " + b.key() + " " + shape_text(b.value()) + "\n";
  return out;
}

std::vector<std::string> lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

torch::Tensor bytes_tensor(const std::string& s) {
  auto t = torch::empty({static_cast<int64_t>(s.size())}, torch::kUInt8);
  std::copy(s.begin(), s.end(), reinterpret_cast<char*>(t.data_ptr<uint8_t>()));
  return t;
}

std::string tensor_bytes(const torch::Tensor& t) {
  const auto c = t.to(torch::kCPU).contiguous();
  return std::string(reinterpret_cast<const char*>(c.data_ptr<uint8_t>()), c.numel());
}

void write_string(torch::serialize::OutputArchive& a, const std::string& key, const std::string& v) {
  a.write(key, bytes_tensor(v), /*is_buffer=*/true);
}

std::string read_string(torch::serialize::InputArchive& a, const std::string& key) {
  torch::Tensor t;
  a.read(key, t, /*is_buffer=*/true);
  return tensor_bytes(t);
}

int64_t read_int(torch::serialize::InputArchive& a, const std::string& key) {
  torch::Tensor t;
  a.read(key, t, /*is_buffer=*/true);
  return t.item<int64_t>();
}

// What to do about a damaged file. Never "delete it": it may be the only copy of a long run,
// and the damage may be in the copy, not the original.
const char* kWhatToDo =
    "use an earlier checkpoint of the run (the other ckpt_*.pt in its folder; train takes one "
    "with --resume PATH), or copy this one again if it came from elsewhere";

// A checkpoint path must name a file; the archive reader fails obscurely on a directory.
void require_regular_file(const std::string& path) {
  if (!fs::exists(path)) {
    throw FileError(path, 0, "no such checkpoint; check the path, or drop --resume to start a new run");
  }
  if (fs::is_directory(path)) {
    throw FileError(path, 0, "is a directory, not a checkpoint file; pass a ckpt_*.pt file (a run keeps them "
                             "in <run dir>/checkpoints/)");
  }
}

// A Python torch.save file is no damaged checkpoint: say what reads it.
const char* kOfficialFileHint =
    "is a Python torch.save file (an official Glow-TTS checkpoint such as G_*.pth or ddi_G.pth, or a "
    "state_dict), not a monoflow checkpoint: train --init-from FILE starts a new run from its weights, "
    "synthesize --checkpoint FILE --config CONFIG speaks with it, convert_weights FILE checks it; "
    "--resume continues monoflow runs only";

// What a FileError about `path` says after "path: ".
std::string detail_of(const FileError& e, const std::string& path) {
  const std::string what = e.what(), prefix = path + ": ";
  return what.rfind(prefix, 0) == 0 ? what.substr(prefix.size()) : what;
}

[[noreturn]] void damaged(const std::string& path, const std::string& what) {
  throw DamagedCheckpoint(path, 0, what + "; " + kWhatToDo);
}

// The bytes (CRC of every record) and the structure (every storage inside its record, every
// tensor inside its storage) before LibTorch reads anything: its reader trusts both.
void check_integrity(const std::string& path) {
  try {
    zip::verify_file_records(path, kWhatToDo);  // LibTorch's zip reader does not check the CRCs
  } catch (const FileError& e) {
    throw DamagedCheckpoint(e.file(), e.line(), detail_of(e, e.file()));
  }
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    models::check_libtorch_archive(reader, path);
  } catch (const FileError& e) {
    damaged(path, detail_of(e, path));
  } catch (const std::exception&) {
    damaged(path, "corrupt or not a checkpoint (cannot read the archive)");
  }
}

struct OpenedCheckpoint {
  torch::serialize::InputArchive archive;
  CheckpointState state;
  std::string signature;
};

void open_checkpoint(const std::string& path, const torch::Device& device, OpenedCheckpoint& out) {
  check_checkpoint_file(path);
  check_integrity(path);
  try {
    out.archive.load_from(path, device);
  } catch (const std::exception&) {  // c10::Error, or the TorchScript parser's error on mangled code/
    damaged(path, "corrupt or not a checkpoint (cannot read the archive)");
  }
  auto& a = out.archive;
  auto& s = out.state;
  bool ours = false;
  try {
    ours = read_string(a, "format") == kFormat;
  } catch (const std::exception&) {
  }
  if (!ours) {
    throw FileError(path, 0, "a LibTorch archive without monoflow's format tag, so not a monoflow checkpoint (a "
                             "TorchScript model, such as a vocoder, goes to synthesize --vocoder); pass a ckpt_*.pt "
                             "that train wrote");
  }
  try {
    const int64_t version = read_int(a, "version");
    if (version != kVersion) {
      throw FileError(path, 0, "checkpoint format version " + std::to_string(version) +
                                   " is not supported by this build (it reads version " +
                                   std::to_string(kVersion) + "); use the monoflow version that wrote it");
    }
    s.step = read_int(a, "step");
    s.epoch = read_int(a, "epoch");
    s.nonfinite_total = read_int(a, "nonfinite_total");
    s.scheduler = read_string(a, "scheduler");
    s.loader_position = read_string(a, "loader_position");
    s.config_yaml = read_string(a, "config_yaml");
    out.signature = read_string(a, "model_signature");
    torch::Tensor run_id;  // absent in checkpoints written before run ids
    if (a.try_read("run_id", run_id, /*is_buffer=*/true)) s.run_id = tensor_bytes(run_id);
    torch::Tensor dataset;  // absent in checkpoints written before dataset identities
    if (a.try_read("dataset", dataset, /*is_buffer=*/true)) s.dataset = tensor_bytes(dataset);
    torch::serialize::InputArchive rng;
    a.read("rng", rng);
    if (read_int(rng, "has_cpu") != 0) {
      rng.read("cpu", s.rng.cpu, true);
      s.rng.cpu = s.rng.cpu.to(torch::kCPU);
    }
    const int64_t n_cuda = read_int(rng, "cuda_count");
    for (int64_t i = 0; i < n_cuda; ++i) {
      torch::Tensor t;
      rng.read("cuda_" + std::to_string(i), t, true);
      s.rng.cuda.push_back(t.to(torch::kCPU));
    }
  } catch (const UserError&) {
    throw;
  } catch (const std::exception&) {
    damaged(path, "corrupt checkpoint (missing or unreadable entries)");
  }
}

// Optimizer::load moves the saved state tensors in as they are, and the fused Adam kernel
// walks each moment with its parameter's element count: a moment of another shape, dtype or
// layout would be read and written out of bounds. Checked before the first step; on a
// mismatch the state is dropped, so that the optimizer is never left holding it.
void check_optimizer_state(torch::optim::Optimizer& optimizer, const torch::nn::Module& model,
                           const std::string& path) {
  std::map<const void*, std::string> names;
  for (const auto& p : model.named_parameters(true)) names[p.value().unsafeGetTensorImpl()] = p.key();
  std::string problem;
  for (size_t g = 0; g < optimizer.param_groups().size() && problem.empty(); ++g) {
    const auto& group = optimizer.param_groups()[g];
    const auto* adam_options = dynamic_cast<const torch::optim::AdamOptions*>(&group.options());
    for (const torch::Tensor& p : group.params()) {
      auto it = optimizer.state().find(p.unsafeGetTensorImpl());
      if (it == optimizer.state().end()) continue;  // none yet: the first step creates it
      const std::string name = names.count(p.unsafeGetTensorImpl()) ? names[p.unsafeGetTensorImpl()] : "?";
      const auto* adam = dynamic_cast<const torch::optim::AdamParamState*>(it->second.get());
      if (adam == nullptr || adam_options == nullptr) {
        problem = "parameter '" + name + "' has optimizer state of another kind than Adam's";
        break;
      }
      auto check = [&](const torch::Tensor& t, const char* what, bool required) {
        if (!problem.empty() || (!t.defined() && !required)) return;
        std::string wrong;
        if (!t.defined()) {
          wrong = "is missing";
        } else if (t.sizes() != p.sizes() || t.scalar_type() != p.scalar_type() || t.device() != p.device()) {
          wrong = "is " + std::string(c10::toString(t.scalar_type())) + " " + shape_text(t) + " on " + t.device().str() +
                  ", the parameter " + c10::toString(p.scalar_type()) + " " + shape_text(p) + " on " + p.device().str();
        } else if (!tensor_storage_problem(t).empty()) {
          wrong = tensor_storage_problem(t);
        } else if (!t.is_contiguous()) {
          wrong = "is not contiguous (strides " + c10::str(t.strides()) + ")";
        }
        if (!wrong.empty()) problem = "optimizer state '" + std::string(what) + "' of parameter '" + name + "' " + wrong;
      };
      check(adam->exp_avg(), "exp_avg", true);
      check(adam->exp_avg_sq(), "exp_avg_sq", true);
      check(adam->max_exp_avg_sq(), "max_exp_avg_sq", adam_options->amsgrad());
      if (problem.empty() && adam->step() < 0) {
        problem = "optimizer step count " + std::to_string(adam->step()) + " of parameter '" + name + "' is negative";
      }
      if (!problem.empty()) break;
    }
  }
  if (!problem.empty()) {
    optimizer.state().clear();
    damaged(path, "corrupt checkpoint: " + problem);
  }
}

}  // namespace

CheckpointFormat checkpoint_format(const std::string& path) {
  char head[4] = {0, 0, 0, 0};
  {
    std::ifstream in(path, std::ios::binary);
    in.read(head, sizeof head);
    if (in.gcount() < 2) return CheckpointFormat::kUnknown;
  }
  if (static_cast<unsigned char>(head[0]) == 0x80 && head[1] == 0x02) return CheckpointFormat::kTorchSave;  // legacy
  if (std::string(head, 4) != std::string("PK\x03\x04", 4)) return CheckpointFormat::kUnknown;
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    // LibTorch's archives (ours) carry TorchScript's constants; Python's torch.save does not.
    if (reader.hasRecord("constants.pkl")) return CheckpointFormat::kMonoflow;
    if (reader.hasRecord("data.pkl")) return CheckpointFormat::kTorchSave;
  } catch (const std::exception&) {
  }
  return CheckpointFormat::kUnknown;
}

void check_checkpoint_file(const std::string& path) {
  require_regular_file(path);
  if (checkpoint_format(path) == CheckpointFormat::kTorchSave) throw FileError(path, 0, kOfficialFileHint);
}

std::string checkpoint_filename(int64_t step) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "ckpt_%09lld.pt", static_cast<long long>(step));
  return buf;
}

std::vector<std::string> list_checkpoints(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) return out;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() == 17 && name.rfind("ckpt_", 0) == 0 && name.substr(14) == ".pt" &&
        std::all_of(name.begin() + 5, name.begin() + 14, ::isdigit)) {
      out.push_back(entry.path().string());
    }
  }
  std::sort(out.begin(), out.end());  // fixed-width step numbers sort by step
  return out;
}

std::string newest_checkpoint(const std::string& dir) {
  const auto all = list_checkpoints(dir);
  return all.empty() ? std::string() : all.back();
}

std::string new_run_id() {
  std::random_device device;
  const uint64_t mixed = (static_cast<uint64_t>(device()) << 32 ^ device()) ^
                         static_cast<uint64_t>(std::chrono::system_clock::now().time_since_epoch().count()) ^
                         (static_cast<uint64_t>(getpid()) << 17);
  char buf[20];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(mixed));
  return buf;
}

std::string checkpoint_run_id(const std::string& path) {
  try {
    caffe2::serialize::PyTorchStreamReader reader(path);
    auto pkl = reader.getRecord("data.pkl");
    const std::string program(static_cast<const char*>(std::get<0>(pkl).get()), std::get<1>(pkl));
    const models::StorageLoader no_data = [](const models::StorageRef& ref) {
      return c10::Storage(c10::Storage::use_byte_size_t(), 0, at::DataPtr(nullptr, c10::Device(c10::kCPU)), nullptr,
                          false);
    };
    for (const auto& t : models::pickled_tensors(program, no_data, path)) {
      if (t.path != "run_id") continue;
      auto rec = reader.getRecord("data/" + t.storage.key);
      const auto* bytes = static_cast<const char*>(std::get<0>(rec).get());
      const int64_t offset = t.tensor.storage_offset(), n = t.tensor.numel();
      if (t.tensor.dim() != 1 || t.tensor.element_size() != 1 || t.tensor.stride(0) != 1 || offset < 0 || n > 64 ||
          static_cast<uint64_t>(offset) + static_cast<uint64_t>(n) > std::get<1>(rec)) {
        return "";
      }
      return std::string(bytes + offset, static_cast<size_t>(n));
    }
  } catch (const std::exception&) {  // unreadable: not known to be this run's
  }
  return "";
}

namespace {

// checkpoint_run_id by path, remembered while the file stays the same one (device, inode, size,
// modification time): pruning after every save would otherwise open every checkpoint of the
// folder each time, quadratic in a run that keeps many (~8 ms a file).
std::string cached_run_id(const std::string& path) {
  struct Known {
    dev_t device;
    ino_t inode;
    off_t size;
    int64_t mtime_ns;
    std::string run_id;
  };
  static std::mutex mutex;
  static std::map<std::string, Known> known;
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "";
  const int64_t mtime_ns = static_cast<int64_t>(st.st_mtim.tv_sec) * 1000000000 + st.st_mtim.tv_nsec;
  {
    std::lock_guard<std::mutex> lock(mutex);
    const auto it = known.find(path);
    if (it != known.end() && it->second.device == st.st_dev && it->second.inode == st.st_ino &&
        it->second.size == st.st_size && it->second.mtime_ns == mtime_ns) {
      return it->second.run_id;
    }
  }
  std::string id = checkpoint_run_id(path);
  std::lock_guard<std::mutex> lock(mutex);
  known[path] = Known{st.st_dev, st.st_ino, st.st_size, mtime_ns, id};
  return id;
}

}  // namespace

void prune_checkpoints(const std::string& dir, int keep, const std::string& run_id) {
  std::vector<std::string> own;
  const auto all = list_checkpoints(dir);
  // With no more checkpoints than `keep` in the folder, none of the run's can be over.
  if (keep > 0 && all.size() > static_cast<size_t>(keep)) {
    for (const auto& path : all) {
      if (!run_id.empty() && cached_run_id(path) == run_id) own.push_back(path);
    }
  }
  std::error_code ec;
  for (size_t i = 0; keep > 0 && i + static_cast<size_t>(keep) < own.size(); ++i) fs::remove(own[i], ec);
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    // Leftovers of a writer killed mid-write (ours carry the writer's pid, never our own now).
    if (is_temporary_file(name) && name.find("ckpt_") != std::string::npos &&
        name.find(".tmp." + std::to_string(getpid())) == std::string::npos) {
      fs::remove(entry.path(), ec);
    }
  }
}

void save_checkpoint(const std::string& path, const torch::nn::Module& model,
                     const torch::optim::Optimizer& optimizer, const CheckpointState& state) {
  write_checkpoint(path, checkpoint_contents(model, optimizer, state));
}

CheckpointContents checkpoint_contents(const torch::nn::Module& model, const torch::optim::Optimizer& optimizer,
                                       const CheckpointState& state) {
  CheckpointContents c;
  c.state = state;
  c.model_signature = model_signature(model);
  for (const auto& p : model.named_parameters(true)) c.parameters.emplace_back(p.key(), p.value());
  for (const auto& b : model.named_buffers(true)) c.buffers.emplace_back(b.key(), b.value());
  c.write_optimizer = [&optimizer](torch::serialize::OutputArchive& a) { optimizer.save(a); };
  return c;
}

namespace {

// A parameter that views part of a larger storage (FusedAdam's flat buffer) as a copy of its
// own: the archive writes a tensor's whole storage.
torch::Tensor compact(const torch::Tensor& t) {
  return t.defined() && t.storage().nbytes() > t.nbytes() ? t.clone() : t;
}

}  // namespace

void write_checkpoint(const std::string& path, const CheckpointContents& contents) {
  torch::NoGradGuard no_grad;
  const CheckpointState& state = contents.state;
  torch::serialize::OutputArchive a;
  write_string(a, "format", kFormat);
  a.write("version", torch::tensor(kVersion), true);
  a.write("step", torch::tensor(state.step), true);
  a.write("epoch", torch::tensor(state.epoch), true);
  a.write("nonfinite_total", torch::tensor(state.nonfinite_total), true);
  write_string(a, "scheduler", state.scheduler);
  write_string(a, "loader_position", state.loader_position);
  write_string(a, "config_yaml", state.config_yaml);
  write_string(a, "model_signature", contents.model_signature);
  write_string(a, "run_id", state.run_id);
  write_string(a, "dataset", state.dataset);

  torch::serialize::OutputArchive weights;
  for (const auto& [name, t] : contents.parameters) weights.write(name, compact(t));
  for (const auto& [name, t] : contents.buffers) weights.write(name, t, true);
  a.write("model", weights);

  torch::serialize::OutputArchive opt;
  contents.write_optimizer(opt);
  a.write("optimizer", opt);

  torch::serialize::OutputArchive rng;
  rng.write("has_cpu", torch::tensor(static_cast<int64_t>(state.rng.cpu.defined())), true);
  if (state.rng.cpu.defined()) rng.write("cpu", state.rng.cpu, true);
  rng.write("cuda_count", torch::tensor(static_cast<int64_t>(state.rng.cuda.size())), true);
  for (size_t i = 0; i < state.rng.cuda.size(); ++i) rng.write("cuda_" + std::to_string(i), state.rng.cuda[i], true);
  a.write("rng", rng);

  std::ostringstream bytes;
  a.save_to(bytes);
  write_file_atomically(path, bytes.str());
}

CheckpointState read_checkpoint_state(const std::string& path) {
  OpenedCheckpoint opened;
  open_checkpoint(path, torch::kCPU, opened);
  return opened.state;
}

std::vector<std::pair<std::string, torch::Tensor>> read_checkpoint_weights(const std::string& path,
                                                                           CheckpointState* state) {
  OpenedCheckpoint opened;
  open_checkpoint(path, torch::kCPU, opened);
  std::vector<std::pair<std::string, torch::Tensor>> out;
  try {
    torch::serialize::InputArchive weights;
    opened.archive.read("model", weights);
    for (const std::string& line : lines(opened.signature)) {  // "param|buffer NAME SHAPE"
      const size_t a = line.find(' '), b = line.find(' ', a + 1);
      if (a == std::string::npos || b == std::string::npos) {
        damaged(path, "corrupt checkpoint (unreadable model signature line '" + line + "')");
      }
      const std::string name = line.substr(a + 1, b - a - 1);
      torch::Tensor t;
      weights.read(name, t, /*is_buffer=*/line.compare(0, a, "buffer") == 0);
      check_tensor_in_storage(t, path, name);
      if (shape_text(t) != line.substr(b + 1)) {
        damaged(path, "corrupt checkpoint: tensor '" + name + "' has shape " + shape_text(t) + ", its signature says " +
                          line.substr(b + 1));
      }
      out.emplace_back(name, t.to(torch::kCPU));
    }
  } catch (const UserError&) {
    throw;
  } catch (const std::exception&) {
    damaged(path, "corrupt checkpoint (weights unreadable)");
  }
  if (state != nullptr) *state = opened.state;
  return out;
}

CheckpointState load_checkpoint(const std::string& path, torch::nn::Module& model,
                                torch::optim::Optimizer* optimizer) {
  const auto params = model.named_parameters(true);
  const torch::Device device = params.is_empty() ? torch::Device(torch::kCPU) : params.begin()->value().device();
  OpenedCheckpoint opened;
  open_checkpoint(path, device, opened);

  const std::string expected = model_signature(model);
  if (opened.signature != expected) {
    const auto have = lines(opened.signature), want = lines(expected);
    std::string detail;
    for (size_t i = 0; i < std::max(have.size(), want.size()) && detail.empty(); ++i) {
      const std::string h = i < have.size() ? have[i] : "(nothing)";
      const std::string w = i < want.size() ? want[i] : "(nothing)";
      if (h != w) detail = "the checkpoint has '" + h + "' where the model built from the config has '" + w + "'";
    }
    throw FileError(path, 0, "incompatible checkpoint: " + detail +
                                 "; train with the config the checkpoint was made with (its snapshot "
                                 "is config.yaml in the run directory) or start a new run directory");
  }

  torch::NoGradGuard no_grad;
  try {
    torch::serialize::InputArchive weights;
    opened.archive.read("model", weights);
    for (auto& p : model.named_parameters(true)) {
      torch::Tensor t;
      weights.read(p.key(), t);
      check_tensor_in_storage(t, path, p.key());
      p.value().copy_(t);
    }
    for (auto& b : model.named_buffers(true)) {
      torch::Tensor t;
      weights.read(b.key(), t, true);
      check_tensor_in_storage(t, path, b.key());
      b.value().copy_(t);
    }
    if (optimizer != nullptr) {
      torch::serialize::InputArchive opt;
      opened.archive.read("optimizer", opt);
      optimizer->load(opt);
      check_optimizer_state(*optimizer, model, path);
    }
  } catch (const UserError&) {
    throw;
  } catch (const std::exception&) {  // c10::Error, and std::stoull's on a mangled parameter key
    if (optimizer != nullptr) optimizer->state().clear();
    damaged(path, "corrupt checkpoint (weights or optimizer state unreadable)");
  }
  return opened.state;
}

int64_t completed_epochs(const CheckpointState& state) {
  std::istringstream in(state.loader_position);  // "epoch batch", as the trainer writes it
  int64_t epoch = 0, batch = 0;
  if (!(in >> epoch >> batch) || epoch < 0 || batch < 0) return state.epoch;
  // A position of {e, n} with n = the batches of an epoch (the checkpoint followed the epoch's
  // last step, before the loader moved on to {e + 1, 0}): epoch e is complete too.
  const int64_t before = state.step - batch;  // the steps of the epochs before this one
  if (epoch > 0 && before > 0 && before % epoch == 0 && before / epoch == batch) return epoch + 1;
  return epoch;
}

}  // namespace monoflow::train
