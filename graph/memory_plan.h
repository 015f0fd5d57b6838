// Arena memory planning: live intervals of every tensor the kernels write, and offsets in one
// arena such that tensors alive at the same time never overlap.
#pragma once

#include <string>
#include <vector>

#include "graph/ir.h"
#include "graph/kernel_spec.h"

namespace kiln::graph {

struct ArenaBuffer {
  ValueId value;
  int64_t offset = 0;
  int64_t bytes = 0;
  int first = 0;  // index of the producing node
  int last = 0;   // index of the last reading node; num_nodes for graph outputs
};

// A tensor stored inside another. A slice: `value` is [offset, offset + its extent) of `base`
// along `axis` (same rank, same extents elsewhere), written there by its producer and the
// Concat `node` copying nothing, or cut from it by the Slice `node`, which copies nothing. A
// view (axis kWhole): `value` is `base`'s bytes from element `offset` on (0 but for a
// contiguous Slice's, or a view of one) under its own dense shape, and the Reshape or Slice
// `node` copies nothing. Only a Slice's base may itself be an alias, a view (the Slice of a
// relabelled tensor).
// A strided view (axis kStrided): `value`'s element [i0, i1, ...] is `base`'s element
// offset + sum(i_a * strides[a]), and the Transpose, Slice or Reshape `node` copies nothing
// (PlanOptions::strided_views); `base` is a buffer of the arena's own.
struct ArenaAlias {
  static constexpr int kWhole = -1;
  static constexpr int kStrided = -2;
  ValueId value, base;
  int axis = 0;
  int64_t offset = 0;
  NodeId node;                   // the Concat, Reshape, Slice or Transpose this makes a no-op
  std::vector<int64_t> strides;  // kStrided: in elements, one per axis of `value`, row-major
  bool is_view() const { return axis == kWhole; }
  bool is_strided() const { return axis == kStrided; }
};

struct ArenaPlan {
  std::vector<ArenaBuffer> buffers;  // one per tensor a node writes and owns, in node order
  std::vector<ArenaAlias> aliases;   // Concat inputs written in place; Reshapes, Slices and
                                     // Transposes as views
  int64_t arena_bytes = 0;           // planned size
  int64_t unshared_bytes = 0;        // the owned tensors without any reuse
  bool flat_pointwise = false;       // PlanOptions::flat_pointwise
  const ArenaBuffer* find(ValueId v) const;
  const ArenaAlias* find_alias(ValueId v) const;
  bool elides(NodeId n) const;  // n is a Concat, Reshape, Slice or Transpose that copies nothing
};

struct PlanOptions {
  int64_t alignment = 64;
  // Concat in place: when every input of a Concat is produced by a Halide conv kernel (which
  // writes strided outputs) and read by nothing else, the convs write straight into their
  // slices of the Concat's output and the Concat does nothing. Off for backends whose buffers
  // cannot alias (CUDA device memory).
  bool in_place_concat = true;
  // Reshapes as views: a Reshape of a tensor the arena holds (not a graph input or a Concat's
  // slice) stores nothing and runs nothing; its output is the input's bytes, which stay alive
  // as long as either is read. So does a Slice whose output is one contiguous run of such a
  // tensor (whole trailing axes, single indices before the cut one: attention's q, k and v
  // taken from [3, B, H, N, D], a class token), read by anything, and not a graph output: its
  // output is the run's bytes. Off where buffers cannot alias.
  bool reshape_views = true;
  // Slices as views: a Slice with unit steps that cuts one axis of a tensor with a buffer of the
  // arena's own (a channel split: ShuffleNet's, a CSP block's), read only by kernels that read
  // strided inputs, stores nothing and runs nothing; its readers read its part of the input at
  // the input's strides, and the input stays alive as long as either is read. Off where buffers
  // cannot alias.
  bool slice_views = true;
  // Transposes as strided views: a Transpose that keeps the last axis last, of a tensor the
  // arena holds (or a chain of Reshapes of one), read only by kernels that read strided inputs
  // or through Slices with unit steps and squeezing Reshapes by such kernels (attention's
  // [B, N, 3, H, D] -> [3, B, H, N, D], then q, k and v), stores nothing and runs nothing, nor
  // do those Slices and Reshapes: each reader is compiled for its input's strides in the
  // transposed tensor's buffer. Off where buffers cannot alias.
  bool strided_views = true;
  // Pointwise convolutions as long rows: a dense 1x1 convolution of stride 1 without padding
  // whose input, output and residual are dense NHWC tensors (not Concat slices) is the same
  // computation on an image of fewer, longer rows, [N, H / k, k * W, C] (flat_pointwise_rows):
  // planned_kernels gives its kernel those shapes, and the runtime passes views of the tensors'
  // buffers reshaped alike. A register tile then runs along k rows at once, so the AVX-512
  // schedules can take tiles of 4 channel vectors by 4 to 6 pixels without computing columns
  // twice at the end of 14- or 28-pixel rows (schedules/conv_params_direct.cpp). Off where buffers
  // cannot alias.
  bool flat_pointwise = true;
};

// The plan of a backend: the CPU's aliases tensors (in-place Concats, Reshape and Slice views); a GPU's
// buffers are device allocations of their own, so nothing is aliased there.
inline PlanOptions plan_options_for(bool aliasing_buffers) {
  PlanOptions o;
  o.in_place_concat = o.reshape_views = o.slice_views = o.strided_views = o.flat_pointwise =
      aliasing_buffers;
  return o;
}

// Graph inputs are bound by the caller and constants live with the model: neither is in the
// arena. Fused intermediates do not exist as values after fusion, so they get nothing.
ArenaPlan plan_arena(const Graph& g, const PlanOptions& options);
inline ArenaPlan plan_arena(const Graph& g, int64_t alignment = 64) {
  PlanOptions o;
  o.alignment = alignment;
  return plan_arena(g, o);
}

// The kernels that run under `plan`: lower_to_kernels(g) less the nodes the plan elides, each
// input stored as a slice of a larger tensor given that tensor's strides (TensorDesc::strides),
// so its kernel is compiled for them. Outputs keep dense descriptions: the kernels that write
// slices (convolutions) take their output strides at run time.
// With plan.flat_pointwise, pointwise convolutions get the shapes of flat_pointwise_rows.
std::vector<KernelSpec> planned_kernels(const Graph& g, const ArenaPlan& plan);

// The rows of H rows of W pixels read as long rows: the most whole rows k (a divisor of H) whose
// k * W pixels stay within kMaxFlatRow, as H / k rows (at least 2 tasks of rows on a 14x14
// image). Where 3 or more such rows by the blocks of 64 of `channels` (the output's) make an odd
// count under 16, an even count of rows at least 3/4 as long if one divides the H * W pixels
// (rows then start mid image row: the tensors are dense). An image whose rows are that long
// already keeps them (returns H). Images of at most kMinFlatPixels pixels are never reshaped.
inline constexpr int64_t kMaxFlatRow = 128;
inline constexpr int64_t kMinFlatPixels = 64;
int64_t flat_pointwise_rows(int64_t height, int64_t width, int64_t channels);

// Bytes of every activation tensor (non-constant, non-input) of a graph, each in its own
// buffer: what an engine without fusion or reuse would allocate.
int64_t naive_activation_bytes(const Graph& g);

// A table: tensor, bytes, offset, live interval.
std::string describe(const ArenaPlan& plan, const Graph& g);

}  // namespace kiln::graph
