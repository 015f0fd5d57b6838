// ONNX -> IR for the network's compute ops: convolution, normalization, activations,
// elementwise arithmetic, pooling, Gemm/MatMul, the Softmax family and LayerNormalization.
#include <algorithm>
#include <cmath>
#include <limits>

#include "graph/onnx/importer.h"
#include "graph/shape_inference.h"

namespace kiln::graph::onnx {
namespace {

// Bound on kernel sizes, strides, dilations and pads: far beyond any real network, small
// enough that the IR's int arithmetic on them cannot overflow.
constexpr int64_t kMaxWindowParam = int64_t{1} << 20;

// The 2-D window parameters shared by Conv and the pools. A 1-D op (input [N, C, L]) runs as
// the 2-D one on [N, C, 1, L]: its attributes give the W entries, and H takes 1 and no padding.
struct Window {
  int kh = 1, kw = 1, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  int pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
};

// Attribute `name` with one entry per spatial dim (`dims`: 1 or 2) as (H, W); H is `def` in 1-D.
std::pair<int, int> pair_attr(const NodeCtx& c, const char* name, int def, int64_t lo, int dims) {
  const std::vector<int64_t> v = attr_ints(c, name);
  if (v.empty()) return {def, def};
  if (v.size() != static_cast<size_t>(dims))
    node_error(c, std::string("attribute '") + name + "' has " + std::to_string(v.size()) +
                      " entries, expected " + std::to_string(dims) + " (" + std::to_string(dims) +
                      "-D)");
  const std::string what = std::string("attribute '") + name + "'";
  const int w = to_int(c, v.back(), what + "[" + std::to_string(dims - 1) + "]", lo, kMaxWindowParam);
  return {dims == 1 ? def : to_int(c, v[0], what + "[0]", lo, kMaxWindowParam), w};
}

// ONNX SAME padding: the output is ceil(in / stride); UPPER puts the odd pixel at the end.
std::pair<int, int> same_pads(int64_t in, int k, int stride, int dil, bool upper) {
  const int64_t out = (in + stride - 1) / stride;
  const int64_t total = std::max<int64_t>(0, (out - 1) * stride + int64_t{dil} * (k - 1) + 1 - in);
  const int small = static_cast<int>(total / 2), big = static_cast<int>(total - total / 2);
  return upper ? std::make_pair(small, big) : std::make_pair(big, small);
}

// `x` is the (4-D) image shape; `dims` the op's spatial rank (1 or 2).
Window window_attrs(const NodeCtx& c, int64_t kh, int64_t kw, const Shape& x, int dims) {
  Window w;
  w.kh = to_int(c, kh, "kernel height", 1, kMaxWindowParam);
  w.kw = to_int(c, kw, "kernel width", 1, kMaxWindowParam);
  std::tie(w.stride_h, w.stride_w) = pair_attr(c, "strides", 1, 1, dims);
  std::tie(w.dil_h, w.dil_w) = pair_attr(c, "dilations", 1, 1, dims);
  const std::string auto_pad = attr_string(c, "auto_pad", "NOTSET");
  if (auto_pad == "NOTSET") {
    const std::vector<int64_t> p = attr_ints(c, "pads");
    if (p.empty()) return w;
    if (p.size() != static_cast<size_t>(2 * dims))
      node_error(c, "attribute 'pads' has " + std::to_string(p.size()) + " entries, expected " +
                        std::to_string(2 * dims) + " (" + std::to_string(dims) + "-D)");
    int* dst2[4] = {&w.pad_top, &w.pad_left, &w.pad_bottom, &w.pad_right};
    int* dst1[2] = {&w.pad_left, &w.pad_right};
    for (size_t k = 0; k < p.size(); ++k)
      *(dims == 1 ? dst1 : dst2)[k] =
          to_int(c, p[k], "attribute 'pads'[" + std::to_string(k) + "]", 0, kMaxWindowParam);
  } else if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
    const bool upper = auto_pad == "SAME_UPPER";
    std::tie(w.pad_top, w.pad_bottom) = same_pads(x[2], w.kh, w.stride_h, w.dil_h, upper);
    std::tie(w.pad_left, w.pad_right) = same_pads(x[3], w.kw, w.stride_w, w.dil_w, upper);
  } else if (auto_pad != "VALID") {
    node_error(c, "attribute 'auto_pad' is '" + auto_pad +
                      "', expected NOTSET, VALID, SAME_UPPER or SAME_LOWER");
  }
  return w;
}

// Input 0 of a convolution or pooling as an image: [N, C, H, W], or a 1-D [N, C, L] viewed as
// [N, C, 1, L] (a Reshape), which runs the 2-D kernels with H = 1.
struct ImageInput {
  Shape shape;  // 4-D
  int dims;     // the op's spatial rank: 1 or 2
};

ImageInput image_input(Importer& im, const NodeCtx& c, const char* what) {
  const Shape xs = im.input_shape(c, 0);
  if (xs.size() == 3) return {{xs[0], xs[1], 1, xs[2]}, 1};
  if (xs.size() != 4)
    node_error(c, std::string("only 1-D, 2-D and 3-D ") + what + " are supported: input '" +
                      im.input_name(c, 0) + "' is " + to_string(xs) +
                      ", expected 3-D NCL, 4-D NCHW or 5-D NCDHW");
  return {xs, 2};
}

// The image input as a graph value of in.shape.
ValueId image_value(Importer& im, const NodeCtx& c, const ImageInput& in) {
  const ValueId x = im.value_input(c, 0);
  if (in.dims == 2) return x;
  return im.emit(c, Reshape{in.shape}, {x}, c.name + "/input_2d", c.name + "/input_2d");
}

// Emits `op` on the image input and defines output 0, reshaped back to 1-D for a 1-D op.
void emit_image_op(Importer& im, const NodeCtx& c, const ImageInput& in, Op op,
                   std::vector<ValueId> inputs) {
  if (in.dims == 2) {
    im.define_value(c, 0, im.emit(c, std::move(op), std::move(inputs), im.output_name(c, 0)));
    return;
  }
  const ValueId y = im.emit(c, std::move(op), std::move(inputs), c.name + "/output_2d");
  Shape ys = im.graph().value(y).shape;
  ys.erase(ys.begin() + 2);  // H, which is 1
  im.define_value(c, 0, im.emit(c, Reshape{ys}, {y}, im.output_name(c, 0), c.name + "/output_1d"));
}

float scalar_input(Importer& im, const NodeCtx& c, int i, const std::string& role) {
  const HostTensor& h = im.constant_input(c, i, role);
  if (h.size() != 1)
    node_error(
        c, role + " '" + im.input_name(c, i) + "' must hold one value, got " + to_string(h.dims));
  return h.is_float() ? h.f[0] : static_cast<float>(h.i[0]);
}

void emit_single(Importer& im, const NodeCtx& c, Op op, std::vector<ValueId> inputs) {
  im.define_value(c, 0, im.emit(c, std::move(op), std::move(inputs), im.output_name(c, 0)));
}

}  // namespace

// Opset < 7 Add/Sub/Mul/Div (and Pow, the comparisons and logic ops) broadcast only with broadcast=1, aligning B to A at `axis`. That
// equals numpy broadcasting when B aligns with A's trailing dims, the only case accepted.
void check_legacy_broadcast(Importer& im, const NodeCtx& c) {
  const Shape a = im.input_shape(c, 0), b = im.input_shape(c, 1);
  if (attr_int(c, "broadcast", 0) == 0) {
    if (a != b)
      node_error(c, "shapes " + to_string(a) + " and " + to_string(b) +
                        " differ and attribute 'broadcast' is 0 (opset < 7)");
    return;
  }
  if (b.size() > a.size())
    node_error(c, "B " + to_string(b) + " has a higher rank than A " + to_string(a) +
                      " (opset < 7 broadcast)");
  if (find_attr(c, "axis") &&
      normalize_axis(c, attr_int(c, "axis", 0), a.size(), "attribute 'axis'") !=
          static_cast<int>(a.size() - b.size()))
    node_error(c,
               "attribute 'axis' with broadcast=1 aligns B to non-trailing dims of A; only "
               "trailing alignment (numpy broadcasting) is supported");
}

ValueId conv_bias(Importer& im, const NodeCtx& c, int64_t out_channels) {
  if (im.has_input(c, 2)) {
    im.constant_input(c, 2, "bias");
    return im.constant_value(c, 2, Layout::any);
  }
  return im.add_constant(c.name + "/zero_bias", {out_channels},
                         std::vector<float>(static_cast<size_t>(out_channels), 0.0f), Layout::any);
}

void convert_conv(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 2, 3);
  if (im.input_shape(c, 0).size() == 5) return convert_conv_3d(im, c);
  const ImageInput in = image_input(im, c, "convolutions");
  const HostTensor& w = im.constant_input(c, 1, "weights");
  if (w.dims.size() != static_cast<size_t>(in.dims + 2))
    node_error(c, "weights '" + im.input_name(c, 1) + "' are " + to_string(w.dims) +
                      (in.dims == 1 ? ", expected 3-D [out channels, in channels / group, k]"
                                    : ", expected 4-D [out channels, in channels / group, kH, kW]"));
  const Shape spatial(w.dims.begin() + 2, w.dims.end());
  const std::vector<int64_t> ks = attr_ints(c, "kernel_shape");
  if (!ks.empty() && ks != spatial)
    node_error(c, "attribute 'kernel_shape' does not match the weights' spatial dims " +
                      to_string(w.dims));
  const Window win = window_attrs(c, in.dims == 1 ? 1 : w.dims[2], w.dims.back(), in.shape, in.dims);
  Conv2d a;
  a.groups = to_int(c, attr_int(c, "group", 1), "attribute 'group'", 1, kMaxWindowParam);
  a.stride_h = win.stride_h, a.stride_w = win.stride_w;
  a.dilation_h = win.dil_h, a.dilation_w = win.dil_w;
  a.pad_top = win.pad_top, a.pad_left = win.pad_left;
  a.pad_bottom = win.pad_bottom, a.pad_right = win.pad_right;
  const ValueId x = image_value(im, c, in);
  ValueId wv;
  if (in.dims == 2) {
    wv = im.constant_value(c, 1, Layout::oihw);  // rejects empty weights first
  } else {
    if (!w.is_float() || w.f.empty())
      node_error(c, "weights '" + im.input_name(c, 1) + "' must be non-empty FLOAT");
    wv = im.add_constant(c.name + "/weight_2d", {w.dims[0], w.dims[1], 1, w.dims[2]}, w.f,
                         Layout::oihw);
  }
  const ValueId b = conv_bias(im, c, w.dims[0]);
  emit_image_op(im, c, in, a, {x, wv, b});
}

void convert_batch_norm(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 5, 5);
  if (c.opset < 7 && attr_int(c, "is_test", 0) == 0)
    node_error(c, "training mode (attribute 'is_test'=0) is not supported; Kiln runs inference");
  if (c.opset < 9 && attr_int(c, "spatial", 1) != 1)
    node_error(c, "attribute 'spatial'=0 (per-activation statistics) is not supported");
  if (attr_int(c, "training_mode", 0) != 0) return convert_batch_norm_training(im, c);
  // Running mean and variance (and saved statistics before opset 14) exist only in training.
  int outputs = 0;
  for (int k = 0; k < im.num_outputs(c); ++k) outputs += !im.output_name(c, k).empty();
  if (outputs > 1)
    node_error(c, "declares " + std::to_string(outputs) +
                      " outputs (training statistics); only inference BatchNormalization (one "
                      "output) is supported");
  std::vector<ValueId> in{im.value_input(c, 0)};
  const char* roles[] = {"scale", "bias", "mean", "variance"};
  for (int i = 1; i < 5; ++i) {
    im.constant_input(c, i, roles[i - 1]);
    in.push_back(im.constant_value(c, i, Layout::any));
  }
  emit_single(im, c, BatchNorm{attr_float(c, "epsilon", 1e-5f)}, std::move(in));
}

void convert_unary(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  Op op = Relu{};
  if (c.op() == "LeakyRelu")
    op = LeakyRelu{attr_float(c, "alpha", 0.01f)};
  else if (c.op() == "Sigmoid")
    op = Sigmoid{};
  else if (c.op() == "HardSigmoid")
    op = HardSigmoid{attr_float(c, "alpha", 0.2f), attr_float(c, "beta", 0.5f)};
  else if (c.op() == "HardSwish")
    op = HardSwish{};
  emit_single(im, c, op, {im.value_input(c, 0)});
}

ChainStepKind unary_step_kind(const NodeCtx& c) {
  using K = ChainStepKind;
  static const std::vector<std::pair<std::string, K>> kinds = {
      {"Tanh", K::tanh},         {"Erf", K::erf},
      {"Exp", K::exp},           {"Log", K::log},
      {"Sqrt", K::sqrt},         {"Abs", K::abs},
      {"Neg", K::neg},           {"Reciprocal", K::reciprocal},
      {"Softplus", K::softplus}, {"Softsign", K::softsign},
      {"Elu", K::elu},           {"Selu", K::selu},
      {"Celu", K::celu},         {"ThresholdedRelu", K::thresholded_relu},
      {"Mish", K::mish},         {"Floor", K::floor},
      {"Ceil", K::ceil},         {"Round", K::round},
      {"Sign", K::sign},         {"Shrink", K::shrink},
      {"Sin", K::sin},           {"Cos", K::cos},
      {"Tan", K::tan},           {"Sinh", K::sinh},
      {"Cosh", K::cosh},         {"Asin", K::asin},
      {"Acos", K::acos},         {"Atan", K::atan},
      {"Asinh", K::asinh},       {"Acosh", K::acosh},
      {"Atanh", K::atanh}};
  for (const auto& [name, kind] : kinds)
    if (c.op() == name) return kind;
  KILN_CHECK(false, "convert_chain_step has no step for " + c.op());
  return K::clamp;
}

// Unary math and activation ops without an op of their own in the IR: each is a chain of one
// step, which fusion merges with its neighbours and codegen generates.
void convert_chain_step(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  using K = ChainStepKind;
  ChainStep step;
  step.kind = unary_step_kind(c);
  // Neg, Abs and Sign of an integer tensor known at import (shape arithmetic, e.g.
  // LayerNormalization's function body negating an axis): folded exactly.
  const HostTensor* h = im.host_input(c, 0);
  if (h && !h->is_float() && (step.kind == K::neg || step.kind == K::abs || step.kind == K::sign)) {
    HostTensor r = *h;
    for (int64_t& v : r.i) {
      if (step.kind == K::sign) {
        v = (v > 0) - (v < 0);
        continue;
      }
      if (v == std::numeric_limits<int64_t>::min()) node_error(c, "integer overflow");
      v = step.kind == K::neg ? -v : std::abs(v);
    }
    return im.define_host(c, 0, std::move(r));
  }
  if (step.kind == K::elu || step.kind == K::celu || step.kind == K::thresholded_relu)
    step.a = attr_float(c, "alpha", 1.0f);
  if (step.kind == K::selu) {
    step.a = attr_float(c, "alpha", 1.67326319217681884765625f);
    step.b = attr_float(c, "gamma", 1.05070102214813232421875f);
  }
  if (step.kind == K::shrink) {
    step.a = attr_float(c, "lambd", 0.5f);
    step.b = attr_float(c, "bias", 0.0f);
  }
  if (step.kind == K::celu && step.a == 0.0f) node_error(c, "Celu's alpha must not be 0");
  emit_single(im, c, ElementwiseChain{{step}}, {im.value_input(c, 0)});
}

// PRelu: max(x, 0) + slope * min(x, 0), slope broadcast to x (a constant or a tensor): exact,
// since one of the two terms is zero. Elementwise nodes that fusion merges into one kernel.
// Before opset 7 the slope holds one value or one per channel (axis 1), not numpy broadcasting.
void convert_prelu(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 2, 2);
  const float inf = std::numeric_limits<float>::infinity();
  const ValueId x = im.value_input(c, 0);
  ValueId slope = im.value_input(c, 1);
  const Shape xs = im.input_shape(c, 0), ss = im.input_shape(c, 1);
  if (c.opset < 7 && !(ss == Shape{1})) {
    if (ss.size() != 1 || xs.size() < 2 || ss[0] != xs[1])
      node_error(c, "slope is " + to_string(ss) + "; before opset 7 it holds one value or one per channel");
    Shape per_channel(xs.size() - 1, 1);
    per_channel[0] = ss[0];
    slope = im.emit(c, Reshape{per_channel}, {slope}, c.name + "/slope_per_channel",
                    c.name + "/slope_per_channel");
  }
  const ValueId pos = im.emit(c, Relu{}, {x}, c.name + "/positive", c.name + "/positive");
  const ValueId neg = im.emit(c, Clip{-inf, 0.0f}, {x}, c.name + "/negative", c.name + "/negative");
  const ValueId sloped = im.emit(c, Binary{BinaryOp::mul}, {neg, slope},
                                 c.name + "/sloped", c.name + "/sloped");
  emit_single(im, c, Binary{BinaryOp::add}, {pos, sloped});
}

// Gelu (opset 20): approximate "none" is the exact (Erf) form, "tanh" the tanh approximation;
// both are chain steps, as the forms exporters decompose (pass fuse_gelu) become.
void convert_gelu(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  const std::string approximate = attr_string(c, "approximate", "none");
  if (approximate != "none" && approximate != "tanh")
    node_error(c, "attribute 'approximate' is '" + approximate + "', expected none or tanh");
  const ChainStepKind kind = approximate == "none" ? ChainStepKind::gelu : ChainStepKind::gelu_tanh;
  emit_single(im, c, ElementwiseChain{{ChainStep{kind, 0.0f, 0.0f}}}, {im.value_input(c, 0)});
}

// Swish (opset 24): x * sigmoid(alpha * x). With alpha 1 (torch's SiLU) the silu chain step,
// as the decomposed x * Sigmoid(x) exporters write becomes; else alpha * x, a Sigmoid node and
// the product with x, elementwise nodes that fusion merges into one kernel.
void convert_swish(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  const float alpha = attr_float(c, "alpha", 1.0f);
  if (!std::isfinite(alpha)) node_error(c, "attribute 'alpha' must be finite");
  const ValueId x = im.value_input(c, 0);
  if (alpha == 1.0f)
    return emit_single(im, c, ElementwiseChain{{ChainStep{ChainStepKind::silu, 0.0f, 0.0f}}}, {x});
  const ValueId a = im.add_constant(c.name + "/alpha", Shape{1}, {alpha}, Layout::any);
  const ValueId ax =
      im.emit(c, Binary{BinaryOp::mul}, {x, a}, c.name + "/scaled", c.name + "/scale");
  const ValueId gate = im.emit(c, Sigmoid{}, {ax}, c.name + "/gate", c.name + "/gate");
  emit_single(im, c, Binary{BinaryOp::mul}, {x, gate});
}

void convert_clip(Importer& im, const NodeCtx& c) {
  const float inf = std::numeric_limits<float>::infinity();
  Clip clip{-inf, inf};
  if (c.opset < 11) {
    expect_inputs(c, 1, 1);
    clip.min = attr_float(c, "min", -inf);
    clip.max = attr_float(c, "max", inf);
  } else {
    expect_inputs(c, 1, 3);
    if (im.has_input(c, 1)) clip.min = scalar_input(im, c, 1, "min");
    if (im.has_input(c, 2)) clip.max = scalar_input(im, c, 2, "max");
  }
  if (std::isnan(clip.min) || std::isnan(clip.max)) node_error(c, "min and max must not be NaN");
  emit_single(im, c, clip, {im.value_input(c, 0)});
}

void convert_binary(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 2, 2);
  const BinaryOp op = c.op() == "Add"   ? BinaryOp::add
                      : c.op() == "Sub" ? BinaryOp::sub
                      : c.op() == "Mul" ? BinaryOp::mul
                                        : BinaryOp::div;
  if (c.opset < 7) check_legacy_broadcast(im, c);
  const HostTensor* a = im.host_input(c, 0);
  const HostTensor* b = im.host_input(c, 1);
  bool ok = false;
  if (a && b && (!a->is_float() || fits_fold(broadcast_shapes(a->dims, b->dims, &ok)))) {
    HostTensor r = host_binary(c, op, *a, *b);
    if (!r.is_float()) return im.define_host(c, 0, std::move(r));
    // Float arithmetic is the network's: the value is known now for attribute-like inputs
    // (a Clip bound, a Pad value), but the graph computes it if it reads the result.
    return im.define_host(c, 0, std::move(r), [&im, c, op] {
      return im.emit(c, Binary{op}, {im.value_input(c, 0), im.value_input(c, 1)},
                     im.output_name(c, 0));
    });
  }
  emit_single(im, c, Binary{op}, {im.value_input(c, 0), im.value_input(c, 1)});
}

void convert_pool(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  // MaxPool's Indices output may be declared (PyTorch's dynamo exporter does) but not read.
  const bool is_max = c.op() == "MaxPool";
  if (attr_int(c, "storage_order", 0) != 0)
    node_error(c, "attribute 'storage_order'=1 (column-major indices) is not supported");
  if (im.input_shape(c, 0).size() == 5) return convert_pool_3d(im, c);
  const ImageInput in = image_input(im, c, "pooling");
  const std::vector<int64_t> ks = attr_ints(c, "kernel_shape");
  if (ks.size() != static_cast<size_t>(in.dims))
    node_error(c, "attribute 'kernel_shape' has " + std::to_string(ks.size()) + " entries, expected " +
                      std::to_string(in.dims) + " (" + std::to_string(in.dims) + "-D pooling)");
  const Window w = window_attrs(c, in.dims == 1 ? 1 : ks[0], ks.back(), in.shape, in.dims);
  Pool2d p;
  p.kind = is_max ? PoolKind::max : PoolKind::avg;
  p.kernel_h = w.kh, p.kernel_w = w.kw;
  p.stride_h = w.stride_h, p.stride_w = w.stride_w;
  p.dilation_h = w.dil_h, p.dilation_w = w.dil_w;
  p.pad_top = w.pad_top, p.pad_left = w.pad_left;
  p.pad_bottom = w.pad_bottom, p.pad_right = w.pad_right;
  p.ceil_mode = attr_int(c, "ceil_mode", 0) != 0;
  p.count_include_pad = !is_max && attr_int(c, "count_include_pad", 0) != 0;
  emit_image_op(im, c, in, p, {image_value(im, c, in)});
}

void convert_global_pool(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  if (im.input_shape(c, 0).size() == 5) return convert_global_pool_3d(im, c);
  const ImageInput in = image_input(im, c, "global pooling");
  const PoolKind kind = c.op() == "GlobalMaxPool" ? PoolKind::max : PoolKind::avg;
  emit_image_op(im, c, in, GlobalPool{kind}, {image_value(im, c, in)});
}

void convert_gemm(Importer& im, const NodeCtx& c) {
  expect_inputs(c, c.opset < 11 ? 3 : 2, 3);
  const Gemm g{attr_int(c, "transA", 0) != 0, attr_int(c, "transB", 0) != 0,
               attr_float(c, "alpha", 1.0f), attr_float(c, "beta", 1.0f)};
  // Before opset 7, C broadcasts only with broadcast=1; without it C must already be [M, N].
  if (c.opset < 7 && attr_int(c, "broadcast", 0) == 0) {
    const Shape a = im.input_shape(c, 0), b = im.input_shape(c, 1), cs = im.input_shape(c, 2);
    if (a.size() != 2 || b.size() != 2 || cs != Shape{a[g.trans_a ? 1 : 0], b[g.trans_b ? 0 : 1]})
      node_error(c, "C " + to_string(cs) + " must be [M, N] when attribute 'broadcast' is 0");
  }
  std::vector<ValueId> in{im.value_input(c, 0), im.value_input(c, 1)};
  if (im.has_input(c, 2)) in.push_back(im.value_input(c, 2));
  emit_single(im, c, g, std::move(in));
}

void convert_matmul(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 2, 2);
  emit_single(im, c, MatMul{}, {im.value_input(c, 0), im.value_input(c, 1)});
}

// Softmax, LogSoftmax and Hardmax.
void convert_softmax(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  const size_t rank = im.input_shape(c, 0).size();
  Softmax s;
  s.kind = c.op() == "LogSoftmax" ? SoftmaxKind::log_softmax
           : c.op() == "Hardmax"  ? SoftmaxKind::hardmax
                                  : SoftmaxKind::softmax;
  // Before opset 13 Softmax flattened the input to 2-D at `axis` (default 1).
  s.coerce_2d = c.opset < 13;
  s.axis = normalize_axis(c, attr_int(c, "axis", s.coerce_2d ? 1 : -1), rank, "attribute 'axis'");
  emit_single(im, c, s, {im.value_input(c, 0)});
}

// LayerNormalization (opset 17): one LayerNorm node. Its optional Mean and InvStdDev outputs,
// when read, are computed by nodes of their own from the same definitions (Reduce over the
// normalized axes, the mean of the squared deviation, 1 / sqrt(var + epsilon)).
void convert_layer_norm(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 2, 3);
  const Shape xs = im.input_shape(c, 0);
  LayerNorm ln;
  ln.axis = normalize_axis(c, attr_int(c, "axis", -1), xs.size(), "attribute 'axis'");
  ln.epsilon = attr_float(c, "epsilon", 1e-5f);
  if (attr_int(c, "stash_type", 1) != 1)
    node_error(c, "attribute 'stash_type' is " + std::to_string(attr_int(c, "stash_type", 1)) +
                      "; Kiln computes the statistics in float32 (stash_type 1)");
  const ValueId x = im.value_input(c, 0);
  std::vector<ValueId> in = {x, im.value_input(c, 1)};
  if (im.has_input(c, 2)) in.push_back(im.value_input(c, 2));
  emit_single(im, c, ln, std::move(in));
  if (!im.output_used(c, 1) && !im.output_used(c, 2)) return;
  Reduce over_row{{}, true};
  for (int a = ln.axis; a < static_cast<int>(xs.size()); ++a) over_row.axes.push_back(a);
  const std::string base = im.output_name(c, 0);
  const ValueId mean = im.emit(c, over_row, {x}, im.output_used(c, 1) ? im.output_name(c, 1) : base + "/mean");
  im.define_value(c, 1, mean);
  if (!im.output_used(c, 2)) return;
  const ValueId dev = im.emit(c, Binary{BinaryOp::sub}, {x, mean}, base + "/deviation");
  const ValueId sq = im.emit(c, Binary{BinaryOp::mul}, {dev, dev}, base + "/square");
  const ValueId var = im.emit(c, over_row, {sq}, base + "/variance");
  const ValueId eps = im.add_constant(base + "/epsilon", {}, {ln.epsilon}, Layout::any);
  const ValueId shifted = im.emit(c, Binary{BinaryOp::add}, {var, eps}, base + "/variance+epsilon");
  const ValueId inv = im.emit(c, ElementwiseChain{{{ChainStepKind::sqrt, 0, 0}, {ChainStepKind::reciprocal, 0, 0}}},
                              {shifted}, im.output_name(c, 2));
  im.define_value(c, 2, inv);
}

}  // namespace kiln::graph::onnx
