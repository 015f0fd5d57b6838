// fuse_elementwise_chains: a run of elementwise nodes, each the only reader of the one before,
// becomes one ElementwiseChain node: one pass over memory instead of one per op, in a kernel
// generated for its shapes (a lone elementwise node becomes a chain of one step for the same
// reason). BatchNorm that could not fold into a conv (e.g. BN -> ReLU -> Conv in pre-activation
// networks) becomes a per-channel scale+shift step, the self-gated activations exporters
// write as two or three nodes, x * Sigmoid(x) (SiLU), x * HardSigmoid(x) (HardSwish) and
// x * Tanh(Softplus(x)) (Mish), one step each, HardSwish as TensorFlow writes it,
// x * relu6(x + 3) / 6, one step, and PRelu as the importer writes it one prelu step
// (leaky_relu where the slope is one value).
// A chain whose input is a dense or depthwise convolution's output, read by nothing else, goes
// into that conv as its post steps (Conv2d::post), so it never reaches memory on its own. Runs
// last (after the layout pass, so constants are already in their final layout).
#include <algorithm>
#include <cmath>
#include <optional>

#include "graph/kernel_spec.h"
#include "graph/passes/passes.h"
#include "graph/passes/pattern_util.h"
#include "graph/shape_inference.h"

namespace kiln::graph {
namespace {

// A per-channel (or scalar) constant broadcast against `x`, as a [C] vector; empty if it is not.
std::vector<float> per_channel(const Value& c, const Value& x) {
  if (!c.is_constant()) return {};
  const int64_t n = num_elements(c.shape);
  const bool has_channels = x.shape.size() >= 2 && !(x.layout == Layout::nhwc && x.shape.size() != 4);
  if (!has_channels) return {};
  const size_t axis = x.layout == Layout::nhwc ? 3 : 1;
  const int64_t channels = x.shape[axis];
  if (n == 1) return std::vector<float>(channels, (*c.data)[0]);
  if (c.shape.size() > x.shape.size() || n != channels) return {};
  // Right-aligned, every dim 1 except the channel axis.
  const size_t offset = x.shape.size() - c.shape.size();
  for (size_t i = 0; i < c.shape.size(); ++i)
    if (c.shape[i] != 1 && i + offset != axis) return {};
  return *c.data;
}

struct Step {
  ChainStep step;
  std::vector<float> scale, shift;  // per-channel steps only (affine; prelu: slope, scale)
};

// A comparison of x with a scalar constant (either side), or x to the power of a scalar
// constant: one step with the constant in a. Other Binary ops: nullopt.
std::optional<ChainStep> scalar_step(const Binary& b, const Value& c, bool const_right) {
  if (num_elements(c.shape) != 1) return std::nullopt;
  const float v = (*c.data)[0];
  using K = ChainStepKind;
  switch (b.op) {
    case BinaryOp::pow:
      if (!const_right) return std::nullopt;
      return ChainStep{K::pow, v, 0};
    case BinaryOp::equal: return ChainStep{K::equal, v, 0};
    case BinaryOp::less: return ChainStep{const_right ? K::less : K::greater, v, 0};
    case BinaryOp::greater: return ChainStep{const_right ? K::greater : K::less, v, 0};
    case BinaryOp::less_equal:
      return ChainStep{const_right ? K::less_equal : K::greater_equal, v, 0};
    case BinaryOp::greater_equal:
      return ChainStep{const_right ? K::greater_equal : K::less_equal, v, 0};
    case BinaryOp::add:
    case BinaryOp::sub:
    case BinaryOp::mul:
    case BinaryOp::div:
    case BinaryOp::max:
    case BinaryOp::min:
    case BinaryOp::logical_and:
    case BinaryOp::logical_or:
    case BinaryOp::logical_xor:
      return std::nullopt;
  }
  return std::nullopt;
}

// The chain step a node computes on its activation input `x`, if it is chainable.
std::optional<Step> as_step(const Graph& g, const Node& n, ValueId* x) {
  *x = n.inputs[0];
  if (std::holds_alternative<Relu>(n.op)) return Step{{ChainStepKind::clamp, 0.0f, INFINITY}, {}, {}};
  if (const auto* c = std::get_if<Clip>(&n.op)) return Step{{ChainStepKind::clamp, c->min, c->max}, {}, {}};
  if (const auto* l = std::get_if<LeakyRelu>(&n.op)) return Step{{ChainStepKind::leaky_relu, l->alpha, 0}, {}, {}};
  if (std::holds_alternative<Sigmoid>(n.op)) return Step{{ChainStepKind::sigmoid, 0, 0}, {}, {}};
  if (const auto* h = std::get_if<HardSigmoid>(&n.op))
    return Step{{ChainStepKind::hard_sigmoid, h->alpha, h->beta}, {}, {}};
  if (std::holds_alternative<HardSwish>(n.op)) return Step{{ChainStepKind::hard_swish, 0, 0}, {}, {}};
  // Unary ops imported as one-step chains (Tanh, Erf, Exp, ...).
  if (const auto* ch = std::get_if<ElementwiseChain>(&n.op))
    if (ch->steps.size() == 1 && !per_channel_step(ch->steps[0].kind) && n.inputs.size() == 1)
      return Step{ch->steps[0], {}, {}};
  const Value& in = g.value(n.inputs[0]);
  if (const auto* bn = std::get_if<BatchNorm>(&n.op)) {
    for (size_t i = 1; i < 5; ++i)
      if (!g.value(n.inputs[i]).is_constant()) return std::nullopt;
    const auto& gamma = *g.value(n.inputs[1]).data;
    const auto& beta = *g.value(n.inputs[2]).data;
    const auto& mean = *g.value(n.inputs[3]).data;
    const auto& var = *g.value(n.inputs[4]).data;
    Step s{{ChainStepKind::affine, 0, 0}, std::vector<float>(gamma.size()), std::vector<float>(gamma.size())};
    for (size_t c = 0; c < gamma.size(); ++c) {
      const double k = gamma[c] / std::sqrt(static_cast<double>(var[c]) + bn->epsilon);
      s.scale[c] = static_cast<float>(k);
      s.shift[c] = static_cast<float>(beta[c] - mean[c] * k);
    }
    return s;
  }
  const auto* b = std::get_if<Binary>(&n.op);
  if (!b) return std::nullopt;
  const bool const_right = g.value(n.inputs[1]).is_constant() && !in.is_constant();
  const bool const_left = in.is_constant() && !g.value(n.inputs[1]).is_constant();
  if (!const_right && !const_left) return std::nullopt;
  *x = const_right ? n.inputs[0] : n.inputs[1];
  const Value& act = g.value(*x);
  if (g.value(n.outputs[0]).shape != act.shape) return std::nullopt;  // the constant widens x
  const Value& constant = g.value(const_right ? n.inputs[1] : n.inputs[0]);
  if (std::optional<ChainStep> st = scalar_step(*b, constant, const_right)) return Step{*st, {}, {}};
  std::vector<float> c = per_channel(g.value(const_right ? n.inputs[1] : n.inputs[0]), act);
  if (c.empty()) return std::nullopt;
  Step s{{ChainStepKind::affine, 0, 0}, std::vector<float>(c.size(), 1.0f), std::vector<float>(c.size(), 0.0f)};
  for (size_t i = 0; i < c.size(); ++i) {
    switch (b->op) {
      case BinaryOp::add: s.shift[i] = c[i]; break;
      case BinaryOp::mul: s.scale[i] = c[i]; break;
      case BinaryOp::sub:
        if (const_right) s.shift[i] = -c[i];
        else s.scale[i] = -1.0f, s.shift[i] = c[i];
        break;
      case BinaryOp::div:
        if (!const_right || c[i] == 0.0f) return std::nullopt;  // c / x is not affine
        s.scale[i] = 1.0f / c[i];
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
  return s;
}

// A node that computes one step on x with the help of other nodes read by nothing else, which
// it absorbs: the nodes, the step and x.
struct Absorbing {
  std::vector<NodeId> nodes;
  Step step;
  ValueId x;
};

// A chain node of exactly one step of `kind` on one input.
bool one_step(const Node& n, ChainStepKind kind) {
  const auto* ch = std::get_if<ElementwiseChain>(&n.op);
  return ch && ch->steps.size() == 1 && ch->steps[0].kind == kind && n.inputs.size() == 1;
}

// Mul(x, gate(x)) where the gate is read by nothing else: the gate's nodes, and the step the
// pair computes on x (SiLU for a Sigmoid gate, HardSwish for HardSigmoid with alpha 1/6, beta
// 1/2, as opset < 14 exporters write it; Mish for Tanh(Softplus(x)), as exporters write
// torch's Mish before opset 18).
std::optional<Absorbing> as_gated(const patterns::View& v, size_t i) {
  const Graph& g = v.graph();
  const Node& n = v.node(i);
  if (!v.is_binary(n, BinaryOp::mul)) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const ValueId gate = n.inputs[static_cast<size_t>(side)];
    const ValueId other = n.inputs[static_cast<size_t>(1 - side)];
    const Node* p = v.sole_producer(gate, i);
    if (!p || g.value(other).shape != g.value(gate).shape) continue;
    std::optional<ChainStepKind> kind;
    std::vector<NodeId> nodes = {g.value(gate).producer};
    if (p->inputs[0] == other) {
      if (std::holds_alternative<Sigmoid>(p->op)) kind = ChainStepKind::silu;
      if (const auto* h = std::get_if<HardSigmoid>(&p->op))
        if (std::abs(h->alpha - 1.0f / 6.0f) < 1e-6f && h->beta == 0.5f)
          kind = ChainStepKind::hard_swish;
    } else if (one_step(*p, ChainStepKind::tanh)) {
      const Node* sp = v.sole_producer(p->inputs[0], v.index(*p));
      if (sp && one_step(*sp, ChainStepKind::softplus) && sp->inputs[0] == other) {
        kind = ChainStepKind::mish;
        nodes.push_back(g.value(p->inputs[0]).producer);
      }
    }
    if (kind) return Absorbing{nodes, Step{{*kind, 0, 0}, {}, {}}, other};
  }
  return std::nullopt;
}

// PRelu as the importer decomposes it (graph/onnx/ops_nn.cpp), Add(Relu(x), Mul(Clip(x, -inf,
// 0), slope)) with a per-channel (or scalar) constant slope and the Relu, Clip and Mul read by
// nothing else: one step on x, leaky_relu where every channel's slope is the same, else prelu
// with the slopes and a scale of 1.
std::optional<Absorbing> as_prelu(const patterns::View& v, size_t i) {
  const Graph& g = v.graph();
  const Node& n = v.node(i);
  if (!v.is_binary(n, BinaryOp::add)) return std::nullopt;
  for (int side = 0; side < 2; ++side) {
    const Node* relu = v.sole_producer(n.inputs[static_cast<size_t>(side)], i);
    const Node* mul = v.sole_producer(n.inputs[static_cast<size_t>(1 - side)], i);
    if (!relu || !mul || !std::holds_alternative<Relu>(relu->op) ||
        !v.is_binary(*mul, BinaryOp::mul))
      continue;
    for (int k = 0; k < 2; ++k) {
      const Node* clip = v.sole_producer(mul->inputs[static_cast<size_t>(k)], v.index(*mul));
      const auto* c = clip ? std::get_if<Clip>(&clip->op) : nullptr;
      if (!c || c->min != -INFINITY || c->max != 0.0f || clip->inputs[0] != relu->inputs[0])
        continue;
      const Value& in = g.value(relu->inputs[0]);
      if (g.value(n.outputs[0]).shape != in.shape) continue;
      std::vector<float> slope = per_channel(g.value(mul->inputs[static_cast<size_t>(1 - k)]), in);
      if (slope.empty()) continue;
      const std::vector<NodeId> nodes = {g.value(n.inputs[static_cast<size_t>(side)]).producer,
                                         g.value(n.inputs[static_cast<size_t>(1 - side)]).producer,
                                         g.value(mul->inputs[static_cast<size_t>(k)]).producer};
      if (std::all_of(slope.begin(), slope.end(), [&](float s) { return s == slope[0]; }))
        return Absorbing{nodes, Step{{ChainStepKind::leaky_relu, slope[0], 0}, {}, {}},
                         relu->inputs[0]};
      std::vector<float> ones(slope.size(), 1.0f);
      return Absorbing{nodes, Step{{ChainStepKind::prelu, 0, 0}, std::move(slope), std::move(ones)},
                       relu->inputs[0]};
    }
  }
  return std::nullopt;
}

// The value of a scalar constant operand of a Binary node `op` (the divisor of a Div), the
// other operand in *other.
std::optional<float> scalar_operand(const patterns::View& v, const Node& n, BinaryOp op,
                                    ValueId* other) {
  if (!v.is_binary(n, op)) return std::nullopt;
  for (int side = op == BinaryOp::div ? 1 : 0; side < 2; ++side) {  // c / x is no scaling of x
    if (!v.is_scalar(n.inputs[static_cast<size_t>(side)])) continue;
    *other = n.inputs[static_cast<size_t>(1 - side)];
    return (*v.graph().value(n.inputs[static_cast<size_t>(side)]).data)[0];
  }
  return std::nullopt;
}

// Whether `n` multiplies by 1/6 (Mul by 0.1666..., Div by 6), the operand in *other.
bool sixth_of(const patterns::View& v, const Node& n, ValueId* other) {
  if (std::optional<float> d = scalar_operand(v, n, BinaryOp::div, other)) return *d == 6.0f;
  const std::optional<float> m = scalar_operand(v, n, BinaryOp::mul, other);
  return m && std::abs(*m - 1.0f / 6.0f) < 1e-7f;
}

// HardSwish as TensorFlow's and Keras's MobileNetV3 write it, x * relu6(x + 3) / 6, exported as
// Add(x, 3), Clip(0, 6), a Mul by x and a Mul by 1/6 (or Div by 6), the last either outermost
// or on the Clip: one hard_swish step on x, the other nodes absorbed.
std::optional<Absorbing> as_relu6_swish(const patterns::View& v, size_t i) {
  const Graph& g = v.graph();
  const Node& n = v.node(i);
  // relu6(x + 3) read by node `reader` alone: the x it returns, its nodes appended, or nullopt.
  const auto relu6_shifted = [&](ValueId r6, size_t reader,
                                 std::vector<NodeId>* nodes) -> std::optional<ValueId> {
    const Node* clip = v.sole_producer(r6, reader);
    const auto* c = clip ? std::get_if<Clip>(&clip->op) : nullptr;
    if (!c || c->min != 0.0f || c->max != 6.0f) return std::nullopt;
    const Node* add = v.sole_producer(clip->inputs[0], v.index(*clip));
    ValueId in;
    const std::optional<float> k = add ? scalar_operand(v, *add, BinaryOp::add, &in) : std::nullopt;
    if (!k || *k != 3.0f || g.value(in).shape != g.value(r6).shape) return std::nullopt;
    nodes->push_back(g.value(r6).producer);
    nodes->push_back(g.value(clip->inputs[0]).producer);
    return in;
  };
  // Node `m`, Mul(x, gate) with gate relu6(x + 3), or that divided by 6 when `sixth`: x, its
  // nodes appended.
  const auto times_gate = [&](size_t m, bool sixth,
                              std::vector<NodeId>* nodes) -> std::optional<ValueId> {
    const Node& mul = v.node(m);
    if (!v.is_binary(mul, BinaryOp::mul)) return std::nullopt;
    for (int side = 0; side < 2; ++side) {
      const ValueId gate = mul.inputs[static_cast<size_t>(side)];
      const ValueId other = mul.inputs[static_cast<size_t>(1 - side)];
      std::vector<NodeId> found;
      ValueId inner = gate;
      size_t reader = m;
      if (sixth) {
        const Node* scale = v.sole_producer(gate, m);
        if (!scale || !sixth_of(v, *scale, &inner)) continue;
        found.push_back(g.value(gate).producer);
        reader = v.index(*scale);
      }
      const std::optional<ValueId> in = relu6_shifted(inner, reader, &found);
      if (in && *in == other) {
        nodes->insert(nodes->end(), found.begin(), found.end());
        return other;
      }
    }
    return std::nullopt;
  };
  std::vector<NodeId> nodes;
  ValueId product;
  if (sixth_of(v, n, &product)) {  // (x * relu6(x + 3)) / 6
    const Node* mul = v.sole_producer(product, i);
    if (mul && g.value(product).shape == g.value(n.outputs[0]).shape)
      if (const std::optional<ValueId> x = times_gate(v.index(*mul), false, &nodes)) {
        nodes.insert(nodes.begin(), g.value(product).producer);
        return Absorbing{nodes, Step{{ChainStepKind::hard_swish, 0, 0}, {}, {}}, *x};
      }
  }
  nodes.clear();
  if (const std::optional<ValueId> x = times_gate(i, true, &nodes))  // x * (relu6(x + 3) / 6)
    return Absorbing{nodes, Step{{ChainStepKind::hard_swish, 0, 0}, {}, {}}, *x};
  return std::nullopt;
}

std::optional<Absorbing> as_absorbing(const patterns::View& v, size_t i) {
  if (std::optional<Absorbing> a = as_gated(v, i)) return a;
  if (std::optional<Absorbing> a = as_relu6_swish(v, i)) return a;
  return as_prelu(v, i);
}

}  // namespace

Graph fuse_elementwise_chains(const Graph& input) {
  Graph g = input;
  std::vector<Node> nodes = g.nodes();
  std::vector<bool> dead(nodes.size(), false);
  // Gates absorbed into the Mul that applies them (and a PRelu's parts into its Add): not
  // chain members of their own, and not readers that stop a chain from reaching the Mul.
  std::vector<bool> absorbed(nodes.size(), false);
  std::vector<size_t> absorber(nodes.size(), 0);
  std::vector<std::optional<Absorbing>> gated(nodes.size());
  const patterns::View view(g);
  for (size_t i = 0; i < nodes.size(); ++i) {
    gated[i] = as_absorbing(view, i);
    // A node absorbs nodes of no other pattern (one whose nodes another absorbs, or absorb
    // others, keeps them as they are: in topological order the inner pattern comes first).
    const bool taken =
        gated[i] && std::any_of(gated[i]->nodes.begin(), gated[i]->nodes.end(),
                                [&](NodeId a) { return absorbed[a.index] || gated[a.index]; });
    if (taken) gated[i].reset();
    if (gated[i])
      for (NodeId a : gated[i]->nodes) absorbed[a.index] = true, absorber[a.index] = i;
  }
  auto step_of = [&](size_t i, ValueId* x) -> std::optional<Step> {
    if (dead[i] || absorbed[i]) return std::nullopt;
    if (gated[i]) {
      *x = gated[i]->x;
      return gated[i]->step;
    }
    return as_step(g, nodes[i], x);
  };
  // The one node that reads v, itself or through the nodes it absorbs (a PRelu's Add reads x
  // only through its Relu and Clip).
  auto sole_reader = [&](ValueId v) -> std::optional<size_t> {
    std::optional<size_t> reader;
    for (NodeId n : view.readers(v)) {
      const size_t r = absorbed[n.index] ? absorber[n.index] : n.index;
      if (reader && *reader != r) return std::nullopt;
      reader = r;
    }
    return reader;
  };
  for (size_t i = 0; i < nodes.size(); ++i) {
    ValueId x;
    std::optional<Step> first = step_of(i, &x);
    if (!first) continue;
    std::vector<Step> steps = {*first};
    std::vector<size_t> members = {i};
    for (;;) {
      const ValueId out = nodes[members.back()].outputs[0];
      const std::optional<size_t> j = sole_reader(out);
      if (g.is_graph_output(out) || !j) break;
      ValueId xj;
      std::optional<Step> next = step_of(*j, &xj);
      if (!next || xj != out) break;
      steps.push_back(*next);
      members.push_back(*j);
    }

    ElementwiseChain chain;
    Node fused{nodes[members.back()].name, ElementwiseChain{}, {x}, nodes[members.back()].outputs, {}};
    for (size_t k = 0; k < steps.size(); ++k) {
      chain.steps.push_back(steps[k].step);
      if (const auto& gate = gated[members[k]])
        for (NodeId a : gate->nodes)
          for (const std::string& c : nodes[a.index].computes) fused.computes.push_back(c);
      for (const std::string& c : nodes[members[k]].computes) fused.computes.push_back(c);
      if (!per_channel_step(steps[k].step.kind)) continue;
      const std::string base = nodes[members[k]].name;
      const int64_t channels = static_cast<int64_t>(steps[k].scale.size());
      Value sc{base + ".scale", {channels}, DType::f32, Layout::any};
      sc.data = std::make_shared<const std::vector<float>>(std::move(steps[k].scale));
      Value sh{base + ".shift", {channels}, DType::f32, Layout::any};
      sh.data = std::make_shared<const std::vector<float>>(std::move(steps[k].shift));
      fused.inputs.push_back(g.add_value(std::move(sc)));
      fused.inputs.push_back(g.add_value(std::move(sh)));
    }
    for (size_t k = 0; k + 1 < members.size(); ++k) dead[members[k]] = true;
    gated[members.back()].reset();  // the chain or the conv now, not a Mul any more
    const NodeId producer = g.value(x).producer;
    if (producer.valid() && !dead[producer.index] && !g.is_graph_output(x) &&
        sole_reader(x) == members[0] && conv_accepts_post_steps(g, nodes[producer.index])) {
      // The conv's kernel (generated for its shapes) applies the chain in registers.
      Node& conv = nodes[producer.index];
      auto& attrs = std::get<Conv2d>(conv.op);
      attrs.post.insert(attrs.post.end(), chain.steps.begin(), chain.steps.end());
      conv.inputs.insert(conv.inputs.end(), fused.inputs.begin() + 1, fused.inputs.end());
      conv.outputs = fused.outputs;
      conv.computes.insert(conv.computes.end(), fused.computes.begin(), fused.computes.end());
      dead[members.back()] = true;
      continue;
    }
    fused.op = std::move(chain);
    // The chain sits where its last member was: every member's inputs exist by then.
    nodes[members.back()] = std::move(fused);
  }
  for (size_t i = 0; i < nodes.size(); ++i) dead[i] = dead[i] || absorbed[i];
  g.rebuild(std::move(nodes), dead);
  return g;
}

}  // namespace kiln::graph
