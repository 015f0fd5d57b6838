// Lowering: one KernelSpec per node of an optimized graph. A spec is the contract handed to
// the kernel layer: tensors (shape, layout, dtype), the fused operations and their parameters.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "graph/ir.h"

namespace kiln::graph {

struct TensorDesc {
  ValueId value;
  std::string name;
  Shape shape;
  Layout layout = Layout::any;
  DType dtype = DType::f32;
  // Element strides per axis, row-major like `shape`; empty: dense. Set by planned_kernels
  // (graph/memory_plan.h) on an input stored as a slice of a larger tensor (an in-place
  // Concat's output), which the kernel then reads at these constant strides.
  std::vector<int64_t> strides;
};

// A convolution, generated for its shapes: NHWC input, HWIO weights, groups == 1, depthwise
// (groups == channels, weights [Kh, Kw, 1, C]) or grouped (weights [Kh, Kw, Ci / groups, Co]).
struct ConvKernelSpec {
  bool depthwise = false;
  int groups = 1;
  std::string name;
  std::vector<std::string> computes;  // e.g. {"conv2d", "batchnorm (folded)", "relu"}
  TensorDesc input, weights, bias, output;
  // The weights are a constant of the graph, not an input: only then may the kernel read them
  // re-laid-out once at load (Winograd's transformed weights, runtime/conv_weights.h).
  bool constant_weights = true;
  std::optional<TensorDesc> residual;  // added before the activation
  int stride_h = 1, stride_w = 1;
  int pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int dilation_h = 1, dilation_w = 1;
  Activation activation;
  // Steps after the activation (Conv2d::post) and each affine step's scale and shift ([Co]).
  std::vector<ChainStep> post;
  std::vector<TensorDesc> post_params;
  // Steps on the input before the zero padding (Conv2d::pre) and each affine step's scale and
  // shift ([Ci]). Argument order: input, weights, bias, residual, post_params, pre_params.
  std::vector<ChainStep> pre;
  std::vector<TensorDesc> pre_params;
  // The input is NCHW, read in place of a layout transform (Conv2d::nchw_input).
  bool nchw_input = false;
  // The pooling of the result (Conv2d::pool): `output` is the pooled tensor; the convolution's
  // own output (conv_output_nhwc) lives inside the kernel (a band of rows at a time with the
  // wide CPU schedule).
  std::optional<Pool2d> pool;
  // The pooling reads the input instead (Conv2d::pool_first): `output` is the convolution's.
  bool pool_first = false;
  // The resize of the result (Conv2d::resize): `output` is the resized tensor, NCHW with
  // nchw_output (the resize's attributes in that layout's axis order), else NHWC; the
  // convolution's own output (conv_output_nhwc) lives inside the kernel.
  std::optional<Resize> resize;
  bool nchw_output = false;
  // A depthwise convolution's input computed in the kernel as the pointwise expansion of
  // `input` (Conv2d::expand): its activation, and the expansion's weights (HWIO [1, 1, Ci, C])
  // and bias ([C]), the last arguments. `input` then has Ci channels.
  std::optional<Activation> expand;
  std::vector<ChainStep> expand_post;  // after the expansion's activation (Conv2d::expand_post)
  std::optional<TensorDesc> expand_weights, expand_bias;
  // The input's scale per image and channel ([N, 1, 1, Ci], Conv2d::input_scale), the last
  // argument: the kernel multiplies its weights by it per image.
  std::optional<TensorDesc> input_scale;
  // A tensor of the output's shape added after the post steps (Conv2d::shortcut), the last
  // argument.
  std::optional<TensorDesc> shortcut;
  // Multiply-adds in bfloat16 (Conv2d::bf16): the kernel reads its weights as bfloat16 pairs
  // of input channels (runtime::pack_bf16_conv_weights) and rounds its input to bfloat16.
  bool bf16 = false;
  // The schedule of a dense or grouped convolution, in the text form of
  // schedules/conv_params.h ("naive", "deep chunk=144", ...), read over the default for the
  // layer; empty: the default, or a tuned record (codegen::ScheduleLookup). Part of the
  // kernel's signature: a kernel compiled with one schedule is never bound to a spec asking
  // for another.
  std::string schedule;
  // The largest Winograd tile the kernel may use (Conv2d::max_winograd_tile: 4, 2 or 0 for
  // direct only). Part of the signature, but not of schedule_signature.
  int max_winograd_tile = 4;
  // The model's constant tensors take more than kColdWeightBytes: between two calls of this
  // kernel the rest of the model's weights pass through the caches, so its own come from
  // memory. Schedules may prefetch them (schedules::ConvParams::prefetch). Not part of the
  // signature: every kernel of a model has the same, and the schedule it resolves to is in
  // the compile cache's key.
  bool cold_weights = false;
  // Set when the plan merged the image's rows (PlanOptions::flat_pointwise): the output's NHWC
  // shape as the graph has it, whose rows the kernel's shapes hold merged. Descriptive only;
  // the kernel is what its shapes say.
  Shape unmerged_output;
};

// Constant bytes past which a model's weights count as cold (ConvKernelSpec::cold_weights): more
// than a core's share of the last-level cache on the machines measured. On an Intel Xeon VM
// (2 cores, a 480 MiB L3 shared with other tenants) ResNet-18's 45 MiB stayed in cache (its
// 7x7 3x3 layer 0.61 ms a call) and ResNet-50's 98 MiB did not (the same layer 0.76 ms).
inline constexpr int64_t kColdWeightBytes = int64_t{64} << 20;

struct LayoutKernelSpec {
  std::string name;
  TensorDesc input, output;
};

// Any other node: the op with its attributes and its tensors in the node's input order.
// Generated for its shapes when is_generated says so (after run_passes, always).
struct OpKernelSpec {
  std::string name;
  std::vector<std::string> computes;
  Op op;
  std::vector<TensorDesc> inputs;
  TensorDesc output;
};

using KernelSpec = std::variant<ConvKernelSpec, LayoutKernelSpec, OpKernelSpec>;
const std::string& kernel_name(const KernelSpec& k);

// Activations fused into a convolution's epilogue: none, relu, relu6 (other activations fuse as
// post steps). Fusion asks this before absorbing an op, so it never creates a kernel nobody can
// run.
bool conv_epilogue_supported(const Activation& a);
// Whether conv node n can take elementwise steps after its activation (Conv2d::post): an NHWC
// convolution, dense, grouped or depthwise (without a residual), with constant weights and bias,
// whose output is not pooled, resized or added to a shortcut (the steps would apply before
// that).
bool conv_accepts_post_steps(const Graph& g, const Node& n);

// One spec per node: convolutions the generated kernels implement (NHWC, constant weights, a
// supported epilogue) become ConvKernelSpec, NCHW -> NHWC transforms LayoutKernelSpec,
// everything else OpKernelSpec.
std::vector<KernelSpec> lower_to_kernels(const Graph& g);
// Whether node n is a depthwise convolution (groups == input channels == output channels of an
// NHWC convolution): the kernels read each of its input elements once per tap.
bool is_depthwise_conv(const Graph& g, const Node& n);
// Whether the kernel pools its input before the convolution rather than the convolution's
// output after it. An average pooling whose windows lie inside the image commutes with a 1x1
// stride-1 unpadded dense convolution whose epilogue is linear (no activation, steps or
// residual): pool(conv(x) + b) = conv(pool(x)) + b. Pooled first, the convolution runs on the
// pooled pixels, kernel_h * kernel_w times fewer multiply-adds (a DenseNet transition: BN,
// ReLU, 1x1 convolution, 2x2/s2 average pooling). Windows of at most 16 pixels (summed in one
// expression). Also every kernel whose pooling is of its input in the graph
// (ConvKernelSpec::pool_first). In bf16 the pooled input is what is rounded to bfloat16.
bool pools_before_conv(const ConvKernelSpec& k);
// Whether the pooling after the convolution has a window reaching the padding below the
// convolution's output (a 3x3/s2/p1 pooling of an odd number of rows). Such a kernel computes
// its convolution whole before pooling it, never in bands of the pooled rows: Halide's bounds
// inference asked a 1x1 convolution reading its input in place for rows past the image
// (Xception's blocks, 61 -> 31 rows: row 113).
bool pool_reaches_below(const ConvKernelSpec& k);
// The convolution's input shape as [N, H, W, C], whichever layout the kernel reads it in; with
// an expansion, the expanded tensor's (C = the expansion's output channels); pooled first
// (pools_before_conv), the pooled input's.
Shape conv_input_nhwc(const ConvKernelSpec& k);
// The convolution's own output, NHWC: `output`'s shape, or the shape before the pooling when
// the kernel pools after the convolution, or before the resize.
Shape conv_output_nhwc(const ConvKernelSpec& k);
// Whether lower_to_kernels makes node n a Halide convolution kernel (ConvKernelSpec). Those
// kernels take their output as a strided buffer, so they can write into a slice of a larger
// tensor (see the in-place Concat of plan_arena).
bool lowers_to_halide_conv(const Graph& g, const Node& n);
// Why node n cannot run its multiply-adds in bfloat16 (Conv2d::bf16), or "" when it can: a
// Halide convolution (lowers_to_halide_conv), dense (one group), HWIO weights, no per-image
// input scale. The dot-product instruction takes channel pairs: an odd count is rounded up.
std::string bf16_conv_refusal(const Graph& g, const Node& n);

// Kernels generated per model by codegen/: a Halide pipeline built for this spec's exact shapes,
// compiled ahead of time (`kiln compile`) or into a cached shared object (`kiln run`, `bench`,
// the tests). Every node of a graph made by run_passes is one; a spec that is not (an NCHW
// convolution, a lone ReLU node: forms the passes never leave) has no kernel at all, and the
// runtime refuses it, naming not_generated_reason.
bool is_generated(const KernelSpec& k);
// Why an OpKernelSpec is not generated ("its input is not NHWC", ...); empty for the others.
std::string not_generated_reason(const KernelSpec& k);
// The tensors a generated kernel takes, in its argument order: the spec's inputs in node order,
// then the output. Codegen declares the pipeline's arguments from this list and the runtime
// binds buffers from it, so neither side counts arguments by hand.
std::vector<TensorDesc> generated_kernel_arguments(const KernelSpec& k);
// What a generated kernel is compiled for: the op with every attribute, and every argument's
// shape and layout (not the constants' values, which are passed at run time). A compiled kernel
// is bound only to a spec with the same signature.
std::string kernel_signature(const KernelSpec& k);
// The key of a kernel's tuned schedule (codegen::ScheduleDb): its signature without the
// Winograd tile cap, which the model's output check sets per model (Conv2d::max_winograd_tile),
// so that a record tuned before the check still applies where its schedule keeps to the cap.
std::string schedule_signature(const KernelSpec& k);

// The task description, in the form of MISSION.md's reference example.
std::string describe(const KernelSpec& k);

}  // namespace kiln::graph
