// Crash-safe file replacement: the bytes go to a temporary file in the same directory, which
// is flushed to disk (fsync) and renamed over the target, and the directory entry is synced.
// A crash at any point leaves either the old file or the complete new one, never a mix.
#pragma once

#include <string>

namespace monoflow::train {

void write_file_atomically(const std::string& path, const std::string& bytes);  // FileError
bool is_temporary_file(const std::string& filename);  // our ".<name>.tmp.<pid>" leftovers

}  // namespace monoflow::train
