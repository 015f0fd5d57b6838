// matmul_to_conv: a channels-last linear layer, MatMul([N, H, W, K], constant [K, M]), is a 1x1
// convolution of the same bytes read as an image with K channels. It becomes
//   Transpose(0, 3, 1, 2) -> Conv2d 1x1 (weights [M, K, 1, 1], zero bias) -> Transpose(0, 2, 3, 1)
// so that the convolution's fusions apply to it: a bias Add and a per-channel scale fold into
// its weights (fold_batch_norm), a residual Add and activations join its epilogue. The layout
// pass turns both transposes into relabels of the NHWC bytes (no copy), and sink_transposes
// cancels the ones that meet between two such layers. ConvNeXt's MLP is written this way.
// A MatMul with a 1-D operand gets its matrix form here too: Reshapes (views) around a
// MatMul of matrices, which is what the generated product kernels take.
#include <map>

#include "graph/passes/passes.h"
#include "graph/shape_inference.h"

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

bool has_vector_operand(const Graph& g, const Node& n) {
  return std::holds_alternative<MatMul>(n.op) &&
         (g.value(n.inputs[0]).shape.size() == 1 || g.value(n.inputs[1]).shape.size() == 1);
}

// `v` reshaped to `shape` (the same elements): a new constant, or a Reshape node (a view).
ValueId reshaped(Graph& g, std::vector<Node>& nodes, ValueId v, const Shape& shape, const std::string& name) {
  const Value src = g.value(v);
  Value r{name, shape, src.dtype, logical_layout(shape.size())};
  if (src.is_constant()) {
    r.data = src.data;
    return g.add_value(std::move(r));
  }
  const ValueId out = g.add_value(std::move(r));
  nodes.push_back(Node{name, Reshape{shape, Layout::any}, {v}, {out}, {"reshape (no copy)"}});
  return out;
}

// A MatMul with a 1-D operand as ONNX defines it: the vector as a [1, K] or [K, 1] matrix, the
// product's added axis dropped. Reshapes are views, so only the matrix product computes.
void matrix_form(Graph& g, std::vector<Node>& nodes, const Node& n) {
  const Shape sa = g.value(n.inputs[0]).shape, sb = g.value(n.inputs[1]).shape;
  const Value out = g.value(n.outputs[0]);
  const ValueId a = sa.size() == 1 ? reshaped(g, nodes, n.inputs[0], {1, sa[0]}, n.name + "_a_row") : n.inputs[0];
  const ValueId b = sb.size() == 1 ? reshaped(g, nodes, n.inputs[1], {sb[0], 1}, n.name + "_b_column") : n.inputs[1];
  Shape product = out.shape;  // [batch..., M, N] with the vector's axis back
  if (sa.size() == 1) product.insert(product.end() - (sb.size() == 1 ? 0 : 1), 1);
  if (sb.size() == 1) product.push_back(1);
  const ValueId p = g.add_value(Value{out.name + "_matrix", product, out.dtype, logical_layout(product.size())});
  nodes.push_back(Node{n.name, MatMul{}, {a, b}, {p}, n.computes});
  nodes.push_back(Node{n.name + "_vector", Reshape{out.shape, Layout::any}, {p}, n.outputs, {"reshape (no copy)"}});
}

}  // namespace

Graph matmul_to_conv(const Graph& input) {
  Graph g = input;
  std::vector<Node> nodes;
  std::map<uint32_t, ValueId> oihw;  // [K, M] constant -> its [M, K, 1, 1] version (shared)
  for (const Node& n : input.nodes()) {
    if (has_vector_operand(input, n)) {
      matrix_form(g, nodes, n);
      continue;
    }
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
