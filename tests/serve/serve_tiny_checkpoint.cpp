// Writes the tiny untrained checkpoints of tests/infer/tiny_checkpoint.h into a folder, for the
// browser test (test_page.py), which runs the serve binary on them:
//   serve_tiny_checkpoint DIR  ->  DIR/single.pt (one speaker), DIR/multi.pt (three speakers)
#include <cstdio>
#include <filesystem>

#include "test_util.h"
#include "tiny_checkpoint.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: serve_tiny_checkpoint DIR\n");
    return 2;
  }
  const std::filesystem::path out = argv[1];
  std::filesystem::create_directories(out);
  const monoflow::train::testing::TempDir dir;
  std::filesystem::copy_file(monoflow::train::tiny_checkpoint(dir), out / "single.pt",
                             std::filesystem::copy_options::overwrite_existing);
  std::filesystem::copy_file(monoflow::train::tiny_checkpoint(dir, 3), out / "multi.pt",
                             std::filesystem::copy_options::overwrite_existing);
  return 0;
}
