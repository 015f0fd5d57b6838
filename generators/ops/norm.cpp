// Normalization algorithm builders (see norm.h).
#include "generators/ops/norm.h"

#include "generators/ops/elementwise.h"

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

GroupNormAlgorithm group_norm(const std::vector<Func>& inputs, const graph::Shape& shape, bool nhwc,
                              const graph::GroupNorm& gn) {
  const Func& x = inputs[0];
  const Func& scale = inputs[1];
  const Func& bias = inputs[2];
  // Halide dimensions: NHWC is (c, w, h, n), NCHW (w, h, c, n).
  const int channel_dim = nhwc ? 0 : 2;
  const int p0 = nhwc ? 1 : 0;  // the innermost pixel dimension, then p0 + 1
  const int64_t channels = shape[nhwc ? 3 : 1], per_group = channels / gn.groups;
  const int64_t width = shape[nhwc ? 2 : 3], height = shape[nhwc ? 1 : 2];
  GroupNormAlgorithm a{Func("group_norm"),
                       Func("channel_sum"),
                       Func("group_mean"),
                       Func("channel_square_sum"),
                       Func("group_inv_std"),
                       Func("channel_mean"),
                       Func("channel_factor"),
                       Halide::RDom(0, static_cast<int>(width), 0, static_cast<int>(height))};
  Var c("c"), n("n"), g("g");
  // x at channel c of image n and pixel (r.x, r.y).
  const auto at = [&](const Expr& ch, const Expr& px, const Expr& py) {
    std::vector<Expr> i(4);
    i[static_cast<size_t>(channel_dim)] = ch;
    i[static_cast<size_t>(p0)] = px;
    i[static_cast<size_t>(p0 + 1)] = py;
    i[3] = n;
    return x(i);
  };
  const float inv_count = 1.0f / static_cast<float>(per_group * width * height);
  // The sum over a group's channels of a per-channel Func.
  const auto over_group = [&](const Func& per_channel) -> Expr {
    if (per_group == 1) return per_channel(g, n);
    Halide::RDom k(0, static_cast<int>(per_group));
    return Halide::sum(per_channel(g * static_cast<int>(per_group) + k, n));
  };
  a.channel_sum(c, n) = 0.0f;
  a.channel_sum(c, n) += at(c, a.r.x, a.r.y);
  a.mean(g, n) = over_group(a.channel_sum) * inv_count;
  a.channel_mean(c, n) = a.mean(c / static_cast<int>(per_group), n);
  // About the mean, so a large offset cancels exactly before squaring.
  const Expr dev = at(c, a.r.x, a.r.y) - a.channel_mean(c, n);
  a.channel_square_sum(c, n) = 0.0f;
  a.channel_square_sum(c, n) += dev * dev;
  a.inv_std(g, n) = 1.0f / Halide::sqrt(over_group(a.channel_square_sum) * inv_count + gn.epsilon);
  a.channel_factor(c, n) = a.inv_std(c / static_cast<int>(per_group), n) * scale(c);
  std::vector<Var> o = {Var("d0"), Var("d1"), Var("d2"), Var("d3")};
  const Var& oc = o[static_cast<size_t>(channel_dim)];
  Expr y = (x(o) - a.channel_mean(oc, o[3])) * a.channel_factor(oc, o[3]) + bias(oc);
  if (gn.residual) y += inputs[3](o);
  const std::vector<Func> params(
      inputs.begin() + static_cast<std::ptrdiff_t>(gn.first_post_input()), inputs.end());
  a.out(o) = apply_chain(gn.post, y, params, oc);
  return a;
}

}  // namespace kiln::generators::ops
