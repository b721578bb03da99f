// A seeded mutation fuzzer, self-contained (no libFuzzer: the project builds with gcc).
// Each fuzz_* program feeds one parser inputs made by mutating its seeds (the regression
// inputs of issue #13 among them) for a bounded time, and fails when the parser crashes, runs
// over a per-input limit, or throws anything but what its contract allows: monoflow's
// UserError (FileError included), as every reader documents for bad input.
//
//   fuzz_config [--seconds S] [--iterations N] [--seed X] [--replay FILE] [--artifacts DIR]
//
// The seed is printed (MONOFLOW_FUZZ_SEED=X or --seed X repeats a run); MONOFLOW_FUZZ_SECONDS
// sets the default budget. A failing input is written to <artifacts>/<name>-failure.bin (also
// on a crash or under a sanitizer) and --replay runs it alone.
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace monoflow::fuzz {

using Rng = std::mt19937_64;

struct Target {
  std::string name;
  std::vector<std::string> seeds;       // starting inputs; each is also run once as it is
  size_t valid_seeds = 0;               // the first ones must be accepted (no exception at all)
  std::vector<std::string> dictionary;  // tokens the mutator inserts or overwrites with
  // Runs one input. Throws only UserError (or what `allowed` accepts) for bad input.
  std::function<void(const std::string& input)> run;
  // Optional structure-aware step: a new input from `input` (e.g. one record of an archive
  // mutated and the archive rebuilt with valid CRCs, so that the parser behind the CRC check
  // is reached). Used for about half of the inputs when set.
  std::function<std::string(const std::string& input, Rng& rng)> mutate_structure;
  // Inputs that are not bytes (a directory given as the file...), run once before the loop.
  std::function<void()> fixed_cases;
};

// Byte-level mutations: bit flips, interesting values, inserted and deleted ranges,
// dictionary tokens, little-endian integers at random offsets, truncation, splicing.
std::string mutate(const std::string& input, const std::vector<std::string>& seeds,
                   const std::vector<std::string>& dictionary, Rng& rng, size_t max_size);

int fuzz_main(int argc, char** argv, const Target& target);

// For fixed cases: f() must throw UserError; no error is a failure (std::runtime_error naming
// `what`), and any other exception goes on to the driver, which reports it.
void expect_user_error(const std::function<void()>& f, const std::string& what);

// Fixed cases of a file reader: read(path) must throw UserError for a directory (the folder
// dir() gives) and for a file missing from it (missing_name); `what` names the file in the
// failures ("a directory as the <what>", "a missing <what>").
std::function<void()> unreadable_path_cases(std::function<void(const std::string& path)> read,
                                            std::function<std::string()> dir, std::string missing_name,
                                            std::string what);

// A fresh folder under the temp dir, removed at exit (helpers for file-based targets).
std::string temp_dir(const std::string& name);
void write_bytes(const std::string& path, const std::string& bytes);

// Sends stderr to /dev/null while it lives: the warnings a reader prints for each of
// thousands of inputs (skipped lines, down-mixed channels) would bury a failure's report.
class QuietStderr {
 public:
  QuietStderr();
  ~QuietStderr();
  QuietStderr(const QuietStderr&) = delete;
  QuietStderr& operator=(const QuietStderr&) = delete;

 private:
  int saved_;
};
std::string read_bytes(const std::string& path);

}  // namespace monoflow::fuzz
