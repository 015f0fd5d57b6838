// Arena memory planning: live intervals of every tensor the kernels write, and offsets in one
// arena such that tensors alive at the same time never overlap.
#pragma once

#include <string>
#include <vector>

#include "graph/ir.h"

namespace kiln::graph {

struct ArenaBuffer {
  ValueId value;
  int64_t offset = 0;
  int64_t bytes = 0;
  int first = 0;  // index of the producing node
  int last = 0;   // index of the last reading node; num_nodes for graph outputs
};

struct ArenaPlan {
  std::vector<ArenaBuffer> buffers;  // one per tensor a node writes, in node order
  int64_t arena_bytes = 0;           // planned size
  int64_t unshared_bytes = 0;        // the same tensors without any reuse
  const ArenaBuffer* find(ValueId v) const;
};

// Graph inputs are bound by the caller and constants live with the model: neither is in the
// arena. Fused intermediates do not exist as values after fusion, so they get nothing.
ArenaPlan plan_arena(const Graph& g, int64_t alignment = 64);

// Bytes of every activation tensor (non-constant, non-input) of a graph, each in its own
// buffer: what an engine without fusion or reuse would allocate.
int64_t naive_activation_bytes(const Graph& g);

// A table: tensor, bytes, offset, live interval.
std::string describe(const ArenaPlan& plan, const Graph& g);

}  // namespace kiln::graph
