// fuse_layer_norm: the LayerNorm exporters write as separate ops (torch.onnx before opset 17,
// and ConvNeXt-style code that spells it out),
//   mean = ReduceMean(x); d = x - mean; var = ReduceMean(Pow(d, 2) or d * d);
//   y = d / Sqrt(var + eps) [* gamma] [+ beta]
// over the same trailing axes, becomes one LayerNorm node: one kernel that reads each row once
// instead of nine kernels and eight intermediate tensors. Every intermediate must be read only
// inside the pattern. Runs after fold_constants, on the logical (pre-layout) graph.
#include <cmath>
#include <optional>

#include "graph/passes/passes.h"
#include "graph/passes/pattern_util.h"
#include "graph/shape_inference.h"

namespace kiln::graph {
namespace {

struct Match {
  std::vector<size_t> members;  // in graph order; the last one's output is the result
  LayerNorm ln;
  ValueId x, scale, bias;       // scale and bias invalid when the pattern has none
};

class Matcher : public patterns::View {
 public:
  explicit Matcher(const Graph& g) : View(g), g_(g) {}

  std::optional<Match> at_div(size_t i) const {
    const Node& div = g_.nodes()[i];
    if (!is_binary(div, BinaryOp::div)) return std::nullopt;
    const ValueId d = div.inputs[0];
    const Node* sqrt = sole_producer(div.inputs[1], i);
    if (!sqrt || !is_step(*sqrt, ChainStepKind::sqrt, 1.0f)) return std::nullopt;
    const Node* add = sole_producer(sqrt->inputs[0], index(*sqrt));
    if (!add || !is_binary(*add, BinaryOp::add)) return std::nullopt;
    const int eps_side = is_scalar(add->inputs[0]) ? 0 : is_scalar(add->inputs[1]) ? 1 : -1;
    if (eps_side < 0) return std::nullopt;
    const Node* var = sole_producer(add->inputs[1 - eps_side], index(*add));
    if (!var || !std::holds_alternative<Reduce>(var->op)) return std::nullopt;
    const Node* square = sole_producer(var->inputs[0], index(*var));
    if (!square) return std::nullopt;
    const bool pow2 = is_step(*square, ChainStepKind::pow, 2.0f) && square->inputs[0] == d;
    const bool self_mul = is_binary(*square, BinaryOp::mul) && square->inputs[0] == d && square->inputs[1] == d;
    if (!pow2 && !self_mul) return std::nullopt;
    // d feeds the square and the division, nothing else.
    const Value& dv = g_.value(d);
    if (!dv.producer.valid() || g_.is_graph_output(d)) return std::nullopt;
    for (NodeId r : readers(d))
      if (r.index != i && r.index != index(*square)) return std::nullopt;
    const Node& sub = g_.node(dv.producer);
    if (!is_binary(sub, BinaryOp::sub)) return std::nullopt;
    const ValueId x = sub.inputs[0];
    const Node* mean = sole_producer(sub.inputs[1], index(sub));
    if (!mean || !std::holds_alternative<Reduce>(mean->op) || mean->inputs[0] != x) return std::nullopt;
    const Value& xv = g_.value(x);
    if (xv.layout == Layout::nhwc || dv.shape != xv.shape || g_.value(div.outputs[0]).shape != xv.shape)
      return std::nullopt;
    const int axis = trailing_axis(std::get<Reduce>(mean->op), xv.shape.size());
    if (axis < 0 || trailing_axis(std::get<Reduce>(var->op), xv.shape.size()) != axis)
      return std::nullopt;

    Match m;
    m.x = x;
    m.ln = LayerNorm{axis, (*g_.value(add->inputs[static_cast<size_t>(eps_side)]).data)[0]};
    m.members = {index(*mean), index(sub), index(*square), index(*var), index(*add), index(*sqrt), i};
    // The affine tail: * gamma, then + beta, each a constant of the normalized shape.
    if (const std::optional<size_t> mul = affine_reader(i, BinaryOp::mul, axis, &m.scale)) {
      m.members.push_back(*mul);
      if (const std::optional<size_t> add_b = affine_reader(*mul, BinaryOp::add, axis, &m.bias))
        m.members.push_back(*add_b);
    }
    return m;
  }

 private:
  // A one-step chain of `kind` (with parameter a, for pow).
  static bool is_step(const Node& n, ChainStepKind kind, float a) {
    const auto* c = std::get_if<ElementwiseChain>(&n.op);
    return c && c->steps.size() == 1 && c->steps[0].kind == kind &&
           (kind != ChainStepKind::pow || c->steps[0].a == a) && n.inputs.size() == 1;
  }
  // A mean over the trailing axes [axis, rank) keeping them: axis, else -1.
  static int trailing_axis(const Reduce& rm, size_t rank) {
    if (!rm.keepdims || rm.kind != ReduceKind::mean) return -1;
    if (rm.axes.empty()) return 0;
    for (size_t k = 0; k < rm.axes.size(); ++k)
      if (rm.axes[k] != static_cast<int>(rank - rm.axes.size() + k)) return -1;
    return rm.axes.front();
  }
  // The sole reader of node n's output when it is `op` with a constant of the normalized shape
  // (either side for Mul and Add) and keeps the shape; the constant goes to *param.
  std::optional<size_t> affine_reader(size_t n, BinaryOp op, int axis, ValueId* param) const {
    const ValueId out = node(n).outputs[0];
    const std::optional<size_t> r = sole_reader(out);
    if (!r) return std::nullopt;
    const Node& reader = node(*r);
    if (!is_binary(reader, op)) return std::nullopt;
    const ValueId other = reader.inputs[0] == out ? reader.inputs[1] : reader.inputs[0];
    const Value& x = g_.value(out);
    const Value& c = g_.value(other);
    if (!c.is_constant() || !holds_normalized_shape(c.shape, x.shape, axis) ||
        g_.value(reader.outputs[0]).shape != x.shape)
      return std::nullopt;
    *param = other;
    return r;
  }

  const Graph& g_;
};

}  // namespace

Graph fuse_layer_norm(const Graph& g) {
  std::vector<Match> matches;
  std::vector<std::vector<size_t>> groups;
  const Matcher matcher(g);
  for (size_t i = 0; i < g.num_nodes(); ++i)
    if (std::optional<Match> m = matcher.at_div(i)) {
      groups.push_back(m->members);
      matches.push_back(std::move(*m));
    }
  return patterns::rewrite_groups(g, groups, [&](size_t k, Graph& out) {
    Match& m = matches[k];
    const Node& last = out.nodes()[m.members.back()];
    Node ln{last.name, m.ln, {m.x}, last.outputs, {}};
    for (size_t i : m.members)
      ln.computes.insert(ln.computes.end(), out.nodes()[i].computes.begin(), out.nodes()[i].computes.end());
    if (!m.scale.valid()) {  // no gamma: a scale of ones
      const Shape& xs = out.value(m.x).shape;
      const Shape normalized(xs.begin() + m.ln.axis, xs.end());
      Value ones{ln.name + ".scale", normalized, DType::f32, Layout::any};
      ones.data = std::make_shared<const std::vector<float>>(num_elements(normalized), 1.0f);
      m.scale = out.add_value(std::move(ones));
    }
    ln.inputs.push_back(m.scale);
    if (m.bias.valid()) ln.inputs.push_back(m.bias);
    return ln;
  });
}

}  // namespace kiln::graph
