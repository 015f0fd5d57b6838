// gemm_as_conv (bf16 mode only, ahead of the other passes): a Gemm of a computed A [N, K] and a
// constant B (a classifier's fully connected layer) is the 1x1 convolution of A read as an
// [N, K, 1, 1] image:
//   Reshape [N, K, 1, 1] -> Conv2d 1x1 (weights alpha * B as [M, K, 1, 1], bias beta * C) ->
//   Reshape [N, M]
// so that use_bf16 gives it bf16 weights: such a layer streams its weights from memory once per
// call, and bf16 halves the bytes (ResNet-50's 2048 -> 1000 layer, 8 MB in float32).
#include <optional>
#include <vector>

#include "graph/passes/passes.h"

namespace kiln::graph {
namespace {

// The constant bias of M elements a Gemm adds, scaled by beta (zeros without C), or nothing
// when its C is computed or broadcasts differently.
std::optional<std::vector<float>> gemm_bias(const Graph& g, const Node& n, const Gemm& gm,
                                            int64_t m) {
  if (n.inputs.size() < 3) return std::vector<float>(static_cast<size_t>(m), 0.0f);
  const Value& c = g.value(n.inputs[2]);
  if (!c.is_constant() || c.shape.empty() || c.shape.back() != m || num_elements(c.shape) != m)
    return std::nullopt;
  std::vector<float> bias(*c.data);
  for (float& v : bias) v *= gm.beta;
  return bias;
}

}  // namespace

Graph gemm_as_conv(const Graph& input) {
  Graph g = input;
  std::vector<Node> nodes;
  for (const Node& n : input.nodes()) {
    const auto* gm = std::get_if<Gemm>(&n.op);
    if (!gm || n.inputs.size() < 2) {
      nodes.push_back(n);
      continue;
    }
    // Copies: add_value below may move the graph's values.
    const Value a = g.value(n.inputs[0]), b = g.value(n.inputs[1]);
    if (gm->trans_a || a.is_constant() || a.shape.size() != 2 || !b.is_constant() ||
        b.shape.size() != 2) {
      nodes.push_back(n);
      continue;
    }
    const int64_t batch = a.shape[0], k = a.shape[1], m = gm->trans_b ? b.shape[0] : b.shape[1];
    const std::optional<std::vector<float>> bias = gemm_bias(g, n, *gm, m);
    if (!bias) {
      nodes.push_back(n);
      continue;
    }
    std::vector<float> weights(static_cast<size_t>(m * k));  // OIHW [M, K, 1, 1]
    for (int64_t o = 0; o < m; ++o)
      for (int64_t i = 0; i < k; ++i)
        weights[static_cast<size_t>(o * k + i)] =
            gm->alpha * (*b.data)[static_cast<size_t>(gm->trans_b ? o * k + i : i * m + o)];
    Value wv{b.name + "_oihw", {m, k, 1, 1}, DType::f32, Layout::oihw};
    wv.data = std::make_shared<const std::vector<float>>(std::move(weights));
    Value bv{n.name + "_bias", {m}, DType::f32, Layout::any};
    bv.data = std::make_shared<const std::vector<float>>(std::move(*bias));
    const ValueId w = g.add_value(std::move(wv)), bias_id = g.add_value(std::move(bv));
    const Value out = g.value(n.outputs[0]);
    const ValueId image =
        g.add_value(Value{a.name + "_as_image", {batch, k, 1, 1}, a.dtype, Layout::nchw});
    const ValueId conv_out =
        g.add_value(Value{out.name + "_image", {batch, m, 1, 1}, out.dtype, Layout::nchw});
    nodes.push_back(Node{n.name + "_to_image",
                         Reshape{{batch, k, 1, 1}, Layout::any},
                         {n.inputs[0]},
                         {image},
                         {"reshape (no copy)"}});
    nodes.push_back(
        Node{n.name, Conv2d{}, {image, w, bias_id}, {conv_out}, {"gemm (as a 1x1 conv2d)"}});
    nodes.push_back(Node{n.name + "_to_matrix",
                         Reshape{out.shape, Layout::any},
                         {conv_out},
                         n.outputs,
                         {"reshape (no copy)"}});
  }
  g.rebuild(std::move(nodes));
  return g;
}

}  // namespace kiln::graph
