// fuse_conv_pooling: a 2-D pooling that alone reads a convolution's output goes into that
// convolution (Conv2d::pool). The stems of ResNets (7x7/s2 conv, then a 3x3/s2 max pool) and
// Inception networks (3x3 convs, then a 3x3/s2 max pool) write their largest activation only for
// the pooling to read it back; the fused kernel (with the wide CPU schedule, which such stems
// take) computes the convolution a band of rows at a time, pools the band while it is in
// cache, and writes the pooled tensor alone (a quarter of the bytes for a stride-2 pool). Runs after every pass that adds to a convolution's epilogue:
// the pooling comes after all of it.
#include "graph/kernel_spec.h"
#include "graph/passes/passes.h"

namespace kiln::graph {

Graph fuse_conv_pooling(const Graph& input) {
  Graph g = input;
  const auto uses = g.consumers();
  std::vector<Node> nodes = g.nodes();
  std::vector<bool> dead(nodes.size(), false);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto* pool = std::get_if<Pool2d>(&nodes[i].op);
    if (!pool || nodes[i].inputs.size() != 1 || nodes[i].outputs.size() != 1) continue;
    const ValueId v = nodes[i].inputs[0];
    const Value& x = g.value(v);
    if (x.layout != Layout::nhwc || x.shape.size() != 4 || g.is_graph_output(v) ||
        uses[v.index].size() != 1 || !x.producer.valid())
      continue;
    Node& conv = nodes[x.producer.index];
    auto* attrs = std::get_if<Conv2d>(&conv.op);
    if (!attrs || attrs->has_tail() || conv.outputs.size() != 1 || !lowers_to_halide_conv(g, conv))
      continue;
    attrs->pool = *pool;
    conv.outputs[0] = nodes[i].outputs[0];
    conv.computes.insert(conv.computes.end(), nodes[i].computes.begin(), nodes[i].computes.end());
    dead[i] = true;
  }
  g.rebuild(std::move(nodes), dead);
  return g;
}

}  // namespace kiln::graph
