// The graph passes. Each takes a verified graph and returns a new one; none mutates its input.
#pragma once

#include "graph/ir.h"

namespace kiln::graph {

// Computes every node whose inputs are all constants (float32; outputs of at most 2^20
// elements, and no larger than its inputs together or 1024 elements; no convolution or matrix
// product, no graph output) once, with the reference interpreter: its outputs become
// constants. Runs first.
Graph fold_constants(const Graph& g);

// Rewrites the decomposed LayerNorm exporters write (ReduceMean -> Sub -> Pow(2) or Mul by
// itself -> ReduceMean -> Add(eps) -> Sqrt -> Div [-> Mul gamma -> Add beta], over the same
// trailing axes) into one LayerNorm node. Runs after fold_constants, on the logical graph.
Graph fuse_layer_norm(const Graph& g);

// Rewrites exact GELU as exporters spell it (x * 0.5 * (1 + Erf(x / sqrt 2)), any grouping of
// the products) into one gelu chain step. Runs before fuse_elementwise_chains.
Graph fuse_gelu(const Graph& g);

// Rewrites a sum over axis 1 of a 5-D [N, R, C, H, W] view of R channel blocks of a 4-D image
// (ResNeSt's and SKNet's radix axis), and of products and sums of such views, as Adds of the
// blocks' channel Slices, which stay NHWC. Runs before simplify_exported_ops.
Graph split_radix_sums(const Graph& g);

// Rewrites a mean or max over H and W of a 4-D image as a GlobalPool (and a Reshape without
// keepdims), leaves out a Tile (ONNX Expand) whose readers are all broadcasting binary ops
// with another operand of its shape, and makes a LayerNorm or GroupNorm node of a group
// normalization written through views. Runs after fuse_layer_norm, before the layout pass.
Graph simplify_exported_ops(const Graph& g);

// Rewrites a channels-last linear layer, MatMul of a 4-D [N, H, W, K] tensor by a constant
// [K, M], as Transpose(0, 3, 1, 2) -> 1x1 Conv2d -> Transpose(0, 2, 3, 1), so that it fuses
// like any convolution (a [B, T, K] or [T, K] one too, viewed as [1, B, T, K], with the bias
// Add after it as the convolution's bias); a MatMul with a 1-D operand becomes its matrix form
// between Reshapes. Runs before sink_transposes.
Graph matmul_to_conv(const Graph& g);

// Moves a BatchNorm or unary elementwise op that reads a 3-D convolution's output (a 2-D
// convolution over [N * Do, ...], a Reshape and a Transpose back to [N, M, Do, Ho, Wo]) in front
// of the Reshape and Transpose, so that it folds or fuses into the convolution. Runs before
// sink_transposes.
Graph hoist_conv3d_epilogue(const Graph& g);

// Moves Transposes below the elementwise ops that alone read them (re-laying out their
// broadcast constants), and merges or cancels Transposes that meet. Runs before the folds and
// fusions, so that ops freed from a Transpose join their producer's epilogue.
Graph sink_transposes(const Graph& g);

// Folds a zero Pad of the spatial axes into the padding of the convolutions that read it (when
// only convolutions do), deleting the Pad. Runs before convert_to_nhwc.
Graph fold_pad_into_conv(const Graph& g);

// Folds inference BatchNorm into the convolution that feeds it (when that conv has no other
// consumer and all parameters are constants): w' = w * s, b' = (b - mean) * s + beta with
// s = gamma / sqrt(var + eps), per output channel. The BatchNorm node is deleted.
Graph fold_batch_norm(const Graph& g);

// Merges an Add of two branches that read the same tensor x, each a convolution of x (nothing
// fused into it, constant weights) or x itself or a BatchNorm of x, into one convolution: the
// kernels summed at the taps each reads (x is a kernel of one tap per channel), the biases
// summed. RepVGG's training-form block and ACNet's 3x3 + 1x3 + 3x1 become one convolution. Runs
// after fold_batch_norm and before fuse_epilogues.
Graph merge_parallel_convs(const Graph& g);

// Absorbs elementwise consumers into the epilogue of the output-fusable node that produces
// their input, when that output has exactly one consumer and is not a graph output, and the
// kernel layer implements the combined epilogue: a same-shape Add becomes the conv's residual
// input, then ReLU / Clip chains become its activation. Run after fold_batch_norm.
Graph fuse_epilogues(const Graph& g);

// Splits each 3x3 stride-1 convolution of 2-4 groups of at least 32 channels each (ResNeSt's
// split attention) into a dense convolution per group, each reading a Slice of the input's
// channels, joined by a Concat (both in place: the memory plan's views), so that every group
// takes the dense schedules, Winograd among them. Runs after fuse_epilogues.
Graph split_grouped_convs(const Graph& g);

// Converts the graph to NHWC: one LayoutTransform per NCHW graph input at the entry, every
// activation re-declared NHWC, conv weights re-laid-out ahead of time to HWIO (output channels
// innermost, the layout the kernels vectorize over). Outputs computed by nodes become NHWC; a
// graph input that is also a graph output keeps its layout. Idempotent.
Graph convert_to_nhwc(const Graph& g);

// Merges each run of elementwise nodes (each the only reader of the one before; ReLU, Clip,
// LeakyRelu, Sigmoid, HardSigmoid, HardSwish, unfoldable BatchNorm, per-channel or scalar
// Add/Sub/Mul/Div by a constant) into one ElementwiseChain node. Runs after convert_to_nhwc.
Graph fuse_elementwise_chains(const Graph& g);

// Moves an Add of a tensor of its shape and layout, then an ElementwiseChain, that alone read a
// GroupNorm's output into the GroupNorm (GroupNorm::residual, GroupNorm::post). Runs after
// fuse_elementwise_chains, before fuse_conv_prologues.
Graph fuse_norm_epilogues(const Graph& g);

// Moves each ElementwiseChain whose output only a dense or grouped convolution reads, as its
// input, into that convolution as its pre steps (Conv2d::pre): the BatchNorm + ReLU of
// pre-activation blocks, computed as the convolution stages its input. Then an NCHW -> NHWC
// transform of an image of at most 4 channels that only such a convolution reads goes into it
// (Conv2d::nchw_input): the stem reads the NCHW input in place. And a Mul by a [N, 1, 1, C]
// tensor (a squeeze-and-excitation scale) that only a dense convolution reads goes into it
// (Conv2d::input_scale): its weights are scaled per image instead.
Graph fuse_conv_prologues(const Graph& g);

// Moves each Add of a Halide convolution's output (read by the Add alone) and a tensor of the
// same shape that exists before the convolution runs into that convolution, added after its
// activation and post steps (Conv2d::shortcut): a YOLO bottleneck's x + SiLU(conv(...)).
Graph fuse_conv_shortcut(const Graph& g);

// Moves each MaxPool or AveragePool that alone reads an NHWC Halide convolution's output into
// that convolution (Conv2d::pool): its kernel writes only the pooled tensor (with the wide CPU
// schedule, pooling bands of the convolution's rows in cache). Runs after every pass that
// adds to a convolution's epilogue (a convolution with a shortcut keeps its pooling apart).
Graph fuse_conv_pooling(const Graph& g);

// Moves each pointwise expansion (a dense 1x1 stride-1 unpadded NHWC convolution with an
// activation and post steps without inputs, such as SiLU) whose output only a depthwise
// convolution reads into that convolution (Conv2d::expand, Conv2d::expand_post), where
// expansion_fusion_pays: the MobileNet inverted residual's expanded
// tensor is computed by the depthwise kernel a row at a time and never stored whole. Float32
// mode only: a fused expansion runs in float32, so bf16 mode runs keep_expansions_apart in its
// place, which fuses nothing and notes each expansion it keeps apart.
Graph fuse_expand_depthwise(const Graph& g);
Graph keep_expansions_apart(const Graph& g);

// Moves each Resize that alone reads an NHWC Halide convolution's output, directly (a nearest
// resize) or through a transform to NCHW (any mode), into that convolution (Conv2d::resize,
// Conv2d::nchw_output): its kernel computes the convolution into a buffer of its own and writes
// only the resized tensor. After fuse_conv_pooling and fuse_expand_depthwise (a convolution
// with a pooling or an expansion keeps its Resize apart).
Graph fuse_conv_resize(const Graph& g);

// Moves each MaxPool or AveragePool (of at most 25 taps) whose output only a 1x1, stride-1,
// unpadded dense Halide convolution reads, as its input, into that convolution as the pooling
// of its input (Conv2d::pool_first): the kernel pools the input as it stages it, and the pooled
// tensor is never stored (Inception's and GoogLeNet's pooling branches, ResNet-D's average
// pooled shortcut). Runs last of the fusions: the convolution keeps whatever it absorbed.
Graph fuse_pooling_into_conv(const Graph& g);
// The same for every such pair, whatever their shapes (the tests' small blocks).
Graph fuse_expand_depthwise_everywhere(const Graph& g);
// Whether the fused kernel measured faster than the two it replaces, for an expansion of
// `input_channels` into a tensor of `expanded` (NHWC) read by a depthwise convolution of
// vertical stride `stride` and window height `kernel`: expansion weights of at most 512 KiB
// (every task reads them all), rows of at least 14 pixels, and stride 2 or an image of at most
// 28x28 under a window of at most 3 rows.
bool expansion_fusion_pays(int64_t input_channels, const Shape& expanded, int stride, int kernel);

// use_bf16 (PipelineOptions::precision bf16, after every other pass): every convolution that
// can (bf16_conv_refusal) runs its multiply-adds in bfloat16 (Conv2d::bf16), but for narrow
// 3x3 stride-1 layers whose float32 kernel is Winograd, which stay float32: 64 or fewer output
// channels where the bf16 kernels run on AMX (`amx`), 128 or fewer where they run AVX512_BF16
// dot products. Its `computes` list says which. Everything else stays float32.
Graph use_bf16(const Graph& g, bool amx = false);

// gemm_as_conv (PipelineOptions::precision bf16, before every other pass): a Gemm of a computed
// matrix and a constant one, with no bias or a constant one, becomes a 1x1 convolution between
// two Reshapes (views), which use_bf16 then marks.
Graph gemm_as_conv(const Graph& g);

}  // namespace kiln::graph
