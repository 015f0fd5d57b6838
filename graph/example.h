// The reference example of MISSION.md, built with the C++ API: NCHW input ->
// Conv2d (3x3, stride 2, padding 1) -> BatchNorm (inference) -> ReLU.
#pragma once

#include <cstdint>

#include "graph/ir.h"

namespace kiln::graph {

struct ExampleShape {
  int64_t n = 1, c = 64, h = 56, w = 56, co = 64;
  int kernel = 3, stride = 2, pad = 1;
};

// Seeded random weights and BatchNorm statistics that are far from the identity (variance
// from 0.01 to 4, non-zero mean), so folding really changes the weights.
Graph reference_example(const ExampleShape& shape = {}, uint64_t seed = 1);

}  // namespace kiln::graph
