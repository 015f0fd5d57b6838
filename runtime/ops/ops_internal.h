// The portable kernels, split by family; ops.cpp dispatches to them. Each returns "" on
// success or a message naming what is unsupported or inconsistent.
#pragma once

#include <algorithm>

#include <string>
#include <vector>

#include "runtime/ops/ops.h"

// Compiles a hot loop three times (AVX-512, AVX2, the x86-64 baseline) and lets the loader
// pick the best the CPU has (GCC function multi-versioning): the rest of the runtime is built
// for the baseline only, so that it runs on any x86-64. Not under ThreadSanitizer: the loader
// runs the clones' resolvers before TSan is initialized, and instrumented they crash.
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__SANITIZE_THREAD__)
#define KILN_VECTOR_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define KILN_VECTOR_CLONES
#endif

namespace kiln::runtime::ops {

// ONNX's NaN semantics (numpy's): a NaN operand of a clamp or a maximum gives NaN.
inline float clamp_keep_nan(float v, float lo, float hi) {
  return v != v ? v : std::min(std::max(v, lo), hi);
}
inline float max_keep_nan(float a, float b) { return a != a || b != b ? a + b : std::max(a, b); }

// compute_ops.cpp: Conv2d (any groups, residual, activation; NCHW/OIHW or NHWC/HWIO),
// BatchNorm, Pool2d, GlobalPool, Gemm, MatMul.
bool is_compute(const graph::Op& op);
std::string run_compute(const graph::Op& op, const std::vector<ConstTensorRef>& inputs,
                        const TensorRef& output);

// data_ops.cpp: unary elementwise, Reshape, Transpose, Concat, Slice, Pad, Softmax,
// ReduceMean, LayoutTransform (both directions).
bool is_data(const graph::Op& op);
std::string run_data(const graph::Op& op, const std::vector<ConstTensorRef>& inputs,
                     const TensorRef& output);

}  // namespace kiln::runtime::ops
