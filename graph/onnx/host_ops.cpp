// Import-time folding on host tensors: the shape arithmetic and data movement that exporters
// emit around Reshape (Shape -> Gather -> Unsqueeze -> Concat), computed exactly once here.
#include <algorithm>
#include <cmath>
#include <limits>

#include "graph/onnx/importer.h"
#include "graph/shape_inference.h"

namespace kiln::graph::onnx {
namespace {

// For each element of a tensor shaped `out`, the flat index of the element it reads in a
// tensor shaped `in` under numpy broadcasting (in is right-aligned; size-1 axes repeat).
std::vector<int64_t> broadcast_sources(const Shape& in, const Shape& out) {
  const size_t r = out.size(), lead = r - in.size();
  std::vector<int64_t> stride(r, 0);
  int64_t s = 1;
  for (size_t a = r; a-- > lead;) {
    stride[a] = in[a - lead] == 1 ? 0 : s;
    s *= in[a - lead];
  }
  std::vector<int64_t> src;
  src.reserve(static_cast<size_t>(num_elements(out)));
  std::vector<int64_t> idx(r, 0);
  for (int64_t k = 0, n = num_elements(out); k < n; ++k) {
    int64_t off = 0;
    for (size_t a = 0; a < r; ++a) off += idx[a] * stride[a];
    src.push_back(off);
    for (size_t a = r; a-- > 0;) {
      if (++idx[a] < out[a]) break;
      idx[a] = 0;
    }
  }
  return src;
}

int64_t int_op(const NodeCtx& c, BinaryOp op, int64_t a, int64_t b) {
  int64_t r = 0;
  bool overflow = false;
  switch (op) {
    case BinaryOp::add:
      overflow = __builtin_add_overflow(a, b, &r);
      break;
    case BinaryOp::sub:
      overflow = __builtin_sub_overflow(a, b, &r);
      break;
    case BinaryOp::mul:
      overflow = __builtin_mul_overflow(a, b, &r);
      break;
    case BinaryOp::div:
      if (b == 0) node_error(c, "integer division by zero in a constant expression");
      overflow = a == std::numeric_limits<int64_t>::min() && b == -1;
      if (!overflow) r = a / b;  // ONNX integer Div truncates, as C++ does
      break;
    case BinaryOp::max:
      r = std::max(a, b);
      break;
    case BinaryOp::min:
      r = std::min(a, b);
      break;
    case BinaryOp::pow:  // by squaring, overflow-checked; a negative exponent truncates as C does
      if (b < 0) {
        if (a == 0) node_error(c, "integer 0 to a negative power in a constant expression");
        r = a == 1 ? 1 : a == -1 ? (b % 2 == 0 ? 1 : -1) : 0;
        break;
      }
      r = 1;
      for (int64_t base = a, e = b; e > 0 && !overflow; e >>= 1) {
        if (e & 1) overflow = __builtin_mul_overflow(r, base, &r);
        if (e > 1 && !overflow) overflow = __builtin_mul_overflow(base, base, &base);
      }
      break;
    case BinaryOp::equal:
      r = a == b;
      break;
    case BinaryOp::less:
      r = a < b;
      break;
    case BinaryOp::greater:
      r = a > b;
      break;
    case BinaryOp::less_equal:
      r = a <= b;
      break;
    case BinaryOp::greater_equal:
      r = a >= b;
      break;
    case BinaryOp::logical_and:
      r = a != 0 && b != 0;
      break;
    case BinaryOp::logical_or:
      r = a != 0 || b != 0;
      break;
    case BinaryOp::logical_xor:
      r = (a != 0) != (b != 0);
      break;
  }
  if (overflow)
    node_error(c, "integer overflow in a constant expression (" + std::to_string(a) + ", " +
                      std::to_string(b) + ")");
  return r;
}

float float_op(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::add:
      return a + b;
    case BinaryOp::sub:
      return a - b;
    case BinaryOp::mul:
      return a * b;
    case BinaryOp::div:
      return a / b;
    case BinaryOp::max:
      return std::isnan(a) || std::isnan(b) ? NAN : std::max(a, b);
    case BinaryOp::min:
      return std::isnan(a) || std::isnan(b) ? NAN : std::min(a, b);
    case BinaryOp::pow:
      return std::pow(a, b);
    case BinaryOp::equal:
      return a == b;
    case BinaryOp::less:
      return a < b;
    case BinaryOp::greater:
      return a > b;
    case BinaryOp::less_equal:
      return a <= b;
    case BinaryOp::greater_equal:
      return a >= b;
    case BinaryOp::logical_and:
      return a != 0.0f && b != 0.0f;
    case BinaryOp::logical_or:
      return a != 0.0f || b != 0.0f;
    case BinaryOp::logical_xor:
      return (a != 0.0f) != (b != 0.0f);
  }
  return 0.0f;
}

}  // namespace

bool is_int_dtype(int32_t t) {
  using TP = ::onnx::TensorProto;
  return t == TP::INT64 || t == TP::INT32 || t == TP::INT16 || t == TP::INT8 || t == TP::UINT16 ||
         t == TP::UINT8;
}

bool fits_fold(const Shape& dims) {
  int64_t n = 1;
  for (int64_t d : dims)
    if (d < 0 || __builtin_mul_overflow(n, d, &n)) return false;
  return n <= kMaxFoldElements;
}

HostTensor host_reshape(const HostTensor& t, Shape dims) {
  HostTensor r = t;
  r.dims = std::move(dims);
  return r;
}

HostTensor host_gather_flat(const HostTensor& t, Shape dims, const std::vector<int64_t>& src) {
  HostTensor r;
  r.dtype = t.dtype;
  r.dims = std::move(dims);
  if (t.is_float()) {
    r.f.reserve(src.size());
    for (int64_t k : src) r.f.push_back(t.f.at(k));
  } else {
    r.i.reserve(src.size());
    for (int64_t k : src) r.i.push_back(t.i.at(k));
  }
  return r;
}

Slice axis_slice(const Shape& dims, int axis, int64_t from, int64_t to, int64_t step) {
  Slice s{std::vector<int64_t>(dims.size(), 0), dims, std::vector<int64_t>(dims.size(), 1)};
  s.starts[axis] = from, s.ends[axis] = to, s.steps[axis] = step;
  return s;
}

Shape slice_dims(const Shape& in, const Slice& s) {
  Shape out(in.size());
  for (size_t a = 0; a < in.size(); ++a) {
    const int64_t st = s.steps[a];
    const int64_t span = st > 0 ? s.ends[a] - s.starts[a] : s.starts[a] - s.ends[a];
    const int64_t mag = st > 0 ? st : -st;  // |step| <= dim after normalize_slice
    out[a] = span <= 0 ? 0 : (span + mag - 1) / mag;
  }
  return out;
}

HostTensor host_slice(const HostTensor& t, const Slice& s) {
  const Shape out = slice_dims(t.dims, s);
  const size_t r = out.size();
  std::vector<int64_t> stride(r, 1);
  for (size_t a = r; a-- > 1;) stride[a - 1] = stride[a] * t.dims[a];
  std::vector<int64_t> src, idx(r, 0);
  const int64_t n = num_elements(out);
  src.reserve(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) {
    int64_t off = 0;
    for (size_t a = 0; a < r; ++a) off += (s.starts[a] + idx[a] * s.steps[a]) * stride[a];
    src.push_back(off);
    for (size_t a = r; a-- > 0;) {
      if (++idx[a] < out[a]) break;
      idx[a] = 0;
    }
  }
  return host_gather_flat(t, out, src);
}

HostTensor host_concat(const std::vector<const HostTensor*>& parts, int axis) {
  HostTensor r;
  r.dtype = parts[0]->dtype;
  r.dims = parts[0]->dims;
  r.dims[axis] = 0;
  for (const HostTensor* p : parts) r.dims[axis] += p->dims[axis];
  int64_t outer = 1, inner = 1;
  for (int a = 0; a < axis; ++a) outer *= r.dims[a];
  for (size_t a = axis + 1; a < r.dims.size(); ++a) inner *= r.dims[a];
  for (int64_t o = 0; o < outer; ++o) {
    for (const HostTensor* p : parts) {
      const int64_t len = p->dims[axis] * inner;
      if (p->is_float())
        r.f.insert(r.f.end(), p->f.begin() + o * len, p->f.begin() + (o + 1) * len);
      else
        r.i.insert(r.i.end(), p->i.begin() + o * len, p->i.begin() + (o + 1) * len);
    }
  }
  return r;
}

HostTensor host_binary(const NodeCtx& c, BinaryOp op, const HostTensor& a, const HostTensor& b) {
  if (a.dtype != b.dtype)
    node_error(c, "operands have different dtypes (" + dtype_name(a.dtype) + " and " +
                      dtype_name(b.dtype) + ")");
  using TP = ::onnx::TensorProto;
  const bool logic = op == BinaryOp::logical_and || op == BinaryOp::logical_or ||
                     op == BinaryOp::logical_xor;
  const bool bool_ok = a.dtype == TP::BOOL && (logic || is_boolean(op));
  if (!a.is_float() && !is_int_dtype(a.dtype) && !bool_ok)
    node_error(c, "arithmetic on " + dtype_name(a.dtype) + " tensors is not supported");
  if (logic && a.dtype != TP::BOOL)
    node_error(c, "operands are " + dtype_name(a.dtype) + "; " + c.op() + " takes BOOL");
  bool ok = false;
  const Shape out = broadcast_shapes(a.dims, b.dims, &ok);
  if (!ok) node_error(c, "cannot broadcast " + to_string(a.dims) + " with " + to_string(b.dims));
  if (!fits_fold(out))
    node_error(c, "the constant result " + to_string(out) + " is too large to fold at import");
  const std::vector<int64_t> sa = broadcast_sources(a.dims, out);
  const std::vector<int64_t> sb = broadcast_sources(b.dims, out);
  HostTensor r;
  r.dtype = is_boolean(op) ? TP::BOOL : a.dtype;
  r.dims = out;
  for (size_t k = 0; k < sa.size(); ++k) {
    if (a.is_float() && is_boolean(op))
      r.i.push_back(float_op(op, a.f[sa[k]], b.f[sb[k]]) != 0.0f);
    else if (a.is_float())
      r.f.push_back(float_op(op, a.f[sa[k]], b.f[sb[k]]));
    else
      r.i.push_back(int_op(c, op, a.i[sa[k]], b.i[sb[k]]));
  }
  return r;
}

HostTensor host_where(const NodeCtx& c, const HostTensor& cond, const HostTensor& x,
                      const HostTensor& y) {
  bool ok = false;
  const Shape out = broadcast_shapes(broadcast_shapes(cond.dims, x.dims, &ok), y.dims, &ok);
  if (!ok)
    node_error(c, "cannot broadcast " + to_string(cond.dims) + ", " + to_string(x.dims) + " and " +
                      to_string(y.dims));
  const std::vector<int64_t> sc = broadcast_sources(cond.dims, out);
  const std::vector<int64_t> sx = broadcast_sources(x.dims, out);
  const std::vector<int64_t> sy = broadcast_sources(y.dims, out);
  HostTensor r;
  r.dtype = x.dtype;
  r.dims = out;
  for (size_t k = 0; k < sc.size(); ++k) {
    const bool take_x = cond.is_float() ? cond.f[sc[k]] != 0.0f : cond.i[sc[k]] != 0;
    const HostTensor& from = take_x ? x : y;
    const int64_t i = take_x ? sx[k] : sy[k];
    if (r.is_float())
      r.f.push_back(from.f[i]);
    else
      r.i.push_back(from.i[i]);
  }
  return r;
}

HostTensor host_broadcast(const HostTensor& t, const Shape& out) {
  return host_gather_flat(t, out, broadcast_sources(t.dims, out));
}

HostTensor host_cast(const NodeCtx& c, const HostTensor& t, int32_t to) {
  using TP = ::onnx::TensorProto;
  HostTensor r;
  r.dtype = to;
  r.dims = t.dims;
  if (is_float_dtype(to)) {
    if (t.is_float())
      r.f = t.f;
    else
      for (int64_t v : t.i) r.f.push_back(static_cast<float>(v));
    for (float& v : r.f) v = round_to_dtype(v, to);  // FLOAT16, BFLOAT16: their values
    return r;
  }
  if (!is_int_dtype(to) && to != TP::BOOL)
    node_error(c, "Cast to " + dtype_name(to) + " is not supported");
  if (t.is_float()) {
    for (float v : t.f) {
      if (std::isnan(v)) node_error(c, "cannot cast NaN to " + dtype_name(to));
      // Truncation toward zero (numpy's astype), saturating at the int64 limits.
      const float lim = 9.2233720368547758e18f;
      r.i.push_back(v >= lim    ? std::numeric_limits<int64_t>::max()
                    : v <= -lim ? std::numeric_limits<int64_t>::min()
                                : static_cast<int64_t>(v));
    }
  } else {
    r.i = t.i;
  }
  if (to == TP::BOOL)
    for (int64_t& v : r.i) v = v != 0;
  return r;
}

Slice normalize_slice(const NodeCtx& c, const Shape& dims, const std::vector<int64_t>& starts,
                      const std::vector<int64_t>& ends, const std::vector<int64_t>& axes,
                      const std::vector<int64_t>& steps) {
  const size_t n = starts.size(), r = dims.size();
  if (ends.size() != n || (!axes.empty() && axes.size() != n) ||
      (!steps.empty() && steps.size() != n))
    node_error(c, "starts, ends, axes and steps must have the same length (got " +
                      std::to_string(n) + ", " + std::to_string(ends.size()) + ", " +
                      std::to_string(axes.size()) + ", " + std::to_string(steps.size()) + ")");
  Slice s{std::vector<int64_t>(r, 0), dims, std::vector<int64_t>(r, 1)};
  std::vector<bool> seen(r, false);
  for (size_t k = 0; k < n; ++k) {
    const int a =
        normalize_axis(c, axes.empty() ? static_cast<int64_t>(k) : axes[k], r, "slice axis");
    if (seen[a]) node_error(c, "slice axis " + std::to_string(a) + " is listed twice");
    seen[a] = true;
    const int64_t d = dims[a];
    int64_t step = steps.empty() ? 1 : steps[k];
    if (step == 0) node_error(c, "slice step 0 on axis " + std::to_string(a));
    // A step larger than the axis takes one element, as a step of exactly the axis does;
    // clamping keeps |step| (and all index arithmetic) far from overflow.
    step = std::clamp<int64_t>(step, -std::max<int64_t>(d, 1), std::max<int64_t>(d, 1));
    int64_t st = starts[k] < 0 ? starts[k] + d : starts[k];
    int64_t en = ends[k] < 0 ? ends[k] + d : ends[k];
    if (d == 0) {
      st = en = 0;  // nothing to take from an empty axis
      step = 1;
    } else if (step > 0) {
      st = std::clamp<int64_t>(st, 0, d);
      en = std::clamp<int64_t>(en, 0, d);
    } else {
      st = std::clamp<int64_t>(st, 0, d - 1);
      en = std::clamp<int64_t>(en, -1, d - 1);
    }
    s.starts[a] = st;
    s.ends[a] = en;
    s.steps[a] = step;
  }
  return s;
}

}  // namespace kiln::graph::onnx
