// matmul_to_conv: a channels-last linear layer, MatMul([N, H, W, K], constant [K, M]), is a 1x1
// convolution of the same bytes read as an image with K channels. It becomes
//   Transpose(0, 3, 1, 2) -> Conv2d 1x1 (weights [M, K, 1, 1], zero bias) -> Transpose(0, 2, 3, 1)
// so that the convolution's fusions apply to it: a bias Add and a per-channel scale fold into
// its weights (fold_batch_norm), a residual Add and activations join its epilogue. The layout
// pass turns both transposes into relabels of the NHWC bytes (no copy), and sink_transposes
// cancels the ones that meet between two such layers. ConvNeXt's MLP is written this way.
// A transformer's linear layer on tokens, [B, T, K] or [T, K] by a constant [K, M], is the same
// convolution of the tokens viewed as one image row [1, B, T, K] (Reshapes before and after,
// views): as a matrix product kernel LeViT-128S's ran at 25-30% of the FMA peak, as
// convolutions at 78-95%. What follows it applies to the image before the view back, so that
// the convolution takes it: the Add, Sub, Mul and Div of per-channel constants (the bias Add of
// nn.Linear, a layer scale gamma * x) and a BatchNorm over the flattened tokens (LeViT's
// Linear -> BatchNorm1d: Flatten to [B * T, M], BatchNormalization, Reshape back) fold into
// the weights (fold_batch_norm), a residual Add joins the epilogue, and so does a one-input
// elementwise op (sink_transposes moves it across the transpose).
// A MatMul with a 1-D operand gets its matrix form here too: Reshapes (views) around a
// MatMul of matrices, which is what the generated product kernels take.
#include <map>

#include "graph/passes/passes.h"
#include "graph/shape_inference.h"

namespace kiln::graph {
namespace {

// A linear layer of rank `rank` input: MatMul(x, constant [K, M]) with x [..., K].
bool is_linear(const Graph& g, const Node& n, size_t rank) {
  if (!std::holds_alternative<MatMul>(n.op) || n.inputs.size() != 2) return false;
  const Value& x = g.value(n.inputs[0]);
  const Value& w = g.value(n.inputs[1]);
  return !x.is_constant() && x.shape.size() == rank &&
         (x.layout == Layout::nchw || x.layout == Layout::any) && w.is_constant() &&
         w.shape.size() == 2 && w.shape[0] == x.shape.back();
}
bool is_channels_last_linear(const Graph& g, const Node& n) { return is_linear(g, n, 4); }

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

// The Add, Sub, Mul or Div of a constant that varies along the last axis only (M values, or
// one) and alone reads v (a bias, a layer scale gamma * x), with the constant second for Sub
// and Div; or nullptr.
const Node* channel_constant_op(const Graph& g, ValueId v, int64_t m,
                                const std::vector<std::vector<NodeId>>& uses) {
  if (g.is_graph_output(v) || uses[v.index].size() != 1) return nullptr;
  const Node& op = g.node(uses[v.index][0]);
  const auto* b = std::get_if<Binary>(&op.op);
  if (!b || op.inputs.size() != 2 || op.inputs[0] == op.inputs[1]) return nullptr;
  const bool ordered = b->op == BinaryOp::sub || b->op == BinaryOp::div;
  if (b->op != BinaryOp::add && b->op != BinaryOp::mul && !ordered) return nullptr;
  const bool v_first = op.inputs[0] == v;
  if (ordered && !v_first) return nullptr;
  const Value& c = g.value(op.inputs[v_first ? 1 : 0]);
  const Shape& vs = g.value(v).shape;
  if (!c.is_constant() || c.shape.size() > vs.size() || g.value(op.outputs[0]).shape != vs)
    return nullptr;
  const int64_t n = num_elements(c.shape);
  return n == 1 || (n == m && c.shape.back() == m) ? &op : nullptr;
}

// The one-input elementwise node that alone reads v (no graph output), or nullptr.
const Node* unary_reader(const Graph& g, ValueId v, const std::vector<std::vector<NodeId>>& uses) {
  if (g.is_graph_output(v) || uses[v.index].size() != 1) return nullptr;
  const Node& r = g.node(uses[v.index][0]);
  const bool unary =
      op_is_unary(r.op) || (std::holds_alternative<ElementwiseChain>(r.op) && r.inputs.size() == 1);
  return unary && r.inputs.size() == 1 && r.outputs.size() == 1 ? &r : nullptr;
}

// The BatchNorm over flattened tokens after a linear layer with M outputs (LeViT's
// Linear -> BatchNorm1d exports MatMul -> Flatten -> BatchNormalization -> Reshape): v's one
// reader is a Reshape to [N, M], and that value's one reader a BatchNorm with constant
// parameters, which normalizes along M. Returns the BatchNorm, or nullptr. It applies to the
// convolution's output instead, where fold_batch_norm folds it into the weights.
const Node* flattened_batch_norm(const Graph& g, ValueId v, int64_t m,
                                 const std::vector<std::vector<NodeId>>& uses) {
  if (g.is_graph_output(v) || uses[v.index].size() != 1) return nullptr;
  const Node& view = g.node(uses[v.index][0]);
  if (!std::holds_alternative<Reshape>(view.op) || view.outputs.size() != 1) return nullptr;
  const ValueId flat = view.outputs[0];
  const Shape& fs = g.value(flat).shape;
  if (fs.size() != 2 || fs[1] != m || g.is_graph_output(flat) || uses[flat.index].size() != 1)
    return nullptr;
  const Node& bn = g.node(uses[flat.index][0]);
  if (!std::holds_alternative<BatchNorm>(bn.op) || bn.inputs.size() != 5 || bn.inputs[0] != flat)
    return nullptr;
  for (size_t k = 1; k < 5; ++k) {
    const Value& p = g.value(bn.inputs[k]);
    if (!p.is_constant() || num_elements(p.shape) != m) return nullptr;
  }
  return &bn;
}

// The Reshape that alone reads v and keeps its last axis (a view back to the tokens' shape
// after a flattened BatchNorm), or nullptr.
const Node* view_keeping_last_axis(const Graph& g, ValueId v,
                                   const std::vector<std::vector<NodeId>>& uses) {
  if (g.is_graph_output(v) || uses[v.index].size() != 1) return nullptr;
  const Node& r = g.node(uses[v.index][0]);
  const Shape& in = g.value(v).shape;
  if (!std::holds_alternative<Reshape>(r.op) || r.outputs.size() != 1) return nullptr;
  const Shape& out = g.value(r.outputs[0]).shape;
  return !out.empty() && out.back() == in.back() ? &r : nullptr;
}

// The Add that alone reads v, of v and another value of v's shape computed before node
// `before` (a transformer's residual connection after a linear layer), or nullptr. The other
// operand is a graph input or has its producer earlier: the residual's views go where the
// linear layer is.
const Node* residual_add(const Graph& g, ValueId v, size_t before,
                         const std::vector<std::vector<NodeId>>& uses) {
  if (g.is_graph_output(v) || uses[v.index].size() != 1) return nullptr;
  const Node& add = g.node(uses[v.index][0]);
  const auto* b = std::get_if<Binary>(&add.op);
  if (!b || b->op != BinaryOp::add || add.inputs.size() != 2 || add.inputs[0] == add.inputs[1])
    return nullptr;
  const Value& r = g.value(add.inputs[add.inputs[0] == v ? 1 : 0]);
  if (r.is_constant() || r.shape != g.value(v).shape || g.value(add.outputs[0]).shape != r.shape)
    return nullptr;
  return !r.producer.valid() || r.producer.index < before ? &add : nullptr;
}

}  // namespace

Graph matmul_to_conv(const Graph& input) {
  Graph g = input;
  std::vector<Node> nodes;
  std::map<uint32_t, ValueId> oihw;  // [K, M] constant -> its [M, K, 1, 1] version (shared)
  const auto uses = input.consumers();
  // The nodes after a token linear layer that its convolution takes (per-channel constants,
  // a flattened BatchNorm, a residual Add, an activation).
  std::vector<bool> absorbed(input.num_nodes(), false);
  for (const Node& n : input.nodes()) {
    if (absorbed[static_cast<size_t>(&n - input.nodes().data())]) continue;
    if (has_vector_operand(input, n)) {
      matrix_form(g, nodes, n);
      continue;
    }
    // A token-major linear layer, [B, T, K] or [T, K] by [K, M]: the same with the tokens
    // viewed as an image row [1, B, T, K] (Reshapes are views).
    const bool rows = is_linear(input, n, 3) || is_linear(input, n, 2);
    if (!rows && !is_channels_last_linear(input, n)) {
      nodes.push_back(n);
      continue;
    }
    const Value x0 = g.value(n.inputs[0]);
    const Value out0 = g.value(n.outputs[0]);
    auto as_image = [](Shape s) {
      while (s.size() < 4) s.insert(s.begin(), 1);
      return s;
    };
    const ValueId x_id =
        rows ? reshaped(g, nodes, n.inputs[0], as_image(x0.shape), n.name + "_rows") : n.inputs[0];
    const Value x = g.value(x_id);
    const Value out =
        rows ? Value{out0.name + "_rows", as_image(out0.shape), out0.dtype, Layout::nchw} : out0;
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
    ValueId conv_out = g.add_value(
        Value{out.name + "_image", permuted(out.shape, to_image), out.dtype, Layout::nchw});
    nodes.push_back(
        Node{n.name + "_to_image", Transpose{to_image}, {x_id}, {image}, {"transpose"}});
    const size_t conv_at = nodes.size();
    nodes.push_back(Node{n.name, Conv2d{}, {image, it->second, b}, {conv_out}, {"matmul (as a 1x1 conv2d)"}});
    std::vector<ValueId> tokens = n.outputs;
    // Per-channel constants after it (the bias Add PyTorch's nn.Linear exports, a layer scale)
    // apply to the image's channels, the constant as [M, 1, 1]: fold_batch_norm folds them into
    // the weights, which it could not do through the views.
    while (const Node* op = rows ? channel_constant_op(input, tokens[0], m, uses) : nullptr) {
      absorbed[static_cast<size_t>(op - input.nodes().data())] = true;
      const bool v_first = op->inputs[0] == tokens[0];
      Value c = input.value(op->inputs[v_first ? 1 : 0]);
      c.name += "_per_channel";
      c.shape = num_elements(c.shape) == 1 ? Shape{1} : Shape{m, 1, 1};
      c.layout = Layout::any;
      const ValueId cid = g.add_value(std::move(c));
      const ValueId scaled =
          g.add_value(Value{op->name + "_image", g.value(conv_out).shape, out.dtype, Layout::nchw});
      nodes.push_back(
          Node{op->name,
               op->op,
               v_first ? std::vector<ValueId>{conv_out, cid} : std::vector<ValueId>{cid, conv_out},
               {scaled},
               op->computes});
      conv_out = scaled;
      tokens = op->outputs;
    }
    // A BatchNorm over the flattened tokens normalizes the image's channels: it applies to the
    // convolution's output (NCHW, channels on axis 1), the views to and from [N, M] dropped.
    if (const Node* bn = rows ? flattened_batch_norm(input, tokens[0], m, uses) : nullptr) {
      const Node* view = &input.node(uses[tokens[0].index][0]);
      absorbed[static_cast<size_t>(view - input.nodes().data())] = true;
      absorbed[static_cast<size_t>(bn - input.nodes().data())] = true;
      const ValueId normalized = g.add_value(
          Value{out.name + "_normalized", g.value(conv_out).shape, out.dtype, Layout::nchw});
      std::vector<ValueId> in = bn->inputs;
      in[0] = conv_out;
      nodes.push_back(Node{bn->name, bn->op, in, {normalized}, bn->computes});
      conv_out = normalized;
      tokens = bn->outputs;
      if (const Node* back = view_keeping_last_axis(input, tokens[0], uses)) {
        absorbed[static_cast<size_t>(back - input.nodes().data())] = true;
        tokens = back->outputs;
      }
    }
    // A residual Add after it: the other operand viewed as the same image (views, as the
    // input is; placed before the convolution, which fuse_epilogues requires of a residual),
    // added to the convolution's output, where fuse_epilogues takes it.
    const size_t here = static_cast<size_t>(&n - input.nodes().data());
    if (const Node* res = rows ? residual_add(input, tokens[0], here, uses) : nullptr) {
      absorbed[static_cast<size_t>(res - input.nodes().data())] = true;
      const ValueId r = res->inputs[res->inputs[0] == tokens[0] ? 1 : 0];
      std::vector<Node> views;
      const ValueId r_row = reshaped(g, views, r, out.shape, res->name + "_rows");
      const ValueId r_image = g.add_value(
          Value{res->name + "_as_image", g.value(conv_out).shape, out.dtype, Layout::nchw});
      views.push_back(
          Node{res->name + "_to_image", Transpose{to_image}, {r_row}, {r_image}, {"transpose"}});
      nodes.insert(nodes.begin() + static_cast<std::ptrdiff_t>(conv_at), views.begin(),
                   views.end());
      const ValueId sum = g.add_value(
          Value{out.name + "_plus_residual", g.value(conv_out).shape, out.dtype, Layout::nchw});
      nodes.push_back(Node{res->name, res->op, {conv_out, r_image}, {sum}, res->computes});
      conv_out = sum;
      tokens = res->outputs;
    }
    if (!rows) {
      nodes.push_back(Node{n.name + "_to_channels_last",
                           Transpose{to_channels_last},
                           {conv_out},
                           n.outputs,
                           {"transpose"}});
      continue;
    }
    ValueId flat = g.add_value(out);
    nodes.push_back(Node{n.name + "_to_channels_last",
                         Transpose{to_channels_last},
                         {conv_out},
                         {flat},
                         {"transpose"}});
    // A one-input elementwise op that alone reads the result (the GELU of an MLP) applies to
    // the image row instead, before the view back, where the convolution's epilogue takes it
    // (sink_transposes moves it across the transpose).
    if (const Node* act = unary_reader(input, tokens[0], uses)) {
      absorbed[static_cast<size_t>(act - input.nodes().data())] = true;
      const ValueId activated =
          g.add_value(Value{out.name + "_activated", out.shape, out.dtype, out.layout});
      nodes.push_back(Node{act->name, act->op, {flat}, {activated}, act->computes});
      flat = activated;
      tokens = act->outputs;
    }
    nodes.push_back(Node{n.name + "_tokens",
                         Reshape{g.value(tokens[0]).shape, Layout::any},
                         {flat},
                         tokens,
                         {"reshape (no copy)"}});
  }
  g.rebuild(std::move(nodes));
  return g;
}

}  // namespace kiln::graph
