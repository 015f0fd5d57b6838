// Algorithm builders for the reductions (every graph::ReduceKind) and the Softmax family
// (Softmax, LogSoftmax, Hardmax), with the semantics the reference interpreter states
// (graph/reference_ops_reduce.cpp). Inputs are Funcs indexed innermost first (Halide dimension d
// is row-major axis rank - 1 - d); outputs are Funcs over the output's coordinates.
#pragma once

#include <vector>

#include "Halide.h"
#include "graph/ir.h"

namespace kiln::generators::ops {

// `out` is an elementwise function of the `partials`, each a Func over the output's coordinates
// (Softmax: the row's, with the normalized coordinates 0) with one update over the reduced
// axes, which a schedule computes once per output point (or row).
struct ReductionAlgorithm {
  Halide::Func out;
  std::vector<Halide::Func> partials;
  // Softmax: e^(x - the row's maximum), which the sum and the output both read (inlined into
  // each unless a schedule computes it once per row).
  Halide::Func exps;
};

// The reduction `r` of `in` (row-major `in_shape`) to `out_shape` (rank 0 when every axis goes
// and keepdims is off). Sums accumulate in float32; max and min propagate a NaN; log_sum_exp
// adds exp(x - max) and the max back.
ReductionAlgorithm reduce(const Halide::Func& in, const graph::Shape& in_shape,
                          const graph::Reduce& r, const graph::Shape& out_shape);

// Softmax, LogSoftmax or Hardmax along an axis (or, with coerce_2d, along every axis from it
// on). Softmax and LogSoftmax: the row's maximum and sum of exponentials; Hardmax: the row's
// first maximum, as (flat index, value).
ReductionAlgorithm softmax(const Halide::Func& in, const graph::Shape& shape,
                           const graph::Softmax& s);

// TopK along its axis: `order` (over the input's coordinates) is each element's place in its
// row, the count of the row's elements that come before it (better, or equal at a lower index;
// a NaN the best), n comparisons an element; `out` takes the element whose place is the output
// coordinate along the axis (n more comparisons), as its value or its index.
struct TopKAlgorithm {
  Halide::Func out, order;
};
TopKAlgorithm topk(const Halide::Func& in, const graph::Shape& in_shape, const graph::TopK& t);

}  // namespace kiln::generators::ops
