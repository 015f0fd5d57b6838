// Elementwise algorithm builders. Each step is the maths of the ONNX op it came from.
#include "generators/ops/elementwise.h"

#include <cmath>

namespace kiln::generators::ops {

using Halide::Expr;

namespace {

// e^x for x in [-87, 88.37], where 2^k below is a normal float; from 88.38 to 89 (k = 128) the
// bits of 2^k are those of inf, and so is the result. x = k ln2 + r with k the nearest integer
// to x / ln2 and |r| <= ln2 / 2, then e^x = 2^k (1 + r (1 + r q(r))). k is rounded by adding
// 1.5 * 2^23 (+ 127, the exponent's bias), which leaves k + 127 in the low bits of the sum; the
// bits are read as integers so that no float rule can fold the addition away. q is a degree-3
// least-squares minimax fit made for Kiln (relative error under 1.1e-7 on [-ln2/2, ln2/2]). A
// two-part ln2 (Cody and Waite) would not survive: under Halide's fast-math flags its two
// subtractions are reassociated (measured), and strict_float cost a SiLU stem 9%. Relative error
// over [-87, 87], measured: 3.9e-7 with FMA (k ln2 exact but for ln2's rounding), 4.2e-6
// without (the product rounded); Halide's exp: 3.5e-7 and 4.1e-6. Ten vector operations on
// AVX-512 (LLVM folds the last multiply into a multiply-add), where Halide's takes about 20 (its
// floor splits into two halves on AVX-512).
// With `two_part_ln2`, r = x - k L1 - k L2 in strict float, ln2 = L1 + L2 with L1 of 9
// significant bits (Cephes' expf: k L1 is exact), for callers that need the relative error
// under 2e-7 on every target whatever LLVM contracts (sinh and cosh: 4.3e-6 at 72 without).
Expr exp_in_range(const Expr& x, bool two_part_ln2 = false) {
  const Expr sum = x * 1.44269504f + 12583039.0f;  // 1.5 * 2^23 + 127
  const Expr bits = Halide::reinterpret(Halide::UInt(32), sum);
  const Expr k =
      Halide::cast<float>(Halide::reinterpret(Halide::Int(32), bits - Halide::Expr(0x4b40007fu)));
  const Expr r = two_part_ln2 ? Halide::strict_float(x - k * 0.693359375f - k * -2.12194440e-4f)
                              : x - k * 0.693147181f;
  const Expr p =
      1.0f +
      r * (1.0f + r * (0.49999243f + r * (0.16667111f + r * (0.041889019f + r * 0.0083128605f))));
  // bits is 0x4b400000 + k + 127, whose low 9 bits are k + 127: shifted left by 23, 2^k's bits.
  const Expr two_k = Halide::reinterpret(Halide::Float(32), bits << 23);
  return p * two_k;
}

// e^-v clamped to [e^-87, e^87]: 1 / (1 + e^-v) stays within 1.7e-38 of the sigmoid there.
Expr exp_negated_clamped(const Expr& v) { return exp_in_range(Halide::clamp(-v, -87.0f, 87.0f)); }

}  // namespace

Expr sigmoid(const Expr& v) { return keep_nan(v, 1.0f / (1.0f + exp_negated_clamped(v))); }

namespace {

// e^v - 1 without the cancellation of exp(v) - 1 near 0: below |v| = 1/4 the Taylor series
// to v^6 (truncation error under 2e-8 relative).
Expr expm1_accurate(const Expr& v) {
  const Expr series =
      v * (1.0f +
           v * (1.0f / 2 + v * (1.0f / 6 + v * (1.0f / 24 + v * (1.0f / 120 + v * (1.0f / 720))))));
  return Halide::select(Halide::abs(v) < 0.25f, series, Halide::exp(v) - 1.0f);
}

// Halide's tanh calls libm one lane at a time. (e^2v - 1) / (e^2v + 1), from expm1 so that
// small |v| keep their precision; saturates to +-1 where e^2v overflows.
Expr tanh_vectorized(const Expr& v) {
  const Expr a = Halide::min(Halide::abs(v), 20.0f);  // tanh(20) is 1 in float
  const Expr e = expm1_accurate(2.0f * a);
  const Expr t = e / (e + 2.0f);
  return Halide::select(v < 0.0f, -t, t);
}

// erf(z) as z * P(z^2) / Q(z^2) for |z| <= 3.9 (erf(3.9) rounds to 1 in float): 11
// multiply-adds and one division, against Halide's erf, which evaluates two approximations and
// selects one (about 35 operations and a division) and gives NaN for an infinite argument. The
// coefficients are a weighted least-squares rational fit made for Kiln (degrees 6 and 4 in z^2);
// the absolute error is under 6e-7 over [-3.9, 3.9] (Halide's: 4e-7), the relative error under
// 4e-7 near 0; the fit overshoots 1 by up to 4e-7. erf_fit(w, a, b) is b erf(a w) for the
// already clamped w, with a and b folded into the coefficients (computed in double, rounded
// once), so that GELU's scalings cost no operations.
Expr erf_fit(const Expr& w, double a, double b) {
  static constexpr double p[] = {1.1283791f,     0.18502706f,     0.048609916f,  0.0031066353f,
                                 0.00013093128f, -1.9978386e-06f, 2.1736913e-08f};
  static constexpr double q[] = {1.0f, 0.49730822f, 0.108854204f, 0.013105315f, 0.00082290225f};
  const Expr u = w * w;
  const auto horner = [&](const double* c, int n, double scale) {
    // sum c[k] (a^2 u)^k * scale, highest power first
    Expr e = static_cast<float>(c[n - 1] * std::pow(a * a, n - 1) * scale);
    for (int k = n - 2; k >= 0; --k)
      e = e * u + static_cast<float>(c[k] * std::pow(a * a, k) * scale);
    return e;
  };
  return w * horner(p, 7, a * b) / horner(q, 5, 1.0);
}

// erf(v), with erf(+-inf) = +-1; a NaN stays NaN (the clamp alone would turn it into a number).
Expr erf_rational(const Expr& v) {
  const Expr x = Halide::clamp(v, -3.9f, 3.9f);
  return keep_nan(v, Halide::clamp(erf_fit(x, 1.0, 1.0), -1.0f, 1.0f));
}

// GELU(v) = v/2 + v erf(v / sqrt 2) / 2 as one multiply-add: about 19 vector operations where
// 0.5 v (1 + erf(v / sqrt 2)) took 25 (a 1x1 convolution's epilogue over 48 input channels
// costs half as much again as its products). A NaN v makes the result NaN through the products
// (no bit test needed); GELU(inf) = inf, GELU(-inf) = -inf + inf = NaN (-inf * 0 in ONNX's form).
Expr gelu_erf(const Expr& v) {
  const float edge = static_cast<float>(3.9 / M_SQRT1_2);
  const Expr half_erf =
      Halide::clamp(erf_fit(Halide::clamp(v, -edge, edge), M_SQRT1_2, 0.5), -0.5f, 0.5f);
  return v * half_erf + 0.5f * v;
}

// v^p for a constant exponent: the common ones as multiplications (LayerNorm's square, GELU's
// cube), integers with the sign of an odd power of a negative base (as std::pow), the rest
// through Halide's vectorized pow (NaN for a negative base, as ONNX and numpy give).
Expr pow_constant(const Expr& v, float p) {
  if (p == 0.0f) return Halide::Expr(1.0f) + 0.0f * v;  // 1, NaN for NaN
  if (p == 1.0f) return v;
  if (p == 2.0f) return v * v;
  if (p == 3.0f) return v * v * v;
  if (p == 0.5f) return Halide::sqrt(v);
  if (p == -1.0f) return 1.0f / v;
  if (p == std::floor(p) && std::abs(p) < (1 << 24)) {
    const Expr magnitude = Halide::pow(Halide::abs(v), p);
    const bool odd = std::fmod(std::abs(p), 2.0f) == 1.0f;
    return odd ? Halide::select(v < 0.0f, -magnitude, magnitude) : magnitude;
  }
  return Halide::pow(v, p);
}

// x^y for a tensor exponent, with std::pow's values: |x|^y, negated for a negative x and an
// odd integer y, NaN for a negative x and a non-integer y; y = 0 gives 1 (a NaN x too).
Expr pow_tensor(const Expr& x, const Expr& y) {
  const Expr magnitude = Halide::pow(Halide::abs(x), y);
  const Expr integer = Halide::floor(y) == y;
  const Expr odd = integer && (y - 2.0f * Halide::floor(y * 0.5f)) == 1.0f;
  const Expr nan = Halide::reinterpret(Halide::Float(32), Halide::Expr(0x7fc00000u));
  const Expr negative = Halide::select(odd, -magnitude, integer, magnitude, nan);
  return Halide::select(y == 0.0f, 1.0f, x < 0.0f, negative, magnitude);
}

// 1 where `test` holds, else 0; false where either operand is NaN (tested on the bits, as the
// fast-math comparisons may assume no NaN).
Expr boolean(const Expr& test, const Expr& x, const Expr& y) {
  return Halide::select(is_nan_bits(x) || is_nan_bits(y), 0.0f, Halide::select(test, 1.0f, 0.0f));
}

// log(1 + e^v), without overflow for large v.
Expr softplus(const Expr& v) {
  return Halide::max(v, 0.0f) + Halide::log(1.0f + Halide::exp(-Halide::abs(v)));
}

// sin, cos or tan of v in radians, vectorized (Halide's own call libm per lane): v = k pi/2 + r
// with k the nearest integer to v 2/pi and |r| <= pi/4, r = v - k P1 - k P2 - k P3 with pi/2
// split into P1 + P2 + P3 (Cody and Waite; P1 has 8 significant bits, so k P1 is exact for |k|
// < 2^16), in strict float so that no reassociation or contraction undoes the split; then the
// minimax polynomials of sin and cos on [-pi/4, pi/4] (Cephes' sinf and cosf), and k mod 4
// picks which one, with which sign (tan: their quotient). The error is a few 1e-8 for |v| up to
// about 1e3 and grows with |v| (the rounding of k P2: 2e-7 at 1e4, 2e-6 at 1e5, as the test
// measures); a NaN or infinite v gives NaN, decided on the bits (fast math may assume no NaN).
Expr trig(graph::ChainStepKind kind, const Expr& v) {
  const Expr k = Halide::round(v * static_cast<float>(M_2_PI));
  // v itself where k is 0: -0 - (-0 P1) would be +0, and sin(-0) is -0.
  const Expr r =
      Halide::select(k == 0.0f, v,
                     Halide::strict_float(v - k * 1.5703125f - k * 4.837512969970703125e-4f -
                                          k * 7.54978995489188216e-8f));
  const Expr r2 = r * r;
  // r times a polynomial in r^2 (not r + r^3 (...), whose sum makes -0 a +0).
  const Expr sin_r =
      r * (1.0f + r2 * (-1.6666654611e-1f + r2 * (8.3321608736e-3f + r2 * -1.9515295891e-4f)));
  const Expr cos_r =
      1.0f - 0.5f * r2 +
      r2 * r2 *
          (4.166664568298827e-2f + r2 * (-1.388731625493765e-3f + r2 * 2.443315711809948e-5f));
  // k mod 4 from its low bits (an int32 holds k for |v| < 3e9; past that sin and cos are noise
  // in float32 anyway, and k's low bits are 0).
  const Expr quadrant = Halide::cast<int32_t>(Halide::clamp(k, -1.0e9f, 1.0e9f)) & 3;
  Expr result;
  if (kind == graph::ChainStepKind::tan) {
    // A true division (strict): the reciprocal estimate and its Newton step make -0 a +0.
    result =
        Halide::strict_float(Halide::select((quadrant & 1) == 0, sin_r / cos_r, -cos_r / sin_r));
  } else {
    const Expr q = kind == graph::ChainStepKind::cos ? (quadrant + 1) & 3 : quadrant;
    result = Halide::select(q == 0, sin_r, q == 1, cos_r, q == 2, -sin_r, -cos_r);
  }
  const Expr bits = Halide::reinterpret(Halide::UInt(32), v);
  const Expr finite = (bits & Halide::Expr(0x7f800000u)) != Halide::Expr(0x7f800000u);
  return Halide::select(finite, result,
                        Halide::reinterpret(Halide::Float(32), Halide::Expr(0x7fc00000u)));
}

// The float with v's sign bit and r's other bits (r is non-negative): sign symmetry that keeps
// a -0 (asinh(-0) = -0), decided on the bits.
Expr with_sign_of(const Expr& v, const Expr& r) {
  const Expr sign = Halide::reinterpret(Halide::UInt(32), v) & Halide::Expr(0x80000000u);
  return Halide::reinterpret(Halide::Float(32), Halide::reinterpret(Halide::UInt(32), r) | sign);
}

Expr quiet_nan() { return Halide::reinterpret(Halide::Float(32), Halide::Expr(0x7fc00000u)); }
Expr infinity() { return Halide::reinterpret(Halide::Float(32), Halide::Expr(0x7f800000u)); }

// log(1 + u) for u >= 0 without the cancellation of log(1 + u) near 0: with w = 1 + u rounded,
// log(w) u / (w - 1) (Goldberg), whose two roundings cancel; u itself where w rounds to 1. In
// strict float, so that w - 1 is not simplified to u. Relative error a few 1e-7.
Expr log1p_accurate(const Expr& u) {
  const Expr w = 1.0f + u;
  return Halide::strict_float(Halide::select(w == 1.0f, u, Halide::log(w) * (u / (w - 1.0f))));
}

// sinh and cosh of v from h = e^|v| / 2: h -+ 1 / (4h). e^|v| is squared from e^(|v|/2), so that
// it overflows where sinh does (|v| > 89.4), not at 88.7. Below |v| = 1 sinh is its Taylor series
// to v^11 (truncation under 2e-10 relative), free of h - 1/(4h)'s cancellation. Relative error
// under 5e-7 measured (the exponential's, doubled by the square); NaN stays NaN.
Expr hyperbolic(graph::ChainStepKind kind, const Expr& v) {
  const Expr a = Halide::abs(v);
  const Expr t = exp_in_range(Halide::min(a, 120.0f) * 0.5f, /*two_part_ln2=*/true);
  // Halved first (strict: reassociated, t * t overflows from |v| = 88.7, sinh at 89.4).
  const Expr h = Halide::strict_float((t * 0.5f) * t);
  if (kind == graph::ChainStepKind::cosh) return keep_nan(v, h + 0.25f / h);
  const Expr z = a * a;
  const Expr series =
      a * (1.0f +
           z * (1.0f / 6 + z * (1.0f / 120 +
                                z * (1.0f / 5040 + z * (1.0f / 362880 + z * (1.0f / 39916800))))));
  return keep_nan(v, with_sign_of(v, Halide::select(a < 1.0f, series, h - 0.25f / h)));
}

// asin(x) for 0 <= x <= 1/2, z = x^2: x + x z p(z) (Cephes' asinf, relative error about 1e-7).
Expr asin_near_zero(const Expr& x, const Expr& z) {
  return x + x * z *
                 (1.6666752422e-1f +
                  z * (7.4953002686e-2f +
                       z * (4.5470025998e-2f + z * (2.4181311049e-2f + z * 4.2163199048e-2f))));
}

// asin, acos and atan, vectorized (Halide's call libm per lane), as Cephes' asinf, acosf and
// atanf: asin above 1/2 from asin(x) = pi/2 - 2 asin(sqrt((1 - x) / 2)); acos from asin's
// polynomial by acos(x) = pi/2 - asin(x) within [-1/2, 1/2] and 2 asin(sqrt((1 -+ x) / 2))
// beyond; atan reduced to [0, tan(pi/8)] by atan(x) = pi/4 + atan((x - 1) / (x + 1)) and pi/2 +
// atan(-1/x). Outside [-1, 1] asin and acos are NaN, as are all three of NaN; atan(+-inf) is
// +-pi/2; asin, atan keep a -0.
Expr inverse_trig(graph::ChainStepKind kind, const Expr& v) {
  const float half_pi = static_cast<float>(M_PI_2);
  const Expr a = Halide::abs(v);
  if (kind == graph::ChainStepKind::atan) {
    const Expr big = a > 2.414213562373095f, mid = a > 0.4142135623730950f;
    const Expr x = Halide::select(big, -1.0f / a, mid, (a - 1.0f) / (a + 1.0f), a);
    const Expr base = Halide::select(big, half_pi, mid, static_cast<float>(M_PI_4), 0.0f);
    const Expr z = x * x;
    const Expr p =
        x + x * z *
                (-3.33329491539e-1f +
                 z * (1.99777106478e-1f + z * (-1.38776856032e-1f + z * 8.05374449538e-2f)));
    return keep_nan(v, with_sign_of(v, base + p));
  }
  const Expr far = a > 0.5f;
  const Expr z = Halide::select(far, 0.5f * (1.0f - a), a * a);
  const Expr x = Halide::select(far, Halide::sqrt(z), a);
  const Expr p = asin_near_zero(x, z);  // asin(x)
  Expr r;
  if (kind == graph::ChainStepKind::asin) {
    r = with_sign_of(v, Halide::select(far, half_pi - 2.0f * p, p));
  } else {
    const Expr negative = v < 0.0f;
    r = Halide::select(far, Halide::select(negative, static_cast<float>(M_PI) - 2.0f * p, 2.0f * p),
                       half_pi - with_sign_of(v, p));
  }
  return keep_nan(v, Halide::select(a > 1.0f, quiet_nan(), r));
}

// asinh, acosh and atanh through log1p_accurate: asinh(x) = log1p(x + x^2 / (1 + sqrt(1 +
// x^2))), acosh(1 + t) = log1p(t + sqrt(t (t + 2))), atanh(x) = log1p(2x / (1 - x)) / 2, for
// x >= 0 (asinh and atanh are odd: the sign is v's, -0 kept). From 2^12 on asinh and acosh are
// log(x) + ln 2 (x^2 would overflow; the terms left out are under 1e-8 relative). acosh below 1
// and atanh beyond [-1, 1] are NaN, atanh(+-1) is +-inf, acosh(inf) and asinh(+-inf) infinite.
Expr inverse_hyperbolic(graph::ChainStepKind kind, const Expr& v) {
  const float ln2 = static_cast<float>(M_LN2);
  const Expr a = Halide::abs(v);
  const Expr bits = Halide::reinterpret(Halide::UInt(32), a);
  const Expr is_inf = bits == Halide::Expr(0x7f800000u);
  if (kind == graph::ChainStepKind::atanh) {
    const Expr r = 0.5f * log1p_accurate(2.0f * a / (1.0f - a));
    return keep_nan(
        v, with_sign_of(v, Halide::select(a > 1.0f, quiet_nan(), a == 1.0f, infinity(), r)));
  }
  const Expr large = Halide::log(a) + ln2;  // an infinite a is selected away
  if (kind == graph::ChainStepKind::asinh) {
    const Expr small = Halide::min(a, 4096.0f);
    const Expr z = small * small;
    const Expr r = log1p_accurate(small + z / (1.0f + Halide::sqrt(1.0f + z)));
    return keep_nan(v, with_sign_of(v, Halide::select(is_inf, infinity(), a >= 4096.0f, large, r)));
  }
  const Expr t = Halide::clamp(v, 1.0f, 4096.0f) - 1.0f;  // exact for v in [1, 2]
  const Expr r = log1p_accurate(t + Halide::sqrt(t * (t + 2.0f)));
  return keep_nan(
      v, Halide::select(v < 1.0f, quiet_nan(), is_inf, infinity(), v >= 4096.0f, large, r));
}

}  // namespace

Expr apply_chain_step(const graph::ChainStep& step, const Expr& v, const Expr& scale,
                      const Expr& shift) {
  using K = graph::ChainStepKind;
  switch (step.kind) {
    case K::clamp:  // ReLU, ReLU6, Clip
      return apply_activation(graph::Activation{step.a, step.b}, v);
    case K::leaky_relu:
      return Halide::select(v >= 0.0f, v, step.a * v);
    case K::sigmoid:
      return sigmoid(v);
    case K::hard_sigmoid:
      return apply_activation(graph::Activation{0.0f, 1.0f}, step.a * v + step.b);
    case K::hard_swish:
      // A NaN v makes the product NaN whatever the clamp gives.
      return v * Halide::clamp(v / 6.0f + 0.5f, 0.0f, 1.0f);
    case K::affine:
      return v * scale + shift;  // a BatchNorm or a per-channel Mul/Add
    case K::prelu:  // the slope below zero (a NaN v takes the other branch: scale * NaN)
      return Halide::select(v < 0.0f, v * scale, v * shift);
    case K::silu:
      // v / (1 + e^-v), one division, with -v clamped to [-87, 89]: past 88.37 the exponential
      // is inf (k = 128 above), so that -inf gives -inf / inf = NaN, as v * sigmoid(v) =
      // -inf * 0 does, and v under -88.37 gives -0, within 3.7e-37 of the true value. A NaN v
      // carries through the division.
      return v / (1.0f + exp_in_range(Halide::clamp(-v, -87.0f, 89.0f)));
    case K::tanh:
      return tanh_vectorized(v);
    case K::erf:
      return erf_rational(v);
    case K::exp:
      return Halide::exp(v);
    case K::log:
      return Halide::log(v);
    case K::sqrt:
      return Halide::sqrt(v);
    case K::abs:
      return Halide::abs(v);
    case K::neg:
      return -v;
    case K::reciprocal:
      return 1.0f / v;
    case K::softplus:
      return softplus(v);
    case K::softsign:
      return v / (1.0f + Halide::abs(v));
    case K::elu:
      return Halide::select(v > 0.0f, v, step.a * expm1_accurate(v));
    case K::selu:
      return step.b * Halide::select(v > 0.0f, v, step.a * expm1_accurate(v));
    case K::celu:
      return keep_nan(v, Halide::max(v, 0.0f) +
                             Halide::min(0.0f, step.a * expm1_accurate(v / step.a)));
    case K::thresholded_relu:
      return Halide::select(v > step.a, v, 0.0f);
    case K::pow:
      return pow_constant(v, step.a);
    case K::gelu:  // x * P(X <= x) for a standard normal X
      return gelu_erf(v);
    case K::gelu_tanh: {
      // ONNX Gelu(approximate="tanh"), 0.5 v (1 + tanh(z)) with z = sqrt(2/pi) (v + 0.044715
      // v^3), as v sigmoid(2z) = v / (1 + e^-2z), the identity 0.5 (1 + tanh z) = sigmoid(2z):
      // SiLU's exponential and one division, where tanh took an expm1 (a series and an
      // exponential, selected) and its own division, and 1 + tanh(z) lost its digits for
      // negative z. -2z clamped as SiLU's -v (a NaN, +-inf and -0 behave as there).
      const float c = static_cast<float>(M_2_SQRTPI * M_SQRT1_2);
      const Expr minus_2z = (-2.0f * c) * (v + 0.044715f * v * v * v);
      return v / (1.0f + exp_in_range(Halide::clamp(minus_2z, -87.0f, 89.0f)));
    }
    case K::mish: {
      // v tanh(log(1 + e^v)) = v n / (n + 2) with n = e^v (e^v + 2) (tanh(log u) = (u^2 - 1) /
      // (u^2 + 1) at u = 1 + e^v): one exponential and one division, where the softplus took
      // an exponential and a logarithm and the tanh an expm1 and a division. e^v is taken at v
      // clamped to 20 (the fraction is 1 in float from there) and is 0 below -87 (Mish is
      // under 1e-36 there), so Mish(-inf) = -inf * 0 = NaN as in ONNX; a NaN v carries through
      // the product.
      const Expr e =
          Halide::select(v < -87.0f, 0.0f, exp_in_range(Halide::clamp(v, -87.0f, 20.0f)));
      const Expr n = e * (e + 2.0f);
      return v * n / (n + 2.0f);
    }
    case K::floor:
      return Halide::floor(v);
    case K::ceil:
      return Halide::ceil(v);
    case K::round:  // half to even, as ONNX Round
      return Halide::round(v);
    case K::logical_not:
      return Halide::select(v == 0.0f, 1.0f, 0.0f);
    case K::greater:
      return boolean(v > step.a, v, step.a);
    case K::less:
      return boolean(v < step.a, v, step.a);
    case K::equal:
      return boolean(v == step.a, v, step.a);
    case K::greater_equal:
      return boolean(v >= step.a, v, step.a);
    case K::less_equal:
      return boolean(v <= step.a, v, step.a);
    case K::sign:  // strict: a NaN compares false both ways and stays; a zero keeps its sign
      return Halide::strict_float(Halide::select(v > 0.0f, 1.0f, v < 0.0f, -1.0f, v));
    case K::shrink: {  // NaN compares false both ways: 0, as ONNX's definition gives
      const Expr below = v < -step.a;
      const Expr above = v > step.a;
      return Halide::strict_float(Halide::select(below, v + step.b, above, v - step.b, 0.0f));
    }
    case K::is_nan:
      return Halide::select(is_nan_bits(v), 1.0f, 0.0f);
    case K::sin:
    case K::cos:
    case K::tan:
      return trig(step.kind, v);
    case K::sinh:
    case K::cosh:
      return hyperbolic(step.kind, v);
    case K::asin:
    case K::acos:
    case K::atan:
      return inverse_trig(step.kind, v);
    case K::asinh:
    case K::acosh:
    case K::atanh:
      return inverse_hyperbolic(step.kind, v);
    case K::is_inf: {
      // On the bits, as the fast-math comparisons may assume no infinities.
      const Expr bits = Halide::reinterpret(Halide::UInt(32), v);
      const Expr negative = bits == Halide::Expr(0xff800000u);
      const Expr positive = bits == Halide::Expr(0x7f800000u);
      if (step.a != 0.0f && step.b != 0.0f) return Halide::select(negative || positive, 1.0f, 0.0f);
      if (step.a != 0.0f) return Halide::select(negative, 1.0f, 0.0f);
      if (step.b != 0.0f) return Halide::select(positive, 1.0f, 0.0f);
      return Halide::select(negative && positive, 1.0f, 0.0f);  // neither detected: 0
    }
  }
  return v;
}

Expr apply_chain(const std::vector<graph::ChainStep>& steps, Expr v,
                 const std::vector<Halide::Func>& params, const Expr& channel) {
  size_t affine = 0;
  for (const graph::ChainStep& step : steps) {
    Expr scale = 1.0f, shift = 0.0f;
    if (graph::per_channel_step(step.kind)) {
      scale = params[2 * affine](channel);
      shift = params[2 * affine + 1](channel);
      ++affine;
    }
    // Most steps use their operand more than once (a NaN test and the value, a select's
    // condition and branch): the expression is a graph whose shared parts Halide's lowering
    // passes would walk once per use, 2^n times after n such steps (12 alternating ReLU and
    // Sigmoid steps took 8 GB and a minute to compile). Each step's operand is therefore
    // bound to a Let, once, by common subexpression elimination.
    v = Halide::Internal::common_subexpression_elimination(apply_chain_step(step, v, scale, shift));
  }
  return v;
}

Expr apply_activation(const graph::Activation& a, Expr v) {
  Expr clamped = v;
  if (std::isfinite(a.lo)) clamped = Halide::select(clamped < a.lo, a.lo, clamped);
  if (std::isfinite(a.hi)) clamped = Halide::select(clamped > a.hi, a.hi, clamped);
  return clamped.same_as(v) ? v : Halide::strict_float(clamped);
}

Expr is_nan_bits(const Expr& v) {
  const Expr bits = Halide::reinterpret(Halide::UInt(32), v);
  return (bits & Halide::Expr(0x7fffffffu)) > Halide::Expr(0x7f800000u);
}

Expr keep_nan(const Expr& v, const Expr& result) { return Halide::select(is_nan_bits(v), v, result); }

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

Expr binary_expr(graph::BinaryOp op, const Expr& x, const Expr& y) {
  Expr v;
  switch (op) {
    case graph::BinaryOp::add:
      v = x + y;
      break;
    case graph::BinaryOp::sub:
      v = x - y;
      break;
    case graph::BinaryOp::mul:
      v = x * y;
      break;
    case graph::BinaryOp::div:
      v = x / y;
      break;
    case graph::BinaryOp::max:  // NaN if either is (ONNX Max and Min; Halide's drop a NaN)
      v = Halide::select(is_nan_bits(x), x, is_nan_bits(y), y, Halide::max(x, y));
      break;
    case graph::BinaryOp::min:
      v = Halide::select(is_nan_bits(x), x, is_nan_bits(y), y, Halide::min(x, y));
      break;
    case graph::BinaryOp::pow:
      v = pow_tensor(x, y);
      break;
    case graph::BinaryOp::equal:
      v = boolean(x == y, x, y);
      break;
    case graph::BinaryOp::less:
      v = boolean(x < y, x, y);
      break;
    case graph::BinaryOp::greater:
      v = boolean(x > y, x, y);
      break;
    case graph::BinaryOp::less_equal:
      v = boolean(x <= y, x, y);
      break;
    case graph::BinaryOp::greater_equal:
      v = boolean(x >= y, x, y);
      break;
    case graph::BinaryOp::logical_and:
      v = Halide::select(x != 0.0f && y != 0.0f, 1.0f, 0.0f);
      break;
    case graph::BinaryOp::logical_or:
      v = Halide::select(x != 0.0f || y != 0.0f, 1.0f, 0.0f);
      break;
    case graph::BinaryOp::logical_xor:
      v = Halide::select((x != 0.0f) != (y != 0.0f), 1.0f, 0.0f);
      break;
  }
  return v;
}

Halide::Func binary(graph::BinaryOp op, const Halide::Func& a,
                    const std::vector<int64_t>& a_extents, const Halide::Func& b,
                    const std::vector<int64_t>& b_extents, int rank) {
  std::vector<Halide::Var> dims;
  for (int d = 0; d < rank; ++d) dims.emplace_back("d" + std::to_string(d));
  // Row-major shapes align on their last axis, which is Halide's dimension 0.
  auto at = [&](const std::vector<int64_t>& extents) {
    std::vector<Expr> idx;
    for (size_t d = 0; d < extents.size(); ++d)
      idx.push_back(extents[d] == 1 ? Expr(0) : Expr(dims[d]));
    return idx;
  };
  Halide::Func out("binary");
  out(dims) = binary_expr(op, a(at(a_extents)), b(at(b_extents)));
  return out;
}

Halide::Func where(const std::vector<Halide::Func>& in,
                   const std::vector<std::vector<int64_t>>& extents, int rank) {
  std::vector<Halide::Var> dims;
  for (int d = 0; d < rank; ++d) dims.emplace_back("d" + std::to_string(d));
  std::vector<Expr> v;
  for (size_t i = 0; i < 3; ++i) {
    std::vector<Expr> idx;
    for (size_t d = 0; d < extents[i].size(); ++d)
      idx.push_back(extents[i][d] == 1 ? Expr(0) : Expr(dims[d]));
    v.push_back(in[i](idx));
  }
  Halide::Func out("where");
  out(dims) = Halide::select(v[0] != 0.0f, v[1], v[2]);
  return out;
}

}  // namespace kiln::generators::ops
