// The memory limit (see memory_limit.h).
#include "graph/memory_limit.h"

#include <unistd.h>

#include <cstdio>
#include <limits>

#include "graph/ir.h"

namespace kiln::graph {

int64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  int64_t bytes = 0;
  if (pages <= 0 || page <= 0 || __builtin_mul_overflow(int64_t{pages}, int64_t{page}, &bytes))
    return std::numeric_limits<int64_t>::max();
  return bytes;
}

int64_t effective_memory_limit(int64_t limit) {
  return limit > 0 ? limit : physical_memory_bytes();
}

std::string byte_size_text(int64_t bytes) {
  static const char* const kUnits[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  if (bytes < 1024) return std::to_string(bytes) + " bytes";
  double v = static_cast<double>(bytes) / 1024;
  int unit = 0;
  for (; v >= 1024 && unit < 5; ++unit) v /= 1024;
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f %s", v, kUnits[unit]);
  return buf;
}

void check_memory_limit(int64_t bytes, int64_t limit, const std::string& what) {
  const int64_t effective = effective_memory_limit(limit);
  if (bytes <= effective) return;
  throw Error(what + " needs " + std::to_string(bytes) + " bytes (" + byte_size_text(bytes) +
              "), more than the memory limit of " + byte_size_text(effective) +
              (limit > 0 ? " (set by the caller)"
                         : " (this machine's physical memory; --max-memory or "
                           "ModelOptions::max_memory_bytes set another)"));
}

}  // namespace kiln::graph
