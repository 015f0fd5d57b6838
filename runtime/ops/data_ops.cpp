// Portable data kernels (see ops_internal.h): unary elementwise, data movement, Softmax
// and ReduceMean on float tensors.
//
// Single-threaded on purpose: these ops are memory-bound and small next to the convolutions
// around them. Speed comes from contiguous inner loops GCC vectorizes at baseline x86-64, and
// from collapsing every op to as few axes as possible first (see simplify()).
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <exception>

#include "graph/op_kind.h"
#include "graph/shape_inference.h"
#include "runtime/ops/ops_internal.h"

namespace kiln::runtime::ops {
namespace {

using graph::Shape;
using Dims = std::vector<int64_t>;

Dims strides_of(const Shape& s) {
  Dims st(s.size(), 1);
  for (size_t a = s.size(); a-- > 1;) st[a - 1] = st[a] * s[a];
  return st;
}

// A walk over an index space `dims` through K buffers, buffer k at offset sum(i[a] *
// strides[k][a]). Stride 0 repeats an element (broadcasting); negative strides walk backwards.
template <size_t K>
struct Walk {
  Dims dims;
  std::array<Dims, K> strides;
};

// The same walk over fewer axes: size-1 axes go, and an axis merges into the next when every
// buffer steps over the next one contiguously (or broadcasts both). Same-shape, scalar, row,
// column and channel broadcasts all end with one long last axis of stride 0 or 1.
template <size_t K>
Walk<K> simplify(const Walk<K>& w) {
  Walk<K> s;
  for (size_t a = 0; a < w.dims.size(); ++a) {
    if (w.dims[a] == 1) continue;
    bool merge = !s.dims.empty();
    for (size_t k = 0; k < K && merge; ++k)
      merge = s.strides[k].back() == w.strides[k][a] * w.dims[a];
    if (merge) {
      s.dims.back() *= w.dims[a];
      for (size_t k = 0; k < K; ++k) s.strides[k].back() = w.strides[k][a];
      continue;
    }
    s.dims.push_back(w.dims[a]);
    for (size_t k = 0; k < K; ++k) s.strides[k].push_back(w.strides[k][a]);
  }
  if (s.dims.empty()) {  // a single element
    s.dims.push_back(1);
    for (size_t k = 0; k < K; ++k) s.strides[k].push_back(0);
  }
  return s;
}

// Calls fn(offsets) for every index of all axes but the last; the caller's loop over the last
// axis is the one that vectorizes.
template <size_t K, typename Fn>
void for_each_row(const Walk<K>& w, Fn&& fn) {
  const size_t outer = w.dims.size() - 1;
  int64_t rows = 1;
  for (size_t a = 0; a < outer; ++a) rows *= w.dims[a];
  Dims idx(outer, 0);
  std::array<int64_t, K> off{};
  for (int64_t r = 0; r < rows; ++r) {
    fn(off);
    for (size_t a = outer; a-- > 0;) {  // odometer step
      for (size_t k = 0; k < K; ++k) off[k] += w.strides[k][a];
      if (++idx[a] < w.dims[a]) break;
      for (size_t k = 0; k < K; ++k) off[k] -= w.strides[k][a] * w.dims[a];
      idx[a] = 0;
    }
  }
}

// Copies along a Walk<2> (strides[0]: source, strides[1]: destination).
void box_copy(const Walk<2>& walk, const float* src, float* dst) {
  const Walk<2> w = simplify(walk);
  const int64_t n = w.dims.back(), ss = w.strides[0].back(), ds = w.strides[1].back();
  for_each_row(w, [&](const std::array<int64_t, 2>& off) {
    const float* s = src + off[0];
    float* d = dst + off[1];
    if (ss == 1 && ds == 1)
      std::memcpy(d, s, n * sizeof(float));
    else
      for (int64_t i = 0; i < n; ++i) d[i * ds] = s[i * ss];
  });
}

// ---- elementwise ----

template <typename F>
void map(const float* x, float* y, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) y[i] = f(x[i]);
}

void unary(const graph::Op& op, const float* x, float* y, int64_t n) {
  if (const std::optional<graph::Activation> act = graph::as_activation(op)) {
    const float lo = act->lo, hi = act->hi;
    map(x, y, n, [=](float v) { return clamp_keep_nan(v, lo, hi); });
  } else if (const auto* l = std::get_if<graph::LeakyRelu>(&op)) {
    const float alpha = l->alpha;
    map(x, y, n, [=](float v) { return v >= 0.0f ? v : alpha * v; });
  } else if (std::holds_alternative<graph::Sigmoid>(op)) {
    map(x, y, n, [](float v) { return 1.0f / (1.0f + std::exp(-v)); });
  } else if (const auto* h = std::get_if<graph::HardSigmoid>(&op)) {
    const float alpha = h->alpha, beta = h->beta;
    map(x, y, n, [=](float v) { return v != v ? v : clamp_keep_nan(alpha * v + beta, 0.0f, 1.0f); });
  } else {
    map(x, y, n, [](float v) { return v * clamp_keep_nan(v / 6.0f + 0.5f, 0.0f, 1.0f); });
  }
}

// ---- data movement ----

// One tile side of a blocked transpose: two 32x32 float tiles (8 KiB) stay in L1.
constexpr int64_t kTile = 32;

// The output's last axis is contiguous there but strided in the input, and axis `q` the other
// way round: copy tile by tile over (q, last) so both sides stay in cache.
void transpose_tiled(const Walk<2>& w, size_t q, const float* src, float* dst) {
  const size_t last = w.dims.size() - 1;
  Walk<2> outer;
  for (size_t a = 0; a < last; ++a) {
    if (a == q) continue;
    outer.dims.push_back(w.dims[a]);
    for (size_t k = 0; k < 2; ++k) outer.strides[k].push_back(w.strides[k][a]);
  }
  outer.dims.push_back(1);  // for_each_row leaves the last axis to its caller
  for (size_t k = 0; k < 2; ++k) outer.strides[k].push_back(0);
  const int64_t nq = w.dims[q], nl = w.dims[last];
  const int64_t dq = w.strides[1][q], sl = w.strides[0][last];
  for_each_row(outer, [&](const std::array<int64_t, 2>& off) {
    const float* s = src + off[0];
    float* d = dst + off[1];
    for (int64_t q0 = 0; q0 < nq; q0 += kTile)
      for (int64_t l0 = 0; l0 < nl; l0 += kTile) {
        const int64_t q1 = std::min(nq, q0 + kTile), l1 = std::min(nl, l0 + kTile);
        for (int64_t iq = q0; iq < q1; ++iq)
          for (int64_t il = l0; il < l1; ++il) d[iq * dq + il] = s[il * sl + iq];
      }
  });
}

// Output axis j is input axis perm[j].
void transpose(const float* x, const Shape& in_shape, const std::vector<int>& perm, float* out) {
  const Dims is = strides_of(in_shape);
  Walk<2> w;
  for (int p : perm) {
    w.dims.push_back(in_shape[p]);
    w.strides[0].push_back(is[p]);
  }
  w.strides[1] = strides_of(w.dims);
  w = simplify(w);
  const size_t last = w.dims.size() - 1;
  if (w.strides[0][last] == 1) return box_copy(w, x, out);  // contiguous runs: plain copies
  for (size_t q = 0; q < last; ++q)
    if (w.strides[0][q] == 1) return transpose_tiled(w, q, x, out);
  box_copy(w, x, out);  // a single element: no axis is left
}

void concat(int axis, const std::vector<ConstTensorRef>& in, const TensorRef& out) {
  int64_t outer = 1, after = 1;
  for (int a = 0; a < static_cast<int>(out.shape.size()); ++a) {
    if (a < axis) outer *= out.shape[a];
    if (a > axis) after *= out.shape[a];
  }
  const int64_t out_row = out.shape[axis] * after;
  // Each input contributes one contiguous run per outer index; write the output in order.
  for (int64_t o = 0; o < outer; ++o) {
    float* d = out.data + o * out_row;
    for (const ConstTensorRef& t : in) {
      const int64_t run = t.shape[axis] * after;
      std::memcpy(d, t.data + o * run, run * sizeof(float));
      d += run;
    }
  }
}

// Shape inference checks only that every axis is non-empty; bounds are checked here.
std::string slice(const graph::Slice& sl, const ConstTensorRef& x, const TensorRef& out) {
  const Dims is = strides_of(x.shape);
  Walk<2> w{out.shape, {Dims(), strides_of(out.shape)}};
  int64_t base = 0;
  for (size_t a = 0; a < x.shape.size(); ++a) {
    const int64_t first = sl.starts[a], last = first + (out.shape[a] - 1) * sl.steps[a];
    if (std::min(first, last) < 0 || std::max(first, last) >= x.shape[a])
      return "slice reads indices " + std::to_string(first) + ".." + std::to_string(last) +
             " of axis " + std::to_string(a) + ", which has size " + std::to_string(x.shape[a]);
    base += first * is[a];
    w.strides[0].push_back(sl.steps[a] * is[a]);
  }
  box_copy(w, x.data + base, out.data);
  return "";
}

// Output index j on an axis reads input index j - begin pad (negative pads crop). The whole
// output is filled with the pad value first and the overlap copied over it: simpler than
// filling only the border, and the fill costs no more than the copy.
// Reflect and edge padding read an input element for every output element, one at a time.
void pad(const graph::Pad& p, const ConstTensorRef& x, const TensorRef& out) {
  const size_t r = x.shape.size();
  const Dims is = strides_of(x.shape), os = strides_of(out.shape);
  if (p.mode != graph::PadMode::constant) {
    for (int64_t i = 0; i < graph::num_elements(out.shape); ++i) {
      int64_t src = 0;
      for (size_t a = 0; a < r; ++a)
        src += graph::pad_source_index(p.mode, i / os[a] % out.shape[a], p.pads[a], x.shape[a]) * is[a];
      out.data[i] = x.data[src];
    }
    return;
  }
  std::fill(out.data, out.data + graph::num_elements(out.shape), p.value);
  Walk<2> w{Dims(r), {is, os}};
  int64_t src = 0, dst = 0;
  for (size_t a = 0; a < r; ++a) {
    const int64_t begin = p.pads[a];
    const int64_t lo = std::max<int64_t>(0, begin);
    const int64_t hi = std::min(out.shape[a], begin + x.shape[a]);
    if (hi <= lo) return;  // the input is cropped away entirely on this axis
    w.dims[a] = hi - lo;
    src += (lo - begin) * is[a];
    dst += lo * os[a];
  }
  box_copy(w, x.data + src, out.data + dst);
}

// ---- reductions ----

void softmax_rows(const float* x, float* y, int64_t rows, int64_t n) {
  for (int64_t r = 0; r < rows; ++r, x += n, y += n) {
    const float mx = *std::max_element(x, x + n);
    double sum = 0.0;
    for (int64_t i = 0; i < n; ++i) {
      y[i] = std::exp(x[i] - mx);
      sum += y[i];
    }
    const double inv = 1.0 / sum;
    for (int64_t i = 0; i < n; ++i) y[i] = static_cast<float>(y[i] * inv);
  }
}

// Softmax over n for a tensor viewed as [outer, n, inner], inner > 1: the `inner` independent
// softmaxes advance together so every loop runs over contiguous memory.
void softmax_strided(const float* x, float* y, int64_t outer, int64_t n, int64_t inner) {
  std::vector<float> mx(inner);
  std::vector<double> sum(inner);
  for (int64_t o = 0; o < outer; ++o, x += n * inner, y += n * inner) {
    std::copy(x, x + inner, mx.begin());
    for (int64_t k = 1; k < n; ++k)
      for (int64_t i = 0; i < inner; ++i) mx[i] = std::max(mx[i], x[k * inner + i]);
    std::fill(sum.begin(), sum.end(), 0.0);
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = 0; i < inner; ++i) {
        y[k * inner + i] = std::exp(x[k * inner + i] - mx[i]);
        sum[i] += y[k * inner + i];
      }
    for (int64_t i = 0; i < inner; ++i) sum[i] = 1.0 / sum[i];
    for (int64_t k = 0; k < n; ++k)
      for (int64_t i = 0; i < inner; ++i)
        y[k * inner + i] = static_cast<float>(y[k * inner + i] * sum[i]);
  }
}

void softmax(const graph::Softmax& sm, const ConstTensorRef& x, const TensorRef& out) {
  int64_t outer = 1, n = 1, inner = 1;
  for (int a = 0; a < static_cast<int>(x.shape.size()); ++a) {
    if (a < sm.axis)
      outer *= x.shape[a];
    else if (a == sm.axis || sm.coerce_2d)
      n *= x.shape[a];
    else
      inner *= x.shape[a];
  }
  if (inner == 1)
    softmax_rows(x.data, out.data, outer, n);
  else
    softmax_strided(x.data, out.data, outer, n, inner);
}

// Sums in double into a buffer the size of the output: the walk's output strides are 0 on
// reduced axes, so the input streams through once in order.
void reduce_mean(const graph::ReduceMean& rm, const ConstTensorRef& x, const TensorRef& out) {
  const size_t r = x.shape.size();
  std::vector<bool> reduce(r, rm.axes.empty());
  for (int a : rm.axes) reduce[a] = true;
  Shape kept(r);  // the output shape as if keepdims
  int64_t count = 1;
  for (size_t a = 0; a < r; ++a) {
    kept[a] = reduce[a] ? 1 : x.shape[a];
    count *= reduce[a] ? x.shape[a] : 1;
  }
  Walk<2> w{x.shape, {strides_of(x.shape), strides_of(kept)}};
  for (size_t a = 0; a < r; ++a)
    if (reduce[a]) w.strides[1][a] = 0;
  w = simplify(w);
  std::vector<double> acc(graph::num_elements(out.shape), 0.0);
  const int64_t n = w.dims.back(), os = w.strides[1].back();
  for_each_row(w, [&](const std::array<int64_t, 2>& off) {
    const float* s = x.data + off[0];
    double* d = acc.data() + off[1];
    if (os == 0) {
      double sum = 0.0;
      for (int64_t i = 0; i < n; ++i) sum += s[i];
      *d += sum;
    } else {
      for (int64_t i = 0; i < n; ++i) d[i * os] += s[i];
    }
  });
  for (size_t i = 0; i < acc.size(); ++i) out.data[i] = static_cast<float>(acc[i] / count);
}

// ---- validation and dispatch ----

// Shape inference is the one statement of each op's output shape. Running it on a throwaway
// one-node graph (a few small allocations per call) keeps every kernel from trusting shapes
// that disagree with it, which is what could make it read or write out of bounds.
std::string check_shapes(const graph::Op& op, const std::vector<ConstTensorRef>& in,
                         const TensorRef& out) {
  graph::Graph g;
  graph::Node n{"kernel", op, {}, {}, {}};
  for (size_t i = 0; i < in.size(); ++i) {
    for (int64_t d : in[i].shape)
      if (d < 1) return "input " + std::to_string(i) + " has a non-positive dimension";
    n.inputs.push_back(
        g.add_value(graph::Value{"input " + std::to_string(i), in[i].shape, graph::DType::f32,
                                 in[i].layout}));
  }
  Shape want;
  try {
    want = graph::infer_output(g, n).shape;
  } catch (const std::exception& e) {
    return e.what();
  }
  if (want != out.shape)
    return "the output is " + graph::to_string(out.shape) + ", expected " + graph::to_string(want);
  return "";
}

}  // namespace

bool is_data(const graph::Op& op) {
  using namespace graph;
  return op_is_unary(op) || std::holds_alternative<Reshape>(op) || std::holds_alternative<Transpose>(op) ||
         std::holds_alternative<Concat>(op) || std::holds_alternative<Slice>(op) ||
         std::holds_alternative<Pad>(op) || std::holds_alternative<Softmax>(op) ||
         std::holds_alternative<ReduceMean>(op) || std::holds_alternative<LayoutTransform>(op);
}

std::string run_data(const graph::Op& op, const std::vector<ConstTensorRef>& in,
                     const TensorRef& out) {
  using namespace graph;
  if (!is_data(op)) return std::string("no portable kernel for ") + op_name(op);
  if (std::string err = check_shapes(op, in, out); !err.empty()) return err;
  const int64_t count = num_elements(out.shape);
  if (op_is_unary(op))
    unary(op, in[0].data, out.data, count);
  else if (std::holds_alternative<Reshape>(op))
    std::memcpy(out.data, in[0].data, count * sizeof(float));
  else if (const auto* t = std::get_if<Transpose>(&op))
    transpose(in[0].data, in[0].shape, t->perm, out.data);
  else if (const auto* c = std::get_if<Concat>(&op))
    concat(c->axis, in, out);
  else if (const auto* sl = std::get_if<Slice>(&op))
    return slice(*sl, in[0], out);
  else if (const auto* p = std::get_if<Pad>(&op))
    pad(*p, in[0], out);
  else if (const auto* sm = std::get_if<Softmax>(&op))
    softmax(*sm, in[0], out);
  else if (const auto* rm = std::get_if<ReduceMean>(&op))
    reduce_mean(*rm, in[0], out);
  else {
    const auto& lt = std::get<LayoutTransform>(op);
    const std::vector<int> perm = lt.from == lt.to        ? std::vector<int>{0, 1, 2, 3}
                                  : lt.to == Layout::nhwc ? std::vector<int>{0, 2, 3, 1}
                                                          : std::vector<int>{0, 3, 1, 2};
    transpose(in[0].data, in[0].shape, perm, out.data);
  }
  return "";
}

}  // namespace kiln::runtime::ops
