#include "fuzz_driver.h"

#include <c10/util/Exception.h>
#include <cxxabi.h>
#include <fcntl.h>
#include <ftw.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <typeinfo>

#include "common/error.h"

// Under a sanitizer its report ends the process: this hook still saves the input.
extern "C" void __sanitizer_set_death_callback(void (*callback)(void)) __attribute__((weak));

namespace monoflow::fuzz {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitized = true;
constexpr unsigned kSecondsPerInput = 60;
#else
constexpr bool kSanitized = false;
constexpr unsigned kSecondsPerInput = 20;
#endif

// For the signal handlers: plain memory, nothing allocated while handling.
const std::string* g_input = nullptr;
char g_artifact[4096] = "";
char g_note[512] = "";
int g_stderr = 2;  // the real stderr, while QuietStderr has fd 2 on /dev/null

void write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w <= 0) return;
    data += w;
    n -= static_cast<size_t>(w);
  }
}

void save_current_input() {
  if (g_input == nullptr || g_artifact[0] == '\0') return;
  const int fd = ::open(g_artifact, O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd >= 0) {
    write_all(fd, g_input->data(), g_input->size());
    ::close(fd);
  }
  write_all(g_stderr, g_note, std::strlen(g_note));
}

void on_fatal_signal(int sig) {
  save_current_input();
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

void on_alarm(int) {
  static const char m[] = "\nfuzz: an input ran over the per-input time limit (a hang)\n";
  write_all(g_stderr, m, sizeof m - 1);
  save_current_input();
  ::_exit(3);
}

std::string type_name(const std::type_info& t) {
  int status = 0;
  char* name = abi::__cxa_demangle(t.name(), nullptr, nullptr, &status);
  std::string out = status == 0 && name != nullptr ? name : t.name();
  std::free(name);
  return out;
}

// "" when the input ran or threw what the contract allows (counted in *rejected, its message
// in *refusal); else what it threw.
std::string run_one(const Target& target, const std::string& input, int64_t* rejected, std::string* refusal = nullptr) {
  g_input = &input;
  ::alarm(kSecondsPerInput);
  std::string wrong;
  try {
    target.run(input);
  } catch (const UserError& e) {
    ++*rejected;
    if (refusal != nullptr) *refusal = e.what();
  } catch (const c10::Error& e) {
    wrong = std::string("c10::Error: ") + e.what_without_backtrace();
  } catch (const std::exception& e) {
    wrong = type_name(typeid(e)) + ": " + e.what();
  } catch (...) {
    wrong = "an exception of an unknown type";
  }
  ::alarm(0);
  g_input = nullptr;
  return wrong;
}

std::string hex_head(const std::string& s, size_t n) {
  std::ostringstream out;
  for (size_t i = 0; i < std::min(n, s.size()); ++i) {
    char b[4];
    std::snprintf(b, sizeof b, "%02x", static_cast<unsigned char>(s[i]));
    out << b << ((i + 1) % 32 == 0 ? "\n  " : " ");
  }
  return out.str();
}

uint64_t pick(Rng& rng, uint64_t n) { return n == 0 ? 0 : rng() % n; }

}  // namespace

std::string mutate(const std::string& input, const std::vector<std::string>& seeds,
                   const std::vector<std::string>& dictionary, Rng& rng, size_t max_size) {
  static const unsigned char kBytes[] = {0, 1, 0x7f, 0x80, 0xff, '\n', '\r', '|', ':', '"', '\'', '{', '}', '[',
                                         ']', ' ', '\t', '\\', '%', '&', '*', '!', '#', '-', '.', '0', '9'};
  static const uint64_t kInts[] = {0, 1, 2, 0x7f, 0x80, 0xff, 0x100, 0x7fff, 0x8000, 0xffff, 0x10000,
                                   0x7fffffff, 0x80000000, 0xffffffff, 0x100000000ULL, 0x7fffffffffffffffULL,
                                   0x8000000000000000ULL, ~0ULL, ~0ULL - 1};
  std::string s = input;
  const int n = 1 + static_cast<int>(pick(rng, 4)) + (pick(rng, 4) == 0 ? static_cast<int>(pick(rng, 12)) : 0);
  for (int k = 0; k < n; ++k) {
    const size_t pos = pick(rng, s.size() + 1);  // s.size(): at the end
    switch (pick(rng, 12)) {
      case 0:
        if (!s.empty()) s[pos % s.size()] ^= static_cast<char>(1u << pick(rng, 8));
        break;
      case 1:
        if (!s.empty()) s[pos % s.size()] = static_cast<char>(rng());
        break;
      case 2:
        if (!s.empty()) s[pos % s.size()] = static_cast<char>(kBytes[pick(rng, sizeof kBytes)]);
        break;
      case 3: {
        std::string bytes(1 + pick(rng, 8), '\0');
        for (char& c : bytes) c = static_cast<char>(rng());
        s.insert(pos, bytes);
        break;
      }
      case 4:
        if (!s.empty()) s.erase(pos % s.size(), 1 + pick(rng, 64));
        break;
      case 5:
        if (!s.empty()) {
          const size_t from = pick(rng, s.size());
          s.insert(pos, s.substr(from, 1 + pick(rng, 64)));
        }
        break;
      case 6:
      case 7:
        if (!dictionary.empty()) {
          const std::string& token = dictionary[pick(rng, dictionary.size())];
          if (pick(rng, 2) == 0 || s.size() < token.size()) {
            s.insert(pos, token);
          } else {
            s.replace(pick(rng, s.size() - token.size() + 1), token.size(), token);
          }
        }
        break;
      case 8: {  // an integer of 1, 2, 4 or 8 bytes, little- or big-endian
        const int width = 1 << pick(rng, 4);
        uint64_t v = pick(rng, 4) == 0 ? rng() : kInts[pick(rng, sizeof kInts / sizeof kInts[0])];
        if (pick(rng, 8) == 0) v = s.size() + pick(rng, 16) - 8;
        if (s.size() < static_cast<size_t>(width)) break;
        const size_t at = pick(rng, s.size() - width + 1);
        const bool big = pick(rng, 4) == 0;
        for (int i = 0; i < width; ++i) s[at + (big ? width - 1 - i : i)] = static_cast<char>((v >> (8 * i)) & 0xff);
        break;
      }
      case 9:
        s.resize(pos);
        break;
      case 10:
        if (!seeds.empty()) {
          const std::string& other = seeds[pick(rng, seeds.size())];
          s = s.substr(0, pos) + other.substr(pick(rng, other.size() + 1));
        }
        break;
      case 11:
        if (!s.empty()) {  // a short piece many times: nesting and length limits
          const std::string piece = s.substr(pick(rng, s.size()), 1 + pick(rng, 4));
          std::string many;
          for (uint64_t i = 0, times = 8 + pick(rng, 2000); i < times; ++i) many += piece;
          s.insert(pos, many);
        }
        break;
    }
    if (s.size() > max_size) s.resize(max_size);
  }
  return s;
}

namespace {
std::vector<std::string>& temp_dirs() {
  static auto* dirs = new std::vector<std::string>();
  return *dirs;
}
void remove_temp_dirs() {
  for (const auto& p : temp_dirs()) {
    ::nftw(p.c_str(), [](const char* f, const struct stat*, int, struct FTW*) { return ::remove(f); }, 16,
           FTW_DEPTH | FTW_PHYS);
  }
}
}  // namespace

std::string temp_dir(const std::string& name) {
  std::string pattern = (std::filesystem::temp_directory_path() / ("monoflow_" + name + "_XXXXXX")).string();
  if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("cannot create a temp dir");
  if (temp_dirs().empty()) std::atexit(remove_temp_dirs);
  temp_dirs().push_back(pattern);
  return pattern;
}

void expect_user_error(const std::function<void()>& f, const std::string& what) {
  try {
    f();
  } catch (const UserError&) {
    return;
  }
  throw std::runtime_error(what + ": accepted, where a UserError was due");
}

std::function<void()> unreadable_path_cases(std::function<void(const std::string& path)> read,
                                            std::function<std::string()> dir, std::string missing_name,
                                            std::string what) {
  return [read = std::move(read), dir = std::move(dir), missing_name = std::move(missing_name),
          what = std::move(what)] {
    const std::string d = dir();
    expect_user_error([&] { read(d); }, "a directory as the " + what);
    expect_user_error([&] { read(d + "/" + missing_name); }, "a missing " + what);
  };
}

// Under a sanitizer its report goes to stderr: then nothing is silenced.
QuietStderr::QuietStderr() : saved_(kSanitized ? -1 : ::dup(2)) {
  if (saved_ < 0) return;
  g_stderr = saved_;
  const int null = ::open("/dev/null", O_WRONLY);
  ::dup2(null, 2);
  ::close(null);
}

QuietStderr::~QuietStderr() {
  if (saved_ < 0) return;
  ::dup2(saved_, 2);
  ::close(saved_);
  g_stderr = 2;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

int fuzz_main(int argc, char** argv, const Target& target) {
  double seconds = 20;
  if (const char* env = std::getenv("MONOFLOW_FUZZ_SECONDS")) seconds = std::atof(env);
  int64_t iterations = 0;  // 0: as many as the time allows
  uint64_t seed = std::random_device{}() ^ (static_cast<uint64_t>(std::random_device{}()) << 32);
  if (const char* env = std::getenv("MONOFLOW_FUZZ_SEED")) seed = std::strtoull(env, nullptr, 10);
  std::string replay, artifacts = ".";
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    if (a == "--seconds" && value) seconds = std::atof(argv[++i]);
    else if (a == "--iterations" && value) iterations = std::atoll(argv[++i]);
    else if (a == "--seed" && value) seed = std::strtoull(argv[++i], nullptr, 10);
    else if (a == "--replay" && value) replay = argv[++i];
    else if (a == "--artifacts" && value) artifacts = argv[++i];
    else {
      std::cerr << "usage: " << argv[0] << " [--seconds S] [--iterations N] [--seed X] [--replay FILE] [--artifacts DIR]\n";
      return 2;
    }
  }
  const std::string artifact = artifacts + "/" + target.name + "-failure.bin";
  std::snprintf(g_artifact, sizeof g_artifact, "%s", artifact.c_str());
  if (__sanitizer_set_death_callback != nullptr) __sanitizer_set_death_callback(save_current_input);
  if (!kSanitized) {
    for (int sig : {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT}) std::signal(sig, on_fatal_signal);
  }
  std::signal(SIGALRM, on_alarm);

  int64_t rejected = 0;
  auto fail = [&](const std::string& what, const std::string& input, const std::string& which) {
    write_bytes(artifact, input);
    std::cerr << "FUZZ FAILURE in " << target.name << " (" << which << ", seed " << seed << "): " << what
              << "\n  input (" << input.size() << " bytes, saved as " << artifact << "; rerun: " << argv[0]
              << " --replay " << artifact << "), first bytes:\n  " << hex_head(input, 256) << "\n";
    return 1;
  };
  if (!replay.empty()) {
    const std::string input = read_bytes(replay);
    std::snprintf(g_note, sizeof g_note, "\nfuzz %s: the replayed input crashed\n", target.name.c_str());
    const std::string wrong = run_one(target, input, &rejected);
    if (!wrong.empty()) return fail(wrong, input, "replay");
    std::cout << target.name << ": the input ran " << (rejected ? "and was refused with a UserError" : "and was accepted") << "\n";
    return 0;
  }

  std::cout << "fuzz " << target.name << ": seed " << seed << " (MONOFLOW_FUZZ_SEED=" << seed
            << " repeats it), up to " << seconds << " s" << std::endl;
  if (target.fixed_cases) {  // they check their own outcomes and throw std::runtime_error when one is wrong
    try {
      target.fixed_cases();
    } catch (const std::exception& e) {
      return fail(std::string("a fixed case: ") + e.what(), "", "fixed cases");
    }
  }
  for (size_t i = 0; i < target.seeds.size(); ++i) {
    std::snprintf(g_note, sizeof g_note, "\nfuzz %s: seed input %zu crashed; it is saved as %s\n", target.name.c_str(), i,
                  g_artifact);
    const int64_t before = rejected;
    std::string refusal;
    const std::string wrong = run_one(target, target.seeds[i], &rejected, &refusal);
    if (!wrong.empty()) return fail(wrong, target.seeds[i], "seed input " + std::to_string(i));
    // The valid seeds must pass, or the target tests nothing but its own set-up.
    if (i < target.valid_seeds && rejected != before) {
      return fail("the valid seed input was refused: " + refusal, target.seeds[i], "seed input " + std::to_string(i));
    }
  }
  const int64_t seeds_rejected = rejected;

  size_t max_size = 4096;
  for (const auto& s : target.seeds) max_size = std::max(max_size, 2 * s.size());
  Rng rng(seed);
  std::string last = target.seeds.empty() ? std::string() : target.seeds[0];
  const auto start = std::chrono::steady_clock::now();
  int64_t done = 0;
  rejected = 0;
  for (; iterations == 0 || done < iterations; ++done) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >= seconds) break;
    const std::string& base =
        pick(rng, 2) == 0 || target.seeds.empty() ? last : target.seeds[pick(rng, target.seeds.size())];
    const std::string input = target.mutate_structure && pick(rng, 2) == 0
                                  ? target.mutate_structure(base, rng)
                                  : mutate(base, target.seeds, target.dictionary, rng, max_size);
    std::snprintf(g_note, sizeof g_note, "\nfuzz %s: input %lld of seed %llu crashed; it is saved as %s\n",
                  target.name.c_str(), static_cast<long long>(done), static_cast<unsigned long long>(seed), g_artifact);
    const std::string wrong = run_one(target, input, &rejected);
    if (!wrong.empty()) return fail(wrong, input, "input " + std::to_string(done));
    last = input;
  }
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::cout << "fuzz " << target.name << ": " << target.seeds.size() << " seed inputs (" << seeds_rejected
            << " refused as they should be), then " << done << " mutated inputs in " << took << " s: "
            << rejected << " refused with a UserError, " << (done - rejected)
            << " accepted; no crash, hang or other exception" << std::endl;
  if (done == 0) {
    std::cerr << "fuzz " << target.name << ": no mutated input ran\n";
    return 1;
  }
  return 0;
}

}  // namespace monoflow::fuzz
