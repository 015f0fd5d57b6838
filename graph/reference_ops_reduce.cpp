// Reference semantics of the reductions and of the Softmax family: per row (or per output
// element), the values collected and combined in double as the ONNX definitions state them.
#include <algorithm>
#include <cmath>
#include <limits>

#include "graph/reference_ops.h"

namespace kiln::graph {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

bool any_nan(const std::vector<double>& v) {
  return std::any_of(v.begin(), v.end(), [](double x) { return std::isnan(x); });
}

// The index of the first (or, `last`, the last) maximum or minimum of v as numpy's argmax and
// argmin find it: a NaN is the extreme, so the first (last) NaN when there is one.
double arg_extreme(const std::vector<double>& v, bool is_max, bool last) {
  size_t best = last ? v.size() - 1 : 0;
  for (size_t k = 0; k < v.size(); ++k) {
    const size_t i = last ? v.size() - 1 - k : k;
    if (std::isnan(v[i])) return static_cast<double>(i);
    if (is_max ? v[i] > v[best] : v[i] < v[best]) best = i;
  }
  return static_cast<double>(best);
}

// One output element of reduction `kind` from the values it reduces.
double reduce_values(ReduceKind kind, const std::vector<double>& v) {
  double sum = 0.0, abs_sum = 0.0, square_sum = 0.0, prod = 1.0;
  for (double x : v) {
    sum += x;
    abs_sum += std::fabs(x);
    square_sum += x * x;
    prod *= x;
  }
  switch (kind) {
    case ReduceKind::mean:
      return sum / static_cast<double>(v.size());
    case ReduceKind::sum:
      return sum;
    case ReduceKind::max:
      return any_nan(v) ? NAN : *std::max_element(v.begin(), v.end());
    case ReduceKind::min:
      return any_nan(v) ? NAN : *std::min_element(v.begin(), v.end());
    case ReduceKind::prod:
      return prod;
    case ReduceKind::l1:
      return abs_sum;
    case ReduceKind::l2:
      return std::sqrt(square_sum);
    case ReduceKind::log_sum:
      return std::log(sum);
    case ReduceKind::log_sum_exp: {
      if (any_nan(v)) return NAN;
      const double m = *std::max_element(v.begin(), v.end());
      if (std::isinf(m)) return m;  // all -inf (log 0), or an +inf
      double e = 0.0;
      for (double x : v) e += std::exp(x - m);
      return m + std::log(e);
    }
    case ReduceKind::sum_square:
      return square_sum;
    case ReduceKind::argmax:
    case ReduceKind::argmin:
    case ReduceKind::argmax_last:
    case ReduceKind::argmin_last:
      return arg_extreme(v, kind == ReduceKind::argmax || kind == ReduceKind::argmax_last,
                         kind == ReduceKind::argmax_last || kind == ReduceKind::argmin_last);
  }
  return NAN;
}

}  // namespace

Tensor reference_reduce(const Reduce& r, const Tensor& x, const Shape& out_shape, Layout layout) {
  std::vector<bool> reduce(x.shape.size(), r.axes.empty());
  for (int a : r.axes) reduce[static_cast<size_t>(a)] = true;
  // Output element of each input element: the kept axes' indices in order (and a 0 for each
  // reduced axis when keepdims), in row-major order.
  std::vector<std::vector<double>> groups(static_cast<size_t>(num_elements(out_shape)));
  std::vector<int64_t> xi(x.shape.size(), 0);
  for (int64_t i = 0; i < num_elements(x.shape); ++i) {
    int64_t flat = i;
    for (size_t a = x.shape.size(); a-- > 0;) {
      xi[a] = flat % x.shape[a];
      flat /= x.shape[a];
    }
    int64_t o = 0;
    size_t oa = 0;
    for (size_t a = 0; a < xi.size(); ++a) {
      if (!reduce[a]) {
        o = o * out_shape[oa++] + xi[a];
      } else if (r.keepdims) {
        o = o * out_shape[oa++];
      }
    }
    groups[static_cast<size_t>(o)].push_back(x.data[static_cast<size_t>(i)]);
  }
  Tensor out{out_shape, layout, std::vector<float>(groups.size())};
  for (size_t o = 0; o < groups.size(); ++o)
    out.data[o] = static_cast<float>(reduce_values(r.kind, groups[o]));
  return out;
}

// Each row along the axis sorted best first (a NaN the best, equal values by index), its first
// k kept: their values or their indices.
Tensor reference_topk(const TopK& t, const Tensor& x, const Shape& out_shape, Layout layout) {
  int64_t outer = 1, inner = 1;
  const int64_t n = x.shape[static_cast<size_t>(t.axis)];
  for (int a = 0; a < static_cast<int>(x.shape.size()); ++a) {
    if (a < t.axis) outer *= x.shape[static_cast<size_t>(a)];
    if (a > t.axis) inner *= x.shape[static_cast<size_t>(a)];
  }
  Tensor out{out_shape, layout, std::vector<float>(static_cast<size_t>(num_elements(out_shape)))};
  std::vector<int64_t> order(static_cast<size_t>(n));
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      const auto value = [&](int64_t k) {
        return double{x.data[static_cast<size_t>((o * n + k) * inner + in)]};
      };
      for (int64_t k = 0; k < n; ++k) order[static_cast<size_t>(k)] = k;
      std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) {
        const double va = value(a), vb = value(b);
        if (std::isnan(va) || std::isnan(vb)) return std::isnan(va) && !std::isnan(vb);
        return t.largest ? va > vb : va < vb;
      });
      for (int64_t j = 0; j < t.k; ++j) {
        const int64_t src = order[static_cast<size_t>(j)];
        out.data[static_cast<size_t>((o * t.k + j) * inner + in)] =
            t.indices ? static_cast<float>(src) : static_cast<float>(value(src));
      }
    }
  return out;
}

// Every tensor is viewed as [outer, n, inner] and normalized along n: the axis itself
// (n = dims[axis]), or with coerce_2d everything from the axis on (n = prod(dims[axis:])).
Tensor reference_softmax(const Softmax& sm, const Tensor& x) {
  int64_t outer = 1, n = 1, inner = 1;
  for (int a = 0; a < static_cast<int>(x.shape.size()); ++a) {
    if (a < sm.axis)
      outer *= x.shape[a];
    else if (a == sm.axis || sm.coerce_2d)
      n *= x.shape[a];
    else
      inner *= x.shape[a];
  }
  Tensor out = x;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t in = 0; in < inner; ++in) {
      auto at = [&](int64_t k) { return static_cast<size_t>((o * n + k) * inner + in); };
      double mx = -kInf, sum = 0.0;
      int64_t first_max = 0;
      for (int64_t k = 0; k < n; ++k)
        if (double{x.data[at(k)]} > mx) mx = x.data[at(k)], first_max = k;
      for (int64_t k = 0; k < n; ++k) sum += std::exp(x.data[at(k)] - mx);
      for (int64_t k = 0; k < n; ++k) {
        const double d = x.data[at(k)] - mx;
        double y = 0.0;
        switch (sm.kind) {
          case SoftmaxKind::softmax:
            y = std::exp(d) / sum;
            break;
          case SoftmaxKind::log_softmax:
            y = d - std::log(sum);
            break;
          case SoftmaxKind::hardmax:
            y = k == first_max ? 1.0 : 0.0;
            break;
        }
        out.data[at(k)] = static_cast<float>(y);
      }
    }
  return out;
}

}  // namespace kiln::graph
