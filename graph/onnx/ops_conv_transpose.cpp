// ONNX ConvTranspose -> IR, lowered onto the generated convolution: the input with stride - 1
// zeros inserted between its pixels (a Reshape to [N, C, H, 1, W, 1], or [N, C, D, 1, H, 1, W, 1],
// a zero Pad of the unit axes to the stride, a Reshape back), then a stride-1 convolution with the
// weights flipped in space and their channel axes swapped per group, padded by dilation * (k - 1) -
// pad on each side (plus output_padding at the end; a negative amount crops, through a Pad). This
// is the transposed convolution's definition rewritten as a convolution (the gradient of the
// forward one); it multiplies the product of the strides times more zeros than a direct kernel
// would. A 3-D one ends in the 3-D convolution of ops_conv3d.cpp (depth taps folded into channels).
// A strided 2-D one without dilation is one convolution per output phase instead, all in one
// kernel, and a DepthToSpace (phase_decomposition, below), with no zeros multiplied.
#include <algorithm>
#include <optional>

#include "graph/onnx/importer.h"

namespace kiln::graph::onnx {
namespace {

constexpr int64_t kMaxParam = int64_t{1} << 20;

// Attribute `name` with `dims` entries (1, 2 or 3) as one entry per axis of the lowered
// convolution (`axes`: 2 for 1-D and 2-D, whose 1-D H is `def`; 3 for 3-D).
std::vector<int64_t> axis_attr(const NodeCtx& c, const char* name, int64_t def, int64_t lo,
                               int dims, size_t axes) {
  std::vector<int64_t> v = attr_ints(c, name);
  if (v.empty()) return std::vector<int64_t>(axes, def);
  if (v.size() != static_cast<size_t>(dims))
    node_error(c, std::string("attribute '") + name + "' has " + std::to_string(v.size()) +
                      " entries, expected " + std::to_string(dims));
  for (int64_t e : v)
    if (e < lo || e > kMaxParam)
      node_error(c, std::string("attribute '") + name + "' holds " + std::to_string(e) +
                        ", expected " + std::to_string(lo) + ".." + std::to_string(kMaxParam));
  if (v.size() < axes) v.insert(v.begin(), def);
  return v;
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

// A strided 2-D transposed convolution as one convolution of its input and a DepthToSpace, with
// no zeros multiplied: output pixel o (shifted by the crop c = pad_begin mod stride) is
// S * q + r, and phase r of it reads input q + floor(pad_begin / S) - m through tap S * m + r, for
// the ceil(K / S) values of m that keep the tap inside the window. So each of the S_h * S_w phases
// is a convolution of the input with a ceil(K_h / S_h) x ceil(K_w / S_w) window (a tap past the
// kernel is zero), all of them one convolution to S_h * S_w * Co channels (group-major: channel
// ((g * S_h + r_h) * S_w + r_w) * Co_g + o), then DepthToSpace's regrouping (Reshape, Transpose,
// Reshape; the layout pass turns it into one transpose of the NHWC bytes) and a Slice of the
// c rows and columns before the output and any past it. U-Net's 2x2/s2 is a 1x1 convolution
// with nothing to slice; CenterNet's 4x4/s2 with padding 1 a 2x2 one, sliced by a row and a
// column. nullopt where the padding reaches past the window (the caller's general form).
std::optional<ValueId> phase_decomposition(Importer& im, const NodeCtx& c, const HostTensor& w,
                                           const Shape& xl, const std::vector<int64_t>& k,
                                           const std::vector<int64_t>& st, const std::vector<int64_t>& pb,
                                           const Shape& out_sp, int64_t groups) {
  int64_t m[2], crop[2], q[2], pad_begin[2], pad_end[2];
  for (int a = 0; a < 2; ++a) {
    if (pb[a] < 0) return std::nullopt;
    m[a] = (k[a] + st[a] - 1) / st[a];
    crop[a] = pb[a] % st[a];
    q[a] = (out_sp[a] + crop[a] + st[a] - 1) / st[a];
    pad_begin[a] = m[a] - 1 - pb[a] / st[a];
    pad_end[a] = q[a] - xl[a + 2] - pad_begin[a] + m[a] - 1;
    if (pad_begin[a] < 0 || pad_end[a] < 0 || pad_begin[a] > kMaxParam || pad_end[a] > kMaxParam)
      return std::nullopt;
  }
  const int64_t sh = st[0], sw = st[1], phases = sh * sw, ci = xl[1], ci_g = ci / groups;
  const int64_t co_g = w.dims[1], co = co_g * groups, n = xl[0];
  // Weights [groups * phases * Co_g, Ci_g, M_h, M_w]; ConvTranspose's are [Ci, Co_g, K_h, K_w].
  std::vector<float> pw(static_cast<size_t>(groups * phases * co_g * ci_g * m[0] * m[1]), 0.0f);
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t t = 0; t < phases; ++t)
      for (int64_t o = 0; o < co_g; ++o)
        for (int64_t i = 0; i < ci_g; ++i)
          for (int64_t jy = 0; jy < m[0]; ++jy)
            for (int64_t jx = 0; jx < m[1]; ++jx) {
              const int64_t ky = sh * (m[0] - 1 - jy) + t / sw, kx = sw * (m[1] - 1 - jx) + t % sw;
              if (ky >= k[0] || kx >= k[1]) continue;
              const int64_t oc = (g * phases + t) * co_g + o;
              pw[static_cast<size_t>(((oc * ci_g + i) * m[0] + jy) * m[1] + jx)] =
                  w.f[static_cast<size_t>((((g * ci_g + i) * co_g + o) * k[0] + ky) * k[1] + kx)];
            }
  std::vector<float> bias(static_cast<size_t>(co), 0.0f);
  if (im.has_input(c, 2)) {
    const HostTensor& bt = im.constant_input(c, 2, "bias");
    if (!bt.is_float() || bt.f.size() != static_cast<size_t>(co))
      node_error(c, "bias '" + im.input_name(c, 2) + "' is " + to_string(bt.dims) + ", expected FLOAT [" +
                        std::to_string(co) + "]");
    bias = bt.f;
  }
  std::vector<float> tiled(static_cast<size_t>(groups * phases * co_g));
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t t = 0; t < phases; ++t)
      for (int64_t o = 0; o < co_g; ++o)
        tiled[static_cast<size_t>((g * phases + t) * co_g + o)] = bias[static_cast<size_t>(g * co_g + o)];
  const std::string base = c.name + "/";
  const ValueId wv = im.add_constant(c.name + "/phase_weights", {groups * phases * co_g, ci_g, m[0], m[1]},
                                     std::move(pw), Layout::oihw);
  const ValueId bv = im.add_constant(c.name + "/phase_bias", {groups * phases * co_g}, std::move(tiled),
                                     Layout::any);
  Conv2d conv;
  conv.groups = to_int(c, groups, "attribute 'group'", 1, kMaxParam);
  conv.pad_top = static_cast<int>(pad_begin[0]), conv.pad_bottom = static_cast<int>(pad_end[0]);
  conv.pad_left = static_cast<int>(pad_begin[1]), conv.pad_right = static_cast<int>(pad_end[1]);
  const bool sliced = crop[0] != 0 || crop[1] != 0 || q[0] * sh != out_sp[0] || q[1] * sw != out_sp[1];
  const std::string out_name = im.output_name(c, 0);
  ValueId y = im.emit(c, conv, {im.value_input(c, 0), wv, bv}, base + "phases", base + "phases");
  if (groups == 1) {
    y = im.emit(c, Reshape{{n, sh, sw, co, q[0], q[1]}}, {y}, base + "phases_split", base + "split");
    y = im.emit(c, Transpose{{0, 3, 4, 1, 5, 2}}, {y}, base + "phases_moved", base + "depth_to_space");
  } else {
    y = im.emit(c, Reshape{{n, groups, sh, sw, co_g, q[0], q[1]}}, {y}, base + "phases_split", base + "split");
    y = im.emit(c, Transpose{{0, 1, 4, 5, 2, 6, 3}}, {y}, base + "phases_moved", base + "depth_to_space");
  }
  const Shape full = {n, co, q[0] * sh, q[1] * sw};
  y = im.emit(c, Reshape{full}, {y}, sliced ? base + "uncropped" : out_name, base + "merge");
  if (!sliced) return y;
  Slice crop_slice{{0, 0, crop[0], crop[1]}, {n, co, crop[0] + out_sp[0], crop[1] + out_sp[1]}, {1, 1, 1, 1}};
  return im.emit(c, crop_slice, {y}, out_name, base + "crop");
}

}  // namespace

void convert_conv_transpose(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 2, 3);
  const Shape xs = im.input_shape(c, 0);
  if (xs.size() < 3 || xs.size() > 5)
    node_error(c, "only 1-D, 2-D and 3-D transposed convolutions are supported: input '" +
                      im.input_name(c, 0) + "' is " + to_string(xs) +
                      ", expected 3-D NCL, 4-D NCHW or 5-D NCDHW");
  const int dims = static_cast<int>(xs.size()) - 2;
  const size_t axes = dims == 3 ? 3 : 2;  // spatial axes of the lowered convolution
  const Shape xl = dims == 1 ? Shape{xs[0], xs[1], 1, xs[2]} : xs;  // [N, C, spatial...]
  const HostTensor& w = im.constant_input(c, 1, "weights");
  if (!w.is_float() || w.dims.size() != xs.size() || w.f.empty())
    node_error(c,
               "weights '" + im.input_name(c, 1) + "' are " + to_string(w.dims) +
                   ", expected non-empty FLOAT [in channels, out channels / group, k...] of rank " +
                   std::to_string(xs.size()));
  const int64_t ci = xl[1];
  std::vector<int64_t> k(w.dims.begin() + 2, w.dims.end());
  if (dims == 1) k.insert(k.begin(), 1);
  const int64_t groups = attr_int(c, "group", 1);
  if (groups < 1 || ci % groups != 0 || w.dims[0] != ci)
    node_error(c, "weights " + to_string(w.dims) + " and group " + std::to_string(groups) +
                      " do not fit the input's " + std::to_string(ci) + " channels");
  const int64_t co_g = w.dims[1], ci_g = ci / groups, co = co_g * groups;
  const std::vector<int64_t> ks = attr_ints(c, "kernel_shape");
  if (!ks.empty() && ks != Shape(w.dims.begin() + 2, w.dims.end()))
    node_error(c, "attribute 'kernel_shape' does not match the weights " + to_string(w.dims));
  const std::vector<int64_t> st = axis_attr(c, "strides", 1, 1, dims, axes);
  const std::vector<int64_t> dl = axis_attr(c, "dilations", 1, 1, dims, axes);
  const std::vector<int64_t> op = axis_attr(c, "output_padding", 0, 0, dims, axes);
  for (size_t a = 0; a < axes; ++a)
    if (op[a] >= std::max(st[a], dl[a]))
      node_error(c, "attribute 'output_padding' must be smaller than the stride or the dilation");

  // Padding per axis, begin and end: given, or derived from output_shape or SAME_*.
  std::vector<int64_t> pb(axes, 0), pe(axes, 0);
  const std::string auto_pad = attr_string(c, "auto_pad", "NOTSET");
  const std::vector<int64_t> out_shape = attr_ints(c, "output_shape");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" &&
      auto_pad != "SAME_LOWER")
    node_error(c, "attribute 'auto_pad' is '" + auto_pad +
                      "', expected NOTSET, VALID, SAME_UPPER or SAME_LOWER");
  if (!out_shape.empty() || auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    if (!out_shape.empty() && out_shape.size() != static_cast<size_t>(dims) &&
        out_shape.size() != xs.size())
      node_error(c,
                 "attribute 'output_shape' has " + std::to_string(out_shape.size()) + " entries");
    for (size_t a = 0; a < axes; ++a) {
      int64_t out = xl[a + 2] * st[a];  // SAME: the input times the stride
      if (!out_shape.empty()) {
        const size_t from_end = axes - a;  // the trailing entries are the spatial sizes
        out = from_end > static_cast<size_t>(dims) ? 1 : out_shape[out_shape.size() - from_end];
      }
      std::tie(pb[a], pe[a]) =
          derived_pads(c, xl[a + 2], out, k[a], st[a], dl[a], op[a], auto_pad == "SAME_UPPER");
    }
  } else if (auto_pad == "NOTSET") {
    const std::vector<int64_t> p = attr_ints(c, "pads");
    if (!p.empty()) {
      if (p.size() != static_cast<size_t>(2 * dims))
        node_error(c, "attribute 'pads' has " + std::to_string(p.size()) + " entries, expected " +
                          std::to_string(2 * dims));
      for (int64_t v : p)
        if (v < 0 || v > kMaxParam) node_error(c, "attribute 'pads' holds " + std::to_string(v));
      const size_t skip = axes - static_cast<size_t>(dims);  // 1-D: H has no padding
      for (size_t a = 0; a < static_cast<size_t>(dims); ++a)
        pb[a + skip] = p[a], pe[a + skip] = p[a + static_cast<size_t>(dims)];
    }
  }

  Shape out_sp;
  for (size_t a = 0; a < axes; ++a) {
    out_sp.push_back(st[a] * (xl[a + 2] - 1) + op[a] + (k[a] - 1) * dl[a] + 1 - pb[a] - pe[a]);
    if (out_sp.back() < 1) node_error(c, "the padding leaves an output of " + to_string(out_sp));
  }

  if (dims == 2 && (st[0] > 1 || st[1] > 1) && dl[0] == 1 && dl[1] == 1) {
    if (const std::optional<ValueId> y = phase_decomposition(im, c, w, xl, k, st, pb, out_sp, groups))
      return im.define_value(c, 0, *y);
  }

  // The stride-1 convolution's weights: out channel (group, o) reads in channel (group, i) at
  // the spatially flipped tap (flipping every spatial axis reverses the row-major tap index).
  int64_t taps = 1;
  for (int64_t e : k) taps *= e;
  std::vector<float> flipped(static_cast<size_t>(co * ci_g * taps));
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t o = 0; o < co_g; ++o)
      for (int64_t i = 0; i < ci_g; ++i)
        for (int64_t t = 0; t < taps; ++t)
          flipped[static_cast<size_t>(((g * co_g + o) * ci_g + i) * taps + t)] =
              w.f[static_cast<size_t>(((g * ci_g + i) * co_g + o) * taps + (taps - 1 - t))];
  const ValueId b = conv_bias(im, c, co);

  ValueId x = im.value_input(c, 0);
  const std::string base = c.name + "/";
  const size_t rank = axes + 2;
  if (dims == 1) x = im.emit(c, Reshape{xl}, {x}, base + "input_2d", base + "input_2d");
  if (std::any_of(st.begin(), st.end(), [](int64_t s) { return s > 1; })) {
    // stride - 1 zeros after every element, along every spatial axis
    Shape split = {xl[0], ci}, merged = {xl[0], ci};
    std::vector<int64_t> pads(2 * (2 + 2 * axes), 0);
    for (size_t a = 0; a < axes; ++a) {
      split.push_back(xl[a + 2]);
      split.push_back(1);
      merged.push_back(xl[a + 2] * st[a]);
      pads[2 + 2 * axes + 3 + 2 * a] = st[a] - 1;  // the end of the unit axis after axis a
    }
    x = im.emit(c, Reshape{split}, {x}, base + "split", base + "split");
    x = im.emit(c, Pad{pads, 0.0f}, {x}, base + "zero_inserted", base + "insert_zeros");
    x = im.emit(c, Reshape{merged}, {x}, base + "upsampled", base + "merge");
  }
  // The convolution's padding on each side; the zero-inserted input ends in stride - 1 zeros
  // the transposed convolution does not have, hence the end's - (stride - 1).
  std::vector<int64_t> cb(axes), ce(axes);
  for (size_t a = 0; a < axes; ++a) {
    cb[a] = dl[a] * (k[a] - 1) - pb[a];
    ce[a] = dl[a] * (k[a] - 1) - pe[a] + op[a] - (st[a] - 1);
  }
  if (std::any_of(cb.begin(), cb.end(), [](int64_t p) { return p < 0; }) ||
      std::any_of(ce.begin(), ce.end(), [](int64_t p) { return p < 0; })) {
    // More padding than the window reaches: the first or last outputs are dropped (a crop).
    std::vector<int64_t> crop(2 * rank, 0);
    for (size_t a = 0; a < axes; ++a) {
      crop[a + 2] = std::min<int64_t>(cb[a], 0);
      crop[rank + a + 2] = std::min<int64_t>(ce[a], 0);
    }
    x = im.emit(c, Pad{crop, 0.0f}, {x}, base + "cropped", base + "crop");
  }
  for (size_t a = 0; a < axes; ++a)
    cb[a] = std::max<int64_t>(cb[a], 0), ce[a] = std::max<int64_t>(ce[a], 0);
  if (dims == 3) {
    Conv3dParams p;
    p.groups = groups;
    for (size_t a = 0; a < 3; ++a)
      p.dilation[a] = dl[a], p.pad_begin[a] = cb[a], p.pad_end[a] = ce[a];
    const Shape wd = {co, ci_g, k[0], k[1], k[2]};
    im.define_value(c, 0,
                    emit_conv3d(im, c, x, wd, std::move(flipped), b, p, im.output_name(c, 0)));
    return;
  }
  const ValueId wv = im.add_constant(c.name + "/flipped_weights", {co, ci_g, k[0], k[1]},
                                     std::move(flipped), Layout::oihw);
  Conv2d conv;
  conv.groups = to_int(c, groups, "attribute 'group'", 1, kMaxParam);
  conv.dilation_h = to_int(c, dl[0], "dilation", 1, kMaxParam);
  conv.dilation_w = to_int(c, dl[1], "dilation", 1, kMaxParam);
  conv.pad_top = to_int(c, cb[0], "padding", 0, kMaxParam);
  conv.pad_left = to_int(c, cb[1], "padding", 0, kMaxParam);
  conv.pad_bottom = to_int(c, ce[0], "padding", 0, kMaxParam);
  conv.pad_right = to_int(c, ce[1], "padding", 0, kMaxParam);
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
