// simplify_exported_ops: two forms exporters write for what Kiln has a better op for.
// - A mean or max over H and W of a 4-D image (PyTorch's x.mean((2, 3)), which timm's
//   squeeze-and-excitation and ECA blocks use) is a global pooling: a GlobalPool, which the
//   layout pass keeps in NHWC, where a Reduce would move the image back to NCHW first. Without
//   keepdims, a Reshape (a view) drops the two unit axes.
// - A Tile (ONNX Expand, as in x * y.expand_as(x)) whose every reader is a broadcasting binary
//   op with another operand already of the Tile's shape is left out: the readers broadcast its
//   input themselves, so the expanded copy is never made.
// Runs after fuse_layer_norm (whose patterns include means over H and W) and before the layout
// pass.
#include <optional>

#include "graph/passes/passes.h"

namespace kiln::graph {
namespace {

// The pooling a Reduce over the spatial axes of a 4-D NCHW activation is, or nullopt.
std::optional<PoolKind> spatial_pool(const Graph& g, const Node& n) {
  const auto* r = std::get_if<Reduce>(&n.op);
  if (!r || (r->kind != ReduceKind::mean && r->kind != ReduceKind::max) ||
      r->axes != std::vector<int>{2, 3})
    return std::nullopt;
  const Value& x = g.value(n.inputs[0]);
  if (x.is_constant() || x.shape.size() != 4 || x.layout != Layout::nchw) return std::nullopt;
  return r->kind == ReduceKind::mean ? PoolKind::avg : PoolKind::max;
}

// Whether every reader of the Tile's output is a Binary reading it once, next to an operand of
// the same shape (so the Binary's output shape does not depend on the Tile).
bool broadcast_by_readers(const Graph& g, const Node& tile,
                          const std::vector<std::vector<NodeId>>& uses) {
  const ValueId out = tile.outputs[0];
  if (g.is_graph_output(out) || uses[out.index].empty()) return false;
  for (NodeId u : uses[out.index]) {
    const Node& r = g.node(u);
    if (!std::holds_alternative<Binary>(r.op) || r.inputs.size() != 2 || r.inputs[0] == r.inputs[1])
      return false;
    const ValueId other = r.inputs[0] == out ? r.inputs[1] : r.inputs[0];
    if (g.value(other).shape != g.value(out).shape) return false;
  }
  return true;
}

}  // namespace

Graph simplify_exported_ops(const Graph& input) {
  Graph g = input;
  const auto uses = input.consumers();
  std::vector<Node> nodes;
  std::vector<std::pair<ValueId, ValueId>> replaced;  // a Tile's output -> its input
  for (const Node& n : input.nodes()) {
    if (std::holds_alternative<Tile>(n.op) && broadcast_by_readers(input, n, uses)) {
      replaced.emplace_back(n.outputs[0], n.inputs[0]);
      continue;
    }
    const std::optional<PoolKind> pool = spatial_pool(input, n);
    if (!pool) {
      nodes.push_back(n);
      continue;
    }
    std::vector<std::string> computes = n.computes;
    if (computes.empty()) computes.push_back(op_label(n.op));
    computes.back() += " (as a global pooling)";
    if (std::get<Reduce>(n.op).keepdims) {
      nodes.push_back(Node{n.name, GlobalPool{*pool}, n.inputs, n.outputs, computes});
      continue;
    }
    const Value out = g.value(n.outputs[0]);
    const Shape& x = g.value(n.inputs[0]).shape;
    const ValueId pooled =
        g.add_value(Value{out.name + "_pooled", {x[0], x[1], 1, 1}, out.dtype, Layout::nchw});
    nodes.push_back(Node{n.name, GlobalPool{*pool}, n.inputs, {pooled}, computes});
    nodes.push_back(Node{n.name + "_flat",
                         Reshape{out.shape, Layout::any},
                         {pooled},
                         n.outputs,
                         {"reshape (no copy)"}});
  }
  for (Node& n : nodes)
    for (ValueId& v : n.inputs)
      for (const auto& [tiled, source] : replaced)
        if (v == tiled) v = source;
  g.rebuild(std::move(nodes));
  return g;
}

}  // namespace kiln::graph
