// use_bf16: marks the convolutions that run their multiply-adds in bfloat16 (Conv2d::bf16).
// Runs last: the flag is a property of the fused kernel (its pre steps, epilogue and pooling
// stay float32), and the folded weights are the ones rounded.
#include "graph/kernel_spec.h"
#include "graph/passes/passes.h"

namespace kiln::graph {

Graph use_bf16(const Graph& input) {
  Graph g = input;
  std::vector<Node> nodes = g.nodes();
  for (Node& n : nodes) {
    auto* c = std::get_if<Conv2d>(&n.op);
    if (!c || c->bf16 || !bf16_conv_refusal(g, n).empty()) continue;
    c->bf16 = true;
    n.computes.push_back("bf16 multiply-adds");
  }
  g.rebuild(std::move(nodes));
  return g;
}

}  // namespace kiln::graph
