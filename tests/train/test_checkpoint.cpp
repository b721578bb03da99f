#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>

#include "common/error.h"
#include "common/tensor_bounds.h"
#include "common/zip_integrity.h"
#include "test_util.h"
#include "train/atomic_file.h"
#include "train/checkpoint.h"
#include "train/fused_adam.h"
#include "zip_edit.h"

namespace monoflow::train {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

struct TinyImpl : torch::nn::Module {
  explicit TinyImpl(int64_t width = 4, int64_t big = 0) {
    fc = register_module("fc", torch::nn::Linear(width, 3));
    scale = register_buffer("scale", torch::arange(3, torch::kFloat32));
    if (big > 0) blob = register_parameter("blob", torch::randn({big}));
  }
  torch::Tensor forward(const torch::Tensor& x) { return fc->forward(x) * scale; }
  torch::nn::Linear fc{nullptr};
  torch::Tensor scale, blob;
};
TORCH_MODULE(Tiny);

void train_one_step(Tiny& m, torch::optim::Adam& opt, int seed) {
  torch::manual_seed(seed);
  opt.zero_grad();
  m->forward(torch::randn({5, 4})).pow(2).sum().backward();
  opt.step();
}

CheckpointState some_state() {
  CheckpointState s;
  s.step = 42;
  s.epoch = 3;
  s.nonfinite_total = 2;
  s.scheduler = "noam";
  s.loader_position = std::string("pos\0tion", 8);
  s.config_yaml = "train:\n  batch_size: 8\n";
  torch::manual_seed(99);
  s.rng = capture_rng();
  return s;
}

bool same_params(Tiny& a, Tiny& b) {
  const auto pa = a->named_parameters(), pb = b->named_parameters();
  for (const auto& p : pa) {
    if (!torch::equal(p.value(), pb[p.key()])) return false;
  }
  return true;
}

TEST(Checkpoint, RoundTripRestoresEverything) {
  TempDir dir;
  torch::manual_seed(1);
  Tiny a;
  torch::optim::Adam opt_a(a->parameters(), torch::optim::AdamOptions(1e-2).betas({0.9, 0.98}).eps(1e-9));
  train_one_step(a, opt_a, 5);
  train_one_step(a, opt_a, 6);
  const std::string path = dir / checkpoint_filename(42);
  save_checkpoint(path, *a, opt_a, some_state());

  torch::manual_seed(2);
  Tiny b;  // different initial weights
  b->scale.fill_(-1);
  torch::optim::Adam opt_b(b->parameters(), torch::optim::AdamOptions(1e-2).betas({0.9, 0.98}).eps(1e-9));
  const CheckpointState s = load_checkpoint(path, *b, &opt_b);
  EXPECT_EQ(s.step, 42);
  EXPECT_EQ(s.epoch, 3);
  EXPECT_EQ(s.nonfinite_total, 2);
  EXPECT_EQ(s.scheduler, "noam");
  EXPECT_EQ(s.loader_position, std::string("pos\0tion", 8));
  EXPECT_EQ(s.config_yaml, "train:\n  batch_size: 8\n");
  EXPECT_TRUE(same_params(a, b));
  EXPECT_TRUE(torch::equal(b->scale, a->scale));

  // The optimizer's moments came back: one more identical step gives identical weights.
  train_one_step(a, opt_a, 7);
  train_one_step(b, opt_b, 7);
  EXPECT_TRUE(same_params(a, b));

  // The RNG state restores the generator to where it was captured.
  torch::manual_seed(99);
  const torch::Tensor expected = torch::rand({4});
  torch::manual_seed(0);
  restore_rng(s.rng);
  EXPECT_TRUE(torch::equal(torch::rand({4}), expected));
}

// Parameters that view one larger buffer (FusedAdam::flatten puts them there) are written as
// copies of their own: the archive writes a tensor's whole storage, here 64k values per
// parameter, and they load back as they were.
TEST(Checkpoint, ParametersViewingOneBufferAreWrittenCompact) {
  TempDir dir;
  torch::manual_seed(3);
  Tiny a;
  torch::optim::Adam opt(a->parameters(), torch::optim::AdamOptions(1e-2));
  train_one_step(a, opt, 5);
  const torch::Tensor buffer = torch::zeros({1 << 16});
  int64_t offset = 0;
  {
    torch::NoGradGuard no_grad;
    for (auto& p : a->parameters()) {
      auto view = buffer.narrow(0, offset, p.numel()).view_as(p);
      view.copy_(p);
      p.set_data(view);
      offset += p.numel();
    }
  }
  const std::string path = dir / checkpoint_filename(1);
  save_checkpoint(path, *a, opt, some_state());
  EXPECT_LT(fs::file_size(path), 64u * 1024);  // two parameters as views: 512 KiB each
  Tiny b;
  torch::optim::Adam opt_b(b->parameters(), torch::optim::AdamOptions(1e-2));
  load_checkpoint(path, *b, &opt_b);
  EXPECT_TRUE(same_params(a, b));
}

// The official Glow-TTS's "iteration" is the epochs completed (G_<epoch>.pth after each epoch):
// convert_weights --to-official --checkpoint writes it from the loader's position.
TEST(Checkpoint, CompletedEpochsIsWhatTheOfficialIterationCounts) {
  auto at = [](int64_t step, const std::string& position, int64_t epoch = 0) {
    CheckpointState s;
    s.step = step;
    s.loader_position = position;
    s.epoch = epoch;
    return completed_epochs(s);
  };
  EXPECT_EQ(at(42, "4 2"), 4);     // 10 batches an epoch: step 42 is batch 2 of the fifth epoch
  EXPECT_EQ(at(40, "4 0"), 4);     // the fifth epoch has not started
  EXPECT_EQ(at(50, "4 10"), 5);    // its last batch done, the loader not yet moved on
  EXPECT_EQ(at(7, "0 7"), 0);      // within the first epoch (its length unknown)
  EXPECT_EQ(at(300, "3 0"), 3);
  EXPECT_EQ(at(12, "", 2), 2);     // no position: the state's epoch
  EXPECT_EQ(at(12, "x y", 1), 1);
}

TEST(Checkpoint, ListNewestAndPruneKeepsK) {
  TempDir dir;
  Tiny m;
  torch::optim::Adam opt(m->parameters());
  for (int step : {5, 100, 20, 1000}) {
    CheckpointState s;
    s.step = step;
    s.run_id = "run-a";
    save_checkpoint(dir / checkpoint_filename(step), *m, opt, s);
  }
  std::ofstream(dir / ".ckpt_000000007.pt.tmp.999999") << "partial";
  std::ofstream(dir / "notes.txt") << "not a checkpoint";
  auto all = list_checkpoints(dir.path());
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(fs::path(all.front()).filename(), "ckpt_000000005.pt");
  EXPECT_EQ(fs::path(newest_checkpoint(dir.path())).filename(), "ckpt_000001000.pt");
  prune_checkpoints(dir.path(), 2, "run-a");
  all = list_checkpoints(dir.path());
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(fs::path(all[0]).filename(), "ckpt_000000100.pt");
  EXPECT_EQ(fs::path(all[1]).filename(), "ckpt_000001000.pt");
  EXPECT_FALSE(fs::exists(dir / ".ckpt_000000007.pt.tmp.999999"));
  EXPECT_TRUE(fs::exists(dir / "notes.txt"));
  EXPECT_EQ(newest_checkpoint(dir / "missing"), "");
}

void expect_refused(const std::string& path, Tiny& m, const std::string& words) {
  try {
    load_checkpoint(path, *m, nullptr);
    FAIL() << "loaded " << path;
  } catch (const FileError& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_NE(std::string(e.what()).find(words), std::string::npos) << e.what();
  }
}

TEST(Checkpoint, CorruptFilesAreRefusedByName) {
  TempDir dir;
  torch::manual_seed(1);
  Tiny m;
  torch::optim::Adam opt(m->parameters());
  const std::string good = dir / checkpoint_filename(1);
  save_checkpoint(good, *m, opt, some_state());
  const std::string bytes = testing::read_text(good);
  const auto before = m->fc->weight.clone();

  const std::string truncated = dir / "truncated.pt";
  std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  expect_refused(truncated, m, "corrupt");

  const std::string garbage = dir / "garbage.pt";
  std::ofstream(garbage, std::ios::binary) << "this is not a checkpoint at all";
  expect_refused(garbage, m, "corrupt");

  expect_refused(dir / "missing.pt", m, "no such checkpoint");

  // A LibTorch archive that is not ours.
  const std::string foreign = dir / "foreign.pt";
  torch::serialize::OutputArchive a;
  a.write("weight", torch::ones({2}));
  a.save_to(foreign);
  expect_refused(foreign, m, "not a monoflow checkpoint");

  EXPECT_TRUE(torch::equal(m->fc->weight, before)) << "a refused load must not touch the model";
}

// The byte offset of `needle` in `hay` (which must hold it once).
size_t find_once(const std::string& hay, const std::string& needle) {
  const size_t at = hay.find(needle);
  EXPECT_NE(at, std::string::npos);
  EXPECT_EQ(hay.find(needle, at + 1), std::string::npos);
  return at;
}

TEST(Checkpoint, FlippedByteInATensorFailsItsCrcNamingFileAndRecord) {
  TempDir dir;
  torch::manual_seed(1);
  Tiny m(4, 64);
  m->blob.data().copy_(torch::arange(64, torch::kFloat32) * 0.125 + 1000);  // findable bytes
  torch::optim::Adam opt(m->parameters());
  const std::string good = dir / checkpoint_filename(1);
  save_checkpoint(good, *m, opt, some_state());
  std::string bytes = testing::read_text(good);
  const auto blob = m->blob.contiguous();
  const size_t at = find_once(bytes, std::string(static_cast<const char*>(blob.data_ptr()), 64 * 4));
  bytes[at + 101] ^= 0x10;  // one bit of one weight: a plausible value, only the CRC can tell
  const std::string flipped = dir / checkpoint_filename(2);
  std::ofstream(flipped, std::ios::binary) << bytes;

  const auto before = m->blob.clone();
  expect_refused(flipped, m, "fails its CRC-32 check");
  try {
    read_checkpoint_state(flipped);  // synthesize's first read
    FAIL() << "read the state of a damaged checkpoint";
  } catch (const FileError& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("record '"), std::string::npos) << what;
    EXPECT_NE(what.find("earlier checkpoint"), std::string::npos) << what;
    EXPECT_EQ(what.find("delete"), std::string::npos) << "never advise deleting the user's file: " << what;
  }
  EXPECT_TRUE(torch::equal(m->blob, before));
  EXPECT_NO_THROW(load_checkpoint(good, *m, nullptr));
}

TEST(Checkpoint, ADirectoryIsAClearError) {
  TempDir dir;
  Tiny m;
  expect_refused(dir.path(), m, "is a directory, not a checkpoint file");
  try {
    read_checkpoint_state(dir.path());
    FAIL();
  } catch (const FileError& e) {
    EXPECT_EQ(e.file(), dir.path());
  }
}

TEST(ZipIntegrity, Crc32IsTheZipOne) {
  EXPECT_EQ(zip::crc32("123456789", 9), 0xCBF43926u);  // the standard check value
  EXPECT_EQ(zip::crc32("", 0), 0u);
  const uint32_t first = zip::crc32("12345", 5);
  EXPECT_EQ(zip::crc32("6789", 4, first), 0xCBF43926u);  // chunked = whole
}

TEST(ZipIntegrity, TruncatedArchiveIsRefused) {
  TempDir dir;
  Tiny m;
  torch::optim::Adam opt(m->parameters());
  const std::string good = dir / checkpoint_filename(1);
  save_checkpoint(good, *m, opt, some_state());
  const std::string bytes = testing::read_text(good);
  EXPECT_NO_THROW(zip::verify_records(bytes.data(), bytes.size(), "x.pt"));
  EXPECT_THROW(zip::verify_records(bytes.data(), bytes.size() - 30, "x.pt"), FileError);
  EXPECT_THROW(zip::verify_records(bytes.data(), 10, "x.pt"), FileError);
}

TEST(TensorBounds, OffsetsShapesAndStridesMustStayInsideTheStorage) {
  auto base = torch::arange(10, torch::kFloat32);
  EXPECT_EQ(tensor_storage_problem(base), "");
  // As a file can state them: offset, sizes and strides set without LibTorch's checks.
  auto view = [&](int64_t offset, std::vector<int64_t> sizes, std::vector<int64_t> strides) {
    auto t = torch::empty({0}, torch::kFloat32);
    t.unsafeGetTensorImpl()->set_storage_keep_dtype(base.storage());
    t.unsafeGetTensorImpl()->set_sizes_and_strides(sizes, strides);
    t.unsafeGetTensorImpl()->set_storage_offset(offset);
    return t;
  };
  EXPECT_EQ(tensor_storage_problem(view(6, {4}, {1})), "");           // the last 4 elements
  EXPECT_NE(tensor_storage_problem(view(7, {4}, {1})), "");           // one past the end
  EXPECT_NE(tensor_storage_problem(view(1000, {2}, {1})), "");        // far past it
  EXPECT_NE(tensor_storage_problem(view(0, {2, 5}, {6, 1})), "");     // strides reach past it
  EXPECT_EQ(tensor_storage_problem(view(0, {2, 5}, {5, 1})), "");
  EXPECT_EQ(tensor_storage_problem(view(50, {0, 3}, {3, 1})), "");    // empty: touches nothing
  EXPECT_NE(tensor_storage_problem(view(0, {2}, {INT64_MAX})), "");   // overflow
  EXPECT_NE(tensor_storage_problem(base, 38), "");                     // not whole floats
  try {
    check_tensor_in_storage(view(7, {4}, {1}), "w.pt", "encoder.w");
    FAIL();
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("w.pt: corrupt file: tensor 'encoder.w': storage offset 7"),
              std::string::npos)
        << e.what();
  }
}

TEST(Checkpoint, IncompatibleModelIsRefusedNamingTheParameter) {
  TempDir dir;
  Tiny small(4);
  torch::optim::Adam opt(small->parameters());
  const std::string path = dir / checkpoint_filename(1);
  save_checkpoint(path, *small, opt, some_state());
  Tiny wide(6);
  expect_refused(path, wide, "incompatible checkpoint");
  expect_refused(path, wide, "fc.weight");
}

// A writer killed in the middle of writing must leave the previous checkpoint loadable and no
// half-written file under a checkpoint name. The kill is made deterministic with a file-size
// limit: the child's write() past RLIMIT_FSIZE raises SIGXFSZ, which terminates it right there,
// after exactly `limit` bytes of the new checkpoint reached the disk.
TEST(Checkpoint, KillDuringWriteLeavesThePreviousOneLoadable) {
  TempDir dir;
  torch::manual_seed(1);
  Tiny first(4, 1 << 20);  // 4 MiB of weights
  torch::optim::Adam opt(first->parameters());
  CheckpointState s = some_state();
  s.step = 1;
  save_checkpoint(dir / checkpoint_filename(1), *first, opt, s);
  const auto full_size = static_cast<rlim_t>(fs::file_size(dir / checkpoint_filename(1)));

  // The state (with its RNG capture, which touches CUDA where there is a GPU) is made before the
  // fork: a forked child cannot use CUDA once the parent has initialised it.
  CheckpointState s2 = some_state();
  s2.step = 2;
  auto write_second = [&](rlim_t limit) {
    const pid_t pid = fork();
    if (pid == 0) {
      const struct rlimit no_core {0, 0}, size {limit, limit};
      setrlimit(RLIMIT_CORE, &no_core);
      if (limit != RLIM_INFINITY) setrlimit(RLIMIT_FSIZE, &size);
      auto cpu_gen = at::detail::getDefaultCPUGenerator();
      cpu_gen.set_current_seed(2);  // the CPU generator only, see above
      Tiny second(4, 1 << 20);
      torch::optim::Adam opt2(second->parameters());
      save_checkpoint(dir / checkpoint_filename(2), *second, opt2, s2);
      _exit(0);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
  };

  for (const rlim_t limit : {rlim_t{0}, rlim_t{4096}, full_size / 2, full_size - 1}) {
    const int status = write_second(limit);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGXFSZ) << "limit " << limit << " status " << status;
    // The dead writer's partial temp file is there, with exactly `limit` bytes...
    int temps = 0;
    for (const auto& e : fs::directory_iterator(dir.path())) {
      if (!is_temporary_file(e.path().filename().string())) continue;
      ++temps;
      EXPECT_EQ(fs::file_size(e.path()), limit);
    }
    EXPECT_EQ(temps, 1) << "limit " << limit;
    // ...but under checkpoint names there is only the previous one, and it loads intact.
    const auto all = list_checkpoints(dir.path());
    ASSERT_EQ(all.size(), 1u) << "limit " << limit;
    EXPECT_EQ(fs::path(newest_checkpoint(dir.path())).filename(), checkpoint_filename(1));
    Tiny probe(4, 1 << 20);
    EXPECT_EQ(load_checkpoint(all[0], *probe, nullptr).step, 1);
    EXPECT_TRUE(same_params(probe, first));
    prune_checkpoints(dir.path(), 10, "");  // clears the dead writer's temp file
  }
  // Without the limit the same writer completes and its checkpoint becomes the newest.
  const int status = write_second(RLIM_INFINITY);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  EXPECT_EQ(fs::path(newest_checkpoint(dir.path())).filename(), checkpoint_filename(2));
  Tiny probe(4, 1 << 20);
  EXPECT_EQ(load_checkpoint(newest_checkpoint(dir.path()), *probe, nullptr).step, 2);
  for (const auto& e : fs::directory_iterator(dir.path())) EXPECT_FALSE(is_temporary_file(e.path().filename().string()));
}

// Writes a small model's checkpoint of `step` into `dir`, with `run` as its run id.
class RunCheckpoints {
 public:
  explicit RunCheckpoints(const TempDir& dir) : dir_(dir), opt_(model_->parameters()) {}
  void operator()(int step, const std::string& run) const {
    CheckpointState s;
    s.step = step;
    s.run_id = run;
    save_checkpoint(dir_ / checkpoint_filename(step), *model_, opt_, s);
  }

 private:
  const TempDir& dir_;
  Tiny model_;
  torch::optim::Adam opt_;
};

// Pruning deletes only the checkpoints its own run wrote: not another run's (copied in, or
// the future a resume from an older checkpoint abandoned), not one without a run id (older
// monoflow), not a file it cannot read, and never a foreign file in the folder.
TEST(Checkpoint, PruningTouchesOnlyItsOwnRunsCheckpoints) {
  TempDir dir;
  const RunCheckpoints save(dir);
  save(1, "");          // no id: written before run ids
  save(2, "other-run");
  save(3, "mine");
  save(4, "mine");
  save(5, "mine");
  save(9, "other-run");  // newer than all of mine
  std::ofstream(dir / checkpoint_filename(6), std::ios::binary) << "unreadable";
  std::ofstream(dir / "ckpt_best.pt") << "a user's file";
  EXPECT_EQ(checkpoint_run_id(dir / checkpoint_filename(4)), "mine");
  EXPECT_EQ(checkpoint_run_id(dir / checkpoint_filename(1)), "");
  EXPECT_EQ(checkpoint_run_id(dir / checkpoint_filename(6)), "");
  EXPECT_EQ(checkpoint_run_id(dir / "missing.pt"), "");

  prune_checkpoints(dir.path(), 2, "mine");
  std::vector<std::string> left;
  for (const auto& p : list_checkpoints(dir.path())) left.push_back(fs::path(p).filename().string());
  EXPECT_EQ(left, (std::vector<std::string>{checkpoint_filename(1), checkpoint_filename(2), checkpoint_filename(4),
                                            checkpoint_filename(5), checkpoint_filename(6), checkpoint_filename(9)}));
  EXPECT_TRUE(fs::exists(dir / "ckpt_best.pt"));
  // Another run prunes its own only; an empty id prunes nothing.
  prune_checkpoints(dir.path(), 1, "other-run");
  EXPECT_FALSE(fs::exists(dir / checkpoint_filename(2)));
  EXPECT_TRUE(fs::exists(dir / checkpoint_filename(9)));
  prune_checkpoints(dir.path(), 1, "");
  EXPECT_EQ(list_checkpoints(dir.path()).size(), 5u);
  EXPECT_NE(new_run_id(), new_run_id());
  EXPECT_EQ(new_run_id().size(), 16u);
}

// Pruning remembers which run each file belongs to, but not past the file: one replaced by
// another run's checkpoint under the same name is read again.
TEST(Checkpoint, PruningRereadsAFileReplacedUnderTheSameName) {
  TempDir dir;
  const RunCheckpoints save(dir);
  save(1, "mine");
  save(2, "mine");
  save(3, "mine");
  prune_checkpoints(dir.path(), 5, "mine");  // fewer than 5: nothing to read or delete
  EXPECT_EQ(list_checkpoints(dir.path()).size(), 3u);
  prune_checkpoints(dir.path(), 2, "mine");  // reads all three, deletes step 1
  EXPECT_FALSE(fs::exists(dir / checkpoint_filename(1)));
  save(2, "theirs");  // the same name, another run's file now
  save(4, "mine");
  prune_checkpoints(dir.path(), 1, "mine");
  EXPECT_TRUE(fs::exists(dir / checkpoint_filename(2))) << "another run's file was deleted as ours";
  EXPECT_FALSE(fs::exists(dir / checkpoint_filename(3)));
  EXPECT_TRUE(fs::exists(dir / checkpoint_filename(4)));
}

// A model with a buffer that is a view at offset 5 of a 13-element storage, so that its
// offset (K 5) and its storage's element count (K 13) are findable in the pickle.
struct WindowedImpl : torch::nn::Module {
  WindowedImpl() {
    fc = register_module("fc", torch::nn::Linear(4, 3));
    window = register_buffer("window", torch::arange(13, torch::kFloat32).narrow(0, 5, 3));
  }
  torch::nn::Linear fc{nullptr};
  torch::Tensor window;
};
TORCH_MODULE(Windowed);

// A checkpoint of Windowed after one FusedAdam step; `tamper` may change the state first.
std::string windowed_checkpoint(const TempDir& dir,
                                const std::function<void(Windowed&, FusedAdam&)>& tamper = {}) {
  torch::manual_seed(5);
  Windowed m;
  FusedAdam opt(m->parameters(), torch::optim::AdamOptions(1e-3));
  m->fc->forward(torch::randn({2, 4})).sum().backward();
  opt.step();
  if (tamper) tamper(m, opt);
  const std::string path = dir / "windowed.pt";
  save_checkpoint(path, *m, opt, some_state());
  return testing::read_text(path);
}

// The DamagedCheckpoint `load` throws for `bytes` (saved as `name`), or "(loaded)".
std::string damage_of(const TempDir& dir, const std::string& name, const std::string& bytes, bool with_optimizer) {
  const std::string path = dir / name;
  std::ofstream(path, std::ios::binary) << bytes;
  Windowed m;
  FusedAdam opt(m->parameters(), torch::optim::AdamOptions(1e-3));
  try {
    load_checkpoint(path, *m, with_optimizer ? &opt : nullptr);
  } catch (const DamagedCheckpoint& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_TRUE(opt.state().empty()) << "a refused optimizer state must not stay in the optimizer";
    return e.what();
  }
  return "(loaded)";
}

torch::optim::AdamParamState& adam_state(FusedAdam& opt, const torch::Tensor& p) {
  return static_cast<torch::optim::AdamParamState&>(*opt.state().at(p.unsafeGetTensorImpl()));
}

TEST(Checkpoint, OptimizerStateThatDoesNotFitItsParameterIsRefused) {
  TempDir dir;
  const std::string good = windowed_checkpoint(dir);
  EXPECT_EQ(damage_of(dir, "good.pt", good, true), "(loaded)");
  struct Case {
    const char* name;
    std::function<void(Windowed&, FusedAdam&)> tamper;
    const char* words;
  };
  const std::vector<Case> cases = {
      {"shape.pt", [](Windowed& m, FusedAdam& o) { adam_state(o, m->fc->weight).exp_avg(torch::zeros({1})); },
       "optimizer state 'exp_avg' of parameter 'fc.weight' is Float [1] on cpu, the parameter Float [3, 4] on cpu"},
      {"dtype.pt",
       [](Windowed& m, FusedAdam& o) { adam_state(o, m->fc->bias).exp_avg_sq(torch::zeros({3}, torch::kFloat64)); },
       "optimizer state 'exp_avg_sq' of parameter 'fc.bias' is Double [3]"},
      {"layout.pt", [](Windowed& m, FusedAdam& o) { adam_state(o, m->fc->weight).exp_avg(torch::zeros({4, 3}).t()); },
       "optimizer state 'exp_avg' of parameter 'fc.weight' is not contiguous (strides [1, 3])"},
      {"missing.pt", [](Windowed& m, FusedAdam& o) { adam_state(o, m->fc->weight).exp_avg_sq(torch::Tensor()); },
       "optimizer state 'exp_avg_sq' of parameter 'fc.weight' is missing"},
      {"step.pt", [](Windowed& m, FusedAdam& o) { adam_state(o, m->fc->bias).step(-3); },
       "optimizer step count -3 of parameter 'fc.bias' is negative"},
  };
  for (const auto& c : cases) {
    const std::string what = damage_of(dir, c.name, windowed_checkpoint(dir, c.tamper), true);
    EXPECT_NE(what.find(c.words), std::string::npos) << c.name << ": " << what;
    EXPECT_NE(what.find("earlier checkpoint"), std::string::npos) << what;
    // Synthesis loads without the optimizer: the model's tensors are sound.
    EXPECT_EQ(damage_of(dir, c.name, windowed_checkpoint(dir, c.tamper), false), "(loaded)") << c.name;
  }
}

// Behind valid CRCs, a pickle that puts a tensor past its storage or declares a storage larger
// than its record is refused before LibTorch reads it, naming the tensor by its path.
TEST(Checkpoint, StorageAndOffsetPastTheRecordAreRefusedNamingTheTensor) {
  TempDir dir;
  const std::string good = windowed_checkpoint(dir);
  const std::string rezipped = testing::rezip(good, [](const std::string&, std::string&) {});
  ASSERT_FALSE(rezipped.empty());
  EXPECT_EQ(damage_of(dir, "rezipped.pt", rezipped, true), "(loaded)");

  const std::string offset =
      testing::replace_in_pickle(good, std::string("K\x05(K\x03t", 6), testing::binint(1000000) + "(K\x03t");
  std::string what = damage_of(dir, "offset.pt", offset, true);
  EXPECT_NE(what.find("tensor 'model.window': storage offset 1000000 with shape [3] and strides [1] needs 1000003 "
                      "elements, but its storage holds 13"), std::string::npos) << what;

  const std::string declared = testing::replace_in_pickle(good, "K\x0dtQ", testing::binint(1000000) + "tQ");
  what = damage_of(dir, "declared.pt", declared, true);
  EXPECT_NE(what.find("tensor 'model.window': its storage is declared as 4000000 bytes, but its record 'data/"),
            std::string::npos) << what;
  EXPECT_NE(what.find("' holds 52"), std::string::npos) << what;
  for (const char* name : {"offset.pt", "declared.pt"}) {
    EXPECT_THROW(read_checkpoint_state(dir / name), DamagedCheckpoint) << name;
  }
}

// Damage is told apart from a sound file that does not fit: --resume falls back past the
// first only.
TEST(Checkpoint, DamageIsADamagedCheckpointAndAMismatchIsNot) {
  TempDir dir;
  Tiny m;
  torch::optim::Adam opt(m->parameters());
  const std::string good = dir / "good.pt";
  save_checkpoint(good, *m, opt, some_state());
  std::string bytes = testing::read_text(good);
  const std::string truncated = dir / "truncated.pt";
  std::ofstream(truncated, std::ios::binary) << bytes.substr(0, bytes.size() - 10);
  EXPECT_THROW(read_checkpoint_state(truncated), DamagedCheckpoint);
  Tiny wide(6);
  try {
    load_checkpoint(good, *wide, nullptr);
    FAIL() << "loaded into another model";
  } catch (const DamagedCheckpoint&) {
    FAIL() << "a model mismatch is no damage";
  } catch (const FileError& e) {
    EXPECT_NE(std::string(e.what()).find("incompatible checkpoint"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace monoflow::train
