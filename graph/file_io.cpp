// Atomic file writes (see file_io.h).
#include "graph/file_io.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "graph/ir.h"
#include "graph/memory_limit.h"

namespace kiln::graph {

uint64_t fnv1a(const std::string& bytes, uint64_t h) {
  for (unsigned char c : bytes) h = (h ^ c) * 1099511628211ull;
  return h;
}

int64_t regular_file_size(const std::string& path, const std::string& what) {
  std::error_code ec;
  const auto status = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(status))
    throw Error(what + " '" + path + "' does not exist");
  if (!std::filesystem::is_regular_file(status))
    throw Error(what + " '" + path + "' is not a regular file");
  const auto size = std::filesystem::file_size(path, ec);
  if (ec) throw Error("cannot read the size of " + what + " '" + path + "': " + ec.message());
  return static_cast<int64_t>(size);
}

std::string read_whole_file(const std::string& path, const std::string& what, int64_t max_bytes,
                            const std::string& magic) {
  const int64_t size = regular_file_size(path, what);
  std::ifstream in(path, std::ios::binary);
  std::string bytes(magic.size(), '\0');
  if (!magic.empty() &&
      (!in.read(bytes.data(), static_cast<std::streamsize>(magic.size())) || bytes != magic))
    throw Error("'" + path + "' is not a " + what + " (no " + magic + " magic)");
  check_memory_limit(size, max_bytes, what + " '" + path + "'");
  bytes.resize(static_cast<size_t>(size));
  const std::streamsize rest = static_cast<std::streamsize>(size - magic.size());
  if (!in || !in.read(bytes.data() + magic.size(), rest))
    throw Error("cannot read " + what + " '" + path + "' (it is shorter than its size said)");
  if (in.peek() != std::char_traits<char>::eof())
    throw Error("cannot read " + what + " '" + path + "': it grew while being read");
  return bytes;
}

MappedFile::MappedFile(const std::string& path, const std::string& what, int64_t max_bytes,
                       const std::string& magic) {
  const int64_t size = regular_file_size(path, what);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error("cannot open " + what + " '" + path + "': " + std::strerror(errno));
  // The magic first, read on its own: a file of something else fails here whatever its size.
  std::string head(magic.size(), '\0');
  if (!magic.empty() &&
      (::pread(fd, head.data(), head.size(), 0) != static_cast<ssize_t>(head.size()) || head != magic)) {
    ::close(fd);
    throw Error("'" + path + "' is not a " + what + " (no " + magic + " magic)");
  }
  try {
    check_memory_limit(size, max_bytes, what + " '" + path + "'");
  } catch (...) {
    ::close(fd);
    throw;
  }
  void* p = size > 0 ? ::mmap(nullptr, static_cast<size_t>(size), PROT_READ, MAP_PRIVATE, fd, 0)
                     : nullptr;
  const int err = errno;
  ::close(fd);
  if (p == MAP_FAILED) throw Error("cannot read " + what + " '" + path + "': " + std::strerror(err));
  data_ = static_cast<char*>(p);
  size_ = static_cast<size_t>(size);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(data_, size_);
  data_ = nullptr;
}

void MappedFile::release(size_t from, size_t to) const {
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t first = (from + page - 1) / page * page, last = std::min(to, size_) / page * page;
  if (data_ && first < last) ::madvise(data_ + first, last - first, MADV_DONTNEED);
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
