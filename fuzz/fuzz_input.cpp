// An anonymous in-memory file (memfd) reached through /proc/self/fd: readers see a regular file
// with a path, stat and mmap work, and nothing is left behind when a fuzzer is killed.
#include "fuzz/fuzz_input.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>

namespace kiln::fuzz {

std::string as_file(const uint8_t* data, size_t size) {
  static const int fd = memfd_create("kiln_fuzz_input", 0);
  if (fd < 0) throw std::runtime_error("memfd_create failed");
  if (ftruncate(fd, 0) != 0 || (size > 0 && pwrite(fd, data, size, 0) != static_cast<ssize_t>(size)))
    throw std::runtime_error("cannot write the fuzz input to its memfd");
  return "/proc/self/fd/" + std::to_string(fd);
}

}  // namespace kiln::fuzz
