// Shape inference for the image ops: a convolution with what it fuses (pooling, resize,
// expansion) and pooling, their windows, strides and padding, and the checks of their
// attributes.
#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "graph/shape_inference_detail.h"

namespace kiln::graph::shape_detail {

// The output of pooling `p` over an image of dims `d` (shape `shape`, for messages).
ImageDims pooled_dims(const Node& n, const Pool2d& p, ImageDims d, const Shape& shape) {
  if (p.kernel_h < 1 || p.kernel_w < 1 || p.stride_h < 1 || p.stride_w < 1 || p.dilation_h < 1 ||
      p.dilation_w < 1)
    fail(n, "kernel, strides and dilations must be >= 1");
  if (p.pad_top < 0 || p.pad_left < 0 || p.pad_bottom < 0 || p.pad_right < 0)
    fail(n, "pads must be >= 0");
  auto out_dim = [&](int64_t in, int pad0, int pad1, int k, int stride, int dil) {
    const int64_t span = in + pad0 + pad1 - (int64_t{dil} * (k - 1) + 1);
    if (span < 0) fail(n, "the pooling window is larger than the padded input " + to_string(shape));
    int64_t o = (p.ceil_mode ? (span + stride - 1) / stride : span / stride) + 1;
    // ONNX: with ceil_mode the last window must start inside the input or the left padding.
    if (p.ceil_mode && (o - 1) * stride >= in + pad0) --o;
    return o;
  };
  d.h = out_dim(d.h, p.pad_top, p.pad_bottom, p.kernel_h, p.stride_h, p.dilation_h);
  d.w = out_dim(d.w, p.pad_left, p.pad_right, p.kernel_w, p.stride_w, p.dilation_w);
  return d;
}

// A Resize's attributes against its input's shape `in` (in the order the Resize reads it).
void check_resize(const Node& n, const Resize& r, const Shape& in, Layout layout) {
  const size_t rank = in.size();
  if (r.sizes.size() != rank || r.scales.size() != rank)
    fail(n, "sizes and scales need one entry per input axis");
  const bool crop = r.coordinates == ResizeCoordinates::tf_crop_and_resize;
  if (r.roi.size() != (crop ? 2 * rank : 0))
    fail(n, "roi has " + std::to_string(r.roi.size()) +
                " entries; tf_crop_and_resize takes 2 * rank, other coordinate modes none");
  for (float v : r.roi)
    if (!std::isfinite(v)) fail(n, "roi holds a non-finite value");
  for (size_t a = 0; a < rank; ++a) {
    if (r.sizes[a] <= 0)
      fail(n, "output size " + std::to_string(r.sizes[a]) + " on axis " + std::to_string(a));
    if (!(r.scales[a] > 0.0f) || !std::isfinite(r.scales[a]))
      fail(n, "scale " + std::to_string(r.scales[a]) + " on axis " + std::to_string(a) +
                  " is not positive");
    // The image axes: the last two, or H and W of an NHWC image.
    const bool image_axis =
        layout == Layout::nhwc ? rank == 4 && (a == 1 || a == 2) : a + 2 >= rank;
    if (r.mode != ResizeMode::nearest && !image_axis && !resize_axis_is_identity(r, a, in[a]))
      fail(n, std::string(to_string(r.mode)) + " resizing of axis " + std::to_string(a) +
                  (layout == Layout::nhwc ? " of an NHWC image: Kiln interpolates only H and W"
                                          : ": Kiln interpolates only the last two axes"));
  }
  if (r.mode == ResizeMode::cubic && !std::isfinite(r.cubic_a)) fail(n, "cubic_a is not finite");
}

TypedShape infer_conv(const Graph& g, const Node& n, const Conv2d& c) {
  const size_t first_post = c.first_post_input(), first_pre = c.first_pre_input();
  const size_t first_expand = c.first_expand_input();
  expect_inputs(n, c.shortcut_input() + (c.shortcut ? 1 : 0));
  const Value& x = activation_input(g, n);
  const Value& w = g.value(n.inputs[1]);
  if (c.nchw_input && x.layout != Layout::nchw)
    fail(n, "nchw_input: input '" + x.name + "' must be NCHW, got " + to_string(x.layout));
  // The output's layout: the input's, or NHWC for an NCHW input read in place.
  const Layout out_layout = c.nchw_input ? Layout::nhwc : x.layout;
  const Layout wl = filter_layout_for(out_layout);
  if (w.shape.size() != 4 || w.layout != wl)
    fail(n, "weights '" + w.name + "' must be 4-D " + to_string(wl) + " for a " +
                to_string(x.layout) + " input, got " + to_string(w.shape) + " " +
                to_string(w.layout));
  ImageDims in = image_dims(x.shape, x.layout);
  if (c.expand) {  // the convolution reads x's pointwise expansion (fuse_expand_depthwise)
    const Value& ew = g.value(n.inputs[first_expand]);
    if (x.layout != Layout::nhwc || c.nchw_input || !c.pre.empty() || c.pool || c.bf16)
      fail(n, "an expansion needs an NHWC input and no pre steps, pooling or bf16");
    if (ew.layout != Layout::hwio || ew.shape.size() != 4 || ew.shape[0] != 1 || ew.shape[1] != 1 ||
        ew.shape[2] != in.c)
      fail(n, "expansion weights '" + ew.name + "' must be HWIO [1, 1, " + std::to_string(in.c) +
                  ", C], got " + to_string(ew.shape) + " " + to_string(ew.layout));
    in.c = ew.shape[3];
    expect_vector(g, n, first_expand + 1, in.c, "expansion bias");
  }
  if (c.input_scale) {  // x scaled per image and channel (fuse_conv_prologues)
    const Value& s = g.value(n.inputs[c.scale_input()]);
    if (x.layout != Layout::nhwc || c.nchw_input || !c.pre.empty() || c.expand || c.bf16 ||
        c.groups != 1)
      fail(n,
           "an input scale needs a dense convolution of an NHWC input, without pre steps, an "
           "expansion or bf16");
    if (s.shape != Shape{in.n, 1, 1, in.c} || s.layout != Layout::nhwc)
      fail(n, "input scale '" + s.name + "' must be NHWC [" + std::to_string(in.n) + ", 1, 1, " +
                  std::to_string(in.c) + "], got " + to_string(s.shape) + " " +
                  to_string(s.layout));
  }
  const FilterDims f = filter_dims(w.shape, w.layout);
  if (c.pool_first) {  // the convolution reads the pooled input (fuse_pooling_into_conv)
    if (!c.pool || x.layout != Layout::nhwc || c.nchw_input || !c.pre.empty() || c.expand ||
        c.input_scale || c.groups != 1 || f.kh != 1 || f.kw != 1 || c.stride_h != 1 ||
        c.stride_w != 1 || c.pad_top || c.pad_left || c.pad_bottom || c.pad_right)
      fail(n,
           "pool_first needs a pooling and a 1x1, stride-1, unpadded dense convolution of an "
           "NHWC input, without pre steps, an expansion or an input scale");
    in = pooled_dims(n, *c.pool, in, x.shape);
  }
  if (c.expand && (c.groups != in.c || f.co != in.c))
    fail(n, "an expansion feeds a depthwise convolution only (groups = channels = " +
                std::to_string(in.c) + ")");
  if (c.groups < 1 || in.c % c.groups != 0 || f.co % c.groups != 0)
    fail(n, "groups=" + std::to_string(c.groups) + " must divide the input channels (" +
                std::to_string(in.c) + ") and the output channels (" + std::to_string(f.co) + ")");
  if (f.ci * c.groups != in.c)
    fail(n, "weights expect " + std::to_string(f.ci * c.groups) + " input channels (" +
                std::to_string(f.ci) + " per group x " + std::to_string(c.groups) +
                " groups), input '" + x.name + "' has " + std::to_string(in.c));
  expect_vector(g, n, 2, f.co, "bias");
  if (c.stride_h < 1 || c.stride_w < 1 || c.dilation_h < 1 || c.dilation_w < 1)
    fail(n, "strides and dilations must be >= 1");
  if (c.pad_top < 0 || c.pad_left < 0 || c.pad_bottom < 0 || c.pad_right < 0)
    fail(n, "pads must be >= 0");
  const int64_t span_h = int64_t{c.dilation_h} * (f.kh - 1) + 1;
  const int64_t span_w = int64_t{c.dilation_w} * (f.kw - 1) + 1;
  const int64_t h = in.h + c.pad_top + c.pad_bottom - span_h;
  const int64_t wd = in.w + c.pad_left + c.pad_right - span_w;
  if (h < 0 || wd < 0)
    fail(n, "the " + std::to_string(f.kh) + "x" + std::to_string(f.kw) +
                " kernel (with dilation) is larger than the padded input " + to_string(x.shape));
  for (size_t i = first_post; i < first_pre; ++i)
    expect_vector(g, n, i, f.co, "post-step scale/shift");
  for (size_t i = first_pre; i < first_expand; ++i)
    expect_vector(g, n, i, in.c, "pre-step scale/shift");
  ImageDims out{in.n, f.co, h / c.stride_h + 1, wd / c.stride_w + 1};
  const Shape out_shape = image_shape(out, out_layout);
  if (c.residual) {
    const Value& r = g.value(n.inputs[3]);
    if (r.shape != out_shape || r.layout != out_layout)
      fail(n, "residual '" + r.name + "' is " + to_string(r.shape) + " " + to_string(r.layout) +
                  ", the output is " + to_string(out_shape) + " " + to_string(out_layout));
  }
  if (c.shortcut) {  // added after the post steps (fuse_conv_shortcut)
    if (c.pool || c.resize || c.expand || c.input_scale)
      fail(n,
           "a shortcut needs a convolution without a pooling, a resize, an expansion or an input "
           "scale");
    const Value& r = g.value(n.inputs[c.shortcut_input()]);
    if (r.shape != out_shape || r.layout != out_layout)
      fail(n, "shortcut '" + r.name + "' is " + to_string(r.shape) + " " + to_string(r.layout) +
                  ", the output is " + to_string(out_shape) + " " + to_string(out_layout));
  }
  if (c.pool && !c.pool_first) {  // the node's output is the pooled convolution (fuse_conv_pooling)
    if (out_layout != Layout::nhwc) fail(n, "a pooled convolution must have an NHWC output");
    return {image_shape(pooled_dims(n, *c.pool, out, out_shape), out_layout), out_layout};
  }
  if (c.nchw_output && !c.resize) fail(n, "nchw_output without a resize");
  if (c.resize) {  // the node's output is the resized convolution (fuse_conv_resize)
    if (out_layout != Layout::nhwc || c.pool || c.expand)
      fail(n,
           "a resize needs a convolution with an NHWC output, without a pooling or an expansion");
    if (!c.nchw_output && c.resize->mode != ResizeMode::nearest)
      fail(n, std::string(to_string(c.resize->mode)) +
                  " resizing of an NHWC output (interpolation reads NCHW: nchw_output)");
    const Layout layout = c.nchw_output ? Layout::nchw : Layout::nhwc;
    const Shape unresized = image_shape(out, layout);
    check_resize(n, *c.resize, unresized, layout);
    const size_t channel_axis = c.nchw_output ? 1 : 3;
    if (!resize_axis_is_identity(*c.resize, 0, unresized[0]) ||
        !resize_axis_is_identity(*c.resize, channel_axis, unresized[channel_axis]))
      fail(n, "a convolution's resize leaves N and C alone");
    return {c.resize->sizes, layout};
  }
  return {out_shape, out_layout};
}

TypedShape infer_pool(const Graph& g, const Node& n, const Pool2d& p) {
  expect_inputs(n, 1);
  const Value& x = activation_input(g, n);
  return {image_shape(pooled_dims(n, p, image_dims(x.shape, x.layout), x.shape), x.layout),
          x.layout};
}

}  // namespace kiln::graph::shape_detail
