// Comparisons (Equal, Less, Greater, LessOrEqual, GreaterOrEqual), logic (Not, And, Or, Xor),
// Where, Pow with a tensor exponent, Expand, Trilu and OneHot. Booleans are float 0/1 in the graph
// (docs/onnx.md, "Booleans"); comparisons of tensors known at import (shape arithmetic) fold.
#include <cmath>

#include "graph/onnx/importer.h"
#include "graph/shape_inference.h"

namespace kiln::graph::onnx {
namespace {

using TP = ::onnx::TensorProto;

BinaryOp binary_op_of(const NodeCtx& c) {
  static const std::vector<std::pair<std::string, BinaryOp>> ops = {
      {"Equal", BinaryOp::equal},
      {"Less", BinaryOp::less},
      {"Greater", BinaryOp::greater},
      {"LessOrEqual", BinaryOp::less_equal},
      {"GreaterOrEqual", BinaryOp::greater_equal},
      {"And", BinaryOp::logical_and},
      {"Or", BinaryOp::logical_or},
      {"Xor", BinaryOp::logical_xor},
      {"Pow", BinaryOp::pow}};
  for (const auto& [name, op] : ops)
    if (c.op() == name) return op;
  KILN_CHECK(false, "no binary op for " + c.op());
  return BinaryOp::add;
}

// An integer tensor known at import as float32, where every value converts exactly (|v| <=
// 2^24); anything else is an error naming `role`.
HostTensor exact_float(const NodeCtx& c, const HostTensor& h, const std::string& role) {
  if (h.is_float()) return h;
  HostTensor r;
  r.dims = h.dims;
  for (int64_t v : h.i) {
    if (v > (int64_t{1} << 24) || v < -(int64_t{1} << 24))
      node_error(c, role + " value " + std::to_string(v) +
                        " is not exactly a float32 (Kiln converts integer values up to 2^24)");
    r.f.push_back(static_cast<float>(v));
  }
  return r;
}

void emit_boolean(Importer& im, const NodeCtx& c, Op op, std::vector<ValueId> inputs) {
  const ValueId v = im.emit(c, std::move(op), std::move(inputs), im.output_name(c, 0));
  im.mark_boolean(v);
  im.define_value(c, 0, v);
}

}  // namespace

// Equal, Less, Greater, LessOrEqual, GreaterOrEqual (numpy broadcasting) and And, Or, Xor
// (before opset 7 they broadcast by attribute, accepted where that is numpy's). Operands known at
// import fold (integers compare exactly); otherwise both are graph tensors (float32; booleans as
// 0/1).
void convert_compare(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 2, 2);
  const BinaryOp op = binary_op_of(c);
  if (c.opset < 7) check_legacy_broadcast(im, c);
  const HostTensor* a = im.host_input(c, 0);
  const HostTensor* b = im.host_input(c, 1);
  bool ok = false;
  if (a && b && fits_fold(broadcast_shapes(a->dims, b->dims, &ok)))
    return im.define_host(c, 0, host_binary(c, op, *a, *b));
  emit_boolean(im, c, Binary{op}, {im.value_input(c, 0), im.value_input(c, 1)});
}

// IsNaN and IsInf (detect_negative, detect_positive; both default 1): 1 where x is NaN or an
// infinity of a detected sign, else 0 (chain steps); folded for a tensor known at import.
void convert_is_nan_inf(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  const bool nan = c.op() == "IsNaN";
  const bool negative = !nan && attr_int(c, "detect_negative", 1) != 0;
  const bool positive = !nan && attr_int(c, "detect_positive", 1) != 0;
  if (const HostTensor* h = im.host_input(c, 0)) {
    if (!h->is_float())
      node_error(c, "the input is " + dtype_name(h->dtype) + "; " + c.op() + " takes floats");
    HostTensor r;
    r.dtype = TP::BOOL;
    r.dims = h->dims;
    for (float v : h->f)
      r.i.push_back(nan ? std::isnan(v) : std::isinf(v) && (v < 0 ? negative : positive));
    return im.define_host(c, 0, std::move(r));
  }
  const ChainStep step =
      nan ? ChainStep{ChainStepKind::is_nan, 0, 0}
          : ChainStep{ChainStepKind::is_inf, negative ? 1.0f : 0.0f, positive ? 1.0f : 0.0f};
  emit_boolean(im, c, ElementwiseChain{{step}}, {im.value_input(c, 0)});
}

// Not: 1 where x is 0, else 0 (a chain step); folded for a tensor known at import.
void convert_not(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  if (const HostTensor* h = im.host_input(c, 0); h && !h->is_float()) {
    HostTensor r = *h;
    for (int64_t& v : r.i) v = v == 0;
    r.dtype = TP::BOOL;
    return im.define_host(c, 0, std::move(r));
  }
  emit_boolean(im, c, ElementwiseChain{{ChainStep{ChainStepKind::logical_not, 0, 0}}},
               {im.value_input(c, 0)});
}

// Where(cond, x, y), the three broadcast together (opset 9 on). Folded when all three are
// known at import; the result is a boolean when x and y are.
void convert_where(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 3, 3);
  const HostTensor* cond = im.host_input(c, 0);
  const HostTensor* x = im.host_input(c, 1);
  const HostTensor* y = im.host_input(c, 2);
  if (cond && x && y && x->dtype == y->dtype) {
    bool ok = false;
    const Shape out = broadcast_shapes(broadcast_shapes(cond->dims, x->dims, &ok), y->dims, &ok);
    if (ok && fits_fold(out)) return im.define_host(c, 0, host_where(c, *cond, *x, *y));
  }
  const ValueId xv = im.value_input(c, 1), yv = im.value_input(c, 2);
  const ValueId v = im.emit(c, Where{}, {im.value_input(c, 0), xv, yv}, im.output_name(c, 0));
  if (im.is_boolean(xv) && im.is_boolean(yv)) im.mark_boolean(v);
  im.define_value(c, 0, v);
}

// Trilu (opset 14): the upper (upper=1, the default) or lower triangle of each matrix of the
// last two axes, from diagonal k (the optional second input, known at import; 0 the main one):
// element (i, j) is kept where j - i >= k (upper) or j - i <= k (lower), else 0. A Where of a
// constant 0/1 mask [M, N], broadcast over the leading axes, between x and 0 (not x times the
// mask, which would keep a NaN or an infinity that should be 0); folded for a tensor known at
// import.
void convert_trilu(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 2);
  const Shape in = im.input_shape(c, 0);
  if (in.size() < 2)
    node_error(c, "the input is " + to_string(in) + "; Trilu takes tensors of rank 2 or more");
  int64_t k = 0;
  if (im.has_input(c, 1)) {
    const std::vector<int64_t> ks = im.int_list_input(c, 1, "k");
    if (ks.size() != 1) node_error(c, "k must be one integer, got " + std::to_string(ks.size()));
    k = ks[0];
  }
  const bool upper = attr_int(c, "upper", 1) != 0;
  const int64_t rows = in[in.size() - 2], cols = in.back();
  HostTensor mask;
  mask.dtype = ::onnx::TensorProto::BOOL;
  mask.dims = {rows, cols};
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t j = 0; j < cols; ++j) mask.i.push_back(upper ? j - i >= k : j - i <= k);
  if (const HostTensor* h = im.host_input(c, 0); h && fits_fold(in)) {
    HostTensor zero;
    zero.dtype = h->dtype;
    zero.dims = {};
    if (h->is_float())
      zero.f = {0.0f};
    else
      zero.i = {0};
    return im.define_host(c, 0, host_where(c, mask, *h, zero));
  }
  std::vector<float> values(mask.i.begin(), mask.i.end());
  const ValueId m = im.add_constant(c.name + "/mask", mask.dims, std::move(values), Layout::any);
  const ValueId zero = im.add_constant(c.name + "/zero", {1}, {0.0f}, Layout::any);
  const ValueId x = im.value_input(c, 0);
  const ValueId v = im.emit(c, Where{}, {m, x, zero}, im.output_name(c, 0));
  if (im.is_boolean(x)) im.mark_boolean(v);
  im.define_value(c, 0, v);
}

// OneHot (opsets 9-28): an output of one more axis than the indices, `depth` long at `axis`,
// holding values[1] where the position along that axis equals the index (a negative one counted
// back from depth) and values[0] elsewhere (an index outside [-depth, depth) matches nothing).
// Lowered as Where(index == j or index == j - depth, on, off) against a constant [0, depth) along
// the axis, the indices viewed with a unit axis there: elementwise kernels. depth must be known at
// import (a non-integer one truncated, as onnxruntime casts it); indices known at import are
// truncated too, indices computed at run time (ArgMax's, a float32 holding the integer) are
// compared as they are; values (2 elements, [off, on]) may be either.
void convert_one_hot(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 3, 3);
  const HostTensor& dh = im.constant_input(c, 1, "depth");
  if (dh.size() != 1) node_error(c, "depth must hold one value, got " + std::to_string(dh.size()));
  const double dv = dh.is_float() ? std::trunc(double{dh.f[0]}) : static_cast<double>(dh.i[0]);
  if (!(dv >= 1 && dv <= double(int64_t{1} << 24)))
    node_error(c, "depth " +
                      (std::abs(dv) < 1e18 ? std::to_string(static_cast<int64_t>(dv))
                                           : std::to_string(dv)) +
                      " is not in [1, 2^24]");
  const auto depth = static_cast<int64_t>(dv);
  const Shape is = im.input_shape(c, 0);
  const int rank = static_cast<int>(is.size()) + 1;
  const int axis =
      normalize_axis(c, attr_int(c, "axis", -1), static_cast<size_t>(rank), "attribute 'axis'");
  if (im.input_shape(c, 2) != Shape{2} && im.input_shape(c, 2) != Shape{1, 2})
    node_error(c,
               "values must hold two elements [off, on], got " + to_string(im.input_shape(c, 2)));
  ValueId idx;
  if (const HostTensor* h = im.known_input(c, 0)) {
    HostTensor f = exact_float(c, *h, "an index");
    for (float& v : f.f) v = std::trunc(v);
    idx =
        im.add_constant(c.name + "/indices", f.dims, std::move(f.f), logical_layout(f.dims.size()));
  } else {
    idx = im.value_input(c, 0);
  }
  Shape unit = is;
  unit.insert(unit.begin() + axis, 1);
  idx = im.emit(c, Reshape{unit}, {idx}, c.name + "/indices_unit", c.name + "/indices_unit");
  Shape along(static_cast<size_t>(rank), 1);
  along[static_cast<size_t>(axis)] = depth;
  std::vector<float> j, j_back;
  for (int64_t k = 0; k < depth; ++k) {
    j.push_back(static_cast<float>(k));
    j_back.push_back(static_cast<float>(k - depth));
  }
  const ValueId pos = im.add_constant(c.name + "/positions", along, std::move(j), Layout::any);
  const ValueId back =
      im.add_constant(c.name + "/positions_back", along, std::move(j_back), Layout::any);
  const ValueId hit =
      im.emit(c, Binary{BinaryOp::equal}, {idx, pos}, c.name + "/hit", c.name + "/hit");
  const ValueId hit_back =
      im.emit(c, Binary{BinaryOp::equal}, {idx, back}, c.name + "/hit_back", c.name + "/hit_back");
  const ValueId on_here = im.emit(c, Binary{BinaryOp::logical_or}, {hit, hit_back},
                                  c.name + "/on_here", c.name + "/on_here");
  ValueId off, on;
  if (const HostTensor* h = im.known_input(c, 2)) {
    const HostTensor f = exact_float(c, *h, "a value");
    off = im.add_constant(c.name + "/off", {1}, {f.f[0]}, Layout::any);
    on = im.add_constant(c.name + "/on", {1}, {f.f[1]}, Layout::any);
  } else {
    ValueId values = im.value_input(c, 2);
    if (im.input_shape(c, 2) != Shape{2})
      values = im.emit(c, Reshape{{2}}, {values}, c.name + "/values", c.name + "/values");
    off = im.emit(c, axis_slice({2}, 0, 0, 1), {values}, c.name + "/off", c.name + "/off");
    on = im.emit(c, axis_slice({2}, 0, 1, 2), {values}, c.name + "/on", c.name + "/on");
  }
  im.define_value(c, 0, im.emit(c, Where{}, {on_here, on, off}, im.output_name(c, 0)));
}

// Pow (before opset 7 broadcasting by attribute, accepted where that is numpy's). A scalar exponent
// known at import (LayerNorm's square, GELU's cube) is a chain step; any other exponent a
// broadcasting Binary pow. An integer exponent known at import is converted to float32 (exact up to
// 2^24); integer base and exponent both known fold.
void convert_pow(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 2, 2);
  if (c.opset < 7) check_legacy_broadcast(im, c);
  const HostTensor* base = im.host_input(c, 0);
  const HostTensor* e = im.host_input(c, 1);
  if (base && e && !base->is_float() && !e->is_float())
    return im.define_host(c, 0, host_binary(c, BinaryOp::pow, *base, *e));
  const Shape xs = im.input_shape(c, 0), es = im.input_shape(c, 1);
  if (e && e->size() == 1 && es.size() <= xs.size()) {
    const float p = exact_float(c, *e, "exponent").f[0];
    const ValueId v = im.emit(c, ElementwiseChain{{ChainStep{ChainStepKind::pow, p, 0.0f}}},
                              {im.value_input(c, 0)}, im.output_name(c, 0));
    return im.define_value(c, 0, v);
  }
  ValueId exponent;
  if (e && !e->is_float()) {
    const HostTensor f = exact_float(c, *e, "exponent");
    exponent =
        im.add_constant(im.input_name(c, 1) + "#float", f.dims, f.f, logical_layout(f.dims.size()));
  } else {
    exponent = im.value_input(c, 1);
  }
  const ValueId v =
      im.emit(c, Binary{BinaryOp::pow}, {im.value_input(c, 0), exponent}, im.output_name(c, 0));
  im.define_value(c, 0, v);
}

// Expand (opset 8 on) with a constant shape: x broadcast to broadcast(x.shape, shape). A
// Reshape (a view) gives x the output's rank, then a Tile repeats each size-1 axis; a tensor
// known at import folds.
void convert_expand(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 2, 2);
  const std::vector<int64_t> shape = im.int_list_input(c, 1, "shape");
  const Shape xs = im.input_shape(c, 0);
  bool ok = false;
  const Shape out = broadcast_shapes(xs, shape, &ok);
  if (!ok) node_error(c, "cannot broadcast the input " + to_string(xs) + " to " + to_string(shape));
  for (int64_t d : out)
    if (d <= 0) node_error(c, "the output " + to_string(out) + " is empty; Kiln tensors cannot be");
  if (const HostTensor* h = im.host_input(c, 0); h && fits_fold(out))
    return im.define_host(c, 0, host_broadcast(*h, out));
  if (out == xs) return im.define_alias(c, 0, 0);
  Shape padded(out.size() - xs.size(), 1);
  padded.insert(padded.end(), xs.begin(), xs.end());
  std::vector<int64_t> repeats;
  for (size_t a = 0; a < out.size(); ++a) repeats.push_back(out[a] / padded[a]);
  ValueId x = im.value_input(c, 0);
  const bool boolean = im.is_boolean(x);
  if (padded != xs) {
    const std::string name = padded == out ? im.output_name(c, 0) : c.name + "/ranked";
    x = im.emit(c, Reshape{padded}, {x}, name, c.name + "/ranked");
  }
  ValueId v = x;
  if (padded != out) v = im.emit(c, Tile{repeats}, {x}, im.output_name(c, 0));
  if (boolean) im.mark_boolean(v);
  im.define_value(c, 0, v);
}

}  // namespace kiln::graph::onnx
