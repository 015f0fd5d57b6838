// Normalization algorithm builders (see norm.h).
#include "generators/ops/norm.h"

namespace kiln::generators::ops {

using Halide::Expr;
using Halide::Func;
using Halide::Var;

LayerNormAlgorithm layer_norm(const Func& x, const graph::Shape& shape, const graph::LayerNorm& ln,
                              const std::vector<Func>& params,
                              const std::vector<graph::Shape>& param_shapes) {
  const int rank = static_cast<int>(shape.size());
  const int k = rank - ln.axis;
  std::vector<Halide::Range> ranges;
  int64_t count = 1;
  for (int d = 0; d < k; ++d) {
    ranges.emplace_back(0, static_cast<int>(shape[static_cast<size_t>(rank - 1 - d)]));
    count *= shape[static_cast<size_t>(rank - 1 - d)];
  }
  LayerNormAlgorithm a{Func("layer_norm"), Func("row_sum"),         Func("row_mean"),
                       Func("row_square_sum"), Func("row_inv_std"), Halide::RDom(ranges), k};
  std::vector<Var> o;
  for (int d = 0; d < rank; ++d) o.emplace_back("d" + std::to_string(d));
  // The row's point (normalized coordinates 0) and the row's elements (the RDom).
  std::vector<Expr> row(o.begin(), o.end()), at(o.begin(), o.end());
  for (int d = 0; d < k; ++d) {
    row[static_cast<size_t>(d)] = 0;
    at[static_cast<size_t>(d)] = a.r[d];
  }
  const float inv_count = 1.0f / static_cast<float>(count);
  a.sum(o) = 0.0f;
  a.sum(o) += x(at);
  a.mean(o) = a.sum(row) * inv_count;
  const Expr dev = x(at) - a.mean(row);
  a.square_sum(o) = 0.0f;
  a.square_sum(o) += dev * dev;
  a.inv_std(o) = 1.0f / Halide::sqrt(a.square_sum(row) * inv_count + ln.epsilon);
  Expr y = (x(o) - a.mean(row)) * a.inv_std(row);
  for (size_t p = 0; p < params.size(); ++p) {
    // Indexed by the normalized coordinates; its own leading 1s (and any extra dims) take 0.
    const graph::Shape& s = param_shapes[p];
    size_t significant = s.size();
    for (size_t i = 0; i < s.size() && s[i] == 1; ++i) --significant;
    std::vector<Expr> pi;
    for (size_t d = 0; d < s.size(); ++d) pi.push_back(d < significant ? Expr(o[d]) : Expr(0));
    y = p == 0 ? y * params[p](pi) : y + params[p](pi);
  }
  a.out(o) = y;
  return a;
}

}  // namespace kiln::generators::ops
