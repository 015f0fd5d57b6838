// One generated kernel as a Halide pipeline: the algorithm from the op builders in
// generators/ops/, every argument's shape (and most strides) fixed to the spec's, the schedule
// from schedules/ for the target.
#pragma once

#include <vector>

#include "Halide.h"
#include "graph/kernel_spec.h"

namespace kiln::codegen {

struct KernelPipeline {
  Halide::Pipeline pipeline;
  // The inputs, in graph::generated_kernel_arguments order; the output follows them in every
  // compiled entry point (Halide appends a pipeline's outputs to its arguments).
  std::vector<Halide::ImageParam> inputs;
  std::vector<Halide::Argument> arguments() const { return {inputs.begin(), inputs.end()}; }
};

// The pipeline of a graph::is_generated spec for `target` (a GPU target gets the GPU schedule).
// Every buffer's extents are compile-time constants, and so are its strides (dense row-major,
// as the runtime's arena and constants lay them out), except a convolution's weights and output
// past their innermost dimension: the runtime may pad weight rows, and an output may be a slice
// of a Concat's.
KernelPipeline build_kernel_pipeline(const graph::KernelSpec& spec, const Halide::Target& target);

}  // namespace kiln::codegen
