// Elementwise algorithm builders. Each step is the maths of the ONNX op it came from.
#include "generators/ops/elementwise.h"

#include <cmath>

namespace kiln::generators::ops {

using Halide::Expr;

Expr sigmoid(const Expr& v) {
  // e^88 is within float's range and 1 / (1 + e^88) is below float's smallest normal.
  return 1.0f / (1.0f + Halide::fast_exp(-Halide::clamp(v, -88.0f, 88.0f)));
}

Expr apply_chain_step(const graph::ChainStep& step, const Expr& v, const Expr& scale,
                      const Expr& shift) {
  using K = graph::ChainStepKind;
  switch (step.kind) {
    case K::clamp:  // ReLU, ReLU6, Clip
      return apply_activation(graph::Activation{step.a, step.b}, v);
    case K::leaky_relu: return Halide::select(v >= 0.0f, v, step.a * v);
    case K::sigmoid: return sigmoid(v);
    case K::hard_sigmoid: return Halide::clamp(step.a * v + step.b, 0.0f, 1.0f);
    case K::hard_swish: return v * Halide::clamp(v / 6.0f + 0.5f, 0.0f, 1.0f);
    case K::affine: return v * scale + shift;  // a BatchNorm or a per-channel Mul/Add
    case K::silu: return v * sigmoid(v);
  }
  return v;
}

Expr apply_chain(const std::vector<graph::ChainStep>& steps, Expr v,
                 const std::vector<Halide::Func>& params, const Expr& channel) {
  size_t affine = 0;
  for (const graph::ChainStep& step : steps) {
    Expr scale = 1.0f, shift = 0.0f;
    if (step.kind == graph::ChainStepKind::affine) {
      scale = params[2 * affine](channel);
      shift = params[2 * affine + 1](channel);
      ++affine;
    }
    v = apply_chain_step(step, v, scale, shift);
  }
  return v;
}

Expr apply_activation(const graph::Activation& a, Expr v) {
  if (std::isfinite(a.lo)) v = Halide::max(v, a.lo);
  if (std::isfinite(a.hi)) v = Halide::min(v, a.hi);
  return v;
}

Halide::Func elementwise_chain(const Halide::Func& x, int rank,
                               const std::vector<graph::ChainStep>& steps,
                               const std::vector<Halide::Func>& params, int channel_dim) {
  std::vector<Halide::Var> dims;
  for (int d = 0; d < rank; ++d) dims.emplace_back("d" + std::to_string(d));
  const std::vector<Expr> at(dims.begin(), dims.end());
  Halide::Func out("chain");
  const Expr channel = rank > 0 ? Expr(dims[static_cast<size_t>(channel_dim)]) : Expr(0);
  out(dims) = apply_chain(steps, x(at), params, channel);
  return out;
}

Halide::Func binary(graph::BinaryOp op, const Halide::Func& a, const std::vector<int64_t>& a_extents,
                    const Halide::Func& b, const std::vector<int64_t>& b_extents, int rank) {
  std::vector<Halide::Var> dims;
  for (int d = 0; d < rank; ++d) dims.emplace_back("d" + std::to_string(d));
  // Row-major shapes align on their last axis, which is Halide's dimension 0.
  auto at = [&](const std::vector<int64_t>& extents) {
    std::vector<Expr> idx;
    for (size_t d = 0; d < extents.size(); ++d) idx.push_back(extents[d] == 1 ? Expr(0) : Expr(dims[d]));
    return idx;
  };
  const Expr x = a(at(a_extents)), y = b(at(b_extents));
  Expr v;
  switch (op) {
    case graph::BinaryOp::add: v = x + y; break;
    case graph::BinaryOp::sub: v = x - y; break;
    case graph::BinaryOp::mul: v = x * y; break;
    case graph::BinaryOp::div: v = x / y; break;
  }
  Halide::Func out("binary");
  out(dims) = v;
  return out;
}

}  // namespace kiln::generators::ops
