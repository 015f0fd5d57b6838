// fuse_norm_epilogues: what a GroupNorm's output alone feeds goes into the GroupNorm's kernel,
// which computes it as it writes the normalized image: an Add of another tensor of its shape
// and layout (the shortcut of a GroupNorm ResNet's block, whose other operand
// may be the downsampling branch's GroupNorm), then an ElementwiseChain (the ReLU or SiLU after
// the norm) as its post steps. Each would otherwise be a kernel of its own, reading and writing
// the whole image once more. The fused node takes the place of the last node it absorbs, where
// every tensor it reads exists. Runs after fuse_elementwise_chains (the chains are formed) and
// before fuse_conv_prologues, which would take a chain read by one convolution into that
// convolution instead: in the norm's kernel the chain is computed once per element whatever
// reads the result.
#include "graph/passes/passes.h"

namespace kiln::graph {

Graph fuse_norm_epilogues(const Graph& input) {
  Graph g = input;
  const auto uses = g.consumers();
  std::vector<Node> nodes = g.nodes();
  std::vector<bool> dead(nodes.size(), false);
  // The one live node that reads v, unless v is a graph output.
  const auto sole_reader = [&](ValueId v) -> const Node* {
    if (g.is_graph_output(v) || uses[v.index].size() != 1 || dead[uses[v.index][0].index])
      return nullptr;
    return &nodes[uses[v.index][0].index];
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto* attrs = std::get_if<GroupNorm>(&nodes[i].op);
    if (!attrs || dead[i] || attrs->residual || !attrs->post.empty()) continue;
    Node norm = nodes[i];
    GroupNorm gn = *attrs;
    const Value x = g.value(norm.outputs[0]);
    size_t at = i;  // the last node absorbed
    const auto absorb = [&](const Node* n) {
      at = static_cast<size_t>(n - nodes.data());
      if (n->computes.empty()) norm.computes.push_back(op_label(n->op));
      norm.computes.insert(norm.computes.end(), n->computes.begin(), n->computes.end());
      norm.outputs = n->outputs;
      if (at != i) dead[at] = true;
    };
    if (const Node* add = sole_reader(norm.outputs[0])) {
      const auto* b = std::get_if<Binary>(&add->op);
      if (b && b->op == BinaryOp::add && add->inputs.size() == 2 &&
          add->inputs[0] != add->inputs[1]) {
        const ValueId other = add->inputs[0] == norm.outputs[0] ? add->inputs[1] : add->inputs[0];
        const Value& o = g.value(other);
        if (!o.is_constant() && o.shape == x.shape && o.layout == x.layout &&
            g.value(add->outputs[0]).shape == x.shape) {
          gn.residual = true;
          norm.inputs.push_back(other);
          absorb(add);
        }
      }
    }
    if (const Node* chain = sole_reader(norm.outputs[0])) {
      const auto* c = std::get_if<ElementwiseChain>(&chain->op);
      bool constant_params = c && chain->inputs[0] == norm.outputs[0];
      for (size_t k = 1; constant_params && k < chain->inputs.size(); ++k)
        constant_params = g.value(chain->inputs[k]).is_constant();
      if (constant_params && g.value(chain->outputs[0]).shape == x.shape) {
        gn.post = c->steps;
        norm.inputs.insert(norm.inputs.end(), chain->inputs.begin() + 1, chain->inputs.end());
        absorb(chain);
      }
    }
    if (at == i) continue;
    norm.op = gn;
    dead[at] = false;
    nodes[at] = std::move(norm);
    dead[i] = true;
  }
  g.rebuild(std::move(nodes), dead);
  return g;
}

}  // namespace kiln::graph
