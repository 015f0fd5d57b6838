// Reduction and Softmax-family algorithm builders (see reduce.h).
#include "generators/ops/reduce.h"

#include <limits>
#include <string>

#include "generators/ops/elementwise.h"

namespace kiln::generators::ops {
namespace {

using Halide::Expr;
using Halide::Func;
using Halide::Var;

std::vector<Var> vars(size_t rank) {
  std::vector<Var> v;
  for (size_t d = 0; d < rank; ++d) v.emplace_back("d" + std::to_string(d));
  return v;
}

size_t dim_of(size_t rank, size_t axis) { return rank - 1 - axis; }

Expr is_inf_bits(const Expr& v) {
  const Expr bits = Halide::reinterpret(Halide::UInt(32), v);
  return (bits & Expr(0x7fffffffu)) == Expr(0x7f800000u);
}

// acc combined with v by max or min, the NaN itself once either is NaN (ONNX; Halide's max and
// min return the other operand). Tested on the bits, which fast math cannot fold.
Expr nan_propagating(const Expr& acc, const Expr& v, bool is_max) {
  return Halide::select(is_nan_bits(acc), acc, is_nan_bits(v), v,
                        is_max ? Halide::max(acc, v) : Halide::min(acc, v));
}

}  // namespace

ReductionAlgorithm reduce(const Func& in, const graph::Shape& in_shape, const graph::Reduce& r,
                          const graph::Shape& out_shape) {
  using K = graph::ReduceKind;
  const size_t rank = in_shape.size();
  std::vector<bool> reduced(rank, r.axes.empty());
  for (int a : r.axes) reduced[static_cast<size_t>(a)] = true;
  std::vector<Halide::Range> ranges;  // the reduced axes, innermost first
  int64_t count = 1;
  for (size_t a = rank; a-- > 0;)
    if (reduced[a]) {
      ranges.emplace_back(0, static_cast<int>(in_shape[a]));
      count *= in_shape[a];
    }
  const Halide::RDom rd(ranges);
  const std::vector<Var> o = vars(out_shape.size());
  // Input coordinates from the output's: a kept axis takes its output coordinate, a reduced one
  // the next RDom variable; output axes of reduced ones (keepdims) are 0 and unused.
  std::vector<Expr> at(rank);
  size_t next_out = 0, next_r = ranges.size();
  for (size_t a = 0; a < rank; ++a) {
    if (reduced[a]) {
      at[dim_of(rank, a)] = rd[static_cast<int>(--next_r)];
      if (r.keepdims) ++next_out;
    } else {
      at[dim_of(rank, a)] = o[dim_of(out_shape.size(), next_out++)];
    }
  }
  const Expr v = in(at);
  const float inf = std::numeric_limits<float>::infinity();
  ReductionAlgorithm alg{Func("reduce_" + std::string(graph::to_string(r.kind))), {}};
  Func acc("reduce_acc");
  switch (r.kind) {
    case K::max:
    case K::min:
      acc(o) = r.kind == K::max ? -inf : inf;
      acc(o) = nan_propagating(acc(o), v, r.kind == K::max);
      alg.out(o) = acc(o);
      break;
    case K::argmax:
    case K::argmin:
    case K::argmax_last:
    case K::argmin_last: {
      // (index, value) of the extreme so far, the axis walked in order: a later element takes
      // over when more extreme (when at least as extreme for the last one) or NaN, numpy's
      // rule that a NaN is the extreme; nothing takes over from a NaN but a later NaN (last).
      const bool is_max = r.kind == K::argmax || r.kind == K::argmax_last;
      const bool last = r.kind == K::argmax_last || r.kind == K::argmin_last;
      Func best("arg_best");
      best(o) = {0, is_max ? -inf : inf};
      const Expr cur = best(o)[1];
      const Expr beyond = is_max ? (last ? v >= cur : v > cur) : (last ? v <= cur : v < cur);
      const Expr take = last ? is_nan_bits(v) || (!is_nan_bits(cur) && beyond)
                             : !is_nan_bits(cur) && (is_nan_bits(v) || beyond);
      best(o) = {Halide::select(take, rd.x, best(o)[0]), Halide::select(take, v, cur)};
      alg.out(o) = Halide::cast<float>(best(o)[0]);
      alg.partials.push_back(best);
      return alg;
    }
    case K::prod:
      acc(o) = 1.0f;
      acc(o) *= v;
      alg.out(o) = acc(o);
      break;
    case K::log_sum_exp: {
      // log(sum(exp(x))) = m + log(sum(exp(x - m))) with m the maximum, so exp never overflows;
      // an infinite maximum is the answer itself (all -inf: log 0; an +inf: +inf).
      Func mx("reduce_max");
      mx(o) = -inf;
      mx(o) = nan_propagating(mx(o), v, true);
      acc(o) = 0.0f;
      acc(o) += Halide::exp(v - mx(o));
      alg.out(o) = Halide::select(is_inf_bits(mx(o)), mx(o), mx(o) + Halide::log(acc(o)));
      alg.partials.push_back(mx);
      break;
    }
    case K::mean:
    case K::sum:
    case K::l1:
    case K::l2:
    case K::log_sum:
    case K::sum_square: {  // sums: of x, |x| or x^2
      const Expr term = r.kind == K::l1                              ? Halide::abs(v)
                        : r.kind == K::l2 || r.kind == K::sum_square ? v * v
                                                                     : v;
      acc(o) = 0.0f;
      acc(o) += term;
      Expr value = acc(o);
      if (r.kind == K::mean) value = value * (1.0f / static_cast<float>(count));
      if (r.kind == K::l2) value = Halide::sqrt(value);
      if (r.kind == K::log_sum) value = Halide::log(value);
      alg.out(o) = value;
    }
  }
  alg.partials.push_back(acc);
  return alg;
}

ReductionAlgorithm softmax(const Func& in, const graph::Shape& shape, const graph::Softmax& s) {
  const size_t rank = shape.size();
  const size_t first = static_cast<size_t>(s.axis), last = s.coerce_2d ? rank - 1 : first;
  // The normalized axes [first, last] as one RDom (innermost first); a row is every other axis.
  std::vector<Halide::Range> ranges;
  for (size_t a = last + 1; a-- > first;) ranges.emplace_back(0, static_cast<int>(shape[a]));
  const Halide::RDom rd(ranges);
  const std::vector<Var> o = vars(rank);
  std::vector<Expr> row(o.begin(), o.end()), at(o.begin(), o.end());
  // The position within the row, row-major over the normalized axes, of the RDom's point and
  // of the output's.
  Expr r_index = 0, o_index = 0;
  for (size_t a = first; a <= last; ++a) {
    row[dim_of(rank, a)] = 0;
    at[dim_of(rank, a)] = rd[static_cast<int>(last - a)];
    const int extent = static_cast<int>(shape[a]);
    r_index = r_index * extent + rd[static_cast<int>(last - a)];
    o_index = o_index * extent + o[dim_of(rank, a)];
  }
  ReductionAlgorithm alg{Func(graph::to_string(s.kind)), {}};
  if (s.kind == graph::SoftmaxKind::hardmax) {
    // (index, value) of the row's first maximum: a later element replaces it only when larger.
    Func best("hardmax_best");
    best(o) = {0, Halide::Float(32).min()};
    const Expr larger = in(at) > best(o)[1];
    best(o) = {Halide::select(larger, r_index, best(o)[0]),
               Halide::select(larger, in(at), best(o)[1])};
    alg.out(o) = Halide::select(best(row)[0] == o_index, 1.0f, 0.0f);
    alg.partials = {best};
    return alg;
  }
  // Per row, so the row's coordinates on the normalized axes are 0.
  Func mx("softmax_max"), sum("softmax_sum"), e("softmax_exp");
  mx(o) = Halide::Float(32).min();
  mx(o) = Halide::max(mx(o), in(at));
  const Expr d = in(o)-mx(row);
  e(o) = Halide::exp(d);
  sum(o) = 0.0f;
  sum(o) += e(at);
  alg.out(o) = s.kind == graph::SoftmaxKind::softmax ? e(o) / sum(row) : d - Halide::log(sum(row));
  alg.partials = {mx, sum};
  alg.exps = e;
  return alg;
}

TopKAlgorithm topk(const Halide::Func& in, const graph::Shape& in_shape, const graph::TopK& t) {
  const int rank = static_cast<int>(in_shape.size());
  const int d = rank - 1 - t.axis;  // the axis' Halide dimension
  const int n = static_cast<int>(in_shape[static_cast<size_t>(t.axis)]);
  std::vector<Halide::Var> v;
  for (int j = 0; j < rank; ++j) v.emplace_back("t" + std::to_string(j));
  const auto along = [&](const Expr& i) {
    std::vector<Expr> at(v.begin(), v.end());
    at[static_cast<size_t>(d)] = i;
    return at;
  };
  Halide::RDom m(0, n, "m");
  const Expr xi = in(v), xm = in(along(m));
  const Expr nan_i = is_nan_bits(xi), nan_m = is_nan_bits(xm);
  // Strict: the comparisons of a NaN are masked here, but a fast-math one would be poison.
  const Expr beats = Halide::strict_float(t.largest ? xm > xi : xm < xi);
  const Expr equal = Halide::strict_float(xm == xi) || (nan_m && nan_i);
  const Expr before =
      (nan_m && !nan_i) || (!nan_m && !nan_i && beats) || (equal && m < v[static_cast<size_t>(d)]);
  TopKAlgorithm a{Halide::Func("topk"), Halide::Func("topk_order")};
  a.order(v) = Halide::sum(Halide::select(before, 1, 0));
  Halide::RDom r(0, n, "r");
  const Expr found =
      Halide::argmax(Halide::select(a.order(along(r)) == v[static_cast<size_t>(d)], 1, 0))[0];
  a.out(v) = t.indices ? Halide::cast<float>(found) : in(along(Halide::clamp(found, 0, n - 1)));
  return a;
}

}  // namespace kiln::generators::ops
