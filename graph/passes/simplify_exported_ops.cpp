// simplify_exported_ops: three forms exporters write for what Kiln has a better op for.
// - A mean or max over H and W of a 4-D image (PyTorch's x.mean((2, 3)), which timm's
//   squeeze-and-excitation and ECA blocks use) is a global pooling: a GlobalPool, which the
//   layout pass keeps in NHWC, where a Reduce would move the image back to NCHW first. Without
//   keepdims, a Reshape (a view) drops the two unit axes.
// - A Tile (ONNX Expand, as in x * y.expand_as(x)) whose every reader is a broadcasting binary
//   op with another operand already of the Tile's shape is left out: the readers broadcast its
//   input themselves, so the expanded copy is never made.
// - GroupNorm with one group as PyTorch exports it before opset 18 (and torch's dynamo exporter
//   still does): a Reshape of [N, C, H, W] to [N, 1, C*H*W], an InstanceNormalization (a
//   LayerNorm of the last axis, then a Mul and an Add by one value each), a Reshape back. The
//   statistics are over every element of a sample, so this is a LayerNorm of x from axis 1 with
//   one-value scale and bias, which the layout pass keeps NHWC: the two views and the transforms
//   to NCHW and back that they would need are never made (PoolFormer's every norm layer).
// - GroupNorm with G > 1 groups, from ONNX GroupNormalization (imported as a view to
//   [N, G, C/G*H*W], a LayerNorm of the last axis and a view back) or PyTorch's export (the
//   same with an InstanceNormalization's per-group Mul and Add inside the views), with the Mul
//   and Add by per-channel weight and bias after it: one GroupNorm node with a scale and shift
//   per channel, which runs in its input's layout (NHWC after a convolution), where the views
//   would need the image in NCHW and a transform each way around every norm layer
//   (GroupNorm ResNets, diffusion U-Nets).
// Runs after fuse_layer_norm (whose patterns include means over H and W) and before the layout
// pass.
#include <algorithm>
#include <map>
#include <memory>
#include <optional>

#include "graph/passes/passes.h"

namespace kiln::graph {
namespace {

// The pooling a Reduce over the spatial axes of a 4-D NCHW activation is, or nullopt.
std::optional<PoolKind> spatial_pool(const Graph& g, const Node& n) {
  const auto* r = std::get_if<Reduce>(&n.op);
  if (!r || (r->kind != ReduceKind::mean && r->kind != ReduceKind::max) ||
      r->axes != std::vector<int>{2, 3})
    return std::nullopt;
  const Value& x = g.value(n.inputs[0]);
  if (x.is_constant() || x.shape.size() != 4 || x.layout != Layout::nchw) return std::nullopt;
  return r->kind == ReduceKind::mean ? PoolKind::avg : PoolKind::max;
}

// Whether every reader of the Tile's output is a Binary reading it once, next to an operand of
// the same shape (so the Binary's output shape does not depend on the Tile).
bool broadcast_by_readers(const Graph& g, const Node& tile,
                          const std::vector<std::vector<NodeId>>& uses) {
  const ValueId out = tile.outputs[0];
  if (g.is_graph_output(out) || uses[out.index].empty()) return false;
  for (NodeId u : uses[out.index]) {
    const Node& r = g.node(u);
    if (!std::holds_alternative<Binary>(r.op) || r.inputs.size() != 2 || r.inputs[0] == r.inputs[1])
      return false;
    const ValueId other = r.inputs[0] == out ? r.inputs[1] : r.inputs[0];
    if (g.value(other).shape != g.value(out).shape) return false;
  }
  return true;
}

// The one value of a constant whose elements are all equal, or nullopt.
std::optional<float> uniform_constant(const Value& v) {
  if (!v.is_constant() || v.data->empty()) return std::nullopt;
  const float first = v.data->front();
  for (float f : *v.data)
    if (f != first) return std::nullopt;
  return first;
}

// The values of a constant operand of a Binary whose other operand has shape `shape`, one per
// index of axis `axis` (`count` of them; a one-value constant repeated), or nullopt when it
// varies along any other axis or is not a constant.
std::optional<std::vector<float>> along_axis(const Value& v, const Shape& shape, size_t axis,
                                             int64_t count) {
  if (!v.is_constant() || v.shape.size() > shape.size()) return std::nullopt;
  if (v.data->size() == 1) return std::vector<float>(static_cast<size_t>(count), v.data->front());
  Shape padded(shape.size() - v.shape.size(), 1);
  padded.insert(padded.end(), v.shape.begin(), v.shape.end());
  for (size_t a = 0; a < padded.size(); ++a)
    if (padded[a] != (a == axis ? count : 1)) return std::nullopt;
  return *v.data;
}

// A normalization over whole samples or over groups of channels written through a view (see
// the file comment): the nodes from the first Reshape to the last node absorbed, x, and the
// scale and shift of each group (one group: the LayerNorm's one-value scale and bias) or,
// with groups, of each channel.
struct SampleNorm {
  std::vector<size_t> nodes;  // the view, the LayerNorm, any Mul and Add, the view back, ...
  ValueId x, out;
  int64_t groups = 1;
  float epsilon = 0.0f;
  std::vector<float> scale, shift;  // per group; per channel after absorb_channel_affine
};

// Mul and Add of the view back's output by per-channel constants, in that order (PyTorch's
// GroupNorm weight and bias), folded into a grouped norm's scale and shift per channel.
void absorb_channel_affine(const Graph& g, const std::vector<std::vector<NodeId>>& uses,
                           SampleNorm& m) {
  const Shape& x = g.value(m.x).shape;
  const int64_t channels = x[1];
  std::vector<float> scale(static_cast<size_t>(channels)), shift(scale.size());
  for (int64_t c = 0; c < channels; ++c) {
    scale[c] = m.scale[static_cast<size_t>(c / (channels / m.groups))];
    shift[c] = m.shift[static_cast<size_t>(c / (channels / m.groups))];
  }
  for (BinaryOp kind : {BinaryOp::mul, BinaryOp::add}) {
    if (g.is_graph_output(m.out) || uses[m.out.index].size() != 1) break;
    const Node& n = g.node(uses[m.out.index][0]);
    const auto* b = std::get_if<Binary>(&n.op);
    if (!b || b->op != kind || n.inputs.size() != 2 || n.inputs[0] == n.inputs[1]) continue;
    const size_t c = n.inputs[0] == m.out ? 1 : 0;
    const std::optional<std::vector<float>> v = along_axis(g.value(n.inputs[c]), x, 1, channels);
    if (!v || g.value(n.outputs[0]).shape != x) continue;
    for (int64_t k = 0; k < channels; ++k) {
      if (kind == BinaryOp::mul) scale[k] *= (*v)[k];
      (kind == BinaryOp::mul ? shift[k] *= (*v)[k] : shift[k] += (*v)[k]);
    }
    m.nodes.push_back(uses[m.out.index][0].index);
    m.out = n.outputs[0];
  }
  m.scale = std::move(scale);
  m.shift = std::move(shift);
}

// The SampleNorm whose view back is node `last` (a Reshape), or nullopt. Every value inside it
// is read once, by the next node, and is no graph output.
std::optional<SampleNorm> sample_norm_ending_at(const Graph& g, size_t last,
                                                const std::vector<std::vector<NodeId>>& uses) {
  const Node& back = g.nodes()[last];
  if (!std::holds_alternative<Reshape>(back.op)) return std::nullopt;
  SampleNorm m;
  std::vector<size_t> nodes = {last};
  auto inner = [&](ValueId v) -> const Node* {  // v's producer, if only the chain reads v
    const Value& val = g.value(v);
    if (val.is_constant() || !val.producer.valid() || g.is_graph_output(v) ||
        uses[v.index].size() != 1)
      return nullptr;
    nodes.push_back(val.producer.index);
    return &g.node(val.producer);
  };
  const Node* n = inner(back.inputs[0]);
  const Shape& rows = g.value(back.inputs[0]).shape;  // [N, M] or [N, G, M]
  const int64_t groups = rows.size() == 3 ? rows[1] : 1;
  // Add and Mul by one value per group each, in that order from the end
  // (InstanceNormalization's shift and scale), folded into the LayerNorm's.
  std::vector<float> add(static_cast<size_t>(groups), 0.0f), mul(add.size(), 1.0f);
  for (BinaryOp kind : {BinaryOp::add, BinaryOp::mul}) {
    const auto* b = n ? std::get_if<Binary>(&n->op) : nullptr;
    if (!b || b->op != kind || n->inputs.size() != 2) continue;
    const size_t c = g.value(n->inputs[1]).is_constant() ? 1 : 0;
    std::optional<std::vector<float>> v = along_axis(g.value(n->inputs[c]), rows, 1, groups);
    if (!v || g.value(n->outputs[0]).shape != rows) return std::nullopt;
    (kind == BinaryOp::add ? add : mul) = std::move(*v);
    n = inner(n->inputs[1 - c]);
  }
  const auto* ln = n ? std::get_if<LayerNorm>(&n->op) : nullptr;
  if (!ln) return std::nullopt;
  if (static_cast<size_t>(ln->axis) + 1 != rows.size() || (rows.size() != 2 && rows.size() != 3))
    return std::nullopt;
  const std::optional<float> scale = uniform_constant(g.value(n->inputs[1]));
  const std::optional<float> shift =
      n->inputs.size() > 2 ? uniform_constant(g.value(n->inputs[2])) : std::optional<float>(0.0f);
  if (!scale || !shift) return std::nullopt;
  m.epsilon = ln->epsilon;
  m.groups = groups;
  for (int64_t k = 0; k < groups; ++k) {
    m.scale.push_back(*scale * mul[k]);
    m.shift.push_back(*shift * mul[k] + add[k]);
  }
  const Node* view = inner(n->inputs[0]);
  if (!view || !std::holds_alternative<Reshape>(view->op)) return std::nullopt;
  m.x = view->inputs[0];
  m.out = back.outputs[0];
  const Shape& x = g.value(m.x).shape;
  if (x.size() < 2 || x != g.value(m.out).shape || x[0] != rows[0]) return std::nullopt;
  // Groups of whole channels of an NCHW image: each row is one group's channels, contiguous.
  if (groups > 1 && (x.size() != 4 || g.value(m.x).layout != Layout::nchw || x[1] % groups != 0 ||
                     rows[2] != num_elements(x) / (x[0] * groups)))
    return std::nullopt;
  m.nodes.assign(nodes.rbegin(), nodes.rend());
  if (groups > 1) absorb_channel_affine(g, uses, m);
  return m;
}

// The node that replaces a SampleNorm: a LayerNorm of whole samples with one-value scale and
// shift, or a GroupNorm with its scale and shift per channel.
Node sample_norm_node(const Graph& input, Graph& g, const SampleNorm& m) {
  const Node& ln = input.nodes()[m.nodes[1]];
  Node norm{ln.name, LayerNorm{1, m.epsilon}, {m.x}, {m.out}, {}};
  if (m.groups > 1) norm.op = GroupNorm{static_cast<int>(m.groups), m.epsilon};
  for (size_t k : m.nodes)
    norm.computes.insert(norm.computes.end(), input.nodes()[k].computes.begin(),
                         input.nodes()[k].computes.end());
  norm.computes.push_back(m.groups > 1
                              ? "group_norm (without the views)"
                              : "layer_norm over whole samples (one group, without the views)");
  for (const auto& [role, v] :
       {std::pair<const char*, const std::vector<float>*>{"scale", &m.scale},
        {"shift", &m.shift}}) {
    Value c{
        ln.name + "/sample_" + role, {static_cast<int64_t>(v->size())}, DType::f32, Layout::any};
    c.data = std::make_shared<const std::vector<float>>(*v);
    norm.inputs.push_back(g.add_value(std::move(c)));
  }
  return norm;
}

}  // namespace

Graph simplify_exported_ops(const Graph& input) {
  Graph g = input;
  const auto uses = input.consumers();
  // Normalizations over whole samples or groups first: node index of its last node -> it.
  std::map<size_t, SampleNorm> sample_norms;
  std::vector<bool> in_sample_norm(input.num_nodes(), false);
  for (size_t i = 0; i < input.num_nodes(); ++i)
    if (std::optional<SampleNorm> m = sample_norm_ending_at(input, i, uses)) {
      for (size_t k : m->nodes) in_sample_norm[k] = true;
      const size_t end = m->nodes.back();
      sample_norms.emplace(end, std::move(*m));
    }
  std::vector<Node> nodes;
  std::vector<std::pair<ValueId, ValueId>> replaced;  // a Tile's output -> its input
  for (size_t i = 0; i < input.num_nodes(); ++i) {
    const Node& n = input.nodes()[i];
    if (const auto it = sample_norms.find(i); it != sample_norms.end()) {
      nodes.push_back(sample_norm_node(input, g, it->second));
      continue;
    }
    if (in_sample_norm[i]) continue;
    if (std::holds_alternative<Tile>(n.op) && broadcast_by_readers(input, n, uses)) {
      replaced.emplace_back(n.outputs[0], n.inputs[0]);
      continue;
    }
    const std::optional<PoolKind> pool = spatial_pool(input, n);
    if (!pool) {
      nodes.push_back(n);
      continue;
    }
    std::vector<std::string> computes = n.computes;
    if (computes.empty()) computes.push_back(op_label(n.op));
    computes.back() += " (as a global pooling)";
    if (std::get<Reduce>(n.op).keepdims) {
      nodes.push_back(Node{n.name, GlobalPool{*pool}, n.inputs, n.outputs, computes});
      continue;
    }
    const Value out = g.value(n.outputs[0]);
    const Shape& x = g.value(n.inputs[0]).shape;
    const ValueId pooled =
        g.add_value(Value{out.name + "_pooled", {x[0], x[1], 1, 1}, out.dtype, Layout::nchw});
    nodes.push_back(Node{n.name, GlobalPool{*pool}, n.inputs, {pooled}, computes});
    nodes.push_back(Node{n.name + "_flat",
                         Reshape{out.shape, Layout::any},
                         {pooled},
                         n.outputs,
                         {"reshape (no copy)"}});
  }
  for (Node& n : nodes)
    for (ValueId& v : n.inputs)
      for (const auto& [tiled, source] : replaced)
        if (v == tiled) v = source;
  g.rebuild(std::move(nodes));
  return g;
}

}  // namespace kiln::graph
