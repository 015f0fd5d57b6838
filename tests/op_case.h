// The case of a generated-kernel test of one data movement, reduction or product node: the
// op, its input shapes and how its output is compared (generated_op_cases.h has the cases).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "graph/ir.h"

namespace kiln::testing_util {

using graph::Layout;
using graph::Shape;

// Data movement, reductions and products: one node each, its inputs graph inputs (so the
// kernel reads them at run time) or constants.
struct OpCase {
  std::string name;
  graph::Op op;
  std::vector<Shape> inputs;
  Layout layout = Layout::any;      // of the first input
  std::vector<bool> constant = {};  // per input; default: none
  double rtol = 1e-5, atol = 1e-6;  // products: fp32 sums against the reference's doubles
  float lo = -3.0f, hi = 3.0f;      // the random inputs' range
};
inline void PrintTo(const OpCase& c, std::ostream* os) { *os << c.name; }

}  // namespace kiln::testing_util
