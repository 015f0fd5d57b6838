// plan_arena: greedy by size, each buffer at the lowest offset that does not collide with an
// already placed buffer whose live interval intersects its own.
#include "graph/memory_plan.h"

#include <algorithm>
#include <iomanip>
#include <sstream>

namespace kiln::graph {

const ArenaBuffer* ArenaPlan::find(ValueId v) const {
  for (const ArenaBuffer& b : buffers)
    if (b.value == v) return &b;
  return nullptr;
}

ArenaPlan plan_arena(const Graph& g, int64_t alignment) {
  ArenaPlan plan;
  const auto uses = g.consumers();
  const int end = static_cast<int>(g.num_nodes());
  for (int i = 0; i < end; ++i) {
    for (ValueId v : g.node(NodeId{static_cast<uint32_t>(i)}).outputs) {
      ArenaBuffer b{v, 0, g.value(v).size_bytes(), i, i};
      for (NodeId u : uses[v.index]) b.last = std::max(b.last, static_cast<int>(u.index));
      if (g.is_graph_output(v)) b.last = end;
      plan.buffers.push_back(b);
      plan.unshared_bytes += (b.bytes + alignment - 1) / alignment * alignment;
    }
  }

  std::vector<size_t> order(plan.buffers.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return plan.buffers[a].bytes > plan.buffers[b].bytes;
  });
  std::vector<size_t> placed;
  for (size_t idx : order) {
    ArenaBuffer& b = plan.buffers[idx];
    std::vector<const ArenaBuffer*> live;
    for (size_t p : placed) {
      const ArenaBuffer& o = plan.buffers[p];
      if (o.first <= b.last && b.first <= o.last) live.push_back(&o);
    }
    std::sort(live.begin(), live.end(),
              [](const ArenaBuffer* x, const ArenaBuffer* y) { return x->offset < y->offset; });
    int64_t offset = 0;
    for (const ArenaBuffer* o : live) {
      if (offset + b.bytes <= o->offset) break;
      offset = std::max(offset, (o->offset + o->bytes + alignment - 1) / alignment * alignment);
    }
    b.offset = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + b.bytes);
    placed.push_back(idx);
  }
  plan.arena_bytes = (plan.arena_bytes + alignment - 1) / alignment * alignment;
  return plan;
}

int64_t naive_activation_bytes(const Graph& g) {
  int64_t total = 0;
  for (const Node& n : g.nodes())
    for (ValueId v : n.outputs) total += g.value(v).size_bytes();
  return total;
}

std::string describe(const ArenaPlan& plan, const Graph& g) {
  size_t name_width = 6;
  for (const ArenaBuffer& b : plan.buffers) name_width = std::max(name_width, g.value(b.value).name.size());
  const int w = static_cast<int>(name_width) + 2;
  std::ostringstream s;
  s << "  " << std::left << std::setw(w) << "tensor" << std::right << std::setw(12) << "bytes"
    << std::setw(12) << "offset" << "  live (nodes)\n";
  for (const ArenaBuffer& b : plan.buffers) {
    s << "  " << std::left << std::setw(w) << g.value(b.value).name << std::right
      << std::setw(12) << b.bytes << std::setw(12) << b.offset << "  [" << b.first << ", "
      << (b.last == static_cast<int>(g.num_nodes()) ? std::string("end")
                                                     : std::to_string(b.last))
      << "]\n";
  }
  s << "  arena: " << plan.arena_bytes << " bytes (" << plan.unshared_bytes
    << " without reuse)\n";
  return s.str();
}

}  // namespace kiln::graph
