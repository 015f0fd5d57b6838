// Writing a file so that no reader ever sees half of it: a temporary file next to it (named
// per process), renamed into place. Used for every file Kiln writes that others read back.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::graph {

// Throws Error("cannot write '<path>': <reason>"); leaves no temporary file behind.
void write_file_atomically(const std::string& path, const std::string& bytes);

// 64-bit FNV-1a of `bytes`, continuing from `h`: names cache entries. Not a security boundary;
// the caches store and compare their full keys or verify what they read.
uint64_t fnv1a(const std::string& bytes, uint64_t h = 1469598103934665603ull);

}  // namespace kiln::graph
