// The bound on what Kiln allocates for one model or reads from one file: this machine's
// physical memory unless the caller sets a lower one (ModelOptions::max_memory_bytes, kiln's
// --max-memory). A model or file over it is refused with an Error before anything is allocated.
#pragma once

#include <cstdint>
#include <string>

namespace kiln::graph {

// Physical memory (sysconf); INT64_MAX when the system does not say.
int64_t physical_memory_bytes();

// `limit`, or physical_memory_bytes() when limit is 0 (the default everywhere).
int64_t effective_memory_limit(int64_t limit);

// Throws Error "<what> needs N bytes (X GiB), more than the memory limit of ..." when
// `bytes` > effective_memory_limit(limit).
void check_memory_limit(int64_t bytes, int64_t limit, const std::string& what);

// "1.5 GiB", "512.0 MiB", "12 bytes": sizes in messages.
std::string byte_size_text(int64_t bytes);

}  // namespace kiln::graph
