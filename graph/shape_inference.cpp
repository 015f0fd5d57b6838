// Shape inference for every op: the single place that knows how each op maps input shapes to
// output shapes.
#include "graph/shape_inference.h"

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

TypedShape infer_conv(const Graph& g, const Node& n, const Conv2d& c) {
  expect_inputs(n, 3);
  const Value& x = activation_input(g, n);
  const Value& w = g.value(n.inputs[1]);
  const Layout wl = filter_layout_for(x.layout);
  if (w.shape.size() != 4 || w.layout != wl)
    fail(n, "weights '" + w.name + "' must be 4-D " + to_string(wl) + " for a " +
                to_string(x.layout) + " input, got " + to_string(w.shape) + " " +
                to_string(w.layout));
  const ImageDims in = image_dims(x.shape, x.layout);
  const FilterDims f = filter_dims(w.shape, w.layout);
  if (f.ci != in.c)
    fail(n, "weights expect " + std::to_string(f.ci) + " input channels, input '" + x.name +
                "' has " + std::to_string(in.c));
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
  ImageDims out{in.n, f.co, h / c.stride_h + 1, wd / c.stride_w + 1};
  return {image_shape(out, x.layout), x.layout};
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
    const Value& x = activation_input(g, n);
    const int64_t channels = x.shape[channel_axis(x.layout)];
    const char* roles[] = {"scale", "bias", "mean", "variance"};
    for (size_t i = 1; i < 5; ++i) expect_vector(g, n, i, channels, roles[i - 1]);
    return {x.shape, x.layout};
  }
  if (std::holds_alternative<Relu>(n.op) || std::holds_alternative<Clip>(n.op)) {
    expect_inputs(n, 1);
    const Value& x = g.value(n.inputs[0]);
    return {x.shape, x.layout};
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

}  // namespace kiln::graph
