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
  }
  return f;
}

// Whether axis a maps every output index to itself (same length, scale 1, a mode without a
// half-pixel shift at that scale).
bool identity_axis(const graph::Resize& r, int64_t in_len, size_t a) {
  if (r.sizes[a] != in_len || r.scales[a] != 1.0f) return false;
  // tf_half_pixel_for_nn maps i to i + 1/2: only rounding down brings it back.
  return r.coordinates != graph::ResizeCoordinates::tf_half_pixel_for_nn ||
         (r.mode == graph::ResizeMode::nearest && (r.nearest == graph::NearestRounding::floor ||
                                                   r.nearest == graph::NearestRounding::round_prefer_floor));
}

}  // namespace

Halide::Func resize(const Halide::Func& x, const graph::Shape& in_shape, const graph::Resize& r) {
  const size_t rank = in_shape.size();
  std::vector<Halide::Var> o;
  for (size_t d = 0; d < rank; ++d) o.emplace_back("d" + std::to_string(d));
  // Per axis: the low index, and for interpolated axes the high index and its weight.
  std::vector<Expr> lo(rank), hi(rank), w(rank);
  for (size_t a = 0; a < rank; ++a) {
    const size_t d = rank - 1 - a;
    const int last = static_cast<int>(in_shape[a]) - 1;
    if (identity_axis(r, in_shape[a], a)) {
      lo[d] = o[d];
      continue;
    }
    // num / den is the source coordinate; Halide's integer division rounds down (den > 0).
    const Fraction f = source_fraction(r, a, in_shape[a]);
    const int64_t largest = 2 * (f.a * (r.sizes[a] - 1) + std::abs(f.b)) + f.d;
    const Halide::Type t = largest < (int64_t{1} << 31) ? Halide::Int(32) : Halide::Int(64);
    auto constant = [&](int64_t v) { return Halide::cast(t, Expr(static_cast<int64_t>(v))); };
    const Expr num = constant(f.a) * Halide::cast(t, o[d]) + constant(f.b);
    const Expr den = constant(f.d);
    if (r.mode == graph::ResizeMode::nearest) {
      Expr n;
      switch (r.nearest) {
        case graph::NearestRounding::round_prefer_floor: n = -((den - 2 * num) / (2 * den)); break;
        case graph::NearestRounding::round_prefer_ceil: n = (2 * num + den) / (2 * den); break;
        case graph::NearestRounding::floor: n = num / den; break;
        case graph::NearestRounding::ceil: n = -((-num) / den); break;
      }
      lo[d] = Halide::cast<int>(Halide::clamp(n, constant(0), constant(last)));
      continue;
    }
    const Expr base = num / den;
    lo[d] = Halide::cast<int>(Halide::clamp(base, constant(0), constant(last)));
    hi[d] = Halide::cast<int>(Halide::clamp(base + 1, constant(0), constant(last)));
    w[d] = Halide::cast<float>(num - base * den) / static_cast<float>(f.d);
  }
  // The sum over the corners of the interpolated axes of x(corner) * product of its weights.
  std::vector<size_t> lerp;
  for (size_t d = 0; d < rank; ++d)
    if (w[d].defined()) lerp.push_back(d);
  Expr value = 0.0f;
  for (int corner = 0; corner < (1 << lerp.size()); ++corner) {
    std::vector<Expr> at = lo;
    Expr weight = 1.0f;
    for (size_t k = 0; k < lerp.size(); ++k) {
      const size_t d = lerp[k];
      const bool high = (corner >> k) & 1;
      if (high) at[d] = hi[d];
      weight = weight * (high ? w[d] : 1.0f - w[d]);
    }
    value = corner == 0 ? x(at) * weight : value + x(at) * weight;
  }
  Halide::Func out("resize");
  out(o) = lerp.empty() ? x(lo) : value;
  return out;
}

}  // namespace kiln::generators::ops
