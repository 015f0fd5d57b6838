// A cache of compiled files under Kiln's cache directory: the kernels' archives (one entry per
// kernel and target list) and `kiln compile`'s compiled model source. An entry is found by the
// hash of its key and used only if the full key stored in it is equal and its files still have
// the sizes and hashes recorded when it was stored; anything else is compiled again. A cache
// that cannot be read or written costs a compile, never an error.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kiln::codegen {

class FileCache {
 public:
  // Entries in cache_dir/kind; an empty cache_dir disables the cache (fetch finds nothing,
  // store keeps nothing).
  FileCache(const std::string& cache_dir, const std::string& kind);

  bool enabled() const { return !root_.empty(); }
  // Copies the files `names` of the entry of `key` into `dir`: true if the entry was there,
  // whole and intact, and every copy succeeded.
  bool fetch(const std::string& key, const std::filesystem::path& dir,
             const std::vector<std::string>& names) const;
  // Stores dir/<names> as the entry of `key` (a concurrent writer's entry may win instead).
  void store(const std::string& key, const std::filesystem::path& dir,
             const std::vector<std::string>& names) const;

 private:
  std::filesystem::path root_;
};

// What every compiled file depends on besides its own inputs: Kiln's version, the code
// generator itself (generator_identity), Halide's version and the C++ compiler, one per line.
std::string toolchain_identity();

// A new, empty directory parent/stem-<pid>-<random>. Throws graph::Error.
std::filesystem::path unique_dir(const std::filesystem::path& parent, const std::string& stem);

// The file's bytes, or "" if it cannot be read.
std::string read_text(const std::filesystem::path& p);

}  // namespace kiln::codegen
