// ONNX ops that vanish at import: pass-throughs (Identity, inference Dropout, Cast to float)
// and the constant producers (Constant, Shape, ConstantOfShape, Range, CumSum, and Sin, Cos and
// Mod of constants), evaluated here.
#include <cmath>
#include <type_traits>

#include "graph/onnx/importer.h"
#include "graph/reference_ops.h"
#include "graph/shape_inference.h"

namespace kiln::graph::onnx {
namespace {

using TP = ::onnx::TensorProto;

HostTensor scalar_of(const NodeCtx& c, const ::onnx::AttributeProto& a) {
  using AP = ::onnx::AttributeProto;
  HostTensor h;
  const std::string what = "attribute '" + a.name() + "' of node '" + c.name + "' (Constant)";
  if (a.name() == "value" && a.type() == AP::TENSOR) return decode_tensor(a.t(), what);
  if (a.name() == "value_float" && a.type() == AP::FLOAT) {
    h.f = {a.f()};
  } else if (a.name() == "value_floats" && a.type() == AP::FLOATS) {
    h.f.assign(a.floats().begin(), a.floats().end());
    h.dims = {static_cast<int64_t>(h.f.size())};
  } else if (a.name() == "value_int" && a.type() == AP::INT) {
    h.dtype = TP::INT64;
    h.i = {a.i()};
  } else if (a.name() == "value_ints" && a.type() == AP::INTS) {
    h.dtype = TP::INT64;
    h.i.assign(a.ints().begin(), a.ints().end());
    h.dims = {static_cast<int64_t>(h.i.size())};
  } else {
    node_error(c, "attribute '" + a.name() + "' (" + AP::AttributeType_Name(a.type()) +
                      ") is not supported; expected value, value_float(s) or value_int(s)");
  }
  return h;
}

// The single element of a Range operand.
const HostTensor& range_operand(Importer& im, const NodeCtx& c, int i, const char* role) {
  const HostTensor& h = im.constant_input(c, i, role);
  if (h.size() != 1)
    node_error(c, std::string(role) + " must be a scalar, got " + to_string(h.dims));
  return h;
}

}  // namespace

void convert_identity(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  im.define_alias(c, 0, 0);
}

void convert_dropout(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 3);
  if (c.opset < 7 && attr_int(c, "is_test", 0) == 0)
    node_error(c, "training mode (attribute 'is_test'=0) is not supported; Kiln runs inference");
  if (c.opset >= 12 && im.has_input(c, 2)) {
    const HostTensor& t = im.constant_input(c, 2, "training_mode");
    if (t.size() != 1) node_error(c, "training_mode must be a scalar");
    if (t.is_float() ? t.f[0] != 0.0f : t.i[0] != 0)
      node_error(c, "training_mode is true; Kiln runs inference only");
  }
  if (im.output_used(c, 1))
    node_error(c, "the mask output '" + im.output_name(c, 1) +
                      "' is used; Kiln imports Dropout "
                      "for inference only (output = input, no mask)");
  im.define_alias(c, 0, 0);
}

namespace {

// Input 0 of Cast or CastLike converted to dtype `to`.
void cast_input(Importer& im, const NodeCtx& c, int64_t to) {
  const HostTensor* h = im.host_input(c, 0);
  if (h && h->dtype != to) return im.define_host(c, 0, host_cast(c, *h, static_cast<int32_t>(to)));
  // A float graph value of constants cast to an integer type is shape arithmetic (the padding
  // a TensorFlow-style "same" convolution computes from the image size): computed now.
  if (!h && to != TP::FLOAT && to != TP::BOOL && (h = im.known_input(c, 0)))
    return im.define_host(c, 0, host_cast(c, *h, static_cast<int32_t>(to)));
  // FLOAT16 and BFLOAT16 are float32 inside Kiln (docs/onnx.md, "Half-precision models"): a
  // runtime tensor cast to them passes through unrounded, as one cast to FLOAT does.
  if (h || is_graph_float_dtype(static_cast<int32_t>(to))) return im.define_alias(c, 0, 0);
  if (to == TP::BOOL) {  // x != 0 as float 0/1 (docs/onnx.md, "Booleans"): Not twice
    const ChainStep no{ChainStepKind::logical_not, 0, 0};
    const ValueId v =
        im.emit(c, ElementwiseChain{{no, no}}, {im.value_input(c, 0)}, im.output_name(c, 0));
    im.mark_boolean(v);
    return im.define_value(c, 0, v);
  }
  node_error(c, "casting the runtime tensor '" + im.input_name(c, 0) + "' to " +
                    dtype_name(static_cast<int32_t>(to)) +
                    " is not supported; Kiln graph tensors are FLOAT");
}

}  // namespace

void convert_cast(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  if (!find_attr(c, "to")) node_error(c, "attribute 'to' is missing");
  const int64_t to = attr_int(c, "to", 0);
  if (to < 0 || to > 1000) node_error(c, "attribute 'to' is not a dtype");
  cast_input(im, c, to);
}

// CastLike (opset 15): Cast to the dtype of input 1, which is that of its host tensor, or for a
// graph tensor FLOAT (BOOL for a boolean: docs/onnx.md, "Booleans").
void convert_cast_like(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 2, 2);
  const HostTensor* like = im.host_input(c, 1);
  int64_t to = TP::FLOAT;
  if (like)
    to = like->dtype;
  else if (im.is_boolean(im.value_input(c, 1)))
    to = TP::BOOL;
  cast_input(im, c, to);
}

void convert_constant(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 0, 0);
  if (c.proto->attribute_size() != 1)
    node_error(c, "expected exactly one value attribute, got " +
                      std::to_string(c.proto->attribute_size()));
  im.define_host(c, 0, scalar_of(c, c.proto->attribute(0)));
}

void convert_shape(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  const Shape s = im.input_shape(c, 0);
  const int64_t r = static_cast<int64_t>(s.size());
  // Opset 15 start/end: negative counts from the back, then clamp to [0, rank].
  auto clamp_index = [r](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + r : v, 0, r); };
  const int64_t start = clamp_index(attr_int(c, "start", 0));
  const int64_t end = clamp_index(attr_int(c, "end", r));
  HostTensor h;
  h.dtype = TP::INT64;
  if (end > start) h.i.assign(s.begin() + start, s.begin() + end);
  h.dims = {static_cast<int64_t>(h.i.size())};
  im.define_host(c, 0, std::move(h));
}

// Size: the element count, known from the static shape (a rank-0 int64).
void convert_size(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  HostTensor h;
  h.dtype = TP::INT64;
  h.i = {num_elements(im.input_shape(c, 0))};
  im.define_host(c, 0, std::move(h));
}

void convert_constant_of_shape(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  const std::vector<int64_t> dims = im.int_list_input(c, 0, "shape");
  for (int64_t d : dims)
    if (d < 0) node_error(c, "shape " + to_string(dims) + " has a negative dimension");
  if (!fits_fold(dims))
    node_error(c, "shape " + to_string(dims) + " is too large to build at import time (over " +
                      std::to_string(kMaxFoldElements) + " elements)");
  HostTensor value;
  value.f = {0.0f};
  if (const auto* a = find_attr(c, "value")) {
    if (a->type() != ::onnx::AttributeProto::TENSOR)
      node_error(c, "attribute 'value' must be a TENSOR");
    value = decode_tensor(a->t(), "attribute 'value' of node '" + c.name + "' (ConstantOfShape)");
    if (value.size() != 1) node_error(c, "attribute 'value' must hold one element");
  }
  HostTensor h;
  h.dtype = value.dtype;
  h.dims = dims;
  const int64_t n = checked_elements(dims, "shape");
  if (value.is_float())
    h.f.assign(static_cast<size_t>(n), value.f[0]);
  else
    h.i.assign(static_cast<size_t>(n), value.i[0]);
  im.define_host(c, 0, std::move(h));
}

void convert_range(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 3, 3);
  const HostTensor& s = range_operand(im, c, 0, "start");
  const HostTensor& l = range_operand(im, c, 1, "limit");
  const HostTensor& d = range_operand(im, c, 2, "delta");
  if (s.dtype != l.dtype || s.dtype != d.dtype)
    node_error(c, "start, limit and delta differ in dtype");
  HostTensor h;
  h.dtype = s.dtype;
  int64_t n = 0;
  if (s.is_float()) {
    const double start = s.f[0], delta = d.f[0];
    const double count = std::ceil((static_cast<double>(l.f[0]) - start) / delta);
    if (delta == 0.0 || !std::isfinite(count)) node_error(c, "delta must be non-zero and finite");
    if (count > static_cast<double>(kMaxFoldElements))
      node_error(c, "the range is too long to fold");
    n = count > 0 ? static_cast<int64_t>(count) : 0;
    for (int64_t k = 0; k < n; ++k) h.f.push_back(static_cast<float>(start + k * delta));
  } else {
    const int64_t start = s.i[0], delta = d.i[0];
    if (delta == 0) node_error(c, "delta must be non-zero");
    // 128-bit: limit - start can overflow int64.
    const __int128 span = static_cast<__int128>(l.i[0]) - start;
    const __int128 count = span / delta + ((span % delta) != 0 && ((span > 0) == (delta > 0)));
    if (count > kMaxFoldElements) node_error(c, "the range is too long to fold");
    n = count > 0 ? static_cast<int64_t>(count) : 0;
    for (int64_t k = 0; k < n; ++k) h.i.push_back(start + k * delta);
  }
  h.dims = {n};
  im.define_host(c, 0, std::move(h));
}

// CumSum (opset 11) of a tensor known at import: the running sums along `axis` (exclusive:
// each element's sum leaves the element out; reverse: from the end), accumulated in the
// tensor's type in order, as onnxruntime does. EdgeNeXt's positional encoding takes the
// cumulative sums of a mask of ones; a CumSum of a runtime tensor is refused.
void convert_cumsum(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 2, 2);
  const HostTensor* x = im.known_input(c, 0);
  if (!x)
    node_error(c, "the cumulative sum of the runtime tensor '" + im.input_name(c, 0) +
                      "' is not supported; Kiln evaluates CumSum of constants at import");
  const HostTensor& a = im.constant_input(c, 1, "axis");
  if (a.is_float() || a.size() != 1) node_error(c, "axis must be one integer");
  const bool exclusive = attr_int(c, "exclusive", 0) != 0;
  const bool reverse = attr_int(c, "reverse", 0) != 0;
  const int axis = normalize_axis(c, a.i[0], x->dims.size(), "axis");
  HostTensor h = *x;
  int64_t inner = 1;
  for (size_t d = static_cast<size_t>(axis) + 1; d < h.dims.size(); ++d) inner *= h.dims[d];
  const int64_t len = h.dims.empty() ? 1 : h.dims[static_cast<size_t>(axis)];
  const int64_t outer = len * inner == 0 ? 0 : h.size() / (len * inner);
  // a + b, exactly for integers (an overflow is an error, as in the other folded arithmetic).
  const auto add = [&c](auto a, auto b) {
    if constexpr (std::is_integral_v<decltype(a)>) {
      decltype(a) r{};
      if (__builtin_add_overflow(a, b, &r)) node_error(c, "integer overflow in the cumulative sum");
      return r;
    } else {
      return a + b;
    }
  };
  const auto scan = [&](auto& v) {
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t in = 0; in < inner; ++in) {
        typename std::decay_t<decltype(v)>::value_type sum{};
        for (int64_t k = 0; k < len; ++k) {
          const int64_t at = (o * len + (reverse ? len - 1 - k : k)) * inner + in;
          auto& e = v[static_cast<size_t>(at)];
          const auto value = e;
          if (!exclusive) sum = add(sum, value);
          e = sum;
          if (exclusive) sum = add(sum, value);
        }
      }
  };
  if (h.size() > 0) {
    if (h.is_float())
      scan(h.f);
    else
      scan(h.i);
  }
  im.define_host(c, 0, std::move(h));
}

// The trigonometric functions (Sin, Cos, Tan, Asin, Acos, Atan: opset 7) and the hyperbolic
// ones (Sinh, Cosh, Asinh, Acosh, Atanh: opset 9) of a float tensor known at import (the
// sinusoidal positional encodings of EdgeNeXt and transformer hybrids, computed from constants)
// are evaluated here, in double, as the reference interpreter does; of a runtime tensor they
// are chain steps (convert_chain_step), generated vectorized.
void convert_trig(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 1, 1);
  const HostTensor* x = im.known_input(c, 0);
  if (!x) return convert_chain_step(im, c);  // a runtime tensor: a chain step, generated
  if (!x->is_float())
    node_error(c, "the input is " + dtype_name(x->dtype) + "; " + c.op() + " takes floats");
  const ChainStep step{unary_step_kind(c)};
  HostTensor h = *x;
  for (float& v : h.f) v = static_cast<float>(reference_chain_step(step, v, 1.0, 0.0));
  im.define_host(c, 0, std::move(h));
}

// Mod (opset 10) of tensors known at import: window-attention transformers (Swin, TinyViT,
// Twins) compute their padding to a whole number of windows as (w - size % w) % w from
// constants. fmod=0 takes the divisor's sign (Python's %), fmod=1 the dividend's (C's fmod);
// floats need fmod=1, as the ONNX specification says. A Mod of a runtime tensor is refused.
void convert_mod(Importer& im, const NodeCtx& c) {
  expect_inputs(c, 2, 2);
  const HostTensor* a = im.known_input(c, 0);
  const HostTensor* b = im.known_input(c, 1);
  if (!a || !b)
    node_error(c, "Mod of the runtime tensor '" + im.input_name(c, a ? 1 : 0) +
                      "' is not supported; Kiln evaluates Mod of constants at import");
  if (a->dtype != b->dtype)
    node_error(c, "operands have different dtypes (" + dtype_name(a->dtype) + " and " +
                      dtype_name(b->dtype) + ")");
  const bool fmod = attr_int(c, "fmod", 0) != 0;
  if (a->is_float() && !fmod) node_error(c, "fmod=0 on floats (the specification requires fmod=1)");
  if (!a->is_float() && !is_int_dtype(a->dtype))
    node_error(c, "Mod of " + dtype_name(a->dtype) + " tensors is not supported");
  bool ok = false;
  const Shape out = broadcast_shapes(a->dims, b->dims, &ok);
  if (!ok) node_error(c, "cannot broadcast " + to_string(a->dims) + " with " + to_string(b->dims));
  if (!fits_fold(out))
    node_error(c, "the constant result " + to_string(out) + " is too large to fold at import");
  const HostTensor x = host_broadcast(*a, out), y = host_broadcast(*b, out);
  HostTensor r = x;
  if (r.is_float()) {
    for (size_t k = 0; k < r.f.size(); ++k) r.f[k] = std::fmod(x.f[k], y.f[k]);
  } else {
    for (size_t k = 0; k < r.i.size(); ++k) {
      const int64_t d = y.i[k];
      if (d == 0) node_error(c, "integer Mod by zero");
      // INT64_MIN % -1 overflows in C++; its remainder is 0.
      int64_t m = d == -1 ? 0 : x.i[k] % d;
      if (!fmod && m != 0 && (m < 0) != (d < 0)) m += d;
      r.i[k] = m;
    }
  }
  im.define_host(c, 0, std::move(r));
}

}  // namespace kiln::graph::onnx
