// fold_batch_norm: Conv2d -> BatchNorm becomes one Conv2d with rescaled weights and bias, and so
// does Conv2d -> Add/Sub/Mul/Div by a per-output-channel (or scalar) constant: a bias a
// MatMul-made conv still adds, a layer scale. Needs constant conv weights/bias and constant
// parameters; runs before fuse_epilogues.
#include <cmath>
#include <cstdint>
#include <optional>

#include "graph/passes/passes.h"
#include "graph/passes/pattern_util.h"
#include "graph/shape_inference.h"

namespace kiln::graph {
namespace {

// The conv node (index into `nodes`) that produces `x`, if an affine map may fold into it.
// `producer` is current: a conv that already absorbed a fold produces that fold's output.
std::optional<size_t> foldable_producer(const Graph& g, const std::vector<Node>& nodes,
                                        const std::vector<size_t>& producer, ValueId x,
                                        const std::vector<std::vector<NodeId>>& uses) {
  if (producer[x.index] == SIZE_MAX || uses[x.index].size() != 1 || g.is_graph_output(x)) return std::nullopt;
  const Node& conv = nodes[producer[x.index]];
  const auto* attrs = std::get_if<Conv2d>(&conv.op);
  // An epilogue (e.g. a fused ReLU) sits between conv and BN: BN no longer commutes.
  if (!attrs || !attrs->activation.is_identity() || attrs->residual || !attrs->post.empty()) return std::nullopt;
  if (!g.value(conv.inputs[1]).is_constant() || !g.value(conv.inputs[2]).is_constant()) return std::nullopt;
  return producer[x.index];
}

// out = x * scale[c] + shift[c] per output channel c.
struct Affine {
  std::vector<double> scale, shift;
  std::string label;
};

std::optional<Affine> batch_norm_fold(const Graph& g, const Node& n, int64_t channels) {
  std::optional<patterns::ChannelAffine> a = patterns::batch_norm_affine(g, n, channels);
  if (!a) return std::nullopt;
  return Affine{std::move(a->scale), std::move(a->shift), "batchnorm (folded)"};
}

// x op c with x the conv output ([N, C, H, W], or [N, H, W, C] in NHWC) and c a constant that
// only varies along C (or not at all); for Sub and Div the constant must be the second operand.
std::optional<Affine> binary_affine(const Graph& g, const Node& n, const Binary& b, ValueId x, int64_t channels) {
  if (n.inputs.size() != 2 || n.inputs[0] == n.inputs[1]) return std::nullopt;
  const bool x_first = n.inputs[0] == x;
  const Value& c = g.value(n.inputs[x_first ? 1 : 0]);
  if (!c.is_constant() || (!x_first && (b.op == BinaryOp::sub || b.op == BinaryOp::div))) return std::nullopt;
  const Value& xv = g.value(x);
  if (c.shape.size() > xv.shape.size() || xv.shape.size() != 4) return std::nullopt;
  const size_t channel_axis = xv.layout == Layout::nhwc ? 3 : 1;
  const size_t offset = xv.shape.size() - c.shape.size();
  for (size_t i = 0; i < c.shape.size(); ++i)
    if (c.shape[i] != 1 && i + offset != channel_axis) return std::nullopt;
  const int64_t n_c = num_elements(c.shape);
  if (n_c != 1 && n_c != channels) return std::nullopt;
  Affine a{std::vector<double>(static_cast<size_t>(channels), 1.0), std::vector<double>(static_cast<size_t>(channels), 0.0), ""};
  for (int64_t k = 0; k < channels; ++k) {
    const double v = (*c.data)[static_cast<size_t>(n_c == 1 ? 0 : k)];
    switch (b.op) {
      case BinaryOp::add: a.shift[k] = v; break;
      case BinaryOp::sub: a.shift[k] = -v; break;
      case BinaryOp::mul: a.scale[k] = v; break;
      case BinaryOp::div:
        if (v == 0.0) return std::nullopt;
        a.scale[k] = 1.0 / v;
        break;
      case BinaryOp::max:
      case BinaryOp::min:
      case BinaryOp::pow:
      case BinaryOp::equal:
      case BinaryOp::less:
      case BinaryOp::greater:
      case BinaryOp::less_equal:
      case BinaryOp::greater_equal:
      case BinaryOp::logical_and:
      case BinaryOp::logical_or:
      case BinaryOp::logical_xor:
        return std::nullopt;  // not affine
    }
  }
  static const char* kLabels[] = {"add (folded)", "sub (folded)", "mul (folded)", "div (folded)"};
  a.label = kLabels[static_cast<int>(b.op)];
  return a;
}

}  // namespace

Graph fold_batch_norm(const Graph& input) {
  Graph g = input;
  const auto uses = g.consumers();
  std::vector<Node> nodes = g.nodes();
  std::vector<bool> dead(nodes.size(), false);

  std::vector<size_t> producer(g.values().size(), SIZE_MAX);
  for (size_t i = 0; i < nodes.size(); ++i)
    for (ValueId o : nodes[i].outputs) producer[o.index] = i;

  for (size_t i = 0; i < nodes.size(); ++i) {
    const auto* bn = std::get_if<BatchNorm>(&nodes[i].op);
    const auto* bin = std::get_if<Binary>(&nodes[i].op);
    if (!bn && !bin) continue;
    std::optional<size_t> conv_index;
    ValueId x;
    for (ValueId in : nodes[i].inputs) {  // BatchNorm folds on its first input only
      if (!g.value(in).is_constant() && !conv_index && (conv_index = foldable_producer(g, nodes, producer, in, uses)))
        x = in;
      if (bn) break;
    }
    if (!conv_index) continue;
    const Node* conv = &nodes[*conv_index];

    const Value& w = g.value(conv->inputs[1]);
    const FilterDims f = filter_dims(w.shape, w.layout);
    const std::optional<Affine> a =
        bn ? batch_norm_fold(g, nodes[i], f.co) : binary_affine(g, nodes[i], *bin, x, f.co);
    if (!a || static_cast<int64_t>(a->scale.size()) != f.co) continue;

    // Double precision: the folded constants are computed once and reused forever.
    const std::vector<float>& b = *g.value(conv->inputs[2]).data;
    std::vector<float> new_b(f.co);
    for (int64_t c = 0; c < f.co; ++c) new_b[c] = static_cast<float>(b[c] * a->scale[c] + a->shift[c]);
    std::vector<float> new_w(w.data->size());
    const int64_t per_co = f.ci * f.kh * f.kw;  // OIHW: co outermost; HWIO: co innermost
    for (size_t k = 0; k < new_w.size(); ++k) {
      const int64_t c = w.layout == Layout::oihw ? static_cast<int64_t>(k) / per_co
                                                 : static_cast<int64_t>(k) % f.co;
      new_w[k] = static_cast<float>((*w.data)[k] * a->scale[c]);
    }

    Node& c = nodes[*conv_index];
    Value wv{w.name + "'", w.shape, w.dtype, w.layout};
    wv.data = std::make_shared<const std::vector<float>>(std::move(new_w));
    Value bv{g.value(conv->inputs[2]).name + "'", {f.co}, DType::f32, Layout::any};
    bv.data = std::make_shared<const std::vector<float>>(std::move(new_b));
    c.inputs[1] = g.add_value(std::move(wv));
    c.inputs[2] = g.add_value(std::move(bv));
    c.outputs = nodes[i].outputs;
    for (ValueId o : c.outputs) producer[o.index] = *conv_index;
    c.computes.push_back(a->label);
    dead[i] = true;
  }

  g.rebuild(std::move(nodes), dead);
  return g;
}

}  // namespace kiln::graph
