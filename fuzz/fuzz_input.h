// What the fuzz targets share: a size cap, and the input as a file at a path for the readers
// that take one (an in-memory file, so a run leaves nothing on disk).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kiln::fuzz {

// Inputs over this are skipped: they would only make each run slower, not reach new code.
constexpr size_t kMaxInputBytes = 1 << 20;

// A regular file holding `bytes`, reused by every call in the process; returns its path.
std::string as_file(const uint8_t* data, size_t size);

}  // namespace kiln::fuzz
