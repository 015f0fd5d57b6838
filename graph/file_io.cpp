// Atomic file writes (see file_io.h).
#include "graph/file_io.h"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "graph/ir.h"

namespace kiln::graph {

uint64_t fnv1a(const std::string& bytes, uint64_t h) {
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

void write_file_atomically(const std::string& path, const std::string& bytes) {
  // Per process, so two processes writing one path (e.g. a shared cache) never share a
  // temporary file.
  const std::string tmp = path + ".tmp" + std::to_string(::getpid());
  std::error_code ec;
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (f) f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    if (!f || !f.flush()) {
      const std::string why = std::strerror(errno);
      std::filesystem::remove(tmp, ec);
      throw Error("cannot write '" + path + "': " + why);
    }
  }
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    const std::string why = ec.message();
    std::filesystem::remove(tmp, ec);
    throw Error("cannot write '" + path + "': " + why);
  }
}

}  // namespace kiln::graph
