// fold_constants: a node whose every input is a constant is computed once, by the reference
// interpreter, and its outputs become constants. Exporters leave such arithmetic in the graph
// where the model computes it from its parameters at run time: EfficientDet's fast normalized
// fusion weights (ReLU of a parameter vector, divided by its sum plus epsilon, each weight taken
// out with a Gather) before every BiFPN node. Left in, each step was a kernel, and a Mul of an
// image by a computed scalar kept the image in NCHW (two layout transforms per fusion node);
// folded, the scalars are constants, which the chain and epilogue passes absorb.
//
// Not folded: convolutions and matrix products (a pass over the weights costs more than the
// kernel), graph outputs, values that are not float32, and outputs of more than kMaxElements or
// larger than both the node's inputs together and 1024 elements (a Tile or an Expand of a
// constant stays a kernel, not a copy in the model's weights). Runs first, on the logical
// graph.
#include <algorithm>
#include <memory>
#include <vector>

#include "graph/passes/passes.h"
#include "graph/reference.h"

namespace kiln::graph {
namespace {

constexpr int64_t kMaxElements = int64_t{1} << 20;

bool foldable(const Graph& g, const Node& n) {
  if (n.inputs.empty() || std::holds_alternative<Conv2d>(n.op) ||
      std::holds_alternative<Gemm>(n.op) || std::holds_alternative<MatMul>(n.op))
    return false;
  int64_t in_elements = 0;
  for (ValueId v : n.inputs) {
    const Value& x = g.value(v);
    if (!x.is_constant() || x.dtype != DType::f32) return false;
    in_elements += num_elements(x.shape);
  }
  for (ValueId v : n.outputs) {
    const Value& y = g.value(v);
    const int64_t e = num_elements(y.shape);
    if (g.is_graph_output(v) || y.dtype != DType::f32 || e > kMaxElements ||
        e > std::max<int64_t>(in_elements, 1024))
      return false;
  }
  return true;
}

}  // namespace

Graph fold_constants(const Graph& input) {
  Graph g = input;
  std::vector<Node> kept;
  bool folded = false;
  for (uint32_t k = 0; k < input.num_nodes(); ++k) {
    const Node& n = input.nodes()[k];
    if (!foldable(g, n)) {
      kept.push_back(n);
      continue;
    }
    const std::vector<Tensor> results = run_reference(subgraph(g, {NodeId{k}}, n.outputs), {});
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      Value& v = g.value(n.outputs[i]);
      v.data = std::make_shared<const std::vector<float>>(results.at(i).data);
      v.producer = NodeId{};
    }
    folded = true;
  }
  if (!folded) return input;
  g.rebuild(std::move(kept));
  return g;
}

}  // namespace kiln::graph
