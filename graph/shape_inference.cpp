// Shape inference for every op: the single place that knows how each op maps input shapes to
// output shapes.
#include "graph/shape_inference.h"

#include <cmath>

#include <algorithm>
#include <cstdlib>

namespace kiln::graph {
namespace {

[[noreturn]] void fail(const Node& n, const std::string& what) {
  throw Error(std::string(op_name(n.op)) + " node '" + n.name + "': " + what);
}

void expect_inputs(const Node& n, size_t count) {
  if (n.inputs.size() != count)
    fail(n, "expected " + std::to_string(count) + " inputs, got " +
                std::to_string(n.inputs.size()));
}

const Value& activation_input(const Graph& g, const Node& n) {
  const Value& x = g.value(n.inputs.at(0));
  if (x.shape.size() != 4 || (x.layout != Layout::nchw && x.layout != Layout::nhwc))
    fail(n, "input '" + x.name + "' must be a 4-D NCHW or NHWC tensor, got " +
                to_string(x.shape) + " " + to_string(x.layout));
  return x;
}

void expect_vector(const Graph& g, const Node& n, size_t i, int64_t length, const char* role) {
  const Value& v = g.value(n.inputs.at(i));
  if (v.shape != Shape{length})
    fail(n, std::string(role) + " '" + v.name + "' must have shape [" + std::to_string(length) +
                "], got " + to_string(v.shape));
}

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
    if (r.sizes[a] <= 0) fail(n, "output size " + std::to_string(r.sizes[a]) + " on axis " + std::to_string(a));
    if (!(r.scales[a] > 0.0f) || !std::isfinite(r.scales[a]))
      fail(n, "scale " + std::to_string(r.scales[a]) + " on axis " + std::to_string(a) + " is not positive");
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
      fail(n, "an input scale needs a dense convolution of an NHWC input, without pre steps, an "
              "expansion or bf16");
    if (s.shape != Shape{in.n, 1, 1, in.c} || s.layout != Layout::nhwc)
      fail(n, "input scale '" + s.name + "' must be NHWC [" + std::to_string(in.n) + ", 1, 1, " +
                  std::to_string(in.c) + "], got " + to_string(s.shape) + " " + to_string(s.layout));
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
  for (size_t i = first_post; i < first_pre; ++i) expect_vector(g, n, i, f.co, "post-step scale/shift");
  for (size_t i = first_pre; i < first_expand; ++i) expect_vector(g, n, i, in.c, "pre-step scale/shift");
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
      fail(n, "a shortcut needs a convolution without a pooling, a resize, an expansion or an input scale");
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
      fail(n, "a resize needs a convolution with an NHWC output, without a pooling or an expansion");
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


// Inputs of ops that index tensors in logical (row-major ONNX) order must not be NHWC.
const Value& logical_input(const Graph& g, const Node& n, size_t i) {
  const Value& x = g.value(n.inputs.at(i));
  if (x.layout == Layout::nhwc || x.layout == Layout::hwio)
    fail(n, "input '" + x.name + "' is " + to_string(x.layout) +
                "; this op works on tensors in logical (row-major) order");
  return x;
}

TypedShape infer_binary(const Graph& g, const Node& n) {
  expect_inputs(n, 2);
  const Value& a = g.value(n.inputs[0]);
  const Value& b = g.value(n.inputs[1]);
  bool ok = false;
  const Shape out = broadcast_shapes(a.shape, b.shape, &ok);
  if (!ok)
    fail(n, "cannot broadcast '" + a.name + "' " + to_string(a.shape) + " with '" + b.name + "' " +
                to_string(b.shape));
  // A 4-D operand decides the layout; two 4-D operands must agree.
  Layout l = logical_layout(out.size());
  const bool a4 = a.shape.size() == 4, b4 = b.shape.size() == 4;
  if (a4 && b4 && a.layout != b.layout && !(a.is_constant() || b.is_constant()))
    fail(n, "operands '" + a.name + "' (" + to_string(a.layout) + ") and '" + b.name + "' (" +
                to_string(b.layout) + ") have different layouts");
  if (out.size() == 4) {
    if (a4 && !a.is_constant()) l = a.layout;
    else if (b4 && !b.is_constant()) l = b.layout;
    else if (a4) l = a.layout;
    else if (b4) l = b.layout;
  }
  if (l == Layout::any && out.size() == 4) l = Layout::nchw;
  // Kernels broadcast on stored shapes: next to an NHWC operand, the other one must be stored
  // NHWC too (the layout pass re-lays constants out), or be a single element.
  if (l == Layout::nhwc)
    for (const Value* v : {&a, &b})
      if (v->layout != Layout::nhwc && num_elements(v->shape) != 1)
        fail(n, "operand '" + v->name + "' " + to_string(v->shape) + " " + to_string(v->layout) +
                    " cannot broadcast against an NHWC operand");
  return {out, l};
}

// Where(cond, x, y): the three shapes broadcast together; the layout as for Binary (the operands
// must agree; next to an NHWC operand the others are NHWC or a single element).
TypedShape infer_where(const Graph& g, const Node& n) {
  expect_inputs(n, 3);
  Shape out;
  for (size_t i = 0; i < 3; ++i) {
    const Value& v = g.value(n.inputs[i]);
    bool ok = true;
    if (i > 0) out = broadcast_shapes(out, v.shape, &ok);
    else out = v.shape;
    if (!ok)
      fail(n, "cannot broadcast '" + v.name + "' " + to_string(v.shape) + " with the shape " +
                  to_string(out) + " of the inputs before it");
  }
  Layout l = out.size() == 4 ? Layout::nchw : logical_layout(out.size());
  const Value* decides = nullptr;
  for (ValueId id : n.inputs) {
    const Value& v = g.value(id);
    if (v.shape.size() != 4 || v.is_constant()) continue;
    if (decides && v.layout != decides->layout)
      fail(n, "operands '" + decides->name + "' (" + to_string(decides->layout) + ") and '" +
                  v.name + "' (" + to_string(v.layout) + ") have different layouts");
    if (!decides) decides = &v;
  }
  if (out.size() == 4 && decides) l = decides->layout;
  if (l == Layout::nhwc)
    for (ValueId id : n.inputs) {
      const Value& v = g.value(id);
      if (v.layout != Layout::nhwc && num_elements(v.shape) != 1)
        fail(n, "operand '" + v.name + "' " + to_string(v.shape) + " " + to_string(v.layout) +
                    " cannot broadcast against an NHWC operand");
    }
  return {out, l};
}

TypedShape infer_pool(const Graph& g, const Node& n, const Pool2d& p) {
  expect_inputs(n, 1);
  const Value& x = activation_input(g, n);
  return {image_shape(pooled_dims(n, p, image_dims(x.shape, x.layout), x.shape), x.layout), x.layout};
}

TypedShape infer_gemm(const Graph& g, const Node& n, const Gemm& gm) {
  if (n.inputs.size() != 2 && n.inputs.size() != 3) fail(n, "expected 2 or 3 inputs");
  const Value& a = logical_input(g, n, 0);
  const Value& b = logical_input(g, n, 1);
  if (a.shape.size() != 2 || b.shape.size() != 2) fail(n, "A and B must be 2-D");
  const int64_t m = gm.trans_a ? a.shape[1] : a.shape[0];
  const int64_t ka = gm.trans_a ? a.shape[0] : a.shape[1];
  const int64_t kb = gm.trans_b ? b.shape[1] : b.shape[0];
  const int64_t nn = gm.trans_b ? b.shape[0] : b.shape[1];
  if (ka != kb)
    fail(n, "inner dimensions differ: A " + to_string(a.shape) + " and B " + to_string(b.shape));
  if (n.inputs.size() == 3) {
    const Value& c = g.value(n.inputs[2]);
    bool ok = false;
    const Shape bc = broadcast_shapes(c.shape, {m, nn}, &ok);
    if (!ok || bc != Shape{m, nn} || c.shape.size() > 2)
      fail(n, "C " + to_string(c.shape) + " does not broadcast to [" + std::to_string(m) + ", " +
                  std::to_string(nn) + "]");
  }
  return {{m, nn}, Layout::any};
}

TypedShape infer_matmul(const Graph& g, const Node& n) {
  expect_inputs(n, 2);
  Shape a = logical_input(g, n, 0).shape, b = logical_input(g, n, 1).shape;
  if (a.empty() || b.empty()) fail(n, "operands must have at least 1 dimension");
  const bool a1 = a.size() == 1, b1 = b.size() == 1;
  if (a1) a.insert(a.begin(), 1);
  if (b1) b.push_back(1);
  if (a.back() != b[b.size() - 2])
    fail(n, "inner dimensions differ: " + to_string(a) + " x " + to_string(b));
  bool ok = false;
  Shape batch = broadcast_shapes(Shape(a.begin(), a.end() - 2), Shape(b.begin(), b.end() - 2), &ok);
  if (!ok) fail(n, "batch dimensions do not broadcast");
  if (!a1) batch.push_back(a[a.size() - 2]);
  if (!b1) batch.push_back(b.back());
  return {batch, logical_layout(batch.size())};
}

TypedShape infer_concat(const Graph& g, const Node& n, const Concat& c) {
  if (n.inputs.empty()) fail(n, "expected at least one input");
  const Value& first = g.value(n.inputs[0]);
  const int r = static_cast<int>(first.shape.size());
  if (c.axis < 0 || c.axis >= r) fail(n, "axis " + std::to_string(c.axis) + " out of range");
  Shape out = first.shape;
  out[c.axis] = 0;
  for (ValueId v : n.inputs) {
    const Value& x = g.value(v);
    if (static_cast<int>(x.shape.size()) != r || x.layout != first.layout)
      fail(n, "input '" + x.name + "' differs in rank or layout from '" + first.name + "'");
    for (int a = 0; a < r; ++a)
      if (a != c.axis && x.shape[a] != first.shape[a])
        fail(n, "input '" + x.name + "' " + to_string(x.shape) + " does not match '" + first.name +
                    "' " + to_string(first.shape) + " outside axis " + std::to_string(c.axis));
    out[c.axis] += x.shape[c.axis];
  }
  return {out, first.layout};
}

}  // namespace

ImageDims image_dims(const Shape& s, Layout l) {
  KILN_CHECK(s.size() == 4, "image tensor must be 4-D");
  if (l == Layout::nchw) return {s[0], s[1], s[2], s[3]};
  KILN_CHECK(l == Layout::nhwc, "image layout must be NCHW or NHWC");
  return {s[0], s[3], s[1], s[2]};
}

Shape image_shape(const ImageDims& d, Layout l) {
  if (l == Layout::nchw) return {d.n, d.c, d.h, d.w};
  KILN_CHECK(l == Layout::nhwc, "image layout must be NCHW or NHWC");
  return {d.n, d.h, d.w, d.c};
}

int channel_axis(Layout l) {
  KILN_CHECK(l == Layout::nchw || l == Layout::nhwc, "image layout must be NCHW or NHWC");
  return l == Layout::nchw ? 1 : 3;
}

FilterDims filter_dims(const Shape& s, Layout l) {
  KILN_CHECK(s.size() == 4, "filter tensor must be 4-D");
  if (l == Layout::oihw) return {s[0], s[1], s[2], s[3]};
  KILN_CHECK(l == Layout::hwio, "filter layout must be OIHW or HWIO");
  return {s[3], s[2], s[0], s[1]};
}

Shape filter_shape(const FilterDims& d, Layout l) {
  if (l == Layout::oihw) return {d.co, d.ci, d.kh, d.kw};
  KILN_CHECK(l == Layout::hwio, "filter layout must be OIHW or HWIO");
  return {d.kh, d.kw, d.ci, d.co};
}

Layout filter_layout_for(Layout activation) {
  return activation == Layout::nhwc ? Layout::hwio : Layout::oihw;
}

TypedShape infer_output(const Graph& g, const Node& n) {
  for (ValueId v : n.inputs)
    if (v.index >= g.values().size()) fail(n, "input id %" + std::to_string(v.index) + " is undefined");
  if (const auto* c = std::get_if<Conv2d>(&n.op)) return infer_conv(g, n, *c);
  if (std::holds_alternative<BatchNorm>(n.op)) {
    expect_inputs(n, 5);
    const Value& x = g.value(n.inputs[0]);
    if (x.shape.size() < 2) fail(n, "input '" + x.name + "' must have at least 2 dimensions");
    if (x.layout == Layout::nhwc && x.shape.size() != 4)
      fail(n, "an NHWC input '" + x.name + "' must be 4-D");
    const int64_t channels = x.shape[x.layout == Layout::nhwc ? 3 : 1];
    const char* roles[] = {"scale", "bias", "mean", "variance"};
    for (size_t i = 1; i < 5; ++i) expect_vector(g, n, i, channels, roles[i - 1]);
    return {x.shape, x.layout};
  }
  if (const auto* gn = std::get_if<GroupNorm>(&n.op)) {
    expect_inputs(n, gn->first_post_input() + 2 * affine_steps(gn->post));
    const Value& x = activation_input(g, n);
    const int64_t channels = x.shape[x.layout == Layout::nhwc ? 3 : 1];
    if (gn->groups < 1 || channels % gn->groups != 0)
      fail(n, std::to_string(gn->groups) + " groups do not divide the " + std::to_string(channels) +
                  " channels of '" + x.name + "'");
    expect_vector(g, n, 1, channels, "scale");
    expect_vector(g, n, 2, channels, "bias");
    if (gn->residual) {
      const Value& r = g.value(n.inputs[3]);
      if (r.shape != x.shape || r.layout != x.layout)
        fail(n, "residual '" + r.name + "' is " + to_string(r.shape) + " " + to_string(r.layout) +
                    ", expected " + to_string(x.shape) + " " + to_string(x.layout));
    }
    for (size_t i = gn->first_post_input(); i < n.inputs.size(); ++i)
      expect_vector(g, n, i, channels, "post step parameter");
    return {x.shape, x.layout};
  }
  if (const auto* ch = std::get_if<ElementwiseChain>(&n.op)) {
    size_t affine = 0;
    for (const ChainStep& st : ch->steps) affine += st.kind == ChainStepKind::affine;
    expect_inputs(n, 1 + 2 * affine);
    const Value& x = g.value(n.inputs[0]);
    if (ch->steps.empty()) fail(n, "a chain needs at least one step");
    if (affine > 0) {
      if (x.shape.size() < 2 || (x.layout == Layout::nhwc && x.shape.size() != 4))
        fail(n, "per-channel steps need a channel axis; input '" + x.name + "' is " + to_string(x.shape));
      const int64_t channels = x.shape[x.layout == Layout::nhwc ? 3 : 1];
      for (size_t i = 1; i < n.inputs.size(); ++i) expect_vector(g, n, i, channels, "scale/shift");
    }
    return {x.shape, x.layout};
  }
  if (op_is_unary(n.op)) {
    expect_inputs(n, 1);
    const Value& x = g.value(n.inputs[0]);
    return {x.shape, x.layout};
  }
  if (std::holds_alternative<Binary>(n.op)) return infer_binary(g, n);
  if (std::holds_alternative<Where>(n.op)) return infer_where(g, n);
  if (const auto* p = std::get_if<Pool2d>(&n.op)) return infer_pool(g, n, *p);
  if (std::holds_alternative<GlobalPool>(n.op)) {
    expect_inputs(n, 1);
    const Value& x = activation_input(g, n);
    ImageDims d = image_dims(x.shape, x.layout);
    d.h = d.w = 1;
    return {image_shape(d, x.layout), x.layout};
  }
  if (const auto* gm = std::get_if<Gemm>(&n.op)) return infer_gemm(g, n, *gm);
  if (std::holds_alternative<MatMul>(n.op)) return infer_matmul(g, n);
  if (const auto* r = std::get_if<Reshape>(&n.op)) {
    expect_inputs(n, 1);
    // A relabel reads the bytes in whatever layout they are stored.
    const Value& x = r->layout == Layout::any ? logical_input(g, n, 0) : g.value(n.inputs[0]);
    if (num_elements(r->shape) != num_elements(x.shape))
      fail(n, "cannot reshape " + to_string(x.shape) + " (" + std::to_string(num_elements(x.shape)) +
                  " elements) to " + to_string(r->shape));
    for (int64_t d : r->shape)
      if (d <= 0) fail(n, "target shape " + to_string(r->shape) + " has a non-positive dimension");
    if (r->layout == Layout::nhwc && r->shape.size() != 4)
      fail(n, "an NHWC relabel needs a 4-D target shape, not " + to_string(r->shape));
    return {r->shape, r->layout == Layout::any ? logical_layout(r->shape.size()) : r->layout};
  }
  if (const auto* t = std::get_if<Transpose>(&n.op)) {
    expect_inputs(n, 1);
    const Value& x = logical_input(g, n, 0);
    std::vector<bool> seen(x.shape.size(), false);
    if (t->perm.size() != x.shape.size())
      fail(n, "perm has " + std::to_string(t->perm.size()) + " entries for a rank-" +
                  std::to_string(x.shape.size()) + " input");
    Shape out;
    for (int a : t->perm) {
      if (a < 0 || a >= static_cast<int>(x.shape.size()) || seen[a]) fail(n, "perm is not a permutation");
      seen[a] = true;
      out.push_back(x.shape[a]);
    }
    return {out, logical_layout(out.size())};
  }
  if (const auto* c = std::get_if<Concat>(&n.op)) return infer_concat(g, n, *c);
  if (const auto* sl = std::get_if<Slice>(&n.op)) {
    expect_inputs(n, 1);
    const Value& x = g.value(n.inputs[0]);
    const size_t r = x.shape.size();
    if (sl->starts.size() != r || sl->ends.size() != r || sl->steps.size() != r)
      fail(n, "starts, ends and steps need one entry per input axis");
    Shape out(r);
    for (size_t a = 0; a < r; ++a) {
      const int64_t st = sl->steps[a];
      if (st == 0) fail(n, "slice step 0 on axis " + std::to_string(a));
      const int64_t span = st > 0 ? sl->ends[a] - sl->starts[a] : sl->starts[a] - sl->ends[a];
      out[a] = span <= 0 ? 0 : (span + std::abs(st) - 1) / std::abs(st);
      if (out[a] == 0) fail(n, "slice is empty on axis " + std::to_string(a));
    }
    return {out, x.layout};
  }
  if (const auto* pd = std::get_if<Pad>(&n.op)) {
    expect_inputs(n, 1);
    const Value& x = g.value(n.inputs[0]);
    const size_t r = x.shape.size();
    if (pd->pads.size() != 2 * r) fail(n, "pads needs 2 entries per input axis");
    Shape out(r);
    for (size_t a = 0; a < r; ++a) {
      if (pd->mode == PadMode::reflect && (pd->pads[a] >= x.shape[a] || pd->pads[a + r] >= x.shape[a]))
        fail(n, "reflect padding of axis " + std::to_string(a) + " (size " +
                    std::to_string(x.shape[a]) + ") by " + std::to_string(pd->pads[a]) + " and " +
                    std::to_string(pd->pads[a + r]) + "; each pad must be smaller than the axis");
      out[a] = x.shape[a] + pd->pads[a] + pd->pads[a + r];
      if (out[a] <= 0) fail(n, "padding removes every element of axis " + std::to_string(a));
    }
    return {out, x.layout};
  }
  if (const auto* sm = std::get_if<Softmax>(&n.op)) {
    expect_inputs(n, 1);
    const Value& x = logical_input(g, n, 0);
    if (sm->axis < 0 || sm->axis >= static_cast<int>(x.shape.size())) fail(n, "axis out of range");
    return {x.shape, x.layout};
  }
  if (const auto* rm = std::get_if<Reduce>(&n.op)) {
    expect_inputs(n, 1);
    // An NHWC image reduced with its axes kept, the axes in NHWC order (convert_to_nhwc), is
    // an NHWC image; any other Reduce reads logical order.
    const Value& x0 = g.value(n.inputs[0]);
    const bool nhwc = x0.layout == Layout::nhwc && x0.shape.size() == 4 && rm->keepdims &&
                      !is_arg_reduce(rm->kind);
    const Value& x = nhwc ? x0 : logical_input(g, n, 0);
    std::vector<bool> reduce(x.shape.size(), rm->axes.empty());
    for (size_t i = 0; i < rm->axes.size(); ++i) {
      const int a = rm->axes[i];
      if (a < 0 || a >= static_cast<int>(x.shape.size())) fail(n, "axis " + std::to_string(a) + " out of range");
      if (i > 0 && a <= rm->axes[i - 1]) fail(n, "axes must be sorted and distinct");
      reduce[a] = true;
    }
    if (x.shape.empty()) fail(n, "input '" + x.name + "' is a scalar; there is nothing to reduce");
    if (is_arg_reduce(rm->kind)) {
      if (rm->axes.size() != 1) fail(n, std::string(to_string(rm->kind)) + " reduces exactly one axis");
      if (x.shape[rm->axes[0]] >= kMaxArgReduceExtent)
        fail(n, "the reduced axis has " + std::to_string(x.shape[rm->axes[0]]) +
                    " elements; float32 indices are exact below 2^24");
    }
    Shape out;
    for (size_t a = 0; a < x.shape.size(); ++a) {
      if (!reduce[a]) out.push_back(x.shape[a]);
      else if (rm->keepdims) out.push_back(1);
    }
    return {out, nhwc ? Layout::nhwc : logical_layout(out.size())};
  }
  if (const auto* tl = std::get_if<Tile>(&n.op)) {
    expect_inputs(n, 1);
    const Value& x = logical_input(g, n, 0);
    if (tl->repeats.size() != x.shape.size())
      fail(n, "repeats has " + std::to_string(tl->repeats.size()) + " entries for a rank-" +
                  std::to_string(x.shape.size()) + " input");
    Shape out = x.shape;
    for (size_t a = 0; a < out.size(); ++a) {
      if (tl->repeats[a] < 1 || tl->repeats[a] > (int64_t{1} << 31))
        fail(n, "repeat " + std::to_string(tl->repeats[a]) + " on axis " + std::to_string(a) +
                    " is not in [1, 2^31]");
      if (__builtin_mul_overflow(out[a], tl->repeats[a], &out[a]))
        fail(n, "the output of axis " + std::to_string(a) + " overflows a 64-bit count");
    }
    num_elements(out);  // throws when the element count overflows
    return {out, x.layout};
  }
  if (const auto* ln = std::get_if<LayerNorm>(&n.op)) {
    if (n.inputs.size() != 2 && n.inputs.size() != 3)
      fail(n, "expected 2 or 3 inputs (x, scale[, bias]), got " + std::to_string(n.inputs.size()));
    // NHWC only where every axis but the batch is normalized with one-value parameters: the
    // layout does not matter then (convert_to_nhwc).
    const Value& x0 = g.value(n.inputs[0]);
    const Value& x =
        x0.layout == Layout::nhwc && is_layout_free_layer_norm(g, n) ? x0 : logical_input(g, n, 0);
    if (ln->axis < 0 || ln->axis >= static_cast<int>(x.shape.size()))
      fail(n, "axis " + std::to_string(ln->axis) + " out of range for a rank-" +
                  std::to_string(x.shape.size()) + " input");
    const Shape normalized(x.shape.begin() + ln->axis, x.shape.end());
    for (size_t i = 1; i < n.inputs.size(); ++i) {
      const Value& p = g.value(n.inputs[i]);
      if (!holds_normalized_shape(p.shape, x.shape, ln->axis))
        fail(n, std::string(i == 1 ? "scale" : "bias") + " '" + p.name + "' is " +
                    to_string(p.shape) + ", expected the normalized shape " + to_string(normalized));
    }
    return {x.shape, x.layout};
  }
  if (const auto* rs = std::get_if<Resize>(&n.op)) {
    expect_inputs(n, 1);
    // Resizing reads an NHWC image in its stored order too (convert_to_nhwc remaps its axes):
    // nearest neighbours gather along any axis, interpolation then runs along H and W (axes 1
    // and 2) instead of the last two.
    const Value& x =
        g.value(n.inputs[0]).layout == Layout::nhwc ? g.value(n.inputs[0]) : logical_input(g, n, 0);
    check_resize(n, *rs, x.shape, x.layout);
    return {rs->sizes, x.layout};
  }
  const auto& t = std::get<LayoutTransform>(n.op);
  expect_inputs(n, 1);
  auto is_image = [](Layout l) { return l == Layout::nchw || l == Layout::nhwc; };
  if (!is_image(t.from) || !is_image(t.to))
    fail(n, std::string("transforms only between NCHW and NHWC, not ") + to_string(t.from) +
                " -> " + to_string(t.to));
  const Value& x = activation_input(g, n);
  if (x.layout != t.from)
    fail(n, "input '" + x.name + "' is " + to_string(x.layout) + ", expected " +
                to_string(t.from));
  return {image_shape(image_dims(x.shape, t.from), t.to), t.to};
}

bool is_layout_free_layer_norm(const Graph& g, const Node& n) {
  const auto* ln = std::get_if<LayerNorm>(&n.op);
  if (!ln || ln->axis != 1) return false;
  for (size_t i = 1; i < n.inputs.size(); ++i)
    if (num_elements(g.value(n.inputs[i]).shape) != 1) return false;
  return true;
}

bool holds_normalized_shape(const Shape& param, const Shape& x, int axis) {
  if (num_elements(param) == 1) return true;
  auto without_leading_ones = [](Shape::const_iterator b, Shape::const_iterator e) {
    while (b != e && *b == 1) ++b;
    return Shape(b, e);
  };
  return without_leading_ones(param.begin(), param.end()) ==
         without_leading_ones(x.begin() + axis, x.end());
}

Layout logical_layout(size_t rank) { return rank == 4 ? Layout::nchw : Layout::any; }

bool op_is_unary(const Op& op) {
  return std::holds_alternative<Relu>(op) || std::holds_alternative<Clip>(op) ||
         std::holds_alternative<LeakyRelu>(op) || std::holds_alternative<Sigmoid>(op) ||
         std::holds_alternative<HardSigmoid>(op) || std::holds_alternative<HardSwish>(op);
}

Shape broadcast_shapes(const Shape& a, const Shape& b, bool* ok) {
  const size_t r = std::max(a.size(), b.size());
  Shape out(r);
  *ok = true;
  for (size_t i = 0; i < r; ++i) {
    const int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    const int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1) *ok = false;
    out[i] = da == 1 ? db : da;
  }
  return out;
}

}  // namespace kiln::graph
