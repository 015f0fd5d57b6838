// ONNX pooling beyond what Pool2d takes directly, lowered onto the generated 2-D pools:
// 3-D MaxPool and AveragePool as two 2-D pools (over H and W of [N, C * D, H, W], then over D of
// [N, C, D, Ho * Wo]: a maximum, and an average over a box of valid positions, are separable), and
// LpPool / GlobalLpPool as |x|^p, an average pool that counts the padding, and
// (count * mean)^(1/p).
#include <algorithm>

#include "graph/onnx/importer.h"

namespace kiln::graph::onnx {
namespace {

constexpr int64_t kMaxParam = int64_t{1} << 20;

// Per spatial axis: kernel, stride, dilation and the padding before and after.
struct NdWindow {
  std::vector<int64_t> k, stride, dil, pad_begin, pad_end;
};

std::vector<int64_t> per_axis(const NodeCtx& c, const char* name, size_t axes, int64_t def,
                              int64_t lo) {
  std::vector<int64_t> v = attr_ints(c, name);
  if (v.empty()) return std::vector<int64_t>(axes, def);
  if (v.size() != axes)
    node_error(c, std::string("attribute '") + name + "' has " + std::to_string(v.size()) +
                      " entries, expected " + std::to_string(axes));
  for (int64_t e : v)
    if (e < lo || e > kMaxParam)
      node_error(c, std::string("attribute '") + name + "' holds " + std::to_string(e) +
                        ", expected " + std::to_string(lo) + ".." + std::to_string(kMaxParam));
  return v;
}

// The window attributes of a pool over the spatial axes of `xs` ([N, C, spatial...]).
NdWindow nd_window(const NodeCtx& c, const Shape& xs) {
  const size_t axes = xs.size() - 2;
  NdWindow w;
  w.k = attr_ints(c, "kernel_shape");
  if (w.k.size() != axes)
    node_error(c, "attribute 'kernel_shape' has " + std::to_string(w.k.size()) +
                      " entries, expected " + std::to_string(axes));
  w.k = per_axis(c, "kernel_shape", axes, 1, 1);
  w.stride = per_axis(c, "strides", axes, 1, 1);
  w.dil = per_axis(c, "dilations", axes, 1, 1);
  w.pad_begin.assign(axes, 0);
  w.pad_end.assign(axes, 0);
  const std::string auto_pad = attr_string(c, "auto_pad", "NOTSET");
  if (auto_pad == "NOTSET") {
    const std::vector<int64_t> p = per_axis(c, "pads", 2 * axes, 0, 0);
    for (size_t a = 0; a < axes; ++a) w.pad_begin[a] = p[a], w.pad_end[a] = p[a + axes];
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t a = 0; a < axes; ++a) {  // the output is ceil(in / stride); UPPER: odd pixel last
      const int64_t in = xs[a + 2], out = (in + w.stride[a] - 1) / w.stride[a];
      const int64_t total =
          std::max<int64_t>(0, (out - 1) * w.stride[a] + w.dil[a] * (w.k[a] - 1) + 1 - in);
      const bool upper = auto_pad == "SAME_UPPER";
      w.pad_begin[a] = upper ? total / 2 : total - total / 2;
      w.pad_end[a] = total - w.pad_begin[a];
    }
  } else if (auto_pad != "VALID") {
    node_error(c, "attribute 'auto_pad' is '" + auto_pad +
                      "', expected NOTSET, VALID, SAME_UPPER or SAME_LOWER");
  }
  return w;
}

// A Pool2d over axes (h, w) of window `w` (h < 0: a unit H axis).
Pool2d pool_of(const NodeCtx& c, const NdWindow& w, int h, int x, PoolKind kind, bool ceil,
               bool include_pad) {
  auto get = [&](const std::vector<int64_t>& v, int axis, int64_t unit) {
    return to_int(c, axis < 0 ? unit : v[static_cast<size_t>(axis)], "a window parameter", 0,
                  kMaxParam);
  };
  Pool2d p;
  p.kind = kind;
  p.kernel_h = get(w.k, h, 1), p.kernel_w = get(w.k, x, 1);
  p.stride_h = get(w.stride, h, 1), p.stride_w = get(w.stride, x, 1);
  p.dilation_h = get(w.dil, h, 1), p.dilation_w = get(w.dil, x, 1);
  p.pad_top = get(w.pad_begin, h, 0), p.pad_left = get(w.pad_begin, x, 0);
  p.pad_bottom = get(w.pad_end, h, 0), p.pad_right = get(w.pad_end, x, 0);
  p.ceil_mode = ceil;
  p.count_include_pad = include_pad;
  return p;
}

// Pools x ([N, C, L], [N, C, H, W] or [N, C, D, H, W]) with window `w`; the last node's output is
// named `out_name`.
ValueId emit_nd_pool(Importer& im, const NodeCtx& c, ValueId x, const NdWindow& w, PoolKind kind,
                     bool ceil, bool include_pad, const std::string& out_name) {
  const Shape xs = im.graph().value(x).shape;
  const std::string base = c.name + "/";
  auto reshape = [&](ValueId v, Shape s, const std::string& name, bool last = false) {
    return im.emit(c, Reshape{std::move(s)}, {v}, last ? out_name : base + name, base + name);
  };
  if (xs.size() == 4)
    return im.emit(c, pool_of(c, w, 0, 1, kind, ceil, include_pad), {x}, out_name);
  if (xs.size() == 3) {  // [N, C, 1, L]
    const ValueId y =
        im.emit(c, pool_of(c, w, -1, 0, kind, ceil, include_pad),
                {reshape(x, {xs[0], xs[1], 1, xs[2]}, "input_2d")}, base + "output_2d");
    const Shape ys = im.graph().value(y).shape;
    return reshape(y, {ys[0], ys[1], ys[3]}, "output_1d", true);
  }
  if (xs.size() != 5)
    node_error(c, "input '" + im.input_name(c, 0) + "' is " + to_string(xs) +
                      ", expected [N, C, L], [N, C, H, W] or [N, C, D, H, W]");
  // H and W of every depth slice, then D of every output pixel.
  const ValueId hw = im.emit(c, pool_of(c, w, 1, 2, kind, ceil, include_pad),
                             {reshape(x, {xs[0], xs[1] * xs[2], xs[3], xs[4]}, "depth_slices")},
                             base + "pooled_hw");
  const Shape hs = im.graph().value(hw).shape;  // [N, C * D, Ho, Wo]
  const ValueId d =
      im.emit(c, pool_of(c, w, 0, -1, kind, ceil, include_pad),
              {reshape(hw, {xs[0], xs[1], xs[2], hs[2] * hs[3]}, "depth_rows")}, base + "pooled_d");
  const Shape ds = im.graph().value(d).shape;  // [N, C, Do, Ho * Wo]
  return reshape(d, {xs[0], xs[1], ds[2], hs[2], hs[3]}, "output_3d", true);
}

// The same window as a Pool2d over [N, C, 1, prod(spatial)]: what GlobalPool reduces.
ValueId flatten_spatial(Importer& im, const NodeCtx& c, ValueId x) {
  const Shape xs = im.graph().value(x).shape;
  if (xs.size() < 3)
    node_error(c, "input '" + im.input_name(c, 0) + "' is " + to_string(xs) +
                      ", expected [N, C, D1, ...]");
  if (xs.size() == 4) return x;
  int64_t rest = 1;
  for (size_t a = 2; a + 1 < xs.size(); ++a) rest *= xs[a];
  return im.emit(c, Reshape{{xs[0], xs[1], rest, xs.back()}}, {x}, c.name + "/as_image",
                 c.name + "/as_image");
}

float lp_norm(const NodeCtx& c) {
  const int64_t p = attr_int(c, "p", 2);
  if (p < 1 || p > 64) node_error(c, "attribute 'p' is " + std::to_string(p) + ", expected 1..64");
  return static_cast<float>(p);
}

// |x|^p of the node's input.
ValueId lp_power(Importer& im, const NodeCtx& c) {
  const ElementwiseChain power{{{ChainStepKind::abs, 0, 0}, {ChainStepKind::pow, lp_norm(c), 0}}};
  return im.emit(c, power, {im.value_input(c, 0)}, c.name + "/abs_pow", c.name + "/abs_pow");
}

// (count * mean)^(1/p): an affine step (the count per channel, no shift) and the root.
ValueId lp_root(Importer& im, const NodeCtx& c, ValueId mean, int64_t count,
                const std::string& out_name) {
  const int64_t channels = im.graph().value(mean).shape[1];
  const size_t n = static_cast<size_t>(channels);
  const ValueId scale = im.add_constant(
      c.name + "/count", {channels}, std::vector<float>(n, static_cast<float>(count)), Layout::any);
  const ValueId shift =
      im.add_constant(c.name + "/zero", {channels}, std::vector<float>(n, 0.0f), Layout::any);
  const ElementwiseChain root{
      {{ChainStepKind::affine, 0, 0}, {ChainStepKind::pow, 1.0f / lp_norm(c), 0}}};
  return im.emit(c, root, {mean, scale, shift}, out_name, c.name + "/root");
}

}  // namespace

// MaxPool and AveragePool of a 5-D input (convert_pool takes 1-D and 2-D).
void convert_pool_3d(Importer& im, const NodeCtx& c) {
  const bool is_max = c.op() == "MaxPool";
  const Shape xs = im.input_shape(c, 0);
  const NdWindow w = nd_window(c, xs);
  const bool include_pad = !is_max && attr_int(c, "count_include_pad", 0) != 0;
  im.define_value(
      c, 0,
      emit_nd_pool(im, c, im.value_input(c, 0), w, is_max ? PoolKind::max : PoolKind::avg,
                   attr_int(c, "ceil_mode", 0) != 0, include_pad, im.output_name(c, 0)));
}

// GlobalAveragePool and GlobalMaxPool of a 5-D input: over [N, C, D * H, W].
void convert_global_pool_3d(Importer& im, const NodeCtx& c) {
  const Shape xs = im.input_shape(c, 0);
  const PoolKind kind = c.op() == "GlobalMaxPool" ? PoolKind::max : PoolKind::avg;
  const ValueId y = im.emit(c, GlobalPool{kind}, {flatten_spatial(im, c, im.value_input(c, 0))},
                            c.name + "/pooled");
  im.define_value(c, 0,
                  im.emit(c, Reshape{{xs[0], xs[1], 1, 1, 1}}, {y}, im.output_name(c, 0),
                          c.name + "/output_3d"));
}

// LpPool: (sum over the window of |x|^p)^(1/p), the padding contributing 0. Every window lies
// inside the padded input (with ceil_mode, once the end padding is extended to the last window),
// so the sum is the window size times an average pool that counts the padding: |x|^p (a chain),
// that pool, then a chain scaling by the window size and taking the p-th root.
void convert_lp_pool(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  const Shape xs = im.input_shape(c, 0);
  if (xs.size() < 3 || xs.size() > 5)
    node_error(c, "input '" + im.input_name(c, 0) + "' is " + to_string(xs) +
                      ", expected [N, C, L], [N, C, H, W] or [N, C, D, H, W]");
  NdWindow w = nd_window(c, xs);
  if (attr_int(c, "ceil_mode", 0) != 0) {
    // The outputs ceil_mode adds have windows that reach past the end padding: more zero padding
    // at the end makes every window whole again, so the average still counts the full window.
    for (size_t a = 0; a + 2 < xs.size(); ++a) {
      const int64_t in = xs[a + 2], span = w.dil[a] * (w.k[a] - 1) + 1;
      const int64_t room = in + w.pad_begin[a] + w.pad_end[a] - span;
      if (room < 0) continue;  // the pool's own error names it
      int64_t out = (room + w.stride[a] - 1) / w.stride[a] + 1;
      // ONNX: the last window must start inside the input or the left padding.
      if ((out - 1) * w.stride[a] >= in + w.pad_begin[a]) --out;
      w.pad_end[a] += std::max<int64_t>(0, (out - 1) * w.stride[a] - room);
    }
  }
  int64_t window = 1;
  for (int64_t k : w.k) window *= k;
  const ValueId powered = lp_power(im, c);
  const ValueId mean =
      emit_nd_pool(im, c, powered, w, PoolKind::avg, false, true, c.name + "/window_mean");
  im.define_value(c, 0, lp_root(im, c, mean, window, im.output_name(c, 0)));
}

// GlobalLpPool: the same over every spatial position.
void convert_global_lp_pool(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  const Shape xs = im.input_shape(c, 0);
  int64_t count = 1;
  for (size_t a = 2; a < xs.size(); ++a) count *= xs[a];
  const ValueId powered = lp_power(im, c);
  ValueId mean =
      im.emit(c, GlobalPool{PoolKind::avg}, {flatten_spatial(im, c, powered)}, c.name + "/mean");
  if (xs.size() != 4) {
    Shape out = {xs[0], xs[1]};
    out.resize(xs.size(), 1);
    mean = im.emit(c, Reshape{out}, {mean}, c.name + "/mean_nd", c.name + "/mean_nd");
  }
  im.define_value(c, 0, lp_root(im, c, mean, count, im.output_name(c, 0)));
}

}  // namespace kiln::graph::onnx
