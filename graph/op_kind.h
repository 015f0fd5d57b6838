// What each op is, as far as fusion cares (after TVM's OpPatternKind): fusion decisions are
// made from these kinds, not from lists of op pairs.
#pragma once

#include <optional>

#include "graph/ir.h"

namespace kiln::graph {

enum class OpKind {
  elementwise,      // out[i] = f(in[i]): can become another kernel's epilogue
  injective,        // pure data movement (layout transforms)
  output_fusable,   // compute-heavy, accepts elementwise ops on its output (convolution)
  opaque,           // fused with nothing
};

OpKind op_kind(const Op& op);

// The clamp an elementwise op applies, if it is one.
std::optional<Activation> as_activation(const Op& op);

}  // namespace kiln::graph
