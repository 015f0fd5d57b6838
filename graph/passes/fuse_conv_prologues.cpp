// fuse_conv_prologues: an ElementwiseChain whose output only a convolution reads, as its input,
// goes into that convolution as its pre steps (Conv2d::pre). In pre-activation networks
// (DenseNet, pre-activation ResNets) every BatchNorm + ReLU before a convolution is such a
// chain: it could not fold (no convolution produces its input alone) and ran as a kernel of its
// own, writing the activated tensor to memory for the convolution to read back. The
// convolution's kernel computes the steps as it stages its input instead. The chain's input
// is then the convolution's input, so a slice of an in-place Concat stays a slice. Runs last.
#include "graph/kernel_spec.h"
#include "graph/passes/passes.h"

namespace kiln::graph {

Graph fuse_conv_prologues(const Graph& input) {
  Graph g = input;
  const auto uses = g.consumers();
  std::vector<Node> nodes = g.nodes();
  std::vector<bool> dead(nodes.size(), false);
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto* chain = std::get_if<ElementwiseChain>(&nodes[i].op);
    if (!chain || nodes[i].outputs.size() != 1 || nodes[i].inputs.empty()) continue;
    const ValueId v = nodes[i].outputs[0];
    if (g.is_graph_output(v) || uses[v.index].size() != 1) continue;
    const Value& x = g.value(nodes[i].inputs[0]);
    if (x.layout != Layout::nhwc || x.shape.size() != 4) continue;
    bool constant_params = true;
    for (size_t k = 1; k < nodes[i].inputs.size(); ++k)
      constant_params = constant_params && g.value(nodes[i].inputs[k]).is_constant();
    const size_t j = uses[v.index][0].index;
    Node& conv = nodes[j];
    auto* attrs = std::get_if<Conv2d>(&conv.op);
    // Dense and grouped convolutions stage their input once per task; a depthwise one reads
    // each element for every tap and would compute the steps that many times.
    if (!constant_params || !attrs || !attrs->pre.empty() || conv.inputs[0] != v ||
        !lowers_to_halide_conv(g, conv) || attrs->groups == x.shape[3])
      continue;
    attrs->pre = chain->steps;
    conv.inputs[0] = nodes[i].inputs[0];
    conv.inputs.insert(conv.inputs.end(), nodes[i].inputs.begin() + 1, nodes[i].inputs.end());
    conv.computes.insert(conv.computes.begin(), nodes[i].computes.begin(), nodes[i].computes.end());
    dead[i] = true;
  }
  g.rebuild(std::move(nodes), dead);
  return g;
}

}  // namespace kiln::graph
