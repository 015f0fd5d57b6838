// Resize algorithm builder (see resize.h).
#include "generators/ops/resize.h"

#include <cmath>
#include <cstdint>
#include <numeric>
#include <vector>

namespace kiln::generators::ops {

using Halide::Expr;

namespace {

// An axis' source coordinate as an exact fraction (a * i + b) / d of integers (d > 0): the
// scale is out / in when that is what the float scale holds (sizes given), else the float's own
// exact value m / 2^k. Exact arithmetic puts ties (x.5 for nearest) where they truly are; float
// arithmetic (which Halide also turns into multiplication by a reciprocal) lands a tie one ulp to
// either side.
struct Fraction {
  int64_t a = 1, b = 0, d = 1;
};

Fraction source_fraction(const graph::Resize& r, size_t axis, int64_t in_len) {
  const int64_t out_len = r.sizes[axis];
  const float scale = r.scales[axis];
  // scale = p / q
  int64_t p, q;
  if (static_cast<float>(static_cast<double>(out_len) / static_cast<double>(in_len)) == scale) {
    p = out_len, q = in_len;
  } else {
    int e = 0;
    const double m = std::frexp(static_cast<double>(scale), &e);  // scale = m * 2^e, m in [0.5, 1)
    p = static_cast<int64_t>(std::ldexp(m, 24));
    e -= 24;
    q = 1;
    if (e >= 0) p <<= e; else q <<= -e;
  }
  const int64_t g = std::gcd(p, q);
  p /= g, q /= g;
  Fraction f;
  switch (r.coordinates) {
    case graph::ResizeCoordinates::half_pixel: f = {2 * q, q - p, 2 * p}; break;
    case graph::ResizeCoordinates::pytorch_half_pixel:  // 0 where the resized length is <= 1
      f = in_len * p > q ? Fraction{2 * q, q - p, 2 * p} : Fraction{0, 0, 1};
      break;
    case graph::ResizeCoordinates::align_corners:  // i * (in - 1) / (in * scale - 1)
      f = in_len * p > q ? Fraction{(in_len - 1) * q, 0, in_len * p - q} : Fraction{0, 0, 1};
      break;
    case graph::ResizeCoordinates::asymmetric: f = {q, 0, p}; break;
    case graph::ResizeCoordinates::tf_half_pixel_for_nn: f = {2 * q, q, 2 * p}; break;
    case graph::ResizeCoordinates::tf_crop_and_resize: break;  // a float line (crop_line)
  }
  return f;
}

// Keys' cubic kernel W(t) for t in [0, 2): the weight of a tap t away from the coordinate.
// cubic_near for t <= 1, cubic_far for 1 <= t.
Expr cubic_near(const Expr& t, float A) { return ((A + 2) * t - (A + 3)) * t * t + 1.0f; }
Expr cubic_far(const Expr& t, float A) { return ((A * t - 5 * A) * t + 8 * A) * t - 4 * A; }

// tf_crop_and_resize on axis a: source coordinate c0 + c1 * i (in double, as the reference
// computes it).
void crop_line(const graph::Resize& r, size_t a, int64_t in_len, double& c0, double& c1) {
  const int64_t out_len = r.sizes[a];
  const double ratio = static_cast<double>(out_len) / static_cast<double>(in_len);
  const double scale = static_cast<float>(ratio) == r.scales[a] ? ratio : r.scales[a];
  const double resized = static_cast<double>(in_len) * scale;
  const double span = static_cast<double>(in_len - 1);
  const double start = r.roi[a], end = r.roi[r.sizes.size() + a];
  if (resized > 1) {
    c0 = start * span, c1 = (end - start) * span / (resized - 1);
  } else {
    c0 = 0.5 * (start + end) * span, c1 = 0.0;
  }
}

}  // namespace

ResizeAlgorithm resize(const Halide::Func& x, const graph::Shape& in_shape, const graph::Resize& r) {
  const size_t rank = in_shape.size();
  const bool crop = r.coordinates == graph::ResizeCoordinates::tf_crop_and_resize;
  std::vector<Halide::Var> o;
  for (size_t d = 0; d < rank; ++d) o.emplace_back("d" + std::to_string(d));
  // Per axis the taps: input index and weight (undefined: 1, a single tap).
  struct Tap {
    Expr index, weight;
  };
  std::vector<std::vector<Tap>> taps(rank);
  std::vector<bool> identity(rank, false);  // an axis the resize leaves alone
  int innermost_period = 0;                 // ResizeAlgorithm::period
  Expr inside;  // tf_crop_and_resize: whether every axis' coordinate lies within the input
  for (size_t a = 0; a < rank; ++a) {
    const size_t d = rank - 1 - a;
    const int last = static_cast<int>(in_shape[a]) - 1;
    if (graph::resize_axis_is_identity(r, a, in_shape[a])) {
      identity[d] = true;
      continue;
    }
    bool periodic = false;  // this axis' taps repeat (see below): they read `padded` unclamped
    auto clamp_index = [&](const Expr& i) { return periodic ? i : Halide::clamp(i, 0, last); };
    Expr base, ratio;  // floor of the source coordinate (int) and its fraction (float)
    if (crop) {
      double c0 = 0, c1 = 0;
      crop_line(r, a, in_shape[a], c0, c1);
      // The output indices whose coordinate lies in [0, last], decided in double: a line, so
      // they are one run.
      int64_t first = -1, final_i = -2;
      for (int64_t i = 0; i < r.sizes[a]; ++i) {
        const double s = c0 + c1 * static_cast<double>(i);
        if (s >= 0 && s <= static_cast<double>(last)) {
          if (first < 0) first = i;
          final_i = i;
        }
      }
      const Expr in_run = o[d] >= static_cast<int>(first) && o[d] <= static_cast<int>(final_i);
      inside = inside.defined() ? inside && in_run : in_run;
      const Expr s = static_cast<float>(c0) + static_cast<float>(c1) * Halide::cast<float>(o[d]);
      if (r.mode == graph::ResizeMode::nearest) {
        Expr n;
        switch (r.nearest) {
          case graph::NearestRounding::round_prefer_floor: n = Halide::ceil(s - 0.5f); break;
          case graph::NearestRounding::round_prefer_ceil: n = Halide::floor(s + 0.5f); break;
          case graph::NearestRounding::floor: n = Halide::floor(s); break;
          case graph::NearestRounding::ceil: n = Halide::ceil(s); break;
        }
        taps[d] = {{clamp_index(Halide::cast<int>(n)), Expr()}};
        continue;
      }
      const Expr fl = Halide::floor(s);
      base = Halide::cast<int>(fl);
      ratio = s - fl;
    } else {
      // num / den is the source coordinate; Halide's integer division rounds down (den > 0).
      const Fraction f = source_fraction(r, a, in_shape[a]);
      const int64_t largest = 2 * (f.a * (r.sizes[a] - 1) + std::abs(f.b)) + f.d;
      const Halide::Type t = largest < (int64_t{1} << 31) ? Halide::Int(32) : Halide::Int(64);
      auto constant = [&](int64_t v) { return Halide::cast(t, Expr(static_cast<int64_t>(v))); };
      // The innermost axis' taps repeat every `period` outputs when f.a * period is a multiple
      // of f.d: num = step * f.d * (x / period) + f.a * (x % period) + f.b, so each index below
      // is step * (x / period) plus the same index of the remainder's numerator, and the
      // ratio is the remainder's alone.
      const int64_t period = f.a > 0 ? f.d / std::gcd(f.a, f.d) : 0;
      periodic = d == 0 && period >= 1 && period <= kMaxResizePeriod && r.sizes[a] % period == 0;
      if (periodic) innermost_period = static_cast<int>(period);
      const Expr xp = Halide::cast(t, o[d]);
      const Expr shift =
          periodic ? constant(f.a * period / f.d) * (xp / constant(period)) : constant(0);
      const Expr num = periodic ? constant(f.a) * (xp % constant(period)) + constant(f.b)
                                : constant(f.a) * xp + constant(f.b);
      const Expr den = constant(f.d);
      if (r.mode == graph::ResizeMode::nearest) {
        Expr n;
        switch (r.nearest) {
          case graph::NearestRounding::round_prefer_floor: n = -((den - 2 * num) / (2 * den)); break;
          case graph::NearestRounding::round_prefer_ceil: n = (2 * num + den) / (2 * den); break;
          case graph::NearestRounding::floor: n = num / den; break;
          case graph::NearestRounding::ceil: n = -((-num) / den); break;
        }
        n = shift + n;
        taps[d] = {{Halide::cast<int>(periodic ? n : Halide::clamp(n, constant(0), constant(last))),
                    Expr()}};
        continue;
      }
      const Expr q = num / den;
      // Clamped far enough out that every tap clamps the same, and an int; periodic taps read
      // `padded` wherever they land.
      base = periodic ? Halide::cast<int>(shift + q)
                      : Halide::cast<int>(Halide::clamp(q, constant(-3), constant(last + 3)));
      ratio = Halide::cast<float>(num - q * den) / static_cast<float>(f.d);
    }
    if (r.mode == graph::ResizeMode::linear) {
      taps[d] = {{clamp_index(base), 1.0f - ratio}, {clamp_index(base + 1), ratio}};
      continue;
    }
    // Cubic: taps base - 1 .. base + 2 at distances ratio + 1, ratio, 1 - ratio, 2 - ratio.
    const float A = r.cubic_a;
    std::vector<Expr> w = {cubic_far(ratio + 1.0f, A), cubic_near(ratio, A), cubic_near(1.0f - ratio, A),
                           cubic_far(2.0f - ratio, A)};
    if (r.exclude_outside) {  // taps outside the input dropped, the rest renormalized
      Expr sum;
      for (int k = 0; k < 4; ++k) {
        const Expr i = base + (k - 1);
        w[k] = Halide::select(i >= 0 && i <= last, w[k], 0.0f);
        sum = sum.defined() ? sum + w[k] : w[k];
      }
      for (Expr& e : w) e = e / sum;
    }
    for (int k = 0; k < 4; ++k) taps[d].push_back({clamp_index(base + (k - 1)), w[k]});
  }
  // Separable: one pass per interpolated axis, innermost first, each reading the previous pass
  // at its taps along its own axis only. An outer axis' taps are the same across a vector of
  // the innermost axis, so its pass reads whole rows; only the innermost axis' pass gathers,
  // and on the input's rows rather than the output's (bilinear 8x upsampling: 1/8 of them),
  // unless its taps repeat (period > 0): then it reads `padded` at indices whose schedule makes
  // them contiguous loads (seg_tiny's 8x upsampling, AVX-512: the Resize kernel 0.29 -> 0.17 ms).
  ResizeAlgorithm result;
  result.period = innermost_period;
  if (result.period > 0) {
    std::vector<Expr> at(o.begin(), o.end());
    at[0] = Halide::clamp(o[0], 0, static_cast<int>(in_shape[rank - 1]) - 1);
    result.padded = Halide::Func("resize_padded");
    result.padded(o) = x(at);
  }
  Halide::Func cur = x;
  graph::Shape shape = in_shape;
  for (size_t d = 0; d < rank; ++d) {
    if (identity[d]) continue;
    const Halide::Func source = d == 0 && result.period > 0 ? result.padded : cur;
    std::vector<Expr> at(o.begin(), o.end());
    Expr value;
    for (const Tap& t : taps[d]) {
      at[d] = t.index;
      const Expr term = t.weight.defined() ? source(at) * t.weight : source(at);
      value = value.defined() ? value + term : term;
    }
    Halide::Func pass("resize_axis" + std::to_string(rank - 1 - d));
    pass(o) = value;
    shape[rank - 1 - d] = r.sizes[rank - 1 - d];
    result.passes.push_back(pass);
    result.pass_shapes.push_back(shape);
    cur = pass;
  }
  result.out = Halide::Func("resize");
  result.out(o) = inside.defined() ? Halide::select(inside, cur(o), r.extrapolation) : cur(o);
  if (result.period > 0)
    result.innermost = result.passes.size() == 1 ? result.out : result.passes[0];
  // The last pass is computed inline in the output.
  if (!result.passes.empty()) result.passes.pop_back(), result.pass_shapes.pop_back();
  return result;
}

namespace {

// v reflected back into [lo, hi] (a mirror at each end, as often as it takes), as the reference
// computes it; v itself inside.
Expr reflect_into(const Expr& v, float lo, float hi) {
  const float range = hi - lo;
  if (range <= 0) return Halide::Expr(lo);  // one pixel with align_corners
  const Expr below = v < lo;
  const Expr d = Halide::select(below, lo - v, v - hi);
  const Expr flips = Halide::floor(d / range);
  const Expr r = d - flips * range;
  const Expr even = flips - 2.0f * Halide::floor(flips * 0.5f) == 0.0f;
  return Halide::select(v >= lo && v <= hi, v, Halide::select(below == even, lo + r, hi - r));
}

}  // namespace

GridSampleAlgorithm grid_sample(const Halide::Func& x, const Halide::Func& grid,
                                const graph::Shape& in_shape, const graph::GridSample& gs) {
  using graph::GridSampleMode;
  using graph::GridSamplePadding;
  const int H = static_cast<int>(in_shape[2]), W = static_cast<int>(in_shape[3]);
  Halide::Var j("j"), i("i"), c("c"), n("n");
  // The point in pixels, in strict float (the reference's rounding of half-way points for
  // nearest must not depend on what LLVM contracts).
  const auto pixel = [&](const Expr& g, int size) {
    return gs.align_corners
               ? Halide::strict_float((g + 1.0f) * 0.5f * static_cast<float>(size - 1))
               : Halide::strict_float(((g + 1.0f) * static_cast<float>(size) - 1.0f) * 0.5f);
  };
  Expr px = pixel(grid(0, j, i, n), W), py = pixel(grid(1, j, i, n), H);
  if (gs.mode == GridSampleMode::nearest)
    px = Halide::round(px), py = Halide::round(py);  // half to even
  const float lo_x = gs.align_corners ? 0.0f : -0.5f, hi_x = gs.align_corners ? W - 1.0f : W - 0.5f;
  const float lo_y = gs.align_corners ? 0.0f : -0.5f, hi_y = gs.align_corners ? H - 1.0f : H - 0.5f;
  const Expr outside = px < lo_x || px > hi_x || py < lo_y || py > hi_y;
  if (gs.padding == GridSamplePadding::border) {
    px = Halide::select(outside, Halide::clamp(px, 0.0f, W - 1.0f), px);
    py = Halide::select(outside, Halide::clamp(py, 0.0f, H - 1.0f), py);
  } else if (gs.padding == GridSamplePadding::reflection) {
    px = reflect_into(px, lo_x, hi_x), py = reflect_into(py, lo_y, hi_y);
  }
  GridSampleAlgorithm a{Halide::Func("grid_sample"), Halide::Func("grid_point")};
  a.point(j, i, n) = Halide::Tuple(px, py);
  px = a.point(j, i, n)[0], py = a.point(j, i, n)[1];
  // The pixel at integer-valued (qy, qx), read by the padding rule; indices are clamped in
  // float before the conversion (a huge coordinate must not overflow it).
  const auto tap = [&](Expr qy, Expr qx) {
    Expr inside;
    if (gs.padding == GridSamplePadding::zeros) {
      inside = qx >= 0.0f && qx <= W - 1.0f && qy >= 0.0f && qy <= H - 1.0f;
    } else if (gs.padding == GridSamplePadding::reflection) {
      qx = Halide::trunc(reflect_into(qx, lo_x, hi_x)),
      qy = Halide::trunc(reflect_into(qy, lo_y, hi_y));
    }
    const Expr value = x(Halide::cast<int>(Halide::clamp(qx, 0.0f, W - 1.0f)),
                         Halide::cast<int>(Halide::clamp(qy, 0.0f, H - 1.0f)), c, n);
    return inside.defined() ? Halide::select(inside, value, 0.0f) : value;
  };
  if (gs.mode == GridSampleMode::nearest) {
    a.out(j, i, c, n) = tap(py, px);
    return a;
  }
  const Expr fx = Halide::floor(px), fy = Halide::floor(py);
  const Expr tx = px - fx, ty = py - fy;
  std::vector<Expr> wx, wy;
  int first = 0;  // the first tap's offset from the floor
  if (gs.mode == GridSampleMode::linear) {
    wx = {1.0f - tx, tx}, wy = {1.0f - ty, ty};
  } else {  // Keys' kernel with a = -0.75, for the taps at distances t + 1, t, 1 - t, 2 - t
    constexpr float A = -0.75f;
    wx = {cubic_far(tx + 1.0f, A), cubic_near(tx, A), cubic_near(1.0f - tx, A),
          cubic_far(2.0f - tx, A)};
    wy = {cubic_far(ty + 1.0f, A), cubic_near(ty, A), cubic_near(1.0f - ty, A),
          cubic_far(2.0f - ty, A)};
    first = -1;
  }
  Expr sum = 0.0f;
  for (size_t b = 0; b < wy.size(); ++b) {
    Expr row = 0.0f;
    for (size_t a = 0; a < wx.size(); ++a)
      row += wx[a] * tap(fy + static_cast<float>(first + static_cast<int>(b)),
                         fx + static_cast<float>(first + static_cast<int>(a)));
    sum += wy[b] * row;
  }
  a.out(j, i, c, n) = sum;
  return a;
}

}  // namespace kiln::generators::ops
