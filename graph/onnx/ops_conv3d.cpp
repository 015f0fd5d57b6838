// ONNX 3-D Conv -> IR, lowered onto the generated 2-D convolution. The depth taps are folded into
// the input channels: the input [N, C, D, H, W] is transposed to [N, D, C, H, W], padded along
// D, and for each depth tap kd the depth slices kd * dilation_d + do * stride_d (do < Do) are
// gathered (a strided Slice each, joined by a Concat) into [N, Do, C, KD, H, W], viewed as
// [N * Do, C * KD, H, W]. Every output depth slice is then a 2-D convolution with C * KD input
// channels whose weights are the 3-D weights [M, C / group, KD, KH, KW] read as
// [M, C / group * KD, KH, KW] (the same bytes: channel c * KD + kd, so groups stay group-major).
// The 2-D result [N * Do, M, Ho, Wo] is viewed as [N, Do, M, Ho, Wo] and transposed to
// [N, M, Do, Ho, Wo]. Batch and output depth share the 2-D convolution's batch axis, so the
// tuned 2-D schedules, the depthwise and grouped kernels and the epilogue fusions all apply
// (pass hoist_conv3d_epilogue moves a BatchNorm or activation after the transpose onto the
// 2-D convolution's output).
#include <algorithm>

#include "graph/onnx/importer.h"

namespace kiln::graph::onnx {
namespace {

constexpr int64_t kMaxParam = int64_t{1} << 20;

std::array<int64_t, 3> triple_attr(const NodeCtx& c, const char* name, int64_t def, int64_t lo) {
  const std::vector<int64_t> v = attr_ints(c, name);
  if (v.empty()) return {def, def, def};
  if (v.size() != 3)
    node_error(c, std::string("attribute '") + name + "' has " + std::to_string(v.size()) +
                      " entries, expected 3 (3-D)");
  for (int64_t e : v)
    if (e < lo || e > kMaxParam)
      node_error(c, std::string("attribute '") + name + "' holds " + std::to_string(e) +
                        ", expected " + std::to_string(lo) + ".." + std::to_string(kMaxParam));
  return {v[0], v[1], v[2]};
}

}  // namespace

ValueId emit_conv3d(Importer& im, const NodeCtx& c, ValueId x, const Shape& wdims,
                    std::vector<float> weights, ValueId bias, const Conv3dParams& p,
                    const std::string& out_name) {
  const Shape xs = im.graph().value(x).shape;
  KILN_CHECK(xs.size() == 5 && wdims.size() == 5, "emit_conv3d takes 5-D input and weights");
  const int64_t n = xs[0], ci = xs[1], d = xs[2], h = xs[3], w = xs[4];
  const int64_t co = wdims[0], kd = wdims[2];
  const int64_t dp = d + p.pad_begin[0] + p.pad_end[0];
  const int64_t dout = (dp - p.dilation[0] * (kd - 1) - 1) / p.stride[0] + 1;
  if (dp - p.dilation[0] * (kd - 1) - 1 < 0 || dout < 1)
    node_error(c, "the depth window (" + std::to_string(kd) + " taps, dilation " +
                      std::to_string(p.dilation[0]) + ") does not fit the padded depth " +
                      std::to_string(dp));
  const std::string base = c.name + "/";
  // [N, C, D, H, W] -> [N, D, C, 1, H, W] (a view when D or C is 1).
  const Shape split = {n, d, ci, 1, h, w};
  if (d == 1 || ci == 1) {
    x = im.emit(c, Reshape{split}, {x}, base + "depth_major", base + "depth_major");
  } else {
    x = im.emit(c, Transpose{{0, 2, 1, 3, 4}}, {x}, base + "depth_major_5d", base + "depth_major");
    x = im.emit(c, Reshape{split}, {x}, base + "depth_major", base + "depth_major_view");
  }
  if (p.pad_begin[0] != 0 || p.pad_end[0] != 0) {
    std::vector<int64_t> pads(12, 0);
    pads[1] = p.pad_begin[0], pads[7] = p.pad_end[0];
    x = im.emit(c, Pad{pads, 0.0f}, {x}, base + "depth_padded", base + "depth_pad");
  }
  // The depth gather: tap t reads padded slices t * dilation + do * stride.
  if (kd > 1 || p.stride[0] > 1 || dout != dp) {
    std::vector<ValueId> taps;
    for (int64_t t = 0; t < kd; ++t) {
      Slice s;
      s.starts = {0, t * p.dilation[0], 0, 0, 0, 0};
      s.ends = {n, t * p.dilation[0] + (dout - 1) * p.stride[0] + 1, ci, 1, h, w};
      s.steps = {1, p.stride[0], 1, 1, 1, 1};
      const std::string tap = base + "depth_tap" + std::to_string(t);
      taps.push_back(im.emit(c, s, {x}, tap, tap));
    }
    x = kd == 1 ? taps[0]
                : im.emit(c, Concat{3}, taps, base + "depth_gathered", base + "depth_gather");
  }
  x = im.emit(c, Reshape{{n * dout, ci * kd, h, w}}, {x}, base + "input_2d", base + "input_2d");

  Conv2d conv;
  conv.groups = to_int(c, p.groups, "attribute 'group'", 1, kMaxParam);
  conv.stride_h = to_int(c, p.stride[1], "stride", 1, kMaxParam);
  conv.stride_w = to_int(c, p.stride[2], "stride", 1, kMaxParam);
  conv.dilation_h = to_int(c, p.dilation[1], "dilation", 1, kMaxParam);
  conv.dilation_w = to_int(c, p.dilation[2], "dilation", 1, kMaxParam);
  conv.pad_top = to_int(c, p.pad_begin[1], "padding", 0, kMaxParam);
  conv.pad_left = to_int(c, p.pad_begin[2], "padding", 0, kMaxParam);
  conv.pad_bottom = to_int(c, p.pad_end[1], "padding", 0, kMaxParam);
  conv.pad_right = to_int(c, p.pad_end[2], "padding", 0, kMaxParam);
  const ValueId wv = im.add_constant(base + "weight_2d", {co, wdims[1] * kd, wdims[3], wdims[4]},
                                     std::move(weights), Layout::oihw);
  const ValueId y = im.emit(c, conv, {x, wv, bias}, base + "output_2d", base + "conv_2d");
  const Shape ys = im.graph().value(y).shape;  // [N * Do, M, Ho, Wo]
  const ValueId v = im.emit(c, Reshape{{n, dout, co, ys[2], ys[3]}}, {y},
                            base + "output_depth_major", base + "output_view");
  if (dout == 1 || co == 1)
    return im.emit(c, Reshape{{n, co, dout, ys[2], ys[3]}}, {v}, out_name, base + "output");
  return im.emit(c, Transpose{{0, 2, 1, 3, 4}}, {v}, out_name, base + "output");
}

void convert_conv_3d(Importer& im, const NodeCtx& c) {
  const Shape xs = im.input_shape(c, 0);
  const HostTensor& w = im.constant_input(c, 1, "weights");
  if (!w.is_float() || w.dims.size() != 5 || w.f.empty())
    node_error(c, "weights '" + im.input_name(c, 1) + "' are " + to_string(w.dims) +
                      ", expected non-empty FLOAT [out channels, in channels / group, kD, kH, kW]");
  const std::vector<int64_t> ks = attr_ints(c, "kernel_shape");
  if (!ks.empty() && ks != Shape(w.dims.begin() + 2, w.dims.end()))
    node_error(c, "attribute 'kernel_shape' does not match the weights' spatial dims " +
                      to_string(w.dims));
  Conv3dParams p;
  p.groups = attr_int(c, "group", 1);
  if (p.groups < 1 || p.groups > kMaxParam || xs[1] % p.groups != 0 ||
      w.dims[1] * p.groups != xs[1] || w.dims[0] % p.groups != 0)
    node_error(c, "weights " + to_string(w.dims) + " and group " + std::to_string(p.groups) +
                      " do not fit the input's " + std::to_string(xs[1]) + " channels");
  p.stride = triple_attr(c, "strides", 1, 1);
  p.dilation = triple_attr(c, "dilations", 1, 1);
  const std::string auto_pad = attr_string(c, "auto_pad", "NOTSET");
  if (auto_pad == "NOTSET") {
    const std::vector<int64_t> pads = attr_ints(c, "pads");
    if (!pads.empty() && pads.size() != 6)
      node_error(
          c, "attribute 'pads' has " + std::to_string(pads.size()) + " entries, expected 6 (3-D)");
    for (size_t a = 0; a < pads.size(); ++a) {
      if (pads[a] < 0 || pads[a] > kMaxParam)
        node_error(c, "attribute 'pads' holds " + std::to_string(pads[a]) + ", expected 0.." +
                          std::to_string(kMaxParam));
      (a < 3 ? p.pad_begin : p.pad_end)[a % 3] = pads[a];
    }
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    for (size_t a = 0; a < 3; ++a) {  // the output is ceil(in / stride); UPPER: odd unit last
      const int64_t in = xs[a + 2], out = (in + p.stride[a] - 1) / p.stride[a];
      const int64_t total = std::max<int64_t>(
          0, (out - 1) * p.stride[a] + p.dilation[a] * (w.dims[a + 2] - 1) + 1 - in);
      p.pad_begin[a] = auto_pad == "SAME_UPPER" ? total / 2 : total - total / 2;
      p.pad_end[a] = total - p.pad_begin[a];
    }
  } else if (auto_pad != "VALID") {
    node_error(c, "attribute 'auto_pad' is '" + auto_pad +
                      "', expected NOTSET, VALID, SAME_UPPER or SAME_LOWER");
  }
  const ValueId b = conv_bias(im, c, w.dims[0]);
  im.define_value(
      c, 0, emit_conv3d(im, c, im.value_input(c, 0), w.dims, w.f, b, p, im.output_name(c, 0)));
}

}  // namespace kiln::graph::onnx
