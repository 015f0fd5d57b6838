// Elementwise algorithm builders: the maths of each elementwise step as Halide expressions, and
// a chain of steps as one Func. Every kernel that applies such a chain builds it here.
#pragma once

#include <vector>

#include "Halide.h"
#include "graph/ir.h"

namespace kiln::generators::ops {

// 1 / (1 + e^-v), vectorized, with Kiln's own exponential (relative error 3.9e-7 with FMA); NaN
// stays NaN.
Halide::Expr sigmoid(const Halide::Expr& v);

// One chain step applied to v. `scale` and `shift` are the step's per-channel values (affine
// steps only; ignored otherwise).
Halide::Expr apply_chain_step(const graph::ChainStep& step, const Halide::Expr& v,
                              const Halide::Expr& scale, const Halide::Expr& shift);

// The steps applied to v in order. `params` holds the scale and shift of each affine step, in
// step order, as 1-D Funcs over the channel; `channel` indexes them.
Halide::Expr apply_chain(const std::vector<graph::ChainStep>& steps, Halide::Expr v,
                         const std::vector<Halide::Func>& params, const Halide::Expr& channel);

// The activation clamp [a.lo, a.hi] applied to v (infinite bounds are left out); a NaN stays
// NaN, as in ONNX (max(0, NaN) is NaN): selects that keep v where a comparison with NaN is
// false, as strict float so that fast math cannot swap them into a max that drops it (one
// vmaxps or vminps each on x86, where a NaN bit test and a blend took four operations). The
// whole expression is strict float, v's own operations included.
Halide::Expr apply_activation(const graph::Activation& a, Halide::Expr v);

// Whether float v is NaN, tested on its bits: the float ops that produce v carry LLVM's
// fast-math flags, which let it assume v is never NaN and fold a floating-point test (is_nan)
// to false.
Halide::Expr is_nan_bits(const Halide::Expr& v);

// `result` where v is a number, v itself (NaN) where it is not: ONNX's NaN semantics for the
// ops whose formula clamps (Halide's max and min would return the other operand).
Halide::Expr keep_nan(const Halide::Expr& v, const Halide::Expr& result);

// out(dims) = the chain applied to x(dims), computed in float32. `params` holds the scale and
// shift of each affine step, in step order, as 1-D Funcs over the channel; `channel_dim` is the
// Halide dimension (innermost first) that indexes them: 0 for NHWC, rank - 2 for [N, C, ...].
// `rank` is x's dimension count.
Halide::Func elementwise_chain(const Halide::Func& x, int rank,
                               const std::vector<graph::ChainStep>& steps,
                               const std::vector<Halide::Func>& params, int channel_dim);

// x op y for one pair of elements, with ONNX's semantics (Max and Min keep a NaN; comparisons
// and logic ops give 0/1).
Halide::Expr binary_expr(graph::BinaryOp op, const Halide::Expr& x, const Halide::Expr& y);

// out(dims) = a(dims) op b(dims) with numpy broadcasting: `rank` is the output's dimension
// count, and a_extents / b_extents give each operand's extents innermost first (shorter than
// rank when the operand has fewer dimensions: it is right-aligned, as numpy aligns shapes). An
// extent of 1 where the output's is larger is broadcast.
Halide::Func binary(graph::BinaryOp op, const Halide::Func& a,
                    const std::vector<int64_t>& a_extents, const Halide::Func& b,
                    const std::vector<int64_t>& b_extents, int rank);

// out(dims) = in[0](dims) != 0 ? in[1](dims) : in[2](dims) (ONNX Where), the three broadcast
// as `binary` broadcasts its two: extents[i] are in[i]'s extents, innermost first.
Halide::Func where(const std::vector<Halide::Func>& in,
                   const std::vector<std::vector<int64_t>>& extents, int rank);

}  // namespace kiln::generators::ops
