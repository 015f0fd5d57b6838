// fold_pad_into_conv: a zero Pad of the spatial axes whose only readers are convolutions
// becomes part of their padding, so the padded copy is never made. Runs before the layout pass
// (pads in NCHW order).
#include <algorithm>

#include "graph/passes/passes.h"

namespace kiln::graph {
namespace {

// The Pad's [top, left, bottom, right] when it pads only H and W of an NCHW tensor with zeros.
bool spatial_zero_pad(const Graph& g, const Node& n, int pads[4]) {
  const auto* p = std::get_if<Pad>(&n.op);
  if (!p || p->mode != PadMode::constant || p->value != 0.0f ||
      g.value(n.inputs[0]).layout != Layout::nchw)
    return false;
  const std::vector<int64_t>& q = p->pads;  // [n0, c0, h0, w0, n1, c1, h1, w1]
  if (q.size() != 8 || q[0] || q[1] || q[4] || q[5]) return false;
  for (int i : {2, 3, 6, 7})
    if (q[i] < 0 || q[i] > (1 << 20)) return false;
  pads[0] = static_cast<int>(q[2]);
  pads[1] = static_cast<int>(q[3]);
  pads[2] = static_cast<int>(q[6]);
  pads[3] = static_cast<int>(q[7]);
  return true;
}

}  // namespace

Graph fold_pad_into_conv(const Graph& input) {
  Graph g = input;
  const auto uses = g.consumers();
  std::vector<Node> nodes = g.nodes();
  std::vector<bool> dead(nodes.size(), false);
  for (size_t i = 0; i < nodes.size(); ++i) {
    int pads[4];
    const ValueId out = nodes[i].outputs[0];
    if (!spatial_zero_pad(g, nodes[i], pads) || g.is_graph_output(out) || uses[out.index].empty())
      continue;
    bool only_convs = true;
    for (NodeId u : uses[out.index]) {
      const Node& c = nodes[u.index];
      only_convs &= std::holds_alternative<Conv2d>(c.op) && c.inputs[0] == out &&
                    std::count(c.inputs.begin(), c.inputs.end(), out) == 1;
    }
    if (!only_convs) continue;
    for (NodeId u : uses[out.index]) {
      Node& c = nodes[u.index];
      auto& attrs = std::get<Conv2d>(c.op);
      attrs.pad_top += pads[0];
      attrs.pad_left += pads[1];
      attrs.pad_bottom += pads[2];
      attrs.pad_right += pads[3];
      c.inputs[0] = nodes[i].inputs[0];
      c.computes.insert(c.computes.begin(), "pad (folded)");
    }
    dead[i] = true;
  }
  g.rebuild(std::move(nodes), dead);
  return g;
}

}  // namespace kiln::graph
