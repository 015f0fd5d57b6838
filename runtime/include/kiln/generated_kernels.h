// The interface between the runtime and the kernels codegen/ generates for one model: a table
// of entry points, one per generated kernel spec, each with the signature it was compiled for.
// Compiled models link their table; `kiln run`, `bench` and the tests load one from codegen.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "graph/kernel_spec.h"

namespace kiln {

// Halide's argv entry point: one halide_buffer_t* per graph::generated_kernel_arguments(spec).
using GeneratedKernelFn = int (*)(void** args);

struct GeneratedKernel {
  const char* signature;  // graph::kernel_signature of the spec it was compiled for
  GeneratedKernelFn fn;
};

struct GeneratedKernels {
  std::vector<GeneratedKernel> kernels;  // in the order of the specs they were generated for
  std::shared_ptr<void> owner;           // keeps the code loaded (a dlopen handle), or null
};

// Produces the kernels for a model's generated specs (graph::is_generated), in order, or throws
// graph::Error naming what failed.
using KernelGenerator = std::function<std::shared_ptr<const GeneratedKernels>(
    const std::vector<graph::KernelSpec>& specs)>;

}  // namespace kiln
