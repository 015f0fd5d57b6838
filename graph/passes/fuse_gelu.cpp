// fuse_gelu: exact GELU as exporters spell it, x * 0.5 * (1 + Erf(x / sqrt 2)) in any of
//   ((x * (1 + erf)) * 0.5), ((x * 0.5) * (1 + erf)), (x * ((1 + erf) * 0.5)),
// with x / sqrt 2 or x * (1 / sqrt 2) inside the Erf, becomes one gelu step (an
// ElementwiseChain of one step), which then fuses like any activation (fuse_elementwise_chains).
// Every intermediate must be read only inside the pattern. Runs before the layout pass.
#include <cmath>
#include <optional>

#include "graph/passes/passes.h"
#include "graph/passes/pattern_util.h"

namespace kiln::graph {
namespace {

struct Match {
  std::vector<size_t> members;  // the last one's output is the result
  ValueId x;
};

class Matcher : public patterns::View {
 public:
  explicit Matcher(const Graph& g) : View(g), g_(g) {}

  std::optional<Match> at_erf(size_t i) const {
    const Node& erf = g_.nodes()[i];
    const auto* c = std::get_if<ElementwiseChain>(&erf.op);
    if (!c || c->steps.size() != 1 || c->steps[0].kind != ChainStepKind::erf) return std::nullopt;
    // The argument: x / sqrt 2 or x * (1 / sqrt 2).
    const Node* scaled = sole_producer(erf.inputs[0], i);
    if (!scaled) return std::nullopt;
    ValueId x;
    if (!(operand_with(*scaled, BinaryOp::div, std::sqrt(2.0), &x, true) ||
          operand_with(*scaled, BinaryOp::mul, std::sqrt(0.5), &x)))
      return std::nullopt;
    const Shape& shape = g_.value(x).shape;
    Match m{{index(*scaled), i}, x};
    // 1 + erf
    const std::optional<size_t> one_plus = sole_reader(erf.outputs[0]);
    ValueId e;
    if (!one_plus || !operand_with(node(*one_plus), BinaryOp::add, 1.0, &e) || e != erf.outputs[0])
      return std::nullopt;
    m.members.push_back(*one_plus);
    const std::optional<size_t> m1 = sole_reader(node(*one_plus).outputs[0]);
    if (!m1 || !is_mul(node(*m1))) return std::nullopt;
    m.members.push_back(*m1);
    const Node& mul1 = node(*m1);
    const ValueId a = node(*one_plus).outputs[0];
    const ValueId other = mul1.inputs[0] == a ? mul1.inputs[1] : mul1.inputs[0];
    if (other == x || is_scalar(other, 0.5)) {
      // (x * (1 + erf)) * 0.5 or ((1 + erf) * 0.5) * x: one more Mul, by what is left.
      const std::optional<size_t> m2 = sole_reader(mul1.outputs[0]);
      if (!m2 || !is_mul(node(*m2))) return std::nullopt;
      const Node& mul2 = node(*m2);
      const ValueId y = mul2.inputs[0] == mul1.outputs[0] ? mul2.inputs[1] : mul2.inputs[0];
      if (other == x ? !is_scalar(y, 0.5) : y != x) return std::nullopt;
      m.members.push_back(*m2);
    } else {
      // (x * 0.5) * (1 + erf): the half read by this Mul alone.
      const Node* half = sole_producer(other, *m1);
      ValueId hx;
      if (!half || !operand_with(*half, BinaryOp::mul, 0.5, &hx) || hx != x) return std::nullopt;
      m.members.insert(m.members.begin(), index(*half));
    }
    for (size_t k : m.members)
      if (g_.value(node(k).outputs[0]).shape != shape) return std::nullopt;
    return m;
  }

 private:
  static bool is_mul(const Node& n) { return is_binary(n, BinaryOp::mul); }
  // n is `op` of a tensor and a scalar constant equal to `value` (to float precision); the
  // tensor goes to *x. With right_only the constant must be the second operand (division).
  bool operand_with(const Node& n, BinaryOp op, double value, ValueId* x, bool right_only = false) const {
    const auto* b = std::get_if<Binary>(&n.op);
    if (!b || b->op != op) return false;
    for (int side = right_only ? 1 : 0; side < 2; ++side) {
      if (!is_scalar(n.inputs[static_cast<size_t>(side)], value)) continue;
      *x = n.inputs[static_cast<size_t>(1 - side)];
      return !g_.value(*x).is_constant();
    }
    return false;
  }
  bool is_scalar(ValueId v, double value) const {
    return View::is_scalar(v) && std::abs((*g_.value(v).data)[0] - value) <= 1e-6 * value;
  }
  const Graph& g_;
};

}  // namespace

Graph fuse_gelu(const Graph& g) {
  std::vector<Match> matches;
  std::vector<std::vector<size_t>> groups;
  const Matcher matcher(g);
  for (size_t i = 0; i < g.num_nodes(); ++i)
    if (std::optional<Match> m = matcher.at_erf(i)) {
      groups.push_back(m->members);
      matches.push_back(*m);
    }
  return patterns::rewrite_groups(g, groups, [&](size_t k, Graph& out) {
    size_t last = 0;
    for (size_t i : matches[k].members) last = std::max(last, i);
    return Node{out.nodes()[last].name, ElementwiseChain{{{ChainStepKind::gelu, 0, 0}}},
                {matches[k].x}, out.nodes()[last].outputs, {"gelu"}};
  });
}

}  // namespace kiln::graph
