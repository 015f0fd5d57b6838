// matmul_to_conv: a channels-last linear layer, MatMul([N, H, W, K], constant [K, M]), is a 1x1
// convolution of the same bytes read as an image with K channels. It becomes
//   Transpose(0, 3, 1, 2) -> Conv2d 1x1 (weights [M, K, 1, 1], zero bias) -> Transpose(0, 2, 3, 1)
// so that the convolution's fusions apply to it: a bias Add and a per-channel scale fold into
// its weights (fold_batch_norm), a residual Add and activations join its epilogue. The layout
// pass turns both transposes into relabels of the NHWC bytes (no copy), and sink_transposes
// cancels the ones that meet between two such layers. ConvNeXt's MLP is written this way.
#include <map>

#include "graph/passes/passes.h"

namespace kiln::graph {
namespace {

bool is_channels_last_linear(const Graph& g, const Node& n) {
  if (!std::holds_alternative<MatMul>(n.op) || n.inputs.size() != 2) return false;
  const Value& x = g.value(n.inputs[0]);
  const Value& w = g.value(n.inputs[1]);
  return !x.is_constant() && x.shape.size() == 4 &&
         (x.layout == Layout::nchw || x.layout == Layout::any) && w.is_constant() &&
         w.shape.size() == 2 && w.shape[0] == x.shape[3];
}

Shape permuted(const Shape& s, const std::vector<int>& perm) {
  Shape out;
  for (int p : perm) out.push_back(s[static_cast<size_t>(p)]);
  return out;
}

}  // namespace

Graph matmul_to_conv(const Graph& input) {
  Graph g = input;
  std::vector<Node> nodes;
  std::map<uint32_t, ValueId> oihw;  // [K, M] constant -> its [M, K, 1, 1] version (shared)
  for (const Node& n : input.nodes()) {
    if (!is_channels_last_linear(input, n)) {
      nodes.push_back(n);
      continue;
    }
    const Value x = g.value(n.inputs[0]);
    const Value out = g.value(n.outputs[0]);
    const int64_t k = x.shape[3], m = out.shape[3];

    auto it = oihw.find(n.inputs[1].index);
    if (it == oihw.end()) {
      const Value& w = g.value(n.inputs[1]);
      std::vector<float> data(static_cast<size_t>(k * m));
      for (int64_t i = 0; i < k; ++i)
        for (int64_t o = 0; o < m; ++o) data[static_cast<size_t>(o * k + i)] = (*w.data)[static_cast<size_t>(i * m + o)];
      Value wv{w.name + "_oihw", {m, k, 1, 1}, w.dtype, Layout::oihw};
      wv.data = std::make_shared<const std::vector<float>>(std::move(data));
      it = oihw.emplace(n.inputs[1].index, g.add_value(std::move(wv))).first;
    }
    Value bias{n.name + "_zero_bias", {m}, DType::f32, Layout::any};
    bias.data = std::make_shared<const std::vector<float>>(static_cast<size_t>(m), 0.0f);
    const ValueId b = g.add_value(std::move(bias));

    const std::vector<int> to_image = {0, 3, 1, 2}, to_channels_last = {0, 2, 3, 1};
    const ValueId image = g.add_value(Value{x.name + "_as_image", permuted(x.shape, to_image), x.dtype, Layout::nchw});
    const ValueId conv_out =
        g.add_value(Value{out.name + "_image", permuted(out.shape, to_image), out.dtype, Layout::nchw});
    nodes.push_back(Node{n.name + "_to_image", Transpose{to_image}, {n.inputs[0]}, {image}, {"transpose"}});
    nodes.push_back(Node{n.name, Conv2d{}, {image, it->second, b}, {conv_out}, {"matmul (as a 1x1 conv2d)"}});
    nodes.push_back(Node{n.name + "_to_channels_last", Transpose{to_channels_last}, {conv_out}, n.outputs,
                         {"transpose"}});
  }
  g.rebuild(std::move(nodes));
  return g;
}

}  // namespace kiln::graph
