// fuse_epilogues: an output-fusable node (conv) absorbs the chain of elementwise ops after it
// into its epilogue, so the intermediates never reach memory. Run after fold_batch_norm.
#include "graph/kernel_spec.h"
#include "graph/op_kind.h"
#include "graph/passes/passes.h"

namespace kiln::graph {

Graph fuse_epilogues(const Graph& input) {
  Graph g = input;
  const auto uses = g.consumers();
  std::vector<Node> nodes = g.nodes();
  std::vector<bool> dead(nodes.size(), false);

  for (size_t i = 0; i < nodes.size(); ++i) {
    if (dead[i] || op_kind(nodes[i].op) != OpKind::output_fusable) continue;
    auto& conv = std::get<Conv2d>(nodes[i].op);
    for (;;) {
      const ValueId out = nodes[i].outputs[0];
      // The single-consumer rule: a tensor read by anyone else, or by the caller, must exist.
      if (g.is_graph_output(out) || uses[out.index].size() != 1) break;
      const size_t j = uses[out.index][0].index;
      if (dead[j] || op_kind(nodes[j].op) != OpKind::elementwise) break;
      const std::optional<Activation> act = as_activation(nodes[j].op);
      if (!act) break;
      const Activation combined = conv.activation.then(*act);
      if (!conv_epilogue_supported(combined)) break;
      conv.activation = combined;
      nodes[i].outputs = nodes[j].outputs;
      for (const std::string& op : nodes[j].computes) nodes[i].computes.push_back(op);
      dead[j] = true;
    }
  }

  g.rebuild(std::move(nodes), dead);
  return g;
}

}  // namespace kiln::graph
