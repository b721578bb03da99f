#include "train/run_dir.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <filesystem>

#include "common/error.h"
#include "train/checkpoint.h"

namespace monoflow::train {
namespace fs = std::filesystem;

namespace {

std::string read_holder_pid(int fd) {
  char buf[32] = {};
  const ssize_t n = ::pread(fd, buf, sizeof buf - 1, 0);
  std::string pid(buf, n > 0 ? static_cast<size_t>(n) : 0);
  while (!pid.empty() && (pid.back() == '\n' || pid.back() == ' ')) pid.pop_back();
  return pid.empty() ? "unknown" : pid;
}

std::string utc_stamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", &tm);
  return buf;
}

std::string busy_message(const std::string& path, const std::string& holder) {
  return "another trainer (pid " + holder + ") is using this run directory (lock " + path +
         "); wait for it to end, or pick another run directory (--run-dir)";
}

}  // namespace

RunDirLock::RunDirLock(const std::string& dir) {
  const std::string path = (fs::path(dir) / kFileName).string();
  fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw FileError(path, 0, std::string("cannot create the run directory's lock file: ") + std::strerror(errno) +
                                 "; check run.dir and its permissions");
  }
  if (::flock(fd_, LOCK_EX | LOCK_NB) != 0) {
    const int error = errno;
    if (error == EWOULDBLOCK) {
      const std::string holder = read_holder_pid(fd_);
      ::close(fd_);
      fd_ = -1;
      throw FileError(dir, 0, busy_message(path, holder));
    }
    // A file system without flock (some network mounts): train unguarded rather than not at all.
    std::fprintf(stderr, "warning: %s: cannot lock (%s); nothing stops a second trainer on this run directory\n",
                 path.c_str(), std::strerror(error));
    return;
  }
  // The holder's pid, for the message a second trainer prints (the lock itself is the flock).
  const std::string pid = std::to_string(::getpid()) + "\n";
  if (::ftruncate(fd_, 0) != 0 || ::pwrite(fd_, pid.data(), pid.size(), 0) != static_cast<ssize_t>(pid.size())) {
    std::fprintf(stderr, "warning: %s: cannot write the pid into the lock file\n", path.c_str());
  }
}

RunDirLock::~RunDirLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the last descriptor releases the flock
}

std::vector<std::string> run_evidence(const std::string& dir) {
  std::vector<std::string> found;
  for (const std::string& ckpt : list_checkpoints((fs::path(dir) / "checkpoints").string())) {
    found.push_back("checkpoints/" + fs::path(ckpt).filename().string());
  }
  if (found.size() > 1) found.erase(found.begin(), found.end() - 1);  // the newest says enough
  std::error_code ec;
  if (fs::file_size(fs::path(dir) / "metrics.jsonl", ec) > 0 && !ec) found.push_back("metrics.jsonl");
  return found;
}

std::string lock_holder(const std::string& dir) {
  const std::string path = (fs::path(dir) / RunDirLock::kFileName).string();
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return "";
  // A shared lock is refused while a trainer holds the exclusive one; taken, it goes at close.
  std::string holder;
  if (::flock(fd, LOCK_SH | LOCK_NB) != 0 && errno == EWOULDBLOCK) holder = read_holder_pid(fd);
  ::close(fd);
  return holder;
}

std::string no_checkpoint_advice(const std::string& dir) {
  const std::string holder = lock_holder(dir);
  if (!holder.empty()) return busy_message((fs::path(dir) / RunDirLock::kFileName).string(), holder);
  const std::vector<std::string> evidence = run_evidence(dir);
  if (!evidence.empty()) {
    return "--resume: no checkpoint here to resume from: the run in " + dir +
           " stopped before its first checkpoint (its metrics.jsonl is kept); start a new run with --force-new "
           "(moves the old files into " + (fs::path(dir) / "previous-<time>").string() + "/), or pick another --run-dir";
  }
  return "--resume: no checkpoint here to resume from, and no run; start without --resume, or pass --resume PATH";
}

std::string holds_run_advice(const std::string& dir, const std::vector<std::string>& evidence) {
  std::string found;
  bool checkpoint = false;
  for (const auto& f : evidence) {
    found += (found.empty() ? "" : ", ") + f;
    checkpoint = checkpoint || f.rfind("checkpoints/", 0) == 0;
  }
  const std::string aside = (fs::path(dir) / "previous-<time>").string() + "/";
  if (!checkpoint) {
    // Nothing to resume: only the metrics of a run that stopped before its first checkpoint.
    return "this run directory holds a run that stopped before its first checkpoint (" + found +
           "), so there is nothing to resume; start a new one with --force-new (moves its files into " + aside +
           "), or pick another --run-dir";
  }
  return "this run directory holds a run already (" + found +
         "); continue it with --resume, or start a new one with --force-new (moves the old run into " + aside +
         "), or pick another --run-dir";
}

std::string move_run_aside(const std::string& dir) {
  const fs::path root(dir);
  const std::string stamp = "previous-" + utc_stamp();
  fs::path target = root / stamp;
  for (int n = 2; fs::exists(target); ++n) target = root / (stamp + "-" + std::to_string(n));
  std::error_code ec;
  fs::create_directory(target, ec);
  if (ec) throw FileError(target.string(), 0, "--force-new: cannot create the folder for the old run: " + ec.message());

  std::vector<std::string> names{"checkpoints", "tensorboard", "images", "samples", "metrics.jsonl", "config.yaml"};
  for (const auto& entry : fs::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.rfind("rank", 0) == 0 && name.size() > 12 && name.compare(name.size() - 9, 9, "_final.pt") == 0) {
      names.push_back(name);
    }
  }
  for (const std::string& name : names) {
    if (!fs::exists(fs::symlink_status(root / name))) continue;
    fs::rename(root / name, target / name, ec);
    if (ec) {
      throw FileError((root / name).string(), 0, "--force-new: cannot move it into " + target.string() + ": " +
                                                     ec.message());
    }
  }
  return target.string();
}

std::unique_ptr<RunDirLock> claim_run_directory(const std::string& dir, const std::string& resume, bool force_new,
                                                const std::function<void(const std::string&)>& tell) {
  if (force_new && !resume.empty()) throw UserError("--force-new and --resume exclude each other");
  auto lock = std::make_unique<RunDirLock>(dir);
  const std::vector<std::string> evidence = run_evidence(dir);
  if (evidence.empty() || !resume.empty()) return lock;
  if (force_new) {
    const std::string aside = move_run_aside(dir);
    // Said even when quiet: the user must be able to find the old run.
    tell("--force-new: the previous run in " + dir + " moved to " + aside);
    return lock;
  }
  throw FileError(dir, 0, holds_run_advice(dir, evidence));
}

void create_run_folder(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (!fs::is_directory(dir)) {
    throw FileError(dir, 0, "cannot create the run directory; check run.dir and permissions");
  }
}

}  // namespace monoflow::train
