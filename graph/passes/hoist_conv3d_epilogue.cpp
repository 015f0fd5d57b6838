// hoist_conv3d_epilogue: a 3-D convolution is imported as a 2-D convolution over [N * Do, ...]
// whose output [N * Do, M, Ho, Wo] is viewed as [N, Do, M, Ho, Wo] (a Reshape) and brought to
// [N, M, Do, Ho, Wo] (a Transpose, or a second Reshape when Do or M is 1). A BatchNorm or a
// unary elementwise op after that is per channel M, which is axis 1 of the 2-D output too, so
// it moves in front of the two data-movement nodes: f(P(R(y))) becomes P(R(f(y))). There
// fold_batch_norm folds the BatchNorm and fuse_epilogues / fuse_elementwise_chains take the
// activation into the convolution's epilogue. Repeated until nothing moves (BN, then ReLU).
// Only when each intermediate has that one reader. Runs before sink_transposes.
#include <optional>

#include "graph/op_kind.h"
#include "graph/passes/passes.h"

namespace kiln::graph {
namespace {

bool is_movable(const Graph& g, const Node& n, int64_t channels) {
  if (n.inputs.empty() || n.outputs.size() != 1) return false;
  if (std::holds_alternative<BatchNorm>(n.op)) {
    for (size_t k = 1; k < n.inputs.size(); ++k) {
      const Value& p = g.value(n.inputs[k]);
      if (!p.is_constant() || num_elements(p.shape) != channels) return false;
    }
    return n.inputs.size() == 5;
  }
  return op_kind(n.op) == OpKind::elementwise && !std::holds_alternative<Binary>(n.op) &&
         n.inputs.size() == 1;
}

// The index of the node producing v, when `reader` alone reads v and v is not a graph output.
std::optional<size_t> sole_producer(const Graph& g, const std::vector<std::vector<NodeId>>& uses,
                                    ValueId v, size_t reader) {
  const Value& val = g.value(v);
  if (!val.producer.valid() || g.is_graph_output(v)) return std::nullopt;
  for (NodeId r : uses[v.index])
    if (r.index != reader) return std::nullopt;
  return val.producer.index;
}

// Whether v is a Conv2d's output, perhaps through ops this pass already moved in front of it.
bool from_conv(const Graph& g, const std::vector<Node>& nodes, ValueId v) {
  for (;;) {
    const Value& val = g.value(v);
    if (!val.producer.valid()) return false;
    const Node& n = nodes[val.producer.index];
    if (std::holds_alternative<Conv2d>(n.op)) return true;
    if (!is_movable(g, n, val.shape.size() == 4 ? val.shape[1] : -1)) return false;
    v = n.inputs[0];
  }
}

// One rewrite; false when none applies.
bool hoist_once(Graph& g) {
  const auto uses = g.consumers();
  std::vector<Node> nodes = g.nodes();
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& f = nodes[i];
    if (f.inputs.empty() || g.value(f.inputs[0]).shape.size() != 5) continue;
    const std::optional<size_t> ip = sole_producer(g, uses, f.inputs[0], i);
    if (!ip) continue;
    const Node& p = nodes[*ip];
    const auto* t = std::get_if<Transpose>(&p.op);
    if (!(t && t->perm == std::vector<int>{0, 2, 1, 3, 4}) &&
        !std::holds_alternative<Reshape>(p.op))
      continue;
    const std::optional<size_t> ir = sole_producer(g, uses, p.inputs[0], *ip);
    if (!ir || !std::holds_alternative<Reshape>(nodes[*ir].op)) continue;
    const Node& r = nodes[*ir];
    if (!from_conv(g, nodes, r.inputs[0])) continue;
    const Value& y = g.value(r.inputs[0]);
    const Shape& mid = g.value(r.outputs[0]).shape;
    const Shape& out = g.value(p.outputs[0]).shape;
    // [N * Do, M, Ho, Wo] -> [N, Do, M, Ho, Wo] -> [N, M, Do, Ho, Wo]
    if (y.shape.size() != 4 || mid.size() != 5 || mid[2] != y.shape[1] ||
        mid[0] * mid[1] != y.shape[0] || mid[3] != y.shape[2] || mid[4] != y.shape[3] ||
        out != Shape{mid[0], mid[2], mid[1], mid[3], mid[4]})
      continue;
    if (!is_movable(g, f, y.shape[1])) continue;
    Value moved{g.value(f.outputs[0]).name + "/before_conv3d_view", y.shape, y.dtype, y.layout};
    const ValueId a = g.add_value(std::move(moved));
    Node nf = f, nr = r, np = p;
    nf.inputs[0] = r.inputs[0];
    nf.outputs = {a};
    nr.inputs[0] = a;
    np.outputs = f.outputs;
    nodes[*ir] = std::move(nf);
    nodes[*ip] = std::move(nr);
    nodes[i] = std::move(np);
    g.rebuild(std::move(nodes));
    return true;
  }
  return false;
}

}  // namespace

Graph hoist_conv3d_epilogue(const Graph& input) {
  Graph g = input;
  while (hoist_once(g)) {
  }
  return g;
}

}  // namespace kiln::graph
