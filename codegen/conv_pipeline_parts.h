// What the generated convolutions' pipelines share (conv_pipeline.cpp builds the dense, grouped,
// Winograd and AMX ones, depthwise_pipeline.cpp the depthwise ones with their fused expansion):
// what the convolution reads, its epilogue, its output with any pooling or resize after it, and
// that tail's schedule.
#pragma once

#include <optional>
#include <vector>

#include "codegen/pipeline_parts.h"
#include "generators/ops/conv.h"
#include "generators/ops/pool.h"
#include "generators/ops/resize.h"
#include "schedules/conv_params.h"
#include "schedules/conv_schedule.h"

namespace kiln::codegen {

// What the convolution schedules touch (schedules/conv_schedule.h), for an NHWC output `out` of
// a convolution of an input with `in_channels` dense channels.
inline schedules::ConvFuncs conv_funcs(const generators::ops::ConvAlgorithm& a,
                                       const Halide::Func& output, const graph::Shape& out,
                                       int64_t in_channels, bool stage_input,
                                       bool input_nchw = false) {
  return {a.input_padded,
          a.acc,
          output,
          a.co,
          a.x,
          a.y,
          a.n,
          a.c,
          a.r,
          static_cast<int>(out[3]),
          static_cast<int>(out[2]),
          static_cast<int>(out[1]),
          static_cast<int>(in_channels),
          static_cast<int>(in_channels),
          stage_input,
          input_nchw};
}

// The pipeline's output: the convolution's `conv` (its epilogue applied), or the pooling of it
// (ConvKernelSpec::pool), or the resize of it (ConvKernelSpec::resize, reading `nchw`, the
// convolution transposed to NCHW, with nchw_output), with the output buffer's constant bounds.
struct ConvOutput {
  Halide::Func conv, out;
  std::optional<generators::ops::PoolAlgorithm> pool;
  std::optional<generators::ops::ResizeAlgorithm> resize;
  Halide::Func nchw;
};

ConvOutput conv_output(const graph::ConvKernelSpec& k, const Halide::Func& conv);

// What the convolution reads, as (c, x, y, n), through its prologue and any pooling first.
Halide::Func conv_source(const graph::ConvKernelSpec& k,
                         const std::vector<Halide::ImageParam>& inputs);

// The epilogue on the accumulator value v at `at` (co, x, y, n).
Halide::Expr conv_epilogue(const graph::ConvKernelSpec& k, Halide::Expr v,
                           const std::vector<Halide::ImageParam>& inputs,
                           const std::vector<Halide::Expr>& at);

// The schedule of what follows the convolution in its kernel (a pooling or a resize).
void schedule_tail(const graph::ConvKernelSpec& k, const ConvOutput& o,
                   const schedules::ConvParams& p, const Halide::Target& target);

// A depthwise convolution (depthwise_pipeline.cpp), with its pointwise expansion when it has one
// (ConvKernelSpec::expand). `automatic`: a Halide autoscheduler schedules the pipeline, so
// Kiln's schedule is not applied.
KernelPipeline depthwise_pipeline(const graph::ConvKernelSpec& k, const Halide::Target& target,
                                  const std::vector<Halide::ImageParam>& inputs,
                                  const schedules::ConvParams& params, bool automatic);

}  // namespace kiln::codegen
