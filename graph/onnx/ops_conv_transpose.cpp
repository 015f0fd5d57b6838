// ONNX ConvTranspose -> IR, lowered onto the generated convolution: the input with stride - 1
// zeros inserted between its pixels (a Reshape to [N, C, H, 1, W, 1], a zero Pad of the unit axes
// to the stride, a Reshape back), then a stride-1 convolution with the weights flipped in space
// and their channel axes swapped per group, padded by dilation * (k - 1) - pad on each side
// (plus output_padding at the end; a negative amount crops, through a Pad). This is the
// transposed convolution's definition rewritten as a convolution (the gradient of the forward
// one); it multiplies stride_h * stride_w times more zeros than a direct kernel would.
#include <algorithm>

#include "graph/onnx/importer.h"

namespace kiln::graph::onnx {
namespace {

constexpr int64_t kMaxParam = int64_t{1} << 20;

// Attribute `name` with `dims` entries (1 or 2) as (H, W); H is `def` for a 1-D op.
std::pair<int64_t, int64_t> hw_attr(const NodeCtx& c, const char* name, int64_t def, int64_t lo,
                                    int dims) {
  const std::vector<int64_t> v = attr_ints(c, name);
  if (v.empty()) return {def, def};
  if (v.size() != static_cast<size_t>(dims))
    node_error(c, std::string("attribute '") + name + "' has " + std::to_string(v.size()) +
                      " entries, expected " + std::to_string(dims));
  for (int64_t e : v)
    if (e < lo || e > kMaxParam)
      node_error(c, std::string("attribute '") + name + "' holds " + std::to_string(e) +
                        ", expected " + std::to_string(lo) + ".." + std::to_string(kMaxParam));
  return {dims == 1 ? def : v[0], v.back()};
}

// Begin and end padding of one spatial axis from output_shape or auto_pad SAME_*, as ONNX's
// reference computes them: total = stride * (in - 1) + output_padding + (k - 1) * dilation + 1
// - out, split with the odd unit at the end for SAME_UPPER and at the start otherwise (floor
// division: a negative total, an output larger than the window reaches, pads the end with
// outputs that are the bias alone).
std::pair<int64_t, int64_t> derived_pads(const NodeCtx& c, int64_t in, int64_t out, int64_t k,
                                         int64_t stride, int64_t dil, int64_t out_pad, bool upper) {
  if (out < 1 || out > kMaxParam)
    node_error(c,
               "output size " + std::to_string(out) + " is not in 1.." + std::to_string(kMaxParam));
  const int64_t total = stride * (in - 1) + out_pad + (k - 1) * dil + 1 - out;
  const int64_t half = total >= 0 ? total / 2 : -((-total + 1) / 2);  // floor(total / 2)
  return upper ? std::make_pair(half, total - half) : std::make_pair(total - half, half);
}

}  // namespace

void convert_conv_transpose(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 2, 3);
  const Shape xs = im.input_shape(c, 0);
  if (xs.size() != 3 && xs.size() != 4)
    node_error(c, "only 1-D and 2-D transposed convolutions are supported: input '" +
                      im.input_name(c, 0) + "' is " + to_string(xs) +
                      ", expected 3-D NCL or 4-D NCHW");
  const int dims = static_cast<int>(xs.size()) - 2;
  const Shape x4 = dims == 1 ? Shape{xs[0], xs[1], 1, xs[2]} : xs;
  const HostTensor& w = im.constant_input(c, 1, "weights");
  if (!w.is_float() || w.dims.size() != xs.size() || w.f.empty())
    node_error(c,
               "weights '" + im.input_name(c, 1) + "' are " + to_string(w.dims) +
                   ", expected non-empty FLOAT [in channels, out channels / group, k...] of rank " +
                   std::to_string(xs.size()));
  const int64_t ci = x4[1], kh = dims == 1 ? 1 : w.dims[2], kw = w.dims.back();
  const int64_t groups = attr_int(c, "group", 1);
  if (groups < 1 || ci % groups != 0 || w.dims[0] != ci)
    node_error(c, "weights " + to_string(w.dims) + " and group " + std::to_string(groups) +
                      " do not fit the input's " + std::to_string(ci) + " channels");
  const int64_t co_g = w.dims[1], ci_g = ci / groups, co = co_g * groups;
  const std::vector<int64_t> ks = attr_ints(c, "kernel_shape");
  if (!ks.empty() && ks != Shape(w.dims.begin() + 2, w.dims.end()))
    node_error(c, "attribute 'kernel_shape' does not match the weights " + to_string(w.dims));
  const auto [sh, sw] = hw_attr(c, "strides", 1, 1, dims);
  const auto [dh, dw] = hw_attr(c, "dilations", 1, 1, dims);
  const auto [oph, opw] = hw_attr(c, "output_padding", 0, 0, dims);
  if (oph >= std::max(sh, dh) || opw >= std::max(sw, dw))
    node_error(c, "attribute 'output_padding' must be smaller than the stride or the dilation");

  // Padding [top, left, bottom, right]: given, or derived from output_shape or SAME_*.
  int64_t pt = 0, pl = 0, pb = 0, pr = 0;
  const std::string auto_pad = attr_string(c, "auto_pad", "NOTSET");
  const std::vector<int64_t> out_shape = attr_ints(c, "output_shape");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
      auto_pad != "SAME_LOWER")
    node_error(c, "attribute 'auto_pad' is '" + auto_pad +
                      "', expected NOTSET, VALID, SAME_UPPER or SAME_LOWER");
  if (!out_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    int64_t oh = x4[2] * sh, ow = x4[3] * sw;  // SAME: the input times the stride
    if (!out_shape.empty()) {
      if (out_shape.size() != static_cast<size_t>(dims) && out_shape.size() != xs.size())
        node_error(c,
                   "attribute 'output_shape' has " + std::to_string(out_shape.size()) + " entries");
      ow = out_shape.back();
      oh = dims == 1 ? 1 : out_shape[out_shape.size() - 2];
    }
    const bool upper = auto_pad == "SAME_UPPER";
    std::tie(pt, pb) = derived_pads(c, x4[2], oh, kh, sh, dh, oph, upper);
    std::tie(pl, pr) = derived_pads(c, x4[3], ow, kw, sw, dw, opw, upper);
  } else if (auto_pad == "NOTSET") {
    const std::vector<int64_t> p = attr_ints(c, "pads");
    if (!p.empty()) {
      if (p.size() != static_cast<size_t>(2 * dims))
        node_error(c, "attribute 'pads' has " + std::to_string(p.size()) + " entries, expected " +
                          std::to_string(2 * dims));
      for (int64_t v : p)
        if (v < 0 || v > kMaxParam) node_error(c, "attribute 'pads' holds " + std::to_string(v));
      if (dims == 1)
        pl = p[0], pr = p[1];
      else
        pt = p[0], pl = p[1], pb = p[2], pr = p[3];
    }
  }

  const int64_t ho = sh * (x4[2] - 1) + oph + (kh - 1) * dh + 1 - pt - pb;
  const int64_t wo = sw * (x4[3] - 1) + opw + (kw - 1) * dw + 1 - pl - pr;
  if (ho < 1 || wo < 1)
    node_error(c,
               "the padding leaves an output of " + std::to_string(ho) + "x" + std::to_string(wo));

  // The stride-1 convolution's weights: out channel (group, o) reads in channel (group, i) at
  // the spatially flipped tap.
  std::vector<float> flipped(static_cast<size_t>(co * ci_g * kh * kw));
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t o = 0; o < co_g; ++o)
      for (int64_t i = 0; i < ci_g; ++i)
        for (int64_t y = 0; y < kh; ++y)
          for (int64_t x = 0; x < kw; ++x)
            flipped[static_cast<size_t>((((g * co_g + o) * ci_g + i) * kh + y) * kw + x)] =
                w.f[static_cast<size_t>((((g * ci_g + i) * co_g + o) * kh + (kh - 1 - y)) * kw +
                                        (kw - 1 - x))];
  const ValueId wv = im.add_constant(c.name + "/flipped_weights", {co, ci_g, kh, kw},
                                     std::move(flipped), Layout::oihw);
  ValueId b;
  if (im.has_input(c, 2)) {
    im.constant_input(c, 2, "bias");
    b = im.constant_value(c, 2, Layout::any);
  } else {
    b = im.add_constant(c.name + "/zero_bias", {co},
                        std::vector<float>(static_cast<size_t>(co), 0.0f), Layout::any);
  }

  ValueId x = im.value_input(c, 0);
  const std::string base = c.name + "/";
  if (dims == 1) x = im.emit(c, Reshape{x4}, {x}, base + "input_2d", base + "input_2d");
  if (sh > 1 || sw > 1) {  // stride - 1 zeros after every pixel, along both axes
    const Shape split = {x4[0], ci, x4[2], 1, x4[3], 1};
    x = im.emit(c, Reshape{split}, {x}, base + "split", base + "split");
    x = im.emit(c, Pad{{0, 0, 0, 0, 0, 0, 0, 0, 0, sh - 1, 0, sw - 1}, 0.0f}, {x},
                base + "zero_inserted", base + "insert_zeros");
    x = im.emit(c, Reshape{{x4[0], ci, x4[2] * sh, x4[3] * sw}}, {x}, base + "upsampled",
                base + "merge");
  }
  // The convolution's padding on each side; the zero-inserted input ends in stride - 1 zeros
  // the transposed convolution does not have, hence the end's - (stride - 1).
  const int64_t pads[4] = {dh * (kh - 1) - pt, dw * (kw - 1) - pl,
                           dh * (kh - 1) - pb + oph - (sh - 1),
                           dw * (kw - 1) - pr + opw - (sw - 1)};
  if (std::any_of(std::begin(pads), std::end(pads), [](int64_t p) { return p < 0; })) {
    // More padding than the window reaches: the first or last outputs are dropped (a crop).
    x = im.emit(c,
                Pad{{0, 0, std::min<int64_t>(pads[0], 0), std::min<int64_t>(pads[1], 0), 0, 0,
                     std::min<int64_t>(pads[2], 0), std::min<int64_t>(pads[3], 0)},
                    0.0f},
                {x}, base + "cropped", base + "crop");
  }
  Conv2d conv;
  conv.groups = to_int(c, groups, "attribute 'group'", 1, kMaxParam);
  conv.dilation_h = to_int(c, dh, "dilation", 1, kMaxParam);
  conv.dilation_w = to_int(c, dw, "dilation", 1, kMaxParam);
  conv.pad_top = to_int(c, std::max<int64_t>(pads[0], 0), "padding", 0, kMaxParam);
  conv.pad_left = to_int(c, std::max<int64_t>(pads[1], 0), "padding", 0, kMaxParam);
  conv.pad_bottom = to_int(c, std::max<int64_t>(pads[2], 0), "padding", 0, kMaxParam);
  conv.pad_right = to_int(c, std::max<int64_t>(pads[3], 0), "padding", 0, kMaxParam);
  if (dims == 2) {
    im.define_value(c, 0, im.emit(c, conv, {x, wv, b}, im.output_name(c, 0)));
    return;
  }
  const ValueId y = im.emit(c, conv, {x, wv, b}, base + "output_2d");
  Shape ys = im.graph().value(y).shape;
  ys.erase(ys.begin() + 2);
  im.define_value(c, 0, im.emit(c, Reshape{ys}, {y}, im.output_name(c, 0), base + "output_1d"));
}

}  // namespace kiln::graph::onnx
