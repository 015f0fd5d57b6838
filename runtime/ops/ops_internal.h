// The portable kernels, split by family; ops.cpp dispatches to them. Each returns "" on
// success or a message naming what is unsupported or inconsistent.
#pragma once

#include <string>
#include <vector>

#include "runtime/ops/ops.h"

namespace kiln::runtime::ops {

// compute_ops.cpp: Conv2d (any groups, residual, activation; NCHW/OIHW or NHWC/HWIO),
// BatchNorm, Pool2d, GlobalPool, Gemm, MatMul.
bool is_compute(const graph::Op& op);
std::string run_compute(const graph::Op& op, const std::vector<ConstTensorRef>& inputs,
                        const TensorRef& output);

// data_ops.cpp: unary and binary elementwise, Reshape, Transpose, Concat, Slice, Pad, Softmax,
// ReduceMean, LayoutTransform (both directions).
bool is_data(const graph::Op& op);
std::string run_data(const graph::Op& op, const std::vector<ConstTensorRef>& inputs,
                     const TensorRef& output);

// chain_ops.cpp: ElementwiseChain.
std::string run_chain(const graph::ElementwiseChain& chain, const std::vector<ConstTensorRef>& inputs,
                      const TensorRef& output);

}  // namespace kiln::runtime::ops
