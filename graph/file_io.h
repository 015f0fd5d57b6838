// Writing a file so that no reader ever sees half of it: a temporary file next to it (named
// per process), renamed into place. Used for every file Kiln writes that others read back.
// Reading one with its size known first, so no reader allocates for, or loops on, unbounded
// input (/dev/zero, a FIFO, a huge sparse file).
#pragma once

#include <cstdint>
#include <string>

namespace kiln::graph {

// Throws Error("cannot write '<path>': <reason>"); leaves no temporary file behind.
void write_file_atomically(const std::string& path, const std::string& bytes);

// Size of the regular file at `path`. Throws Error "<what> '<path>' does not exist" or "... is
// not a regular file" (a directory, a device such as /dev/zero, a FIFO).
int64_t regular_file_size(const std::string& path, const std::string& what);

// The whole regular file, after regular_file_size and check_memory_limit(size, max_bytes):
// nothing is allocated for a file over the limit (0: physical memory). With `magic`, a file
// that does not start with those bytes is refused before the rest is read ("'<path>' is not a
// <what> (no <magic> magic)"). A file that changes size while it is read is an Error too.
std::string read_whole_file(const std::string& path, const std::string& what,
                            int64_t max_bytes = 0, const std::string& magic = "");

// A regular file mapped read-only, for readers that pass over a large file once (the .weights
// reader): pages are read from the file as they are touched, and release() gives consumed
// ones back, so the file never needs to be resident in full next to what is parsed from it.
// Opening checks as read_whole_file does: a regular file, within check_memory_limit, starting
// with `magic`. Throws Error.
class MappedFile {
 public:
  MappedFile(const std::string& path, const std::string& what, int64_t max_bytes = 0,
             const std::string& magic = "");
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;
  const char* data() const { return data_; }
  size_t size() const { return size_; }
  // Drops the whole pages inside [from, to) from memory; touching them again reads them back.
  void release(size_t from, size_t to) const;

 private:
  char* data_ = nullptr;
  size_t size_ = 0;
};

// 64-bit FNV-1a of `bytes`, continuing from `h`: names cache entries. Not a security boundary;
// the caches store and compare their full keys or verify what they read.
uint64_t fnv1a(const std::string& bytes, uint64_t h = 1469598103934665603ull);

}  // namespace kiln::graph
