// ONNX -> IR for the reductions (ReduceMean, ReduceSum, ... as one Reduce op with a kind), the
// variadic elementwise ops (Max, Min, Sum, Mean as chains of binary nodes), and the
// rearrangements DepthToSpace, SpaceToDepth (Reshape, Transpose, Reshape, as ONNX defines them)
// and Tile.
#include <algorithm>

#include "graph/onnx/importer.h"
#include "graph/shape_inference.h"

namespace kiln::graph::onnx {
namespace {

ReduceKind reduce_kind(const NodeCtx& c) {
  static const std::vector<std::pair<std::string, ReduceKind>> kinds = {
      {"ReduceMean", ReduceKind::mean},
      {"ReduceSum", ReduceKind::sum},
      {"ReduceMax", ReduceKind::max},
      {"ReduceMin", ReduceKind::min},
      {"ReduceProd", ReduceKind::prod},
      {"ReduceL1", ReduceKind::l1},
      {"ReduceL2", ReduceKind::l2},
      {"ReduceLogSum", ReduceKind::log_sum},
      {"ReduceLogSumExp", ReduceKind::log_sum_exp},
      {"ReduceSumSquare", ReduceKind::sum_square}};
  for (const auto& [name, kind] : kinds)
    if (c.op() == name) return kind;
  KILN_CHECK(false, "convert_reduce has no kind for " + c.op());
  return ReduceKind::mean;
}

// A reduction over no axes (noop_with_empty_axes, or a scalar input) still applies the kind's
// elementwise part, as ONNX's reference does (np.sum(np.square(x), axis=())): |x| for L1 and
// L2, x^2 for SumSquare, log x for LogSum; the others are x itself (LogSumExp too: log(exp(x)),
// exact where float32 exp would overflow).
void reduce_over_no_axes(Importer& im, const NodeCtx& c, ReduceKind kind) {
  ChainStep step;
  switch (kind) {
    case ReduceKind::l1:
    case ReduceKind::l2:
      step = {ChainStepKind::abs, 0, 0};
      break;
    case ReduceKind::sum_square:
      step = {ChainStepKind::pow, 2.0f, 0};
      break;
    case ReduceKind::log_sum:
      step = {ChainStepKind::log, 0, 0};
      break;
    case ReduceKind::mean:
    case ReduceKind::sum:
    case ReduceKind::max:
    case ReduceKind::min:
    case ReduceKind::prod:
    case ReduceKind::log_sum_exp:
      return im.define_alias(c, 0, 0);
    case ReduceKind::argmax:  // not made by the Reduce* ops (convert_arg_reduce)
    case ReduceKind::argmin:
    case ReduceKind::argmax_last:
    case ReduceKind::argmin_last:
      node_error(c, "is not a reduction over axes");
  }
  im.define_value(
      c, 0, im.emit(c, ElementwiseChain{{step}}, {im.value_input(c, 0)}, im.output_name(c, 0)));
}

// The emitted chain a(0) op a(1) op ... for Max, Min, Sum and Mean (then divided by the count).
ValueId variadic_chain(Importer& im, const NodeCtx& c, BinaryOp op) {
  const int n = c.proto->input_size();
  ValueId acc = im.value_input(c, 0);
  for (int i = 1; i < n; ++i)
    acc = im.emit(c, Binary{op}, {acc, im.value_input(c, i)},
                  i + 1 == n && c.op() != "Mean" ? im.output_name(c, 0)
                                                 : c.name + "/partial" + std::to_string(i),
                  c.name + "/" + std::to_string(i));
  if (c.op() != "Mean" || n == 1) return acc;
  // A divisor of the result's rank (at least 1), so the division is an elementwise kernel of
  // its own or a step of the chain it fuses into.
  const Shape ones(std::max<size_t>(1, im.graph().value(acc).shape.size()), 1);
  const ValueId count = im.add_constant(c.name + "/count", ones, {static_cast<float>(n)},
                                        logical_layout(ones.size()));
  return im.emit(c, Binary{BinaryOp::div}, {acc, count}, im.output_name(c, 0), c.name + "/mean");
}

int block_size(const NodeCtx& c) {
  return to_int(c, attr_int(c, "blocksize", 0), "attribute 'blocksize'", 1, int64_t{1} << 16);
}

// Reshape to `split`, Transpose by `perm`, Reshape to `out`: the data movement DepthToSpace and
// SpaceToDepth are defined as. The Reshapes are views; the Transpose is one generated kernel.
void emit_rearrangement(Importer& im, const NodeCtx& c, const Shape& split,
                        const std::vector<int>& perm, const Shape& out) {
  const ValueId x = im.value_input(c, 0);
  const ValueId s = im.emit(c, Reshape{split}, {x}, c.name + "/split", c.name + "/split");
  const ValueId t = im.emit(c, Transpose{perm}, {s}, c.name + "/moved", c.name + "/move");
  im.define_value(c, 0, im.emit(c, Reshape{out}, {t}, im.output_name(c, 0), c.name + "/merge"));
}

Shape image_shape_of(Importer& im, const NodeCtx& c) {
  const Shape xs = im.input_shape(c, 0);
  if (xs.size() != 4)
    node_error(c,
               "input '" + im.input_name(c, 0) + "' is " + to_string(xs) + ", expected 4-D NCHW");
  return xs;
}

}  // namespace

// Opsets 1-17 (ReduceSum 1-12) take the axes as an attribute; ReduceSum from 13 and every other
// reduction from 18 as an optional constant input, with noop_with_empty_axes.
void convert_reduce(Importer& im, const NodeCtx& c) {
  const ReduceKind kind = reduce_kind(c);
  const bool axes_input = c.opset >= (kind == ReduceKind::sum ? 13 : 18);
  expect_inputs(c, 1, axes_input ? 2 : 1);
  const size_t rank = im.input_shape(c, 0).size();
  Reduce r;
  r.kind = kind;
  r.keepdims = attr_int(c, "keepdims", 1) != 0;
  const std::vector<int64_t> axes = !axes_input          ? attr_ints(c, "axes")
                                    : im.has_input(c, 1) ? im.int_list_input(c, 1, "axes")
                                                         : std::vector<int64_t>{};
  if ((axes.empty() && attr_int(c, "noop_with_empty_axes", 0) != 0) || rank == 0)
    return reduce_over_no_axes(im, c, kind);
  for (int64_t a : axes) {
    const int axis = normalize_axis(c, a, rank, "an axes entry");
    if (std::find(r.axes.begin(), r.axes.end(), axis) != r.axes.end())
      node_error(c, "axes lists axis " + std::to_string(axis) + " twice");
    r.axes.push_back(axis);
  }
  std::sort(r.axes.begin(), r.axes.end());
  im.define_value(c, 0, im.emit(c, r, {im.value_input(c, 0)}, im.output_name(c, 0)));
}

// ArgMax and ArgMin (opsets 1-28; select_last_index from 12): a Reduce of the arg kinds over
// one axis. The index is a float32 holding the exact integer (docs/onnx.md), so the reduced
// axis must be shorter than 2^24.
void convert_arg_reduce(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  const Shape xs = im.input_shape(c, 0);
  if (xs.empty())
    node_error(c, "input '" + im.input_name(c, 0) + "' is a scalar; there is no axis to search");
  const bool last = attr_int(c, "select_last_index", 0) != 0;
  Reduce r;
  r.kind = c.op() == "ArgMax" ? (last ? ReduceKind::argmax_last : ReduceKind::argmax)
                              : (last ? ReduceKind::argmin_last : ReduceKind::argmin);
  r.keepdims = attr_int(c, "keepdims", 1) != 0;
  r.axes = {normalize_axis(c, attr_int(c, "axis", 0), xs.size(), "axis")};
  if (xs[r.axes[0]] >= kMaxArgReduceExtent)
    node_error(c, "axis " + std::to_string(r.axes[0]) + " has " + std::to_string(xs[r.axes[0]]) +
                      " elements; Kiln returns indices as float32, exact only below 2^24");
  im.define_value(c, 0, im.emit(c, r, {im.value_input(c, 0)}, im.output_name(c, 0)));
}

// TopK (opsets 1-28: k an attribute before 10, then the input K, known at import; largest and
// sorted from 11): one TopK node per output a later node or the graph reads, the values and the
// indices (a float32 holding the exact index, as ArgMax's). The output is always sorted, which
// sorted=0 allows.
void convert_topk(Importer& im, const NodeCtx& c) {
  expect_inputs(c, c.opset >= 10 ? 2 : 1, c.opset >= 10 ? 2 : 1);
  const Shape xs = im.input_shape(c, 0);
  if (xs.empty())
    node_error(c, "input '" + im.input_name(c, 0) + "' is a scalar; there is no axis to search");
  TopK t;
  t.axis = normalize_axis(c, attr_int(c, "axis", -1), xs.size(), "axis");
  if (c.opset >= 10) {
    const std::vector<int64_t> k = im.int_list_input(c, 1, "K");
    if (k.size() != 1) node_error(c, "K must hold one value, got " + std::to_string(k.size()));
    t.k = k[0];
  } else {
    t.k = attr_int(c, "k", -1);
  }
  t.largest = attr_int(c, "largest", 1) != 0;
  for (int o = 0; o < std::min(im.num_outputs(c), 2); ++o) {
    if (!im.output_used(c, o)) continue;
    t.indices = o == 1;
    im.define_value(c, o,
                    im.emit(c, t, {im.value_input(c, 0)}, im.output_name(c, o),
                            c.name + (o == 1 ? "/indices" : "/values")));
  }
}

// Max, Min, Sum, Mean of one or more inputs with numpy broadcasting: a chain of binary nodes
// (Mean: Sum, then a division by the count). Inputs known at import fold (shape arithmetic).
void convert_variadic(Importer& im, const NodeCtx& c) {
  const int n = c.proto->input_size();
  if (n < 1) node_error(c, "needs at least one input");
  for (int i = 0; i < n; ++i)
    if (!im.has_input(c, i)) node_error(c, "input " + std::to_string(i) + " is empty");
  const BinaryOp op = c.op() == "Max"   ? BinaryOp::max
                      : c.op() == "Min" ? BinaryOp::min
                                        : BinaryOp::add;
  if (n == 1) return im.define_alias(c, 0, 0);
  // Integer inputs known at import (shape arithmetic) fold exactly; float ones are the
  // network's arithmetic and run in the graph.
  std::vector<const HostTensor*> host;
  for (int i = 0; i < n; ++i) host.push_back(im.host_input(c, i));
  if (std::all_of(host.begin(), host.end(),
                  [](const HostTensor* h) { return h && !h->is_float(); })) {
    if (op == BinaryOp::add) node_error(c, "Sum and Mean of integer tensors are not supported");
    HostTensor r = *host[0];
    for (int i = 1; i < n; ++i) r = host_binary(c, op, r, *host[i]);
    return im.define_host(c, 0, std::move(r));
  }
  im.define_value(c, 0, variadic_chain(im, c, op));
}

// DepthToSpace: DCR (the default) moves depth as [blocksize_h, blocksize_w, C'], CRD as
// [C', blocksize_h, blocksize_w].
void convert_depth_to_space(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  const Shape x = image_shape_of(im, c);
  const int64_t b = block_size(c);
  const std::string mode = attr_string(c, "mode", "DCR");
  if (mode != "DCR" && mode != "CRD")
    node_error(c, "attribute 'mode' is '" + mode + "', expected DCR or CRD");
  if (x[1] % (b * b) != 0)
    node_error(c, "the channels (" + std::to_string(x[1]) +
                      ") are not a multiple of blocksize^2 (" + std::to_string(b * b) + ")");
  const int64_t cc = x[1] / (b * b);
  const Shape out = {x[0], cc, x[2] * b, x[3] * b};
  if (mode == "DCR")
    emit_rearrangement(im, c, {x[0], b, b, cc, x[2], x[3]}, {0, 3, 4, 1, 5, 2}, out);
  else
    emit_rearrangement(im, c, {x[0], cc, b, b, x[2], x[3]}, {0, 1, 4, 2, 5, 3}, out);
}

// SpaceToDepth, its inverse: depth as [blocksize_h, blocksize_w, C] (DCR, the only order before
// opset 28 and its default) or [C, blocksize_h, blocksize_w] (CRD, opset 28's `mode`).
void convert_space_to_depth(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  const Shape x = image_shape_of(im, c);
  const int64_t b = block_size(c);
  const std::string mode = attr_string(c, "mode", "DCR");
  if (mode != "DCR" && mode != "CRD")
    node_error(c, "attribute 'mode' is '" + mode + "', expected DCR or CRD");
  if (x[2] % b != 0 || x[3] % b != 0)
    node_error(c, "the spatial size " + std::to_string(x[2]) + "x" + std::to_string(x[3]) +
                      " is not a multiple of blocksize " + std::to_string(b));
  const std::vector<int> perm =
      mode == "DCR" ? std::vector<int>{0, 3, 5, 1, 2, 4} : std::vector<int>{0, 1, 3, 5, 2, 4};
  emit_rearrangement(im, c, {x[0], x[1], x[2] / b, b, x[3] / b, b}, perm,
                     {x[0], x[1] * b * b, x[2] / b, x[3] / b});
}

// Tile (opset 6 on): repeats a constant input with one entry per axis.
void convert_tile(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 2, 2);
  const size_t rank = im.input_shape(c, 0).size();
  const std::vector<int64_t> repeats = im.int_list_input(c, 1, "repeats");
  if (repeats.size() != rank)
    node_error(c, "repeats has " + std::to_string(repeats.size()) + " entries for a rank-" +
                      std::to_string(rank) + " input");
  for (int64_t r : repeats)
    if (r < 1) node_error(c, "repeat " + std::to_string(r) + " would make an empty tensor");
  if (std::all_of(repeats.begin(), repeats.end(), [](int64_t r) { return r == 1; }))
    return im.define_alias(c, 0, 0);
  im.define_value(c, 0, im.emit(c, Tile{repeats}, {im.value_input(c, 0)}, im.output_name(c, 0)));
}

}  // namespace kiln::graph::onnx
