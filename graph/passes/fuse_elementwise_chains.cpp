// fuse_elementwise_chains: a run of elementwise nodes, each the only reader of the one before,
// becomes one ElementwiseChain node: one pass over memory instead of one per op. BatchNorm that
// could not fold into a conv (e.g. BN -> ReLU -> Conv in pre-activation networks) becomes a
// per-channel scale+shift step here, fused with its neighbours. Runs last (after the layout pass,
// so constants are already in their final layout).
#include <cmath>
#include <optional>

#include "graph/passes/passes.h"
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
  std::vector<float> scale, shift;  // affine only
};

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
    }
  }
  return s;
}

}  // namespace

Graph fuse_elementwise_chains(const Graph& input) {
  Graph g = input;
  const auto uses = g.consumers();
  std::vector<Node> nodes = g.nodes();
  std::vector<bool> dead(nodes.size(), false);
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (dead[i]) continue;
    ValueId x;
    std::optional<Step> first = as_step(g, nodes[i], &x);
    if (!first) continue;
    std::vector<Step> steps = {*first};
    std::vector<size_t> members = {i};
    for (;;) {
      const ValueId out = nodes[members.back()].outputs[0];
      if (g.is_graph_output(out) || uses[out.index].size() != 1) break;
      const size_t j = uses[out.index][0].index;
      ValueId xj;
      std::optional<Step> next = dead[j] ? std::nullopt : as_step(g, nodes[j], &xj);
      if (!next || xj != out) break;
      steps.push_back(*next);
      members.push_back(j);
    }
    if (members.size() < 2) continue;

    ElementwiseChain chain;
    Node fused{nodes[members.back()].name, ElementwiseChain{}, {x}, nodes[members.back()].outputs, {}};
    for (size_t k = 0; k < steps.size(); ++k) {
      chain.steps.push_back(steps[k].step);
      for (const std::string& c : nodes[members[k]].computes) fused.computes.push_back(c);
      if (steps[k].step.kind != ChainStepKind::affine) continue;
      const std::string base = nodes[members[k]].name;
      const int64_t channels = static_cast<int64_t>(steps[k].scale.size());
      Value sc{base + ".scale", {channels}, DType::f32, Layout::any};
      sc.data = std::make_shared<const std::vector<float>>(std::move(steps[k].scale));
      Value sh{base + ".shift", {channels}, DType::f32, Layout::any};
      sh.data = std::make_shared<const std::vector<float>>(std::move(steps[k].shift));
      fused.inputs.push_back(g.add_value(std::move(sc)));
      fused.inputs.push_back(g.add_value(std::move(sh)));
    }
    fused.op = std::move(chain);
    // The chain sits where its last member was: every member's inputs exist by then.
    for (size_t k = 0; k + 1 < members.size(); ++k) dead[members[k]] = true;
    nodes[members.back()] = std::move(fused);
  }
  g.rebuild(std::move(nodes), dead);
  return g;
}

}  // namespace kiln::graph
