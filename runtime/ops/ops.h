// Portable C++ kernels for the ops that have no Halide kernel yet: plain, cache-aware loops
// compiled for baseline x86-64, correct for every shape and layout the graph layer produces.
// Each op works on the tensors' physical shapes (an NHWC tensor's shape is [N, H, W, C]);
// the layout tags say where the channel axis is for the layout-aware ops.
#pragma once

#include <string>
#include <vector>

#include "graph/ir.h"

namespace kiln::runtime::ops {

struct ConstTensorRef {
  const float* data = nullptr;
  graph::Shape shape;
  graph::Layout layout = graph::Layout::any;
};

struct TensorRef {
  float* data = nullptr;
  graph::Shape shape;
  graph::Layout layout = graph::Layout::any;
};

// Whether run_op implements this op. Ops that run as Halide kernels (dense and depthwise
// convolution, the NCHW -> NHWC LayoutTransform, the generated ElementwiseChain kernels of
// codegen/) need not.
bool supported(const graph::Op& op);

// Computes one node: `inputs` in the node's input order, `output` pre-allocated with the
// shape shape inference gave. Returns an empty string on success, else what went wrong.
// Never reads or writes outside the given buffers; the output may not alias an input.
std::string run_op(const graph::Op& op, const std::vector<ConstTensorRef>& inputs,
                   const TensorRef& output);

}  // namespace kiln::runtime::ops
