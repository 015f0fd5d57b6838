// Schedules of the layout transforms: NCHW -> NHWC (generators/ops/layout.h) and back.
#pragma once

#include <cstdint>
#include <vector>

#include "Halide.h"

namespace kiln::schedules {

struct LayoutFuncs {
  Halide::Func output;  // (c, x, y, n)
  Halide::Var c, x, y, n;
};

// Square register tiles transposed with shuffles, parallel over rows.
void schedule_layout_cpu(const LayoutFuncs& f, const Halide::Target& target);
// 32x8 tiles, one thread per element.
void schedule_layout_cuda(const LayoutFuncs& f, const Halide::Target& target);

// The NHWC -> NCHW transform, `output` (x, y, c, n) of an input (c, x, y, n): vectors along
// x (strided loads), tasks of 8 output rows. Vectorizing a tile along the channels too made
// Halide load the tile's whole span densely and shuffle it, which LLVM scalarized for channel
// counts that are not a multiple of the vector (seg_tiny's 21).
void schedule_to_nchw_cpu(Halide::Func output, const Halide::Target& target);

// A Transpose that moves the innermost axis: `out` (dims innermost first, extents
// `out_extents`) reads `staged`, a copy of the input, whose innermost dim is out's dim `q` and
// whose dim `p` is out's innermost. Tiles of a vector of out's innermost dim by up to a vector
// of dim q: each tile's block of the input is loaded in vectors along the input's innermost dim
// (staged at the tile, vectorized and unrolled: registers) and stored in vectors along out's
// innermost dim, the transposition in between done with shuffles; parallel over tiles, in tasks
// of at least kMinTaskElements. Returns false, scheduling nothing, where that does not apply
// (out's innermost dim narrower than a vector, or dim q narrower than 2): the elementwise
// schedule's vectors gather the input then.
bool schedule_transpose_cpu(Halide::Func out, Halide::Func staged,
                            const std::vector<int64_t>& out_extents, int q, int p,
                            const Halide::Target& target);

}  // namespace kiln::schedules
