// fuse_epilogues: an output-fusable node (conv) absorbs the chain of elementwise ops after it
// into its epilogue, so the intermediates never reach memory. Run after fold_batch_norm.
#include "graph/kernel_spec.h"
#include "graph/op_kind.h"
#include "graph/passes/passes.h"

namespace kiln::graph {

namespace {

// Whether conv node `i` (output `out`) can take Add node `add` as its residual: a same-shape
// add (no broadcast), before any activation, whose other operand exists before node i so the
// fused node can read it. When both operands are convolutions, the later one absorbs the Add.
bool absorb_residual_add(const Graph& g, size_t i, const Conv2d& conv, const Node& add,
                         ValueId out) {
  const auto* b = std::get_if<Binary>(&add.op);
  if (!b || b->op != BinaryOp::add || conv.residual || !conv.activation.is_identity()) return false;
  if (add.inputs[0] == add.inputs[1]) return false;  // x + x
  const ValueId other = add.inputs[0] == out ? add.inputs[1] : add.inputs[0];
  const Value& o = g.value(other);
  if (o.shape != g.value(out).shape || o.layout != g.value(out).layout) return false;
  return !o.producer.valid() || o.producer.index < i;
}

}  // namespace

Graph fuse_epilogues(const Graph& input) {
  Graph g = input;
  const auto uses = g.consumers();
  std::vector<Node> nodes = g.nodes();
  std::vector<bool> dead(nodes.size(), false);

  for (size_t i = 0; i < nodes.size(); ++i) {
    if (dead[i] || op_kind(nodes[i].op) != OpKind::output_fusable) continue;
    auto& conv = std::get<Conv2d>(nodes[i].op);
    // A pooled, resized or shortcut output (a graph the passes ran on before): the epilogue
    // would apply before that, not to the tensor the ops after it read.
    if (conv.has_tail()) continue;
    for (;;) {
      const ValueId out = nodes[i].outputs[0];
      // The single-consumer rule: a tensor read by anyone else, or by the caller, must exist.
      if (g.is_graph_output(out) || uses[out.index].size() != 1) break;
      const size_t j = uses[out.index][0].index;
      if (dead[j] || op_kind(nodes[j].op) != OpKind::elementwise) break;
      if (absorb_residual_add(g, i, conv, nodes[j], out)) {
        conv.residual = true;
        nodes[i].inputs.push_back(nodes[j].inputs[0] == out ? nodes[j].inputs[1] : nodes[j].inputs[0]);
        nodes[i].outputs = nodes[j].outputs;
        nodes[i].computes.push_back("add (residual)");
        dead[j] = true;
        continue;
      }
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
