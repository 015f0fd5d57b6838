// fuse_conv_shortcut: an Add of a convolution's output, after the convolution's activation and
// post steps, and another tensor of the same shape goes into that convolution (Conv2d::shortcut).
// A YOLO bottleneck is x + SiLU(BN(conv(SiLU(BN(conv(x)))))): the residual that fuse_epilogues
// absorbs is added before the activation, so this Add stayed a kernel of its own, reading both
// tensors and writing a third. Runs after fuse_elementwise_chains (the post steps come first)
// and before fuse_conv_pooling, fuse_expand_depthwise and fuse_conv_resize, which leave a
// convolution with a shortcut alone.
#include "graph/kernel_spec.h"
#include "graph/passes/passes.h"

namespace kiln::graph {

Graph fuse_conv_shortcut(const Graph& input) {
  Graph g = input;
  const auto uses = g.consumers();
  std::vector<Node> nodes = g.nodes();
  std::vector<bool> dead(nodes.size(), false);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto* add = std::get_if<Binary>(&nodes[i].op);
    if (!add || add->op != BinaryOp::add || nodes[i].inputs.size() != 2 ||
        nodes[i].outputs.size() != 1 || nodes[i].inputs[0] == nodes[i].inputs[1])
      continue;
    // The operand a convolution can take: its output, read by this Add alone, with the other
    // operand (same shape and layout) there before the convolution runs. Of two, the later.
    size_t best = nodes.size(), best_conv = 0;
    for (size_t side = 0; side < 2; ++side) {
      const ValueId y = nodes[i].inputs[side], other = nodes[i].inputs[1 - side];
      const Value &v = g.value(y), &o = g.value(other);
      if (!v.producer.valid() || g.is_graph_output(y) || uses[y.index].size() != 1 ||
          o.shape != v.shape || o.layout != v.layout)
        continue;
      const size_t p = v.producer.index;
      const auto* c = std::get_if<Conv2d>(&nodes[p].op);
      if (!c || dead[p] || c->has_tail() || c->expand || c->input_scale ||
          nodes[p].outputs.size() != 1 || !lowers_to_halide_conv(g, nodes[p]) ||
          (o.producer.valid() && o.producer.index >= p))
        continue;
      if (best == nodes.size() || p > best_conv) best = side, best_conv = p;
    }
    if (best == nodes.size()) continue;
    Node& conv = nodes[best_conv];
    std::get<Conv2d>(conv.op).shortcut = true;
    conv.inputs.push_back(nodes[i].inputs[1 - best]);  // Conv2d::shortcut_input()
    conv.outputs[0] = nodes[i].outputs[0];
    conv.computes.push_back("add (shortcut)");
    dead[i] = true;
  }
  g.rebuild(std::move(nodes), dead);
  return g;
}

}  // namespace kiln::graph
