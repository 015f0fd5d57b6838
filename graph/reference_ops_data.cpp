// Reference semantics of the elementwise and data-movement ops.
#include <algorithm>
#include <cmath>
#include <limits>

#include "graph/op_kind.h"
#include "graph/reference_ops.h"
#include "graph/shape_inference.h"

namespace kiln::graph {
namespace {

// The multi-index of flat position `flat` in a tensor of shape `s`.
std::vector<int64_t> unravel(int64_t flat, const Shape& s) {
  std::vector<int64_t> idx(s.size());
  for (size_t a = s.size(); a-- > 0;) {
    idx[a] = flat % s[a];
    flat /= s[a];
  }
  return idx;
}

int64_t ravel(const std::vector<int64_t>& idx, const Shape& s) {
  int64_t flat = 0;
  for (size_t a = 0; a < s.size(); ++a) flat = flat * s[a] + idx[a];
  return flat;
}

Tensor blank(const Shape& shape, Layout layout) {
  return Tensor{shape, layout, std::vector<float>(num_elements(shape))};
}

// Everything is computed in double and rounded once, so the reference is as exact as float
// output allows.
double unary(const Op& op, double x) {
  if (const auto* l = std::get_if<LeakyRelu>(&op)) return x >= 0 ? x : l->alpha * x;
  if (std::holds_alternative<Sigmoid>(op)) return 1.0 / (1.0 + std::exp(-x));
  if (const auto* h = std::get_if<HardSigmoid>(&op))
    return clamp_nan(double{h->alpha} * x + h->beta, 0.0, 1.0);
  KILN_CHECK(std::holds_alternative<HardSwish>(op), "unary op without a reference");
  return x * clamp_nan(x / 6.0 + 0.5, 0.0, 1.0);
}

double binary(BinaryOp op, double a, double b) {
  switch (op) {
    case BinaryOp::add:
      return a + b;
    case BinaryOp::sub:
      return a - b;
    case BinaryOp::mul:
      return a * b;
    case BinaryOp::div:
      return a / b;
    case BinaryOp::max:
      return max_nan(a, b);
    case BinaryOp::min:
      return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
    case BinaryOp::pow:
      return std::pow(a, b);
    case BinaryOp::equal:
      return a == b ? 1.0 : 0.0;
    case BinaryOp::less:
      return a < b ? 1.0 : 0.0;
    case BinaryOp::greater:
      return a > b ? 1.0 : 0.0;
    case BinaryOp::less_equal:
      return a <= b ? 1.0 : 0.0;
    case BinaryOp::greater_equal:
      return a >= b ? 1.0 : 0.0;
    case BinaryOp::logical_and:
      return a != 0.0 && b != 0.0 ? 1.0 : 0.0;
    case BinaryOp::logical_or:
      return a != 0.0 || b != 0.0 ? 1.0 : 0.0;
    case BinaryOp::logical_xor:
      return (a != 0.0) != (b != 0.0) ? 1.0 : 0.0;
  }
  return a / b;
}

// numpy broadcasting: each output index reads index 0 on every axis where an operand has
// size 1, and operands of lower rank are aligned to the trailing axes.
Tensor broadcast_binary(BinaryOp op, const Tensor& a, const Tensor& b, const Shape& out_shape,
                        Layout layout) {
  Tensor out = blank(out_shape, layout);
  const size_t r = out_shape.size();
  auto source = [&](const Shape& s, const std::vector<int64_t>& oi) {
    std::vector<int64_t> idx(s.size());
    for (size_t a = 0; a < s.size(); ++a) idx[a] = s[a] == 1 ? 0 : oi[r - s.size() + a];
    return ravel(idx, s);
  };
  for (int64_t i = 0; i < num_elements(out_shape); ++i) {
    const std::vector<int64_t> oi = unravel(i, out_shape);
    out.data[i] =
        static_cast<float>(binary(op, a.data[source(a.shape, oi)], b.data[source(b.shape, oi)]));
  }
  return out;
}

// Where: cond, x and y broadcast together as in broadcast_binary.
Tensor where(const Tensor& c, const Tensor& x, const Tensor& y, const Shape& out_shape,
             Layout layout) {
  Tensor out = blank(out_shape, layout);
  const size_t r = out_shape.size();
  auto source = [&](const Shape& s, const std::vector<int64_t>& oi) {
    std::vector<int64_t> idx(s.size());
    for (size_t a = 0; a < s.size(); ++a) idx[a] = s[a] == 1 ? 0 : oi[r - s.size() + a];
    return ravel(idx, s);
  };
  for (int64_t i = 0; i < num_elements(out_shape); ++i) {
    const std::vector<int64_t> oi = unravel(i, out_shape);
    const bool take_x = c.data[source(c.shape, oi)] != 0.0f;
    out.data[i] = take_x ? x.data[source(x.shape, oi)] : y.data[source(y.shape, oi)];
  }
  return out;
}

// Output axis j is input axis perm[j].
Tensor transpose(const Tensor& x, const std::vector<int>& perm, const Shape& out_shape,
                 Layout layout) {
  Tensor out = blank(out_shape, layout);
  std::vector<int64_t> xi(x.shape.size());
  for (int64_t i = 0; i < num_elements(out_shape); ++i) {
    const std::vector<int64_t> oi = unravel(i, out_shape);
    for (size_t j = 0; j < perm.size(); ++j) xi[perm[j]] = oi[j];
    out.data[i] = x.data[ravel(xi, x.shape)];
  }
  return out;
}

Tensor concat(int axis, const std::vector<const Tensor*>& in, const Shape& out_shape,
              Layout layout) {
  Tensor out = blank(out_shape, layout);
  for (int64_t i = 0; i < num_elements(out_shape); ++i) {
    std::vector<int64_t> oi = unravel(i, out_shape);
    size_t k = 0;
    while (oi[axis] >= in[k]->shape[axis]) oi[axis] -= in[k++]->shape[axis];
    out.data[i] = in[k]->data[ravel(oi, in[k]->shape)];
  }
  return out;
}

// Shape inference checks only that each axis is non-empty; reading in bounds is checked here.
Tensor slice(const Slice& sl, const Tensor& x, const Shape& out_shape, Layout layout) {
  for (size_t a = 0; a < x.shape.size(); ++a) {
    const int64_t first = sl.starts[a], last = first + (out_shape[a] - 1) * sl.steps[a];
    if (std::min(first, last) < 0 || std::max(first, last) >= x.shape[a])
      throw Error("reference: Slice reads index " + std::to_string(first) + ".." +
                  std::to_string(last) + " of axis " + std::to_string(a) + " (size " +
                  std::to_string(x.shape[a]) + ")");
  }
  Tensor out = blank(out_shape, layout);
  std::vector<int64_t> xi(x.shape.size());
  for (int64_t i = 0; i < num_elements(out_shape); ++i) {
    const std::vector<int64_t> oi = unravel(i, out_shape);
    for (size_t a = 0; a < xi.size(); ++a) xi[a] = sl.starts[a] + oi[a] * sl.steps[a];
    out.data[i] = x.data[ravel(xi, x.shape)];
  }
  return out;
}

// Output index i reads input index i mod (the input's size) on every axis.
Tensor tile(const Tile& /*t*/, const Tensor& x, const Shape& out_shape, Layout layout) {
  Tensor out = blank(out_shape, layout);
  std::vector<int64_t> xi(x.shape.size());
  for (int64_t i = 0; i < num_elements(out_shape); ++i) {
    const std::vector<int64_t> oi = unravel(i, out_shape);
    for (size_t a = 0; a < xi.size(); ++a) xi[a] = oi[a] % x.shape[a];
    out.data[i] = x.data[ravel(xi, x.shape)];
  }
  return out;
}

// An index along an axis of `extent` as GatherElements and ScatterElements read it from its
// float32: truncated, clamped into [-extent, extent), a negative one counted from the end; NaN
// reads 0.
int64_t element_index(float v, int64_t extent) {
  if (std::isnan(v)) return 0;
  const double i = std::clamp(std::trunc(double{v}), -double(extent), double(extent - 1));
  const auto k = static_cast<int64_t>(i);
  return k < 0 ? k + extent : k;
}

// out[i] = data[i with axis `axis` replaced by indices[i]] (indices broadcast where their extent
// is 1: the output's shape tells where).
Tensor gather_elements(const GatherElements& ge, const Tensor& data, const Tensor& indices,
                       const Shape& out_shape, Layout layout) {
  Tensor out = blank(out_shape, layout);
  const auto axis = static_cast<size_t>(ge.axis);
  std::vector<int64_t> from(out_shape.size());
  for (int64_t i = 0; i < num_elements(out_shape); ++i) {
    std::vector<int64_t> at = unravel(i, out_shape);
    for (size_t a = 0; a < at.size(); ++a) from[a] = indices.shape[a] == 1 ? 0 : at[a];
    at[axis] = element_index(indices.data[ravel(from, indices.shape)], data.shape[axis]);
    out.data[i] = data.data[ravel(at, data.shape)];
  }
  return out;
}

// The data, then each update in row-major order written (or combined) at its index.
Tensor scatter_elements(const ScatterElements& se, const Tensor& data, const Tensor& indices,
                        const Tensor& updates, const Shape& out_shape, Layout layout) {
  Tensor out = blank(out_shape, layout);
  out.data = data.data;
  const auto axis = static_cast<size_t>(se.axis);
  for (int64_t i = 0; i < num_elements(updates.shape); ++i) {
    std::vector<int64_t> at = unravel(i, updates.shape);
    at[axis] = element_index(indices.data[static_cast<size_t>(i)], data.shape[axis]);
    float& o = out.data[ravel(at, out_shape)];
    const float u = updates.data[static_cast<size_t>(i)];
    o = se.reduction == ScatterReduction::none
            ? u
            : static_cast<float>(binary(combining_op(se.reduction), double{o}, double{u}));
  }
  return out;
}

// Output index j on an axis reads input index pad_source_index (j - begin pad, mirrored or
// clamped by the mode); outside the input it is `value`. A negative begin pad therefore crops,
// as in ONNX.
Tensor pad(const Pad& p, const Tensor& x, const Shape& out_shape, Layout layout) {
  Tensor out = blank(out_shape, layout);
  std::vector<int64_t> xi(x.shape.size());
  for (int64_t i = 0; i < num_elements(out_shape); ++i) {
    const std::vector<int64_t> oi = unravel(i, out_shape);
    bool inside = true;
    for (size_t a = 0; a < xi.size(); ++a) {
      xi[a] = pad_source_index(p.mode, oi[a], p.pads[a], x.shape[a]);
      inside = inside && xi[a] >= 0 && xi[a] < x.shape[a];
    }
    out.data[i] = inside ? x.data[ravel(xi, x.shape)] : p.value;
  }
  return out;
}

// Per row of the leading axes, in double: the mean, then the biased variance about it (two
// passes, as numpy computes it), then (x - mean) / sqrt(var + epsilon) * scale + bias.
Tensor layer_norm(const LayerNorm& ln, const std::vector<const Tensor*>& in) {
  const Tensor& x = *in[0];
  int64_t cols = 1;
  for (size_t a = static_cast<size_t>(ln.axis); a < x.shape.size(); ++a) cols *= x.shape[a];
  Tensor out = x;
  for (int64_t r = 0; r < num_elements(x.shape) / cols; ++r) {
    const float* row = x.data.data() + r * cols;
    double mean = 0.0, var = 0.0;
    for (int64_t k = 0; k < cols; ++k) mean += row[k];
    mean /= static_cast<double>(cols);
    for (int64_t k = 0; k < cols; ++k) var += (row[k] - mean) * (row[k] - mean);
    var /= static_cast<double>(cols);
    const double inv_std = 1.0 / std::sqrt(var + static_cast<double>(ln.epsilon));
    // A one-value scale or bias applies to every element.
    const auto param = [&](size_t i, int64_t k) {
      const std::vector<float>& p = in[i]->data;
      return static_cast<double>(p.size() == 1 ? p[0] : p[static_cast<size_t>(k)]);
    };
    for (int64_t k = 0; k < cols; ++k) {
      const double bias = in.size() > 2 ? param(2, k) : 0.0;
      out.data[static_cast<size_t>(r * cols + k)] =
          static_cast<float>((row[k] - mean) * inv_std * param(1, k) + bias);
    }
  }
  return out;
}

// Per image and group, in double: the group's mean over its channels and pixels, then the
// biased variance about it, then each element normalized and scaled by its channel's scale and
// bias, the residual added (then rounded to float), and the post steps applied as a chain's.
// Channels on axis 3 for NHWC, axis 1 otherwise.
Tensor group_norm(const GroupNorm& gn, const std::vector<const Tensor*>& in) {
  const Tensor& x = *in[0];
  const bool nhwc = x.layout == Layout::nhwc;
  const int64_t n = x.shape[0], channels = x.shape[nhwc ? 3 : 1];
  const int64_t pixels = num_elements(x.shape) / (n * channels);
  const int64_t per_group = channels / gn.groups;
  const auto index = [&](int64_t b, int64_t c, int64_t p) {
    return static_cast<size_t>(nhwc ? (b * pixels + p) * channels + c
                                    : (b * channels + c) * pixels + p);
  };
  Tensor out = x;
  for (int64_t b = 0; b < n; ++b)
    for (int64_t g = 0; g < gn.groups; ++g) {
      double mean = 0.0, var = 0.0;
      for (int64_t c = g * per_group; c < (g + 1) * per_group; ++c)
        for (int64_t p = 0; p < pixels; ++p) mean += x.data[index(b, c, p)];
      mean /= static_cast<double>(per_group * pixels);
      for (int64_t c = g * per_group; c < (g + 1) * per_group; ++c)
        for (int64_t p = 0; p < pixels; ++p) {
          const double d = x.data[index(b, c, p)] - mean;
          var += d * d;
        }
      var /= static_cast<double>(per_group * pixels);
      const double inv_std = 1.0 / std::sqrt(var + static_cast<double>(gn.epsilon));
      for (int64_t c = g * per_group; c < (g + 1) * per_group; ++c)
        for (int64_t p = 0; p < pixels; ++p) {
          const size_t i = index(b, c, p);
          const double y = (x.data[i] - mean) * inv_std * in[1]->data[c] + in[2]->data[c];
          out.data[i] = static_cast<float>(gn.residual ? y + in[3]->data[i] : y);
        }
    }
  if (gn.post.empty()) return out;
  std::vector<const Tensor*> chain_in = {&out};
  chain_in.insert(chain_in.end(), in.begin() + static_cast<std::ptrdiff_t>(gn.first_post_input()),
                  in.end());
  return reference_chain(ElementwiseChain{gn.post}, chain_in);
}

// Resize, in double: per axis the source coordinate of each output index, then the nearest
// input index, or (linear, cubic) its neighbours with edge values past the ends and their
// weights; every axis is treated alike (an untouched axis maps to itself with weight 0 on the
// other neighbours). The scale is out / in where the float scale is that ratio to float
// precision (sizes given); the resized length in align_corners, pytorch_half_pixel and
// tf_crop_and_resize is in * scale, as ONNX defines it.
double resize_source(const Resize& r, size_t a, int64_t i, int64_t in_len) {
  const int64_t out_len = r.sizes[a];
  const double ratio = static_cast<double>(out_len) / static_cast<double>(in_len);
  const double scale = static_cast<float>(ratio) == r.scales[a] ? ratio : r.scales[a];
  const double x = static_cast<double>(i), resized = static_cast<double>(in_len) * scale;
  switch (r.coordinates) {
    case ResizeCoordinates::half_pixel: return (x + 0.5) / scale - 0.5;
    case ResizeCoordinates::pytorch_half_pixel: return resized > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    case ResizeCoordinates::align_corners:
      return resized > 1 ? x * static_cast<double>(in_len - 1) / (resized - 1) : 0.0;
    case ResizeCoordinates::asymmetric: return x / scale;
    case ResizeCoordinates::tf_half_pixel_for_nn: return (x + 0.5) / scale;
    case ResizeCoordinates::tf_crop_and_resize: {
      const double start = r.roi[a], end = r.roi[r.sizes.size() + a];
      const double span = static_cast<double>(in_len - 1);
      return resized > 1 ? start * span + x * (end - start) * span / (resized - 1)
                         : 0.5 * (start + end) * span;
    }
  }
  return x;
}

// Keys' cubic convolution kernel with coefficient A.
double cubic_weight(double t, double A) {
  t = std::fabs(t);
  if (t <= 1) return ((A + 2) * t - (A + 3)) * t * t + 1;
  if (t < 2) return ((A * t - 5 * A) * t + 8 * A) * t - 4 * A;
  return 0.0;
}

Tensor resize(const Resize& r, const Tensor& x, const Shape& out_shape, Layout layout) {
  const size_t rank = x.shape.size();
  // Per axis and output index: its taps {input index, weight}; none where tf_crop_and_resize
  // puts the coordinate outside the input (the element is the extrapolation value).
  struct Tap {
    int64_t index;
    double w;
  };
  std::vector<std::vector<std::vector<Tap>>> taps(rank);
  for (size_t a = 0; a < rank; ++a) {
    const int64_t len = x.shape[a];
    auto clamp_index = [len](double v) { return static_cast<int64_t>(std::min(std::max(v, 0.0), double(len - 1))); };
    for (int64_t i = 0; i < out_shape[a]; ++i) {
      const double s = resize_source(r, a, i, len);
      std::vector<Tap> t;
      if (r.coordinates == ResizeCoordinates::tf_crop_and_resize && (s < 0 || s > double(len - 1))) {
        taps[a].push_back(t);
        continue;
      }
      const double fl = std::floor(s), frac = s - fl;
      if (r.mode == ResizeMode::linear) {
        t = {{clamp_index(fl), 1.0 - frac}, {clamp_index(fl + 1), frac}};
      } else if (r.mode == ResizeMode::cubic) {
        double sum = 0.0;
        for (int k = -1; k <= 2; ++k) {
          const double at = fl + k;
          const bool outside = at < 0 || at > double(len - 1);
          const double w = r.exclude_outside && outside ? 0.0 : cubic_weight(s - at, r.cubic_a);
          t.push_back({clamp_index(at), w});
          sum += w;
        }
        if (r.exclude_outside)
          for (Tap& tp : t) tp.w /= sum;
      } else {
        double n = fl;
        switch (r.nearest) {
          case NearestRounding::round_prefer_floor: n = frac > 0.5 ? fl + 1 : fl; break;
          case NearestRounding::round_prefer_ceil: n = frac >= 0.5 ? fl + 1 : fl; break;
          case NearestRounding::floor: n = fl; break;
          case NearestRounding::ceil: n = frac > 0 ? fl + 1 : fl; break;
        }
        t = {{clamp_index(n), 1.0}};
      }
      taps[a].push_back(t);
    }
  }
  Tensor out = blank(out_shape, layout);
  for (int64_t e = 0; e < num_elements(out_shape); ++e) {
    const std::vector<int64_t> oi = unravel(e, out_shape);
    std::vector<const std::vector<Tap>*> at(rank);
    bool outside = false;
    for (size_t a = 0; a < rank; ++a) {
      at[a] = &taps[a][static_cast<size_t>(oi[a])];
      outside = outside || at[a]->empty();
    }
    if (outside) {
      out.data[static_cast<size_t>(e)] = r.extrapolation;
      continue;
    }
    // Every combination of the axes' taps.
    double sum = 0.0;
    std::vector<size_t> k(rank, 0);
    std::vector<int64_t> xi(rank);
    while (true) {
      double weight = 1.0;
      for (size_t a = 0; a < rank; ++a) {
        xi[a] = (*at[a])[k[a]].index;
        weight *= (*at[a])[k[a]].w;
      }
      if (weight != 0.0) sum += weight * x.data[static_cast<size_t>(ravel(xi, x.shape))];
      size_t a = 0;
      while (a < rank && ++k[a] == at[a]->size()) k[a++] = 0;
      if (a == rank) break;
    }
    out.data[static_cast<size_t>(e)] = static_cast<float>(sum);
  }
  return out;
}

// GridSample (graph::GridSample), in double: the point's pixel coordinates, the padding rule
// for a point outside the image, then its taps, each read by the padding rule.
// v reflected back into [lo, hi] as often as it takes (a mirror at each end).
double grid_reflect(double v, double lo, double hi) {
  const double range = hi - lo;
  if (v >= lo && v <= hi) return v;
  if (range <= 0) return lo;  // one pixel, align_corners: lo == hi
  const double d = v < lo ? lo - v : v - hi;
  const double flips = std::floor(d / range);
  const double r = d - flips * range;
  const bool even = std::fmod(flips, 2.0) == 0.0;
  return (v < lo) == even ? lo + r : hi - r;
}

Tensor grid_sample(const GridSample& gs, const Tensor& x, const Tensor& grid,
                   const Shape& out_shape, Layout layout) {
  const int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  const int64_t Ho = out_shape[2], Wo = out_shape[3];
  // The range a point may take before the padding rule applies: the pixel centres with
  // align_corners, else the image's edges.
  const double lo_x = gs.align_corners ? 0.0 : -0.5, hi_x = gs.align_corners ? W - 1.0 : W - 0.5;
  const double lo_y = gs.align_corners ? 0.0 : -0.5, hi_y = gs.align_corners ? H - 1.0 : H - 0.5;
  const auto pixel = [&](double g, int64_t size) {
    return gs.align_corners ? (g + 1) / 2 * static_cast<double>(size - 1)
                            : ((g + 1) * static_cast<double>(size) - 1) / 2;
  };
  Tensor out = blank(out_shape, layout);
  for (int64_t n = 0; n < N; ++n)
    for (int64_t i = 0; i < Ho; ++i)
      for (int64_t j = 0; j < Wo; ++j) {
        const size_t g = static_cast<size_t>(((n * Ho + i) * Wo + j) * 2);
        double px = pixel(grid.data[g], W), py = pixel(grid.data[g + 1], H);
        if (gs.mode == GridSampleMode::nearest) px = std::nearbyint(px), py = std::nearbyint(py);
        if (px < lo_x || px > hi_x || py < lo_y || py > hi_y) {
          if (gs.padding == GridSamplePadding::border) {
            px = std::clamp(px, 0.0, W - 1.0), py = std::clamp(py, 0.0, H - 1.0);
          } else if (gs.padding == GridSamplePadding::reflection) {
            px = grid_reflect(px, lo_x, hi_x), py = grid_reflect(py, lo_y, hi_y);
          }
        }
        for (int64_t c = 0; c < C; ++c) {
          const float* image = x.data.data() + (n * C + c) * H * W;
          const auto tap = [&](double r, double q) -> double {  // row r, column q (integers)
            if (gs.padding == GridSamplePadding::zeros)
              return r < 0 || r >= H || q < 0 || q >= W
                         ? 0.0
                         : image[static_cast<int64_t>(r) * W + static_cast<int64_t>(q)];
            if (gs.padding == GridSamplePadding::reflection)
              r = std::trunc(grid_reflect(r, lo_y, hi_y)),
              q = std::trunc(grid_reflect(q, lo_x, hi_x));
            r = std::clamp(r, 0.0, H - 1.0), q = std::clamp(q, 0.0, W - 1.0);
            return image[static_cast<int64_t>(r) * W + static_cast<int64_t>(q)];
          };
          double v = 0;
          if (gs.mode == GridSampleMode::nearest) {
            v = tap(py, px);
          } else {
            const int reach = gs.mode == GridSampleMode::cubic ? 2 : 1;
            const double fx = std::floor(px), fy = std::floor(py);
            for (int dy = 1 - reach; dy <= reach; ++dy)
              for (int dx = 1 - reach; dx <= reach; ++dx) {
                const double qx = fx + dx, qy = fy + dy;
                const double wx =
                    reach == 2 ? cubic_weight(px - qx, -0.75) : 1 - std::fabs(px - qx);
                const double wy =
                    reach == 2 ? cubic_weight(py - qy, -0.75) : 1 - std::fabs(py - qy);
                v += wx * wy * tap(qy, qx);
              }
          }
          out.data[static_cast<size_t>(((n * C + c) * Ho + i) * Wo + j)] = static_cast<float>(v);
        }
      }
  return out;
}

}  // namespace

double reference_chain_step(const ChainStep& st, double v, double scale, double shift) {
  switch (st.kind) {
    case ChainStepKind::clamp: return clamp_nan(v, st.a, st.b);
    case ChainStepKind::leaky_relu: return v >= 0 ? v : st.a * v;
    case ChainStepKind::sigmoid: return 1.0 / (1.0 + std::exp(-v));
    case ChainStepKind::hard_sigmoid: return clamp_nan(st.a * v + st.b, 0.0, 1.0);
    case ChainStepKind::hard_swish: return v * clamp_nan(v / 6.0 + 0.5, 0.0, 1.0);
    case ChainStepKind::affine: return v * scale + shift;
    case ChainStepKind::prelu:
      return v < 0 ? v * scale : v * shift;
    case ChainStepKind::silu: return v / (1.0 + std::exp(-v));
    case ChainStepKind::tanh: return std::tanh(v);
    case ChainStepKind::erf: return std::erf(v);
    case ChainStepKind::sin:
      return std::sin(v);
    case ChainStepKind::cos:
      return std::cos(v);
    case ChainStepKind::tan:
      return std::tan(v);
    case ChainStepKind::sinh:
      return std::sinh(v);
    case ChainStepKind::cosh:
      return std::cosh(v);
    case ChainStepKind::asin:
      return std::asin(v);
    case ChainStepKind::acos:
      return std::acos(v);
    case ChainStepKind::atan:
      return std::atan(v);
    case ChainStepKind::asinh:
      return std::asinh(v);
    case ChainStepKind::acosh:
      return std::acosh(v);
    case ChainStepKind::atanh:
      return std::atanh(v);
    case ChainStepKind::exp: return std::exp(v);
    case ChainStepKind::log: return std::log(v);
    case ChainStepKind::sqrt: return std::sqrt(v);
    case ChainStepKind::abs: return std::fabs(v);
    case ChainStepKind::neg: return -v;
    case ChainStepKind::reciprocal: return 1.0 / v;
    case ChainStepKind::softplus: return std::log1p(std::exp(-std::fabs(v))) + std::max(v, 0.0);
    case ChainStepKind::softsign: return v / (1.0 + std::fabs(v));
    case ChainStepKind::elu: return v > 0 ? v : st.a * std::expm1(v);
    case ChainStepKind::selu: return st.b * (v > 0 ? v : st.a * std::expm1(v));
    case ChainStepKind::celu:
      return std::isnan(v) ? v : std::max(0.0, v) + std::min(0.0, st.a * std::expm1(v / st.a));
    case ChainStepKind::thresholded_relu: return v > st.a ? v : 0.0;
    case ChainStepKind::pow: return std::pow(v, static_cast<double>(st.a));
    case ChainStepKind::gelu: return 0.5 * v * std::erfc(-v / std::sqrt(2.0));
    case ChainStepKind::gelu_tanh:
      return 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
    case ChainStepKind::mish:
      return v * std::tanh(std::log1p(std::exp(-std::fabs(v))) + std::max(v, 0.0));
    case ChainStepKind::floor: return std::floor(v);
    case ChainStepKind::ceil: return std::ceil(v);
    case ChainStepKind::round: return std::nearbyint(v);  // the default mode: half to even
    case ChainStepKind::logical_not: return v == 0.0 ? 1.0 : 0.0;
    case ChainStepKind::greater: return v > st.a ? 1.0 : 0.0;
    case ChainStepKind::less: return v < st.a ? 1.0 : 0.0;
    case ChainStepKind::equal: return v == st.a ? 1.0 : 0.0;
    case ChainStepKind::greater_equal: return v >= st.a ? 1.0 : 0.0;
    case ChainStepKind::less_equal: return v <= st.a ? 1.0 : 0.0;
    case ChainStepKind::sign:
      return v > 0 ? 1.0 : v < 0 ? -1.0 : v;
    case ChainStepKind::shrink:
      return v < -st.a ? v + st.b : v > st.a ? v - st.b : 0.0;
    case ChainStepKind::is_nan:
      return std::isnan(v) ? 1.0 : 0.0;
    case ChainStepKind::is_inf:
      return std::isinf(v) && (v < 0 ? st.a != 0.0f : st.b != 0.0f) ? 1.0 : 0.0;
  }
  return v;
}

// Each step as its own op would compute it, in double.
Tensor reference_chain(const ElementwiseChain& ch, const std::vector<const Tensor*>& in) {
  Tensor out = *in[0];
  const Shape& s = out.shape;
  const size_t axis = out.layout == Layout::nhwc ? 3 : 1;
  int64_t inner = 1;
  for (size_t i = axis + 1; i < s.size(); ++i) inner *= s[i];
  for (size_t e = 0; e < out.data.size(); ++e) {
    double v = out.data[e];
    size_t k = 0;
    for (const ChainStep& st : ch.steps) {
      double scale = 1.0, shift = 0.0;
      if (per_channel_step(st.kind)) {
        const int64_t c = (static_cast<int64_t>(e) / inner) % s[axis];
        scale = in[1 + 2 * k]->data[c];
        shift = in[2 + 2 * k]->data[c];
        ++k;
      }
      v = reference_chain_step(st, v, scale, shift);
      v = static_cast<float>(v);  // each op of the unfused graph rounds to float
    }
    out.data[e] = static_cast<float>(v);
  }
  return out;
}

Tensor reference_data_op(const Op& op, const std::vector<const Tensor*>& in, const Shape& out_shape,
                         Layout out_layout) {
  if (const std::optional<Activation> act = as_activation(op)) {
    Tensor out = *in[0];
    for (float& f : out.data) f = static_cast<float>(clamp_nan(f, act->lo, act->hi));
    return out;
  }
  if (op_is_unary(op)) {
    Tensor out = *in[0];
    for (float& f : out.data) f = static_cast<float>(unary(op, f));
    return out;
  }
  if (const auto* b = std::get_if<Binary>(&op))
    return broadcast_binary(b->op, *in[0], *in[1], out_shape, out_layout);
  if (std::holds_alternative<Reshape>(op)) return Tensor{out_shape, out_layout, in[0]->data};
  if (const auto* t = std::get_if<Transpose>(&op))
    return transpose(*in[0], t->perm, out_shape, out_layout);
  if (const auto* c = std::get_if<Concat>(&op)) return concat(c->axis, in, out_shape, out_layout);
  if (const auto* sl = std::get_if<Slice>(&op)) return slice(*sl, *in[0], out_shape, out_layout);
  if (const auto* p = std::get_if<Pad>(&op)) return pad(*p, *in[0], out_shape, out_layout);
  if (const auto* sm = std::get_if<Softmax>(&op)) return reference_softmax(*sm, *in[0]);
  if (const auto* rm = std::get_if<Reduce>(&op))
    return reference_reduce(*rm, *in[0], out_shape, out_layout);
  if (const auto* tl = std::get_if<Tile>(&op)) return tile(*tl, *in[0], out_shape, out_layout);
  if (std::holds_alternative<Where>(op))
    return where(*in[0], *in[1], *in[2], out_shape, out_layout);
  if (const auto* ln = std::get_if<LayerNorm>(&op)) return layer_norm(*ln, in);
  if (const auto* gn = std::get_if<GroupNorm>(&op)) return group_norm(*gn, in);
  if (const auto* rs = std::get_if<Resize>(&op)) return resize(*rs, *in[0], out_shape, out_layout);
  if (const auto* tk = std::get_if<TopK>(&op))
    return reference_topk(*tk, *in[0], out_shape, out_layout);
  if (const auto* ge = std::get_if<GatherElements>(&op))
    return gather_elements(*ge, *in[0], *in[1], out_shape, out_layout);
  if (const auto* se = std::get_if<ScatterElements>(&op))
    return scatter_elements(*se, *in[0], *in[1], *in[2], out_shape, out_layout);
  if (const auto* gs = std::get_if<GridSample>(&op))
    return grid_sample(*gs, *in[0], *in[1], out_shape, out_layout);
  if (const auto* ch = std::get_if<ElementwiseChain>(&op)) return reference_chain(*ch, in);
  if (const auto* t = std::get_if<LayoutTransform>(&op)) return to_layout(*in[0], t->to);
  throw Error(std::string("reference: no implementation of ") + op_name(op) + " yet");
}

}  // namespace kiln::graph
