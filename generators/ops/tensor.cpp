#include "generators/ops/tensor.h"

#include <string>

#include "generators/ops/elementwise.h"

namespace kiln::generators::ops {
namespace {

using Halide::Expr;
using Halide::Func;
using Halide::Var;

// One Var per dimension, innermost first.
std::vector<Var> vars(size_t rank, const std::string& prefix = "d") {
  std::vector<Var> v;
  for (size_t d = 0; d < rank; ++d) v.emplace_back(prefix + std::to_string(d));
  return v;
}

std::vector<Expr> exprs(const std::vector<Var>& v) { return {v.begin(), v.end()}; }

// Row-major axis a of a rank-r tensor is Halide dimension r - 1 - a.
size_t dim_of(size_t rank, size_t axis) { return rank - 1 - axis; }

int i32(int64_t v) { return static_cast<int>(v); }

}  // namespace

Func transpose(const Func& in, const graph::Shape& in_shape, const std::vector<int>& perm) {
  const size_t rank = in_shape.size();
  const std::vector<Var> o = vars(rank);
  std::vector<Expr> at(rank);
  for (size_t a = 0; a < rank; ++a)  // output axis a is input axis perm[a]
    at[dim_of(rank, static_cast<size_t>(perm[a]))] = o[dim_of(rank, a)];
  Func out("transpose");
  out(o) = in(at);
  return out;
}

Func reshape(const Func& in, const graph::Shape& in_shape, const graph::Shape& out_shape) {
  const std::vector<Var> o = vars(out_shape.size());
  if (in_shape == out_shape) {
    Func out("reshape");
    out(o) = in(o);
    return out;
  }
  // The row-major element index, then the input coordinates it has. The extents are constants,
  // so the divisions are by constants.
  Expr linear = 0;
  for (size_t a = 0; a < out_shape.size(); ++a)
    linear = linear * i32(out_shape[a]) + o[dim_of(out_shape.size(), a)];
  std::vector<Expr> at(in_shape.size());
  for (size_t a = in_shape.size(); a-- > 0;) {
    at[dim_of(in_shape.size(), a)] = linear % i32(in_shape[a]);
    linear = linear / i32(in_shape[a]);
  }
  Func out("reshape");
  out(o) = in(at);
  return out;
}

namespace {

// Where each input starts along `axis`.
std::vector<int64_t> concat_begins(const std::vector<graph::Shape>& shapes, int axis) {
  std::vector<int64_t> begins;
  int64_t end = 0;
  for (const graph::Shape& s : shapes) {
    begins.push_back(end);
    end += s[static_cast<size_t>(axis)];
  }
  return begins;
}

}  // namespace

Func concat(const std::vector<Func>& ins, const std::vector<graph::Shape>& shapes, int axis) {
  const size_t rank = shapes[0].size();
  const std::vector<Var> o = vars(rank);
  const size_t d = dim_of(rank, static_cast<size_t>(axis));
  const std::vector<int64_t> begins = concat_begins(shapes, axis);
  // From the last input back: select(i < end of input k, input k, the later ones).
  Expr value;
  for (size_t k = ins.size(); k-- > 0;) {
    const int extent = i32(shapes[k][static_cast<size_t>(axis)]);
    std::vector<Expr> at = exprs(o);
    at[d] = Halide::clamp(o[d] - i32(begins[k]), 0, extent - 1);
    const Expr v = ins[k](at);
    value = value.defined() ? Halide::select(o[d] < i32(begins[k]) + extent, v, value) : v;
  }
  Func out("concat");
  out(o) = value;
  return out;
}

PiecewiseConcat concat_piecewise(const std::vector<Func>& ins,
                                 const std::vector<graph::Shape>& shapes, int axis) {
  const size_t rank = shapes[0].size();
  const std::vector<Var> o = vars(rank);
  const size_t d = dim_of(rank, static_cast<size_t>(axis));
  const std::vector<int64_t> begins = concat_begins(shapes, axis);
  PiecewiseConcat c{Func("concat"), {}};
  c.out(o) = Halide::undef(Halide::Float(32));
  for (size_t k = 0; k < ins.size(); ++k) {
    c.pieces.emplace_back(0, i32(shapes[k][static_cast<size_t>(axis)]), "piece" + std::to_string(k));
    std::vector<Expr> from = exprs(o), to = exprs(o);
    from[d] = c.pieces.back().x;
    to[d] = c.pieces.back().x + i32(begins[k]);
    c.out(to) = ins[k](from);
  }
  return c;
}

Func slice(const Func& in, const graph::Shape& in_shape, const graph::Slice& s) {
  const size_t rank = in_shape.size();
  const std::vector<Var> o = vars(rank);
  std::vector<Expr> at(rank);
  for (size_t a = 0; a < rank; ++a)
    at[dim_of(rank, a)] = i32(s.starts[a]) + o[dim_of(rank, a)] * i32(s.steps[a]);
  Func out("slice");
  out(o) = in(at);
  return out;
}

Func pad(const Func& in, const graph::Shape& in_shape, const graph::Pad& p) {
  const size_t rank = in_shape.size();
  const std::vector<Var> o = vars(rank);
  std::vector<Expr> at(rank);
  Expr inside = Halide::cast<bool>(true);
  for (size_t a = 0; a < rank; ++a) {
    const size_t d = dim_of(rank, a);
    const Expr last = i32(in_shape[a]) - 1;
    Expr i = o[d] - i32(p.pads[a]);
    inside = inside && i >= 0 && i <= last;
    if (p.mode == graph::PadMode::reflect)  // pads < n: one reflection reaches the input
      i = Halide::select(i < 0, -i, i > last, 2 * last - i, i);
    // The clamp is edge padding, and keeps the constant mode's reads in bounds.
    at[d] = Halide::clamp(i, 0, last);
  }
  Func out("pad");
  out(o) = p.mode == graph::PadMode::constant ? Halide::select(inside, in(at), p.value) : in(at);
  return out;
}

Func tile(const Func& in, const graph::Shape& in_shape) {
  const size_t rank = in_shape.size();
  const std::vector<Var> o = vars(rank);
  std::vector<Expr> at(rank);
  for (size_t a = 0; a < rank; ++a) {
    const size_t d = dim_of(rank, a);
    at[d] = in_shape[a] == 1 ? Expr(0) : o[d] % i32(in_shape[a]);
  }
  Func out("tile");
  out(o) = in(at);
  return out;
}

Expr element_index(const Expr& v, int64_t extent) {
  const int n = i32(extent);
  const Expr k = Halide::cast<int>(Halide::clamp(v, -static_cast<float>(n), n - 1.0f));
  // Clamped again so that bounds inference sees [0, extent) and not the select's union.
  const Expr i = Halide::clamp(Halide::select(k < 0, k + n, k), 0, n - 1);
  return Halide::select(is_nan_bits(v), 0, i);
}

Func gather_elements(const Func& data, const graph::Shape& data_shape, const Func& indices,
                     const graph::Shape& indices_shape, int axis) {
  const size_t rank = indices_shape.size();
  const std::vector<Var> o = vars(rank);
  std::vector<Expr> at = exprs(o), from = exprs(o);
  for (size_t a = 0; a < rank; ++a)
    if (indices_shape[a] == 1) from[dim_of(rank, a)] = 0;  // broadcast (or its one element)
  const size_t d = dim_of(rank, static_cast<size_t>(axis));
  at[d] = element_index(indices(from), data_shape[static_cast<size_t>(axis)]);
  Func out("gather_elements");
  out(o) = data(at);
  return out;
}

Func scatter_elements(const Func& data, const graph::Shape& data_shape, const Func& indices,
                      const graph::Shape& indices_shape, const Func& updates,
                      const graph::ScatterElements& se) {
  const size_t rank = data_shape.size();
  const std::vector<Var> o = vars(rank);
  Func out("scatter_elements");
  out(o) = data(o);
  Halide::Region extents;
  for (size_t j = 0; j < rank; ++j) extents.emplace_back(0, i32(indices_shape[rank - 1 - j]));
  const Halide::RDom r(extents, "u");
  std::vector<Expr> from, at;
  for (int j = 0; j < r.dimensions(); ++j) from.push_back(r[j]);
  at = from;
  const size_t d = dim_of(rank, static_cast<size_t>(se.axis));
  at[d] = element_index(indices(from), data_shape[static_cast<size_t>(se.axis)]);
  const Expr u = updates(from);
  out(at) = se.reduction == graph::ScatterReduction::none
                ? u
                : binary_expr(graph::combining_op(se.reduction), out(at), u);
  return out;
}

std::vector<Expr> MatMulAlgorithm::args() const {
  std::vector<Expr> a = {n, m};
  a.insert(a.end(), batch.begin(), batch.end());
  return a;
}

MatMulAlgorithm matmul(const Func& a, const Func& b, int k_extent, int batch_dims) {
  MatMulAlgorithm alg;
  alg.n = Var("n");
  alg.m = Var("m");
  alg.batch = vars(static_cast<size_t>(batch_dims), "b");
  alg.k = Halide::RDom(0, k_extent, "k");
  alg.acc = Func("matmul_acc");
  std::vector<Expr> a_at = {alg.k.x, alg.m}, b_at = {alg.n, alg.k.x};
  a_at.insert(a_at.end(), alg.batch.begin(), alg.batch.end());
  b_at.insert(b_at.end(), alg.batch.begin(), alg.batch.end());
  alg.acc(alg.args()) = 0.0f;
  alg.acc(alg.args()) += a(a_at) * b(b_at);
  return alg;
}

}  // namespace kiln::generators::ops
