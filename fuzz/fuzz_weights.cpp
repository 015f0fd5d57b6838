// Fuzz target: the .weights reader (graph::read_graph_file: a mapped file, pages given back as
// constants are copied out), then what a compiled model does with the graph before running it:
// lowering and the arena plan. The input's last 8 bytes are replaced by the checksum of the
// rest, so mutations reach the structural checks instead of stopping at the checksum.
#include <cstdint>
#include <stdexcept>
#include <cstring>
#include <string>

#include "fuzz/fuzz_input.h"
#include "graph/kernel_spec.h"
#include "graph/memory_plan.h"
#include "graph/serialize.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace kiln;
  if (size > fuzz::kMaxInputBytes) return 0;
  std::string bytes(reinterpret_cast<const char*>(data), size);
  if (bytes.size() >= 8) {
    const uint64_t sum = graph::format_checksum(bytes.data(), bytes.size() - 8);
    std::memcpy(&bytes[bytes.size() - 8], &sum, 8);  // little-endian, as the format stores it
  }
  try {
    const graph::Graph g = graph::read_graph_file(
        fuzz::as_file(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    for (const graph::KernelSpec& k : graph::lower_to_kernels(g))
      if (graph::is_generated(k)) graph::kernel_signature(k);
    graph::plan_arena(g);
    // What was read is written back the same way (versions 1 and 3 are rewritten as 4).
    const std::string again = graph::serialize(g);
    if (graph::serialize(graph::deserialize(again)) != again)
      throw std::logic_error("fuzz_weights: the .weights round trip changed the graph");
  } catch (const graph::Error&) {
  }
  return 0;
}
