// Kiln's graph IR: values (tensors) and nodes in flat vectors, addressed by small typed ids.
// Nodes are kept in topological order; passes build a new graph rather than patch pointers.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "graph/printable.h"

namespace kiln::graph {

// Bad user input (a malformed graph, an unsupported op, a wrong shape): the message names the
// node or tensor and what was expected. The message is kept printable() (names in it come from
// the model), so it is always one line with nothing a terminal acts on.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(printable(message)) {}
};

// A broken internal invariant: a bug in Kiln, not in the user's model.
#define KILN_CHECK(cond, msg)                                                               \
  do {                                                                                      \
    if (!(cond))                                                                            \
      throw std::logic_error(std::string("internal error: ") + (msg) + " (" #cond ") at " + \
                             __FILE__ + ":" + std::to_string(__LINE__));                    \
  } while (0)

enum class DType : uint8_t { f32 };

// `any` is for tensors whose layout carries no meaning (1-D parameters).
enum class Layout : uint8_t { any, nchw, nhwc, oihw, hwio };

const char* to_string(DType d);
const char* to_string(Layout l);

template <typename Tag>
struct Id {
  static constexpr uint32_t kInvalid = std::numeric_limits<uint32_t>::max();
  uint32_t index = kInvalid;
  bool valid() const { return index != kInvalid; }
  friend bool operator==(Id a, Id b) { return a.index == b.index; }
  friend bool operator!=(Id a, Id b) { return a.index != b.index; }
};
using ValueId = Id<struct ValueTag>;
using NodeId = Id<struct NodeTag>;

using Shape = std::vector<int64_t>;
std::string to_string(const Shape& s);
int64_t num_elements(const Shape& s);

struct Value {
  std::string name;
  Shape shape;
  DType dtype = DType::f32;
  Layout layout = Layout::any;
  std::shared_ptr<const std::vector<float>> data;  // set for constants (immutable, shared)
  NodeId producer;                                  // invalid for graph inputs and constants

  bool is_constant() const { return data != nullptr; }
  int64_t size_bytes() const { return num_elements(shape) * 4; }
};

// An elementwise clamp applied to a kernel's result: ReLU is [0, inf), ReLU6 is [0, 6].
// Any chain of ReLU and Clip composes into one clamp, which is why fusion can absorb them.
struct Activation {
  float lo = -std::numeric_limits<float>::infinity();
  float hi = std::numeric_limits<float>::infinity();
  bool is_identity() const;
  bool is_relu() const;
  bool is_relu6() const;
  Activation then(const Activation& next) const;
};
std::string to_string(const Activation& a);

// ONNX Resize (opsets 10-28) and Upsample: out[i] reads x at coordinates mapped back per axis,
// x_original = f(i) by `coordinates` with that axis' scale (`scales`, as given or out / in from
// sizes). Nearest rounds x_original by `nearest` and clamps it into the axis; linear
// interpolates between its two neighbours, cubic between its four (Keys' kernel with
// coefficient cubic_a; edge values past the ends, or with exclude_outside those taps dropped
// and the weights renormalized), both on at most the last two axes. tf_crop_and_resize maps
// i into the crop [roi[a], roi[rank + a]] of axis a (fractions of in - 1); an element whose
// coordinate falls outside [0, in - 1] on any axis is `extrapolation`. Input: x.
enum class ResizeMode : uint8_t { nearest, linear, cubic };
enum class ResizeCoordinates : uint8_t {
  half_pixel, pytorch_half_pixel, align_corners, asymmetric, tf_half_pixel_for_nn, tf_crop_and_resize
};
enum class NearestRounding : uint8_t { round_prefer_floor, round_prefer_ceil, floor, ceil };
const char* to_string(ResizeMode m);
const char* to_string(ResizeCoordinates c);
const char* to_string(NearestRounding r);
struct Resize {
  ResizeMode mode = ResizeMode::nearest;
  ResizeCoordinates coordinates = ResizeCoordinates::half_pixel;
  NearestRounding nearest = NearestRounding::round_prefer_floor;
  Shape sizes;                // the output shape
  std::vector<float> scales;  // one per axis
  float cubic_a = -0.75f;
  bool exclude_outside = false;
  float extrapolation = 0.0f;
  std::vector<float> roi;  // tf_crop_and_resize: the starts then the ends, 2 * rank; else empty
};
// Whether Resize r maps every index of axis a (input length in_len) to itself.
bool resize_axis_is_identity(const Resize& r, size_t a, int64_t in_len);

// ONNX GridSample (opsets 16-22, 2-D): out[n, c, i, j] samples x[n, c] at the point grid[n, i,
// j] = (gx, gy) in [-1, 1] (x across the width, y down the height), mapped to pixels as
// ((g + 1) / 2) (size - 1) with align_corners, else ((g + 1) size - 1) / 2. A point outside the
// image (past the pixel centres with align_corners, else past the edges) is clamped into it
// (border) or reflected back (reflection) first; then nearest rounds it half to even, linear
// interpolates its 2x2 neighbours, cubic its 4x4 (Keys' kernel, a = -0.75). A neighbour outside
// the image reads 0 (zeros), the nearest edge pixel (border) or its reflection (reflection).
// Inputs: x [N, C, H, W] and grid [N, Ho, Wo, 2], in logical order; output [N, C, Ho, Wo].
enum class GridSampleMode : uint8_t { linear, nearest, cubic };
enum class GridSamplePadding : uint8_t { zeros, border, reflection };
const char* to_string(GridSampleMode m);
const char* to_string(GridSamplePadding p);
struct GridSample {
  GridSampleMode mode = GridSampleMode::linear;
  GridSamplePadding padding = GridSamplePadding::zeros;
  bool align_corners = false;
};

// One elementwise step of an ElementwiseChain (below) or of a convolution's post steps. An
// affine step is a per-channel scale and shift whose values are inputs of the node; a prelu
// step is a per-channel pair of them too, the slope below zero and the scale from zero up
// (x < 0 ? slope * x : scale * x; ONNX PRelu's scale is 1).
// The ONNX unary ops imported as one-step chains are here too (Tanh, Erf, Exp, ..., Celu, and
// Pow with a constant scalar exponent).
// clang-format off
enum class ChainStepKind : uint8_t {  // append only: serialized
  clamp, leaky_relu, sigmoid, hard_sigmoid, hard_swish, affine, silu,
  tanh, erf, exp, log, sqrt, abs, neg, reciprocal, softplus, softsign, elu, selu, celu,
  thresholded_relu, pow, gelu, gelu_tanh, mish,
  floor, ceil, round, logical_not, greater, less, equal, greater_equal, less_equal,
  sign, shrink, is_nan, is_inf, sin, cos, tan,
  sinh, cosh, asin, acos, atan, asinh, acosh, atanh, prelu
};
// clang-format on
constexpr int kNumChainStepKinds = 50;
const char* to_string(ChainStepKind k);  // "clamp", "leaky_relu", ..., "thresholded_relu"
// Steps that evaluate an exponential, a logarithm, a division, a square root or a rational
// approximation per element (15-25 vector operations where a clamp or an affine step takes one
// or two): sigmoid, SiLU, tanh, erf, GELU, Mish, the ELUs, softplus, softsign, exp, log, sqrt,
// reciprocal, the trigonometric and hyperbolic functions and their inverses, and pow other
// than 0-3.
struct ChainStep;
bool costly_step(const ChainStep& s);
struct ChainStep {
  ChainStepKind kind = ChainStepKind::clamp;
  // clamp: [a, b]; leaky_relu, elu, celu, thresholded_relu: alpha = a; hard_sigmoid: alpha = a,
  // beta = b; selu: alpha = a, gamma = b; pow: the exponent = a. gelu is
  // x * (1 + erf(x / sqrt 2)) / 2, gelu_tanh ONNX Gelu's approximate="tanh" form; mish is
  // x * tanh(softplus(x)). round rounds half to even (ONNX Round); logical_not is 1 where x is
  // 0, else 0; greater ... less_equal compare x with the constant a (1 where true, else 0; a
  // NaN x compares false). sign is -1, 0 or 1 (a zero keeps its sign, NaN stays NaN); shrink
  // (lambd = a, bias = b) is x + b below -a, x - b above a, else 0 (NaN gives 0); is_nan is 1
  // where x is NaN; is_inf is 1 where x is -inf and a is non-zero (ONNX detect_negative), or
  // +inf and b is non-zero (detect_positive). sin, cos and tan take radians, and asin, acos
  // and atan give them; sinh ... atanh are the hyperbolic functions and their inverses.
  float a = 0.0f, b = 0.0f;
};
// Whether a step takes two per-channel inputs (affine: scale, shift; prelu: slope, scale).
inline bool per_channel_step(ChainStepKind k) {
  return k == ChainStepKind::affine || k == ChainStepKind::prelu;
}
// The number of per-channel steps: each takes two per-channel inputs.
inline size_t affine_steps(const std::vector<ChainStep>& steps) {
  size_t n = 0;
  for (const ChainStep& s : steps) n += per_channel_step(s.kind);
  return n;
}
enum class PoolKind : uint8_t { max, avg };
// 2-D pooling over the H and W axes of an NCHW or NHWC tensor. Input: x.
struct Pool2d {
  PoolKind kind = PoolKind::max;
  int kernel_h = 1, kernel_w = 1;
  int stride_h = 1, stride_w = 1;
  int pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int dilation_h = 1, dilation_w = 1;
  bool ceil_mode = false;          // output size rounds up (windows may start in the padding)
  bool count_include_pad = false;  // avg: divide by the full window, padding included
};
// Inputs: x, weights, bias[, residual][, post-step scales and shifts][, pre-step scales and
// shifts][, expansion weights and bias][, input scale][, shortcut] (the fused forms below). Weights are OIHW for an NCHW input and HWIO for NHWC; with groups > 1 the weights'
// input-channel dimension is Ci / groups. A residual input (same shape as the output) is added
// before the activation: out = post(act(conv(pad(pre(x))) + b + residual)).
struct Conv2d {
  int stride_h = 1, stride_w = 1;
  int pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int dilation_h = 1, dilation_w = 1;
  Activation activation;  // fused epilogue; identity until fusion absorbs a consumer
  int groups = 1;
  bool residual = false;  // set by fusion when it absorbs an Add
  // Elementwise steps applied after the activation, absorbed by fuse_elementwise_chains (SiLU,
  // HardSwish, a BatchNorm after the activation, ...): computed in registers by the kernel
  // generated for this conv. Each affine step's [Co] scale and shift are inputs after the
  // residual, in step order.
  std::vector<ChainStep> post;
  // Elementwise steps applied to the input before the zero padding and the convolution (a
  // prologue), absorbed by fuse_conv_prologues: the BatchNorm + ReLU of a pre-activation block,
  // computed by the kernel as it stages its input, so the activated tensor never reaches
  // memory. Each affine step's [Ci] scale and shift are inputs after the post steps'.
  std::vector<ChainStep> pre;
  // The input is NCHW (a graph input read where it lies; the weights are HWIO and the output
  // NHWC): the kernel reads it in place of a layout transform (fuse_conv_prologues).
  bool nchw_input = false;
  // A 2-D pooling of the result (after the post steps), absorbed by fuse_conv_pooling: the
  // node's output is the pooled tensor, computed by the convolution's own kernel (the wide CPU
  // schedule computes the convolution a band of rows at a time and pools each band in cache,
  // never storing the whole output). NHWC only.
  std::optional<Pool2d> pool;
  // The pooling reads the input instead, and the convolution reads the pooled tensor: a
  // pooling before a 1x1, stride-1, unpadded convolution of one group without pre steps, an
  // expansion or an input scale, absorbed by fuse_pooling_into_conv (the pooling branch of
  // Inception and GoogLeNet blocks, a 3x3/s1 average or max pooling and its 1x1 projection; a
  // ResNet-D shortcut's 2x2/s2 average pooling). The pooled tensor is never stored: the kernel
  // pools the input as it stages it. Any pooling of Pool2d's, padded or not.
  bool pool_first = false;
  // bfloat16 multiply-adds (PipelineOptions::precision bf16, set by use_bf16): the kernel
  // rounds its input (after any pre steps) and its weights to bfloat16, to nearest even, and
  // accumulates their exact products in float32; the epilogue stays float32. Dense
  // convolutions only (graph::bf16_conv_refusal); an odd channel count reduces over one more
  // channel, read as zero (runtime::bf16_conv_channels).
  bool bf16 = false;
  // A pointwise convolution (1x1, stride 1, unpadded, one group) computed into this depthwise
  // convolution's input, with this activation, absorbed by fuse_expand_depthwise: the node reads
  // the expansion's input (the narrow tensor of a MobileNet inverted-residual block) and its
  // kernel computes the expanded channels a few rows at a time, so the expanded tensor is never
  // stored whole. Its weights (HWIO [1, 1, Ci, C]) and bias ([C]) are the node's last two
  // inputs. Depthwise NHWC convolutions without pre steps, a pooling or bf16 only.
  std::optional<Activation> expand;
  // The expansion's elementwise steps after its activation (the SiLU of EfficientNet's blocks,
  // the HardSwish of MobileNetV3's), steps without per-channel inputs (no affine ones) only.
  std::vector<ChainStep> expand_post;
  // The convolution reads its input multiplied per image and input channel by a tensor
  // ([N, 1, 1, Ci], NHWC: the excitation of a squeeze-and-excitation block), absorbed by
  // fuse_conv_prologues: the node's last input. The kernel scales its weights per image
  // instead (the scale is uniform over the pixels), so the scaled input is never computed.
  // Dense NHWC convolutions without pre steps, an NCHW input, an expansion or bf16 only.
  bool input_scale = false;
  // A Resize of the result (after the post steps), absorbed by fuse_conv_resize: the node's
  // output is the resized tensor, computed by the convolution's own kernel from the whole
  // convolution (kept in a buffer of the kernel's own), so the unresized tensor never makes a
  // round trip between kernels. N and C are left alone. The output is NHWC (a nearest resize,
  // attributes in NHWC axis order), or NCHW with `nchw_output` (the Resize read the
  // convolution's output through a layout transform: a segmentation head's upsampling to the
  // graph output; attributes in NCHW order). Convolutions without a pooling or an expansion.
  std::optional<Resize> resize;
  bool nchw_output = false;  // only with a resize
  // A tensor of the output's shape added after the post steps (a YOLO bottleneck's shortcut,
  // x + SiLU(conv(x)), which the residual, added before the activation, cannot take), absorbed
  // by fuse_conv_shortcut: the node's last input. Convolutions without a pooling, a resize, an
  // expansion or an input scale.
  bool shortcut = false;
  // The largest Winograd output tile this convolution's kernel may use: 4 (F(2x2) or F(4x4),
  // whichever its schedule picks), 2 (F(2x2) only) or 0 (direct convolution only). Lowered by
  // the tools' output check (kiln compile, run, bench, tune), which measures the model's outputs
  // against the reference interpreter and caps the layers whose Winograd rounding takes them out
  // of tolerance; no pass sets it.
  int max_winograd_tile = 4;
  // Whether something follows the epilogue in the node (a pooling, a resize or a shortcut): its
  // output is no longer the convolution's, so no fusion may add steps after the epilogue.
  bool has_tail() const { return (pool && !pool_first) || resize || shortcut; }
  size_t first_post_input() const { return residual ? 4 : 3; }
  size_t first_pre_input() const { return first_post_input() + 2 * affine_steps(post); }
  size_t first_expand_input() const { return first_pre_input() + 2 * affine_steps(pre); }
  size_t scale_input() const { return first_expand_input() + (expand ? 2 : 0); }
  size_t shortcut_input() const { return scale_input() + (input_scale ? 1 : 0); }
};

// Inference BatchNormalization. Inputs: x, scale (gamma), bias (beta), mean, variance.
struct BatchNorm {
  float epsilon = 1e-5f;
};

// Elementwise unary ops.
struct Relu {};
struct Clip {
  float min = 0.0f, max = 6.0f;
};
struct LeakyRelu {
  float alpha = 0.01f;
};
struct Sigmoid {};
struct HardSigmoid {  // max(0, min(1, alpha * x + beta))
  float alpha = 0.2f, beta = 0.5f;
};
struct HardSwish {};  // x * max(0, min(1, x / 6 + 1 / 2))

// Elementwise binary ops with multidirectional (numpy) broadcasting. Inputs: a, b. max and min
// propagate a NaN operand (ONNX Max and Min, whose variadic forms import as chains of them).
// pow is ONNX Pow with a tensor exponent (std::pow's values). The comparisons and the logic ops
// give a boolean as float 1 (true) or 0 (false); the logic ops read an operand as true where it
// is not 0 (Kiln's tensors are float32: a boolean is 0.0 or 1.0).
enum class BinaryOp : uint8_t {  // append only: serialized
  add, sub, mul, div, max, min,
  pow, equal, less, greater, less_equal, greater_equal, logical_and, logical_or, logical_xor
};
constexpr int kNumBinaryOps = 15;
// Whether the op gives a boolean (0 or 1): the comparisons and the logic ops.
bool is_boolean(BinaryOp op);
struct Binary {
  BinaryOp op = BinaryOp::add;
};

// Pooling over all of H and W: [N, C, H, W] -> [N, C, 1, 1] (or the NHWC equivalent).
struct GlobalPool {
  PoolKind kind = PoolKind::avg;
};

// Y = alpha * op(A) * op(B) + beta * C, A and B 2-D, C (optional third input) broadcast to Y.
struct Gemm {
  bool trans_a = false, trans_b = false;
  float alpha = 1.0f, beta = 1.0f;
};
// numpy matmul: batched, broadcasting batch dimensions; 1-D operands promoted as numpy does.
struct MatMul {};

// Row-major reinterpretation to a static shape (Flatten imports as this too). The bytes stay as
// they are: with `layout` any, the input is a logical tensor and the output takes the logical
// layout of its rank; otherwise the input may be stored in any layout and the output is tagged
// `layout` (the layout pass's zero-copy switch between an NHWC tensor and the channels-last
// logical tensor a Transpose makes of it, which holds the same bytes).
struct Reshape {
  Shape shape;
  Layout layout = Layout::any;
};
struct Transpose {
  std::vector<int> perm;
};
struct Concat {
  int axis = 0;  // non-negative
};
// One entry per input axis, already normalized: 0 <= start, clamped end, step != 0.
struct Slice {
  std::vector<int64_t> starts, ends, steps;
};
// Padding; pads = [begin_0, ..., begin_{r-1}, end_0, ..., end_{r-1}] (ONNX order). Output index
// j on an axis of size n reads input index i = j - begin: `value` outside [0, n) (constant),
// the mirror image without the edge (reflect: -i, or 2(n-1) - i; pads < n), or the nearest
// edge element (edge: clamp(i, 0, n-1)). A negative pad crops.
enum class PadMode : uint8_t { constant, reflect, edge };
const char* to_string(PadMode m);
struct Pad {
  std::vector<int64_t> pads;
  float value = 0.0f;
  PadMode mode = PadMode::constant;
};
// The input index output index `j` of a padded axis reads (begin pad `begin`, input size n):
// in [0, n) for reflect and edge; for constant, outside [0, n) where the pad value goes.
int64_t pad_source_index(PadMode mode, int64_t j, int64_t begin, int64_t n);
// Softmax along `axis` (opset >= 13). With coerce_2d (opset < 13) the input is viewed as
// [prod(dims before axis), prod(dims from axis on)] and normalized along the second. `kind`
// makes it ONNX LogSoftmax (x - max - log(sum(exp(x - max)))) or Hardmax (1 at the first
// maximum of each row, 0 elsewhere), which share the row structure.
enum class SoftmaxKind : uint8_t { softmax, log_softmax, hardmax };  // append only: serialized
constexpr int kNumSoftmaxKinds = 3;
const char* to_string(SoftmaxKind k);
struct Softmax {
  int axis = -1;  // non-negative after import
  bool coerce_2d = false;
  SoftmaxKind kind = SoftmaxKind::softmax;
};
// The ONNX reductions over `axes`: the mean, sum, maximum, minimum, product, sum of absolute
// values (l1), square root of the sum of squares (l2), log of the sum, log of the sum of
// exponentials (computed about the maximum, so it does not overflow) and sum of squares. Max
// and min propagate a NaN.
// argmax / argmin (ONNX ArgMax / ArgMin over one axis): the index of the first maximum or
// minimum as a float32 holding an exact integer (a NaN counts as the extreme, as numpy's);
// the _last kinds take the last one (select_last_index=1).
enum class ReduceKind : uint8_t {  // append only: serialized
  mean, sum, max, min, prod, l1, l2, log_sum, log_sum_exp, sum_square,
  argmax, argmin, argmax_last, argmin_last
};
constexpr int kNumReduceKinds = 14;
// Whether k is one of the arg kinds (one axis, an index as the value).
bool is_arg_reduce(ReduceKind k);
// The largest reduced extent an arg reduction takes: every index below it is exact in float32.
constexpr int64_t kMaxArgReduceExtent = int64_t{1} << 24;
const char* to_string(ReduceKind k);
struct Reduce {
  std::vector<int> axes;  // non-negative, sorted; empty means all axes
  bool keepdims = true;
  ReduceKind kind = ReduceKind::mean;
};

// ONNX TopK (opsets 1-28): the k largest (or, without `largest`, smallest) elements along one
// axis, best first (equal elements by index, a NaN counts as the extreme, as the arg
// reductions'), as their values or, with `indices`, their indices along the axis (a float32
// holding the exact integer, as the arg reductions'). One node per output a model reads.
// Input: x, in logical order; the output is x's shape with k along the axis.
// The longest row TopK takes: its kernel compares every pair of a row's elements (2^32 at most).
constexpr int64_t kMaxTopKRow = int64_t{1} << 16;
struct TopK {
  int axis = 0;  // non-negative
  int64_t k = 1;
  bool largest = true;
  bool indices = false;
};

// ONNX GatherElements (opsets 11-28): out[i] = data[i with its coordinate along `axis` replaced
// by indices[i]]; the output has the indices' shape, no larger than the data's on any other
// axis. Inputs: data, indices (a float32 holding an integer, as the arg reductions' outputs; a
// negative index counts from the end), both in logical order. An index outside
// [-data.shape[axis], data.shape[axis]) is an Error at import where the indices are constants;
// at runtime the kernel clamps it into range.
// With `broadcast` (ONNX's op never has it: ONNX Gather of a runtime tensor lowers to it), an
// indices extent of 1 off the axis stands for all of the data's there, and the output is the
// data's shape with the indices' extent along the axis.
struct GatherElements {
  int axis = 0;  // non-negative
  bool broadcast = false;
};
// ONNX ScatterElements (opsets 11-28) and Scatter (9-10): the data with, for every element i of
// the updates in row-major order, out[i with its coordinate along `axis` replaced by indices[i]]
// set to updates[i] (`reduction` none: the last write wins) or combined with it (add, mul, max,
// min). Inputs: data, indices (as GatherElements'), updates (of the indices' shape), in logical
// order; the output has the data's shape. Runtime indices out of range are clamped.
enum class ScatterReduction : uint8_t { none, add, mul, max, min };
const char* to_string(ScatterReduction r);
// The binary op that combines an element with an update (reduction none has none: an Error).
BinaryOp combining_op(ScatterReduction r);
struct ScatterElements {
  int axis = 0;  // non-negative
  ScatterReduction reduction = ScatterReduction::none;
};

// ONNX Tile with constant repeats: out[i] = x[i mod x.shape] on every axis, the output
// x.shape * repeats.
struct Tile {
  std::vector<int64_t> repeats;  // one per axis, >= 1
};
// ONNX Where: out = cond != 0 ? x : y, the three inputs broadcast together (numpy). Inputs:
// cond (a boolean as float 0/1), x, y.
struct Where {};
// ONNX LayerNormalization (opset 17) over the trailing axes [axis, rank): per row of the leading
// axes, y = (x - mean) / sqrt(var + epsilon) * scale + bias with the biased variance. Inputs: x,
// scale[, bias]; scale and bias hold the normalized shape x.shape[axis:] (leading 1s aside), or
// one value for every element. With axis 1 on a 4-D image every axis but the batch is
// normalized, so the layout does not matter where scale and bias are one value each
// (GroupNorm(1), which simplify_exported_ops makes so): it runs NHWC too.
// fuse_layer_norm also makes it from the decomposed form exporters write.
struct LayerNorm {
  int axis = -1;  // non-negative after import
  float epsilon = 1e-5f;
};
// GroupNormalization of a 4-D image in either layout: per image and group of C / groups
// consecutive channels, y = (x - mean) / sqrt(var + epsilon) * scale[c] + bias[c] with the
// statistics (biased variance) over the group's channels and every pixel. Inputs: x, scale and
// bias ([C] constants). The channel axis is 3 for NHWC, else 1, so it runs in the layout of its
// producer (made by simplify_exported_ops from the Reshape -> LayerNorm -> Reshape that ONNX
// GroupNormalization and PyTorch's exports of nn.GroupNorm import as).
struct GroupNorm {
  int groups = 1;  // divides C
  float epsilon = 1e-5f;
  // Absorbed by fuse_norm_epilogues: a tensor of x's shape added to y (a GroupNorm ResNet's
  // shortcut, the input after bias), then elementwise steps (the activation after it), each
  // affine step's [C] scale and shift inputs after the residual, in step order.
  bool residual = false;
  std::vector<ChainStep> post;
  size_t first_post_input() const { return residual ? 4 : 3; }
};

// A chain of elementwise steps applied to one tensor in one pass (made by
// fuse_elementwise_chains from ReLU, Clip, LeakyRelu, Sigmoid, HardSigmoid, HardSwish,
// BatchNorm that could not fold, per-channel or scalar Add/Sub/Mul/Div by constants, and the
// self-gated x * Sigmoid(x) (SiLU) and x * HardSigmoid(x) (HardSwish) of exporters).
// Inputs: x, then for each affine step its per-channel scale and shift ([C] constants), in
// step order. The channel axis is 3 for NHWC, else 1.
struct ElementwiseChain {
  std::vector<ChainStep> steps;
};

// Inserted by the layout pass: one tensor re-laid-out (NCHW <-> NHWC).
struct LayoutTransform {
  Layout from = Layout::nchw, to = Layout::nhwc;
};

using Op = std::variant<Conv2d, BatchNorm, Relu, Clip, LeakyRelu, Sigmoid, HardSigmoid, HardSwish,
                        Binary, Pool2d, GlobalPool, Gemm, MatMul, Reshape, Transpose, Concat, Slice,
                        Pad, Softmax, Reduce, LayerNorm, Resize, ElementwiseChain, LayoutTransform,
                        Tile, Where, GroupNorm, GridSample, TopK, GatherElements, ScatterElements>;
const char* op_name(const Op& op);
// Its attributes as `dump` prints them ("kernel=3x3 stride=2x2 pads=[1,1,1,1]"), or "".
std::string op_attributes(const Op& op);
// Lower-case label for descriptions: "conv2d", "relu", "relu6", "clip(0, 1)", ...
std::string op_label(const Op& op);

struct Node {
  std::string name;
  Op op;
  std::vector<ValueId> inputs;
  std::vector<ValueId> outputs;
  // The original operators this node now computes, in order ("conv2d", "batchnorm (folded)",
  // "relu"): provenance for the kernel description, kept by every pass that merges nodes.
  std::vector<std::string> computes;
};

class Graph {
 public:
  ValueId add_value(Value v);
  // Appends a node (keep topological order: inputs must already be defined) and records it as
  // the producer of its outputs.
  NodeId add_node(Node n);

  Value& value(ValueId id);
  const Value& value(ValueId id) const;
  Node& node(NodeId id);
  const Node& node(NodeId id) const;
  const std::vector<Value>& values() const { return values_; }
  const std::vector<Node>& nodes() const { return nodes_; }
  size_t num_nodes() const { return nodes_.size(); }

  std::vector<ValueId> inputs;   // tensors the caller binds at run time
  std::vector<ValueId> outputs;  // tensors the caller reads back

  // consumers()[v] lists the nodes that read value v (a node reading v twice appears twice).
  std::vector<std::vector<NodeId>> consumers() const;
  bool is_graph_output(ValueId v) const;
  bool is_graph_input(ValueId v) const;

  // Replaces the node list (in topological order), drops values nothing references any more
  // and renumbers ids. Passes end with this.
  void rebuild(std::vector<Node> nodes);
  // The same, leaving out nodes[i] wherever erased[i]: how passes delete the nodes they merged.
  void rebuild(std::vector<Node> nodes, const std::vector<bool>& erased);

 private:
  std::vector<Value> values_;
  std::vector<Node> nodes_;
};

// A graph of copies of `nodes` (in that order, topological in `g`) and the values they touch:
// a value read but produced by none of them is a graph input, unless it is a constant;
// `outputs` (values of `g` the nodes produce) are the graph's outputs.
Graph subgraph(const Graph& g, const std::vector<NodeId>& nodes, const std::vector<ValueId>& outputs);

// The nodes of `nodes` (a topological node list over g's values, such as a pass is about to
// rebuild g with) whose outputs no other node reads and no graph output is, found last first
// so that chains of them go too: the erased flags for Graph::rebuild.
std::vector<bool> unread_nodes(const Graph& g, const std::vector<Node>& nodes);

// Human-readable dump: one line per value and per node, in order.
std::string dump(const Graph& g);

// `g` with every node and value name made printable(): what reports that print many names
// (dumps, kernel descriptions, arena plans) are made from, so none can rewrite the terminal.
Graph with_printable_names(Graph g);

}  // namespace kiln::graph
