// Algorithm builders for data movement and matrix products of dense row-major tensors
// (reductions: reduce.h), with the semantics the reference interpreter states
// (graph/reference_ops_*.cpp).
// Every builder takes its inputs as Funcs indexed innermost first (Halide's order: dimension d
// is row-major axis rank - 1 - d) and their row-major shapes, and returns the output Func over
// the output's coordinates, innermost first.
#pragma once

#include <vector>

#include "Halide.h"
#include "graph/ir.h"

namespace kiln::generators::ops {

// out[i0, .., ir-1] = in[j] with j[perm[a]] = i[a] (ONNX Transpose).
Halide::Func transpose(const Halide::Func& in, const graph::Shape& in_shape,
                       const std::vector<int>& perm);

// The same elements in row-major order, another shape.
Halide::Func reshape(const Halide::Func& in, const graph::Shape& in_shape,
                     const graph::Shape& out_shape);

// The inputs one after another along `axis`: one select per element, each input read at a
// clamped index, so bounds inference asks for nothing outside it.
Halide::Func concat(const std::vector<Halide::Func>& ins, const std::vector<graph::Shape>& shapes,
                    int axis);

// The same as one update per input copying its slab: an undefined pure definition, every
// element written by exactly one update, each update's RDom (`pieces`) along `axis`. Suits an
// axis that is innermost, where the selects would make every vector load a gather.
struct PiecewiseConcat {
  Halide::Func out;
  std::vector<Halide::RDom> pieces;
};
PiecewiseConcat concat_piecewise(const std::vector<Halide::Func>& ins,
                                 const std::vector<graph::Shape>& shapes, int axis);

// out[i] = in[start + i * step] on every axis.
Halide::Func slice(const Halide::Func& in, const graph::Shape& in_shape, const graph::Slice& s);

// Constant padding (a negative pad crops).
Halide::Func pad(const Halide::Func& in, const graph::Shape& in_shape, const graph::Pad& p);

// out[i] = in[i mod in_shape] on every axis (ONNX Tile).
Halide::Func tile(const Halide::Func& in, const graph::Shape& in_shape);

// ONNX GatherElements (graph::GatherElements): out(i) = data(i with dimension `axis` (a row-major
// axis) replaced by the index indices(i) holds, as element_index reads it); indices of extent 1
// on an axis are read at 0 there (broadcast, where the output is longer).
Halide::Func gather_elements(const Halide::Func& data, const graph::Shape& data_shape,
                             const Halide::Func& indices, const graph::Shape& indices_shape,
                             int axis);

// ONNX ScatterElements (graph::ScatterElements): out = data, then one update over every element
// of the indices, in row-major order (the RDom's first dimension innermost), writing or combining
// updates(r) at r with dimension `axis` replaced by the index. Serial: a later update may hit the
// element an earlier one wrote.
Halide::Func scatter_elements(const Halide::Func& data, const graph::Shape& data_shape,
                              const Halide::Func& indices, const graph::Shape& indices_shape,
                              const Halide::Func& updates, const graph::ScatterElements& se);

// An index along an axis of `extent` from the float32 that holds it: NaN reads 0, otherwise
// truncated and clamped into [-extent, extent), a negative one counted from the end.
Halide::Expr element_index(const Halide::Expr& v, int64_t extent);

// acc(n, m, batch...) = sum over k of a(k, m, batch...) * b(n, k, batch...): the product of
// the last two axes, [M, K] x [K, N] -> [M, N], over `batch_dims` leading axes (both operands
// already broadcast to them). The caller defines the output from acc (scaling, a bias); a
// schedule places acc.
struct MatMulAlgorithm {
  Halide::Func acc;
  Halide::Var n, m;
  std::vector<Halide::Var> batch;  // innermost first
  Halide::RDom k;
  // acc's coordinates in order: n, m, batch...
  std::vector<Halide::Expr> args() const;
};
MatMulAlgorithm matmul(const Halide::Func& a, const Halide::Func& b, int k_extent,
                       int batch_dims);

}  // namespace kiln::generators::ops
