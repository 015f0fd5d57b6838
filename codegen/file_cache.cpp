#include "codegen/file_cache.h"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <random>
#include <sstream>

#include "Halide.h"
#include "codegen/kernel_library.h"
#include "codegen_config.h"
#include "graph/file_io.h"
#include "graph/ir.h"

namespace kiln::codegen {
namespace {

namespace fs = std::filesystem;

std::string hex16(uint64_t v) {
  char name[32];
  std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(v));
  return name;
}

std::string entry_name(const std::string& key) { return hex16(graph::fnv1a(key)); }

// One line per file: its name, size and hash; "" if it cannot be read (or is empty).
std::string sums_of(const fs::path& dir, const std::vector<std::string>& names) {
  std::string sums;
  for (const std::string& n : names) {
    const std::string bytes = read_text(dir / n);
    if (bytes.empty()) return "";
    sums += n + " " + std::to_string(bytes.size()) + " " + hex16(graph::fnv1a(bytes)) + "\n";
  }
  return sums;
}

}  // namespace

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return f ? s.str() : "";
}

fs::path unique_dir(const fs::path& parent, const std::string& stem) {
  std::random_device rd;
  for (int attempt = 0; attempt < 100; ++attempt) {
    fs::path p = parent / (stem + "-" + std::to_string(getpid()) + "-" + std::to_string(rd()));
    std::error_code ec;
    if (fs::create_directories(p, ec)) return p;
    if (ec && ec != std::errc::file_exists) break;
  }
  throw graph::Error("cannot create a working directory in " + parent.string());
}

std::string toolchain_identity() {
  return "kiln " KILN_VERSION " halide " + std::to_string(HALIDE_VERSION_MAJOR) + "." +
         std::to_string(HALIDE_VERSION_MINOR) + "." + std::to_string(HALIDE_VERSION_PATCH) +
         "\ngenerator " + generator_identity() + "\ncompiler " + config::kCxxCompiler + "\n";
}

FileCache::FileCache(const std::string& cache_dir, const std::string& kind)
    : root_(cache_dir.empty() ? fs::path() : fs::path(cache_dir) / kind) {}

bool FileCache::fetch(const std::string& key, const fs::path& dir,
                      const std::vector<std::string>& names) const {
  if (root_.empty()) return false;
  const fs::path entry = root_ / entry_name(key);
  if (read_text(entry / "key.txt") != key) return false;
  const std::string sums = sums_of(entry, names);
  if (sums.empty() || read_text(entry / "sums.txt") != sums) return false;
  std::error_code ec;
  for (const std::string& n : names) {
    fs::copy_file(entry / n, dir / n, fs::copy_options::overwrite_existing, ec);
    if (ec) return false;
  }
  return true;
}

void FileCache::store(const std::string& key, const fs::path& dir,
                      const std::vector<std::string>& names) const {
  if (root_.empty()) return;
  std::error_code ec;
  fs::create_directories(root_, ec);
  if (ec || access(root_.c_str(), W_OK) != 0) return;
  const std::string sums = sums_of(dir, names);
  if (sums.empty()) return;
  const std::string name = entry_name(key);
  fs::path tmp;
  try {
    tmp = unique_dir(root_, name + ".tmp");
  } catch (const graph::Error&) {
    return;
  }
  bool ok = true;
  for (const std::string& n : names) {
    fs::copy_file(dir / n, tmp / n, ec);
    ok = ok && !ec;
  }
  // key.txt last: an entry without it is never used.
  ok = ok && static_cast<bool>(std::ofstream(tmp / "sums.txt", std::ios::binary) << sums);
  ok = ok && static_cast<bool>(std::ofstream(tmp / "key.txt", std::ios::binary) << key);
  if (ok) {
    fs::remove_all(root_ / name, ec);
    fs::rename(tmp, root_ / name, ec);  // fails if another process got there first: keep theirs
  }
  fs::remove_all(tmp, ec);
}

}  // namespace kiln::codegen
