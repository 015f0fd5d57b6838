// fold_batch_norm: Conv2d -> BatchNorm becomes one Conv2d with rescaled weights and bias.
// Needs constant conv weights/bias and BN parameters; runs first in the pipeline.
#include <cmath>

#include "graph/passes/passes.h"
#include "graph/shape_inference.h"

namespace kiln::graph {
namespace {

// The conv that produces `x`, if BN may fold into it.
const Node* foldable_producer(const Graph& g, ValueId x,
                              const std::vector<std::vector<NodeId>>& uses) {
  const NodeId p = g.value(x).producer;
  if (!p.valid() || uses[x.index].size() != 1 || g.is_graph_output(x)) return nullptr;
  const Node& conv = g.node(p);
  const auto* attrs = std::get_if<Conv2d>(&conv.op);
  // An epilogue (e.g. a fused ReLU) sits between conv and BN: BN no longer commutes.
  if (!attrs || !attrs->activation.is_identity() || attrs->residual) return nullptr;
  if (!g.value(conv.inputs[1]).is_constant() || !g.value(conv.inputs[2]).is_constant())
    return nullptr;
  return &conv;
}

}  // namespace

Graph fold_batch_norm(const Graph& input) {
  Graph g = input;
  const auto uses = g.consumers();
  std::vector<Node> nodes = g.nodes();
  std::vector<bool> dead(nodes.size(), false);

  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto* bn = std::get_if<BatchNorm>(&nodes[i].op);
    if (!bn) continue;
    const Node* conv = foldable_producer(g, nodes[i].inputs[0], uses);
    if (!conv) continue;
    bool params_constant = true;
    for (size_t k = 1; k < 5; ++k) params_constant &= g.value(nodes[i].inputs[k]).is_constant();
    if (!params_constant) continue;

    const Value& w = g.value(conv->inputs[1]);
    const std::vector<float>& gamma = *g.value(nodes[i].inputs[1]).data;
    const std::vector<float>& beta = *g.value(nodes[i].inputs[2]).data;
    const std::vector<float>& mean = *g.value(nodes[i].inputs[3]).data;
    const std::vector<float>& var = *g.value(nodes[i].inputs[4]).data;
    const std::vector<float>& b = *g.value(conv->inputs[2]).data;
    const FilterDims f = filter_dims(w.shape, w.layout);

    // Double precision: the folded constants are computed once and reused forever.
    std::vector<double> scale(f.co);
    std::vector<float> new_b(f.co);
    for (int64_t c = 0; c < f.co; ++c) {
      scale[c] = gamma[c] / std::sqrt(static_cast<double>(var[c]) + bn->epsilon);
      new_b[c] = static_cast<float>((static_cast<double>(b[c]) - mean[c]) * scale[c] + beta[c]);
    }
    std::vector<float> new_w(w.data->size());
    const int64_t per_co = f.ci * f.kh * f.kw;  // OIHW: co outermost; HWIO: co innermost
    for (size_t k = 0; k < new_w.size(); ++k) {
      const int64_t c = w.layout == Layout::oihw ? static_cast<int64_t>(k) / per_co
                                                 : static_cast<int64_t>(k) % f.co;
      new_w[k] = static_cast<float>((*w.data)[k] * scale[c]);
    }

    const NodeId conv_id = g.value(nodes[i].inputs[0]).producer;
    Node& c = nodes[conv_id.index];
    Value wv{w.name + "'", w.shape, w.dtype, w.layout};
    wv.data = std::make_shared<const std::vector<float>>(std::move(new_w));
    Value bv{g.value(conv->inputs[2]).name + "'", {f.co}, DType::f32, Layout::any};
    bv.data = std::make_shared<const std::vector<float>>(std::move(new_b));
    c.inputs[1] = g.add_value(std::move(wv));
    c.inputs[2] = g.add_value(std::move(bv));
    c.outputs = nodes[i].outputs;
    c.computes.push_back("batchnorm (folded)");
    dead[i] = true;
  }

  g.rebuild(std::move(nodes), dead);
  return g;
}

}  // namespace kiln::graph
