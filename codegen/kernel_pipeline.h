// One generated kernel as a Halide pipeline: the algorithm from the op builders in
// generators/ops/, every argument's shape (and most strides) fixed to the spec's, the schedule
// from schedules/ for the target.
#pragma once

#include <string>
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
// `schedule`: the text form of a schedule (schedules/conv_params.h) read over the default for
// the kernel's shapes, or "auto:NAME" for Halide's autoscheduler NAME (Mullapudi2016,
// Adams2019, Li2018; CPU convolutions only) given the kernel's shapes as estimates; empty: the
// spec's own (ConvKernelSpec::schedule), else the default.
// Throws graph::Error when it does not apply (a kernel without knobs, a tile too large, ...).
KernelPipeline build_kernel_pipeline(const graph::KernelSpec& spec, const Halide::Target& target,
                                     const std::string& schedule = "");

// Schedules as data. Today the kernels with knobs are the dense and grouped convolutions and
// the MatMuls run as 1x1 convolutions, on CPU targets; every other kernel has one schedule
// (these return "" or nothing for it).
// The default schedule of `spec` on `target`, in canonical text form.
std::string default_schedule(const graph::KernelSpec& spec, const Halide::Target& target);
// The canonical text of the schedule `schedule` means for `spec` on `target` (as
// build_kernel_pipeline reads it; "" gives the default). Throws graph::Error as it does.
std::string resolve_schedule(const graph::KernelSpec& spec, const Halide::Target& target,
                             const std::string& schedule);
// The Winograd tile m whose transformed weights (runtime::winograd_conv_weights) the kernel
// built with `schedule` reads, or 0 when it reads them as the spec gives them.
int winograd_weight_tile(const graph::KernelSpec& spec, const Halide::Target& target,
                         const std::string& schedule);
// `schedule` (as resolve_schedule reads it), or, when its weights are not in the layout of
// Winograd tile `tile` (0: direct), the default schedule of that layout for `spec` on `target`.
std::string schedule_for_weight_tile(const graph::KernelSpec& spec, const Halide::Target& target,
                                     const std::string& schedule, int tile);
// The schedule of `spec`'s half-width kernel on `target` (GeneratedKernel::half_fn), in
// canonical text form: schedules::half_width_params for a convolution's shapes, or "" where it
// gets none (every other kernel).
std::string half_width_schedule(const graph::KernelSpec& spec, const Halide::Target& target);
// The tuner's candidates for `spec` on `target` (the default first), at most `limit`.
std::vector<std::string> schedule_candidates(const graph::KernelSpec& spec,
                                             const Halide::Target& target, int threads,
                                             size_t limit);

// The schedules one knob away from `schedule` for `spec` on `target` (schedules::conv_neighbors),
// in canonical text form; nothing for a kernel without knobs or an autoscheduler's schedule.
std::vector<std::string> schedule_neighbors(const graph::KernelSpec& spec,
                                            const Halide::Target& target, int threads,
                                            const std::string& schedule);

}  // namespace kiln::codegen
