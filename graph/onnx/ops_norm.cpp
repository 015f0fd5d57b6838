// ONNX -> IR for the normalizations Kiln builds from its generated kernels: InstanceNormalization,
// BatchNormalization in training mode and GroupNormalization (a LayerNorm over the spatial axes,
// over the batch and spatial axes, or over a group's channels and the spatial axes, then the
// per-channel scale and bias), MeanVarianceNormalization (a LayerNorm over any axes) and LRN (a sum
// of squares over a channel window computed as a 1x1 convolution with a band of ones, then
// elementwise steps).
#include <algorithm>
#include <numeric>

#include "graph/onnx/importer.h"
#include "graph/shape_inference.h"

namespace kiln::graph::onnx {
namespace {

// Input 0 as [N, C, D1, ...], rank >= 3; Error otherwise.
Shape channel_input_shape(Importer& im, const NodeCtx& c) {
  const Shape xs = im.input_shape(c, 0);
  if (xs.size() < 3)
    node_error(c, "input '" + im.input_name(c, 0) + "' is " + to_string(xs) +
                      ", expected [N, C, D1, ...] (rank 3 or more)");
  return xs;
}

// A constant input (`role`) of `count` values, one per channel or one per group of channels
// (each repeated over its channels), as a [C, 1, ..., 1] graph constant that broadcasts over
// an input of rank `rank` along axis 1.
ValueId channel_constant(Importer& im, const NodeCtx& c, int i, const std::string& role,
                         int64_t count, int64_t channels, size_t rank) {
  const HostTensor& h = im.constant_input(c, i, role);
  if (!h.is_float() || h.dims != Shape{count})
    node_error(c, role + " '" + im.input_name(c, i) + "' is " + dtype_name(h.dtype) + " " +
                      to_string(h.dims) + ", expected FLOAT [" + std::to_string(count) + "]");
  std::vector<float> per_channel(static_cast<size_t>(channels));
  for (int64_t k = 0; k < channels; ++k) per_channel[k] = h.f[k / (channels / count)];
  Shape dims(rank - 1, 1);
  dims[0] = channels;
  return im.add_constant(c.name + "/" + role, dims, std::move(per_channel),
                         logical_layout(dims.size()));
}

// LayerNorm of `x` (shaped `xs`) over its axes from `axis` on, with a unit scale (one value).
ValueId normalize_from(Importer& im, const NodeCtx& c, ValueId x, int axis, float epsilon) {
  const ValueId one = im.add_constant(c.name + "/unit_scale", {1}, {1.0f}, Layout::any);
  return im.emit(c, LayerNorm{axis, epsilon}, {x, one}, c.name + "/normalized",
                 c.name + "/normalized");
}

// Output 0 = y * scale + bias (broadcasting Mul and Add, which fusion merges into one kernel).
void scale_and_shift(Importer& im, const NodeCtx& c, ValueId y, ValueId scale, ValueId bias) {
  const ValueId scaled = im.emit(c, Binary{BinaryOp::mul}, {y, scale}, c.name + "/scaled",
                                 c.name + "/scale");
  im.define_value(c, 0, im.emit(c, Binary{BinaryOp::add}, {scaled, bias}, im.output_name(c, 0),
                                c.name + "/shift"));
}

ValueId scalar_constant(Importer& im, const NodeCtx& c, const std::string& role, float v) {
  return im.add_constant(c.name + "/" + role, {1}, {v}, Layout::any);
}

}  // namespace

// y = scale[c] * (x - mean) / sqrt(var + epsilon) + B[c], the statistics per (n, c) over the
// spatial axes: LayerNorm from axis 2 with a unit scale, then a broadcasting Mul and Add, which
// fusion merges into one elementwise kernel after the normalization's.
void convert_instance_norm(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 3, 3);
  const Shape xs = channel_input_shape(im, c);
  const ValueId scale = channel_constant(im, c, 1, "scale", xs[1], xs[1], xs.size());
  const ValueId bias = channel_constant(im, c, 2, "B", xs[1], xs[1], xs.size());
  const ValueId y = normalize_from(im, c, im.value_input(c, 0), 2, attr_float(c, "epsilon", 1e-5f));
  scale_and_shift(im, c, y, scale, bias);
}

// BatchNormalization with training_mode=1, as PyTorch exports F.batch_norm(training=True)
// (normalizer-free networks standardize their weights so): the mean and variance of each
// channel are the input's own, over the batch and the other axes. Inputs 3 and 4, the running
// statistics, only feed outputs 1 and 2 (their update), which Kiln does not compute. Channels
// first (a Transpose, unless the batch is 1), a LayerNorm over the rest, channels back.
void convert_batch_norm_training(Importer& im, const NodeCtx& c) {
  const Shape xs = im.input_shape(c, 0);
  if (xs.size() < 2)
    node_error(c, "input '" + im.input_name(c, 0) + "' is " + to_string(xs) +
                      ", expected [N, C, ...] (rank 2 or more)");
  const ValueId scale = channel_constant(im, c, 1, "scale", xs[1], xs[1], xs.size());
  const ValueId bias = channel_constant(im, c, 2, "B", xs[1], xs[1], xs.size());
  const float epsilon = attr_float(c, "epsilon", 1e-5f);
  const ValueId x = im.value_input(c, 0);
  if (xs[0] == 1 && xs.size() >= 3)
    return scale_and_shift(im, c, normalize_from(im, c, x, 2, epsilon), scale, bias);
  std::vector<int> perm(xs.size());
  std::iota(perm.begin(), perm.end(), 0);
  std::swap(perm[0], perm[1]);
  const ValueId t =
      im.emit(c, Transpose{perm}, {x}, c.name + "/channels_first", c.name + "/channels_first");
  const ValueId y = normalize_from(im, c, t, 1, epsilon);
  scale_and_shift(
      im, c, im.emit(c, Transpose{perm}, {y}, c.name + "/channels_back", c.name + "/channels_back"),
      scale, bias);
}

// GroupNormalization: the statistics per (n, group of C / G channels) over the group's channels
// and the spatial axes; x viewed as [N, G, C / G * D1 * ...] (a Reshape) is a LayerNorm of its
// last axis (one group: x itself from axis 1). Scale and bias hold one value per group at
// opset 18, one per channel from 21.
void convert_group_norm(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 3, 3);
  const Shape xs = channel_input_shape(im, c);
  if (!find_attr(c, "num_groups")) node_error(c, "attribute 'num_groups' is missing");
  const int64_t groups = attr_int(c, "num_groups", 1);
  if (groups <= 0 || xs[1] % groups != 0)
    node_error(c, "attribute 'num_groups' is " + std::to_string(groups) + ", which does not divide the " +
                      std::to_string(xs[1]) + " channels");
  if (attr_int(c, "stash_type", 1) != 1)
    node_error(c, "attribute 'stash_type' is " + std::to_string(attr_int(c, "stash_type", 1)) +
                      "; Kiln computes the statistics in float32 (stash_type 1)");
  const int64_t params = c.opset < 21 ? groups : xs[1];
  const ValueId scale = channel_constant(im, c, 1, "scale", params, xs[1], xs.size());
  const ValueId bias = channel_constant(im, c, 2, "bias", params, xs[1], xs.size());
  const float epsilon = attr_float(c, "epsilon", 1e-5f);
  if (groups == 1)  // every axis but the batch: no view needed (and no layout matters)
    return scale_and_shift(im, c, normalize_from(im, c, im.value_input(c, 0), 1, epsilon), scale,
                           bias);
  const Shape rows = {xs[0], groups, num_elements(xs) / (xs[0] * groups)};
  const ValueId grouped = im.emit(c, Reshape{rows}, {im.value_input(c, 0)}, c.name + "/grouped",
                                  c.name + "/grouped");
  const ValueId y = normalize_from(im, c, grouped, 2, epsilon);
  const ValueId back = im.emit(c, Reshape{xs}, {y}, c.name + "/ungrouped", c.name + "/ungrouped");
  scale_and_shift(im, c, back, scale, bias);
}

// MeanVarianceNormalization (opsets 9 and 13): y = (x - mean) / (sqrt(var) + 1e-9), the
// statistics over `axes` (default [0, 2, 3]: per channel of an NCHW batch). The reduced axes are
// moved last (a Transpose, unless only axes of size 1 move) and the tensor viewed as [kept,
// reduced] (a Reshape), a LayerNorm of the last axis with epsilon 1e-18: (x - mean) /
// sqrt(var + 1e-18), which differs from ONNX's divisor by under 1e-9 absolute (and is 0 where
// the variance is, as ONNX's is); then back.
void convert_mean_variance_norm(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  const Shape xs = im.input_shape(c, 0);
  const size_t rank = xs.size();
  const std::vector<int64_t> listed =
      find_attr(c, "axes") ? attr_ints(c, "axes") : std::vector<int64_t>{0, 2, 3};
  if (listed.empty()) node_error(c, "attribute 'axes' is empty");
  std::vector<bool> reduced(rank, false);
  for (int64_t a : listed) {
    const int axis = normalize_axis(c, a, rank, "an axes entry");
    if (reduced[axis]) node_error(c, "axes lists axis " + std::to_string(axis) + " twice");
    reduced[axis] = true;
  }
  std::vector<int> perm;  // the kept axes, then the reduced ones, each in order
  for (int pass = 0; pass < 2; ++pass)
    for (size_t k = 0; k < rank; ++k)
      if (reduced[k] == (pass == 1)) perm.push_back(static_cast<int>(k));
  int64_t kept = 1, normalized = 1;
  Shape moved;
  for (int k : perm) {
    moved.push_back(xs[k]);
    (reduced[k] ? normalized : kept) *= xs[k];
  }
  int last = -1;  // whether the axes longer than 1 keep their order: then it is only a view
  bool in_order = true;
  for (int k : perm)
    if (xs[k] > 1) in_order = in_order && k > last, last = k;
  ValueId x = im.value_input(c, 0);
  if (!in_order)
    x = im.emit(c, Transpose{perm}, {x}, c.name + "/reduced_last", c.name + "/reduced_last");
  x = im.emit(c, Reshape{{kept, normalized}}, {x}, c.name + "/rows", c.name + "/rows");
  ValueId y = normalize_from(im, c, x, 1, 1e-18f);
  if (in_order) {
    im.define_value(c, 0, im.emit(c, Reshape{xs}, {y}, im.output_name(c, 0), c.name + "/back"));
    return;
  }
  std::vector<int> inverse(rank);
  for (size_t k = 0; k < rank; ++k) inverse[perm[k]] = static_cast<int>(k);
  y = im.emit(c, Reshape{moved}, {y}, c.name + "/moved", c.name + "/moved");
  im.define_value(c, 0,
                  im.emit(c, Transpose{inverse}, {y}, im.output_name(c, 0), c.name + "/back"));
}

// y = x / (bias + alpha / size * square_sum)^beta, square_sum over channels
// [c - floor((size - 1) / 2), c + ceil((size - 1) / 2)] (those that exist). The window sum is a
// 1x1 convolution of x * x with a constant band of ones (C x C weights, C multiply-adds per
// output where the window needs `size`; the convolution kernels make up for it), and the
// affine and pow steps after it fuse into that kernel's epilogue. Inputs other than 4-D are
// viewed as [N, C, 1, D1 * ...] (a Reshape each side).
void convert_lrn(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  const Shape xs = channel_input_shape(im, c);
  if (!find_attr(c, "size")) node_error(c, "attribute 'size' is missing");
  const int64_t size = to_int(c, attr_int(c, "size", 1), "attribute 'size'", 1, 1 << 16);
  const float alpha = attr_float(c, "alpha", 1e-4f), beta = attr_float(c, "beta", 0.75f);
  const float bias = attr_float(c, "bias", 1.0f);
  const int64_t channels = xs[1];
  if (channels > 4096)
    node_error(c, "input '" + im.input_name(c, 0) + "' has " + std::to_string(channels) +
                      " channels; Kiln's LRN (a C x C convolution) takes at most 4096");
  const Shape image = xs.size() == 4 ? xs : Shape{xs[0], channels, 1, num_elements(xs) / (xs[0] * channels)};
  ValueId x = im.value_input(c, 0);
  if (xs.size() != 4) x = im.emit(c, Reshape{image}, {x}, c.name + "/image", c.name + "/image");
  const ValueId square = im.emit(c, Binary{BinaryOp::mul}, {x, x}, c.name + "/square", c.name + "/square");
  std::vector<float> band(static_cast<size_t>(channels * channels), 0.0f);
  for (int64_t o = 0; o < channels; ++o)
    for (int64_t i = std::max<int64_t>(0, o - (size - 1) / 2); i <= std::min(channels - 1, o + size / 2); ++i)
      band[o * channels + i] = 1.0f;
  const ValueId weights = im.add_constant(c.name + "/window", {channels, channels, 1, 1}, std::move(band), Layout::oihw);
  const ValueId zero = im.add_constant(c.name + "/zero_bias", {channels}, std::vector<float>(channels, 0.0f), Layout::any);
  const ValueId sum = im.emit(c, Conv2d{}, {square, weights, zero}, c.name + "/window_sum", c.name + "/window_sum");
  const ValueId scaled = im.emit(c, Binary{BinaryOp::mul}, {sum, scalar_constant(im, c, "alpha_over_size", alpha / size)},
                                 c.name + "/scaled", c.name + "/scaled");
  const ValueId base = im.emit(c, Binary{BinaryOp::add}, {scaled, scalar_constant(im, c, "bias", bias)},
                               c.name + "/base", c.name + "/base");
  const ValueId factor = im.emit(c, ElementwiseChain{{ChainStep{ChainStepKind::pow, -beta, 0.0f}}},
                                 {base}, c.name + "/factor", c.name + "/factor");
  if (xs.size() == 4) {
    im.define_value(c, 0, im.emit(c, Binary{BinaryOp::mul}, {x, factor}, im.output_name(c, 0)));
    return;
  }
  const ValueId y = im.emit(c, Binary{BinaryOp::mul}, {x, factor}, c.name + "/image_out", c.name + "/image_out");
  im.define_value(c, 0, im.emit(c, Reshape{xs}, {y}, im.output_name(c, 0), c.name + "/reshape_back"));
}

}  // namespace kiln::graph::onnx
