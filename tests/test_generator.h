// The kernel generator the tests give their Models: kernels compiled by codegen/ and cached in
// the build tree (KILN_TEST_CACHE_DIR), so a rerun loads them instead of compiling. Also the
// checks of a Model's outputs against the reference interpreter, and a graph's kernel specs.
#pragma once

#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "codegen/kernel_library.h"
#include "graph/builder.h"
#include "graph/reference.h"
#include "kiln/runtime.h"
#include "runtime/kernels.h"

namespace kiln::testing_util {

// Why the tests do not run CPU target `t` (an index into runtime::cpu_targets()) here, or "" when
// they do. The CPU must support it. With KILN_TEST_TARGETS=best in the environment (the asan
// test preset) only the best target this CPU supports runs: the generated kernels are not built
// with the sanitizers, so the other targets would run the same instrumented host code again.
inline std::string target_skip_reason(int t) {
  const std::vector<std::string>& targets = runtime::cpu_targets();
  if (!runtime::cpu_target_supported(t)) return "this CPU lacks features of " + targets[t];
  const char* only = std::getenv("KILN_TEST_TARGETS");
  const int best = runtime::best_cpu_target();
  if (only && std::string(only) == "best" && t != best)
    return "KILN_TEST_TARGETS=best: only " + targets[best] +
           " runs (the generated kernels are not sanitizer-instrumented)";
  return "";
}
inline bool runs_target(int t) { return target_skip_reason(t).empty(); }

// The GPU backends, as "targets" below the CPU targets' indices: the tests run the GPU schedules
// through OpenCL (pocl runs them on the CPU where there is no GPU) and, where a GPU and its
// driver are usable, the CUDA kernels as well.
inline constexpr int kOpenClTarget = -1;
inline constexpr int kCudaTarget = -2;
inline Backend backend_of(int target) {
  return target == kCudaTarget     ? Backend::cuda
         : target == kOpenClTarget ? Backend::opencl
                                   : Backend::cpu;
}
// "opencl", "cuda", or the CPU target's name.
inline std::string target_label(int target) {
  return target < 0 ? to_string(backend_of(target)) : runtime::cpu_targets()[target];
}
// The ModelOptions that run on `target` (a CPU target's index, kOpenClTarget or kCudaTarget).
inline void set_target(ModelOptions& o, int target) {
  o.backend = backend_of(target);
  o.cpu_target = target < 0 ? -1 : target;
}
// The message of a test skipped because GPU backend `b` cannot run here: `why` is
// backend_unusable_reason's (or the Model's) error.
inline std::string gpu_skip_message(Backend b, const std::string& why) {
  return b == Backend::cuda ? "no usable CUDA device (the CUDA kernels run only where a GPU and "
                              "its driver are): " +
                                  why
                            : "no usable OpenCL device (install pocl-opencl-icd): " + why;
}

// The target for the tests that run kernels behind the dispatch wrapper: -1, every CPU target of
// the build; with KILN_TEST_TARGETS=best the best one alone (the wrapper is host code the release
// stage and the dispatch tests cover, and building every target again under the sanitizers costs
// minutes).
inline int dispatch_or_best_target() {
  const char* only = std::getenv("KILN_TEST_TARGETS");
  return only && std::string(only) == "best" ? runtime::best_cpu_target() : -1;
}

// `dispatch`: every CPU target of the build behind the kernels' dispatch wrappers; otherwise the
// target the Model asks for (ModelOptions::cpu_target), or the best one this CPU supports.
inline KernelGenerator test_generator(bool dispatch = false) {
  codegen::CodegenOptions o;
  o.cache_dir = KILN_TEST_CACHE_DIR;
  if (dispatch) o.targets = runtime::cpu_targets();
  return codegen::kernel_generator(o);
}

// Runs `m` on a random input in [-1, 1) (seeded) for `reference`'s first input and expects its
// first output, re-laid-out to the reference's layout, within rtol / atol of `reference`'s.
inline void expect_model_matches_reference(Model& m, const graph::Graph& reference, uint64_t seed,
                                           double rtol, double atol) {
  const graph::Value& in = reference.value(reference.inputs[0]);
  const graph::Tensor x{in.shape, in.layout,
                        graph::random_uniform(graph::num_elements(in.shape), -1.0f, 1.0f, seed)};
  ASSERT_TRUE(m.run(std::vector<graph::Tensor>{x}).is_ok());
  const graph::Tensor want = graph::run_reference(reference, {x})[0];
  const TensorView out = m.output(0);
  const graph::Tensor got = graph::to_layout(
      graph::Tensor{out.shape, out.layout,
                    std::vector<float>(out.data, out.data + graph::num_elements(out.shape))},
      want.layout);
  EXPECT_LE(graph::worst_error_ratio(got.data, want.data, rtol, atol), 1.0)
      << "seed " << seed << ", max abs error " << graph::max_abs_diff(got.data, want.data);
}

// `optimized` run by a Model on `ins` on every CPU target this machine runs, every kernel
// generated; check(i, output) sees each output in the layout of want[i] (the reference's).
inline void check_outputs_on_every_target(
    const graph::Graph& optimized, const std::vector<graph::Tensor>& ins,
    const std::vector<graph::Tensor>& want,
    const std::function<void(size_t, const graph::Tensor&)>& check) {
  ASSERT_EQ(want.size(), optimized.outputs.size());
  for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t) {
    if (!runs_target(t)) continue;
    SCOPED_TRACE(runtime::cpu_targets()[t]);
    ModelOptions o;
    o.cpu_target = t;
    o.generate_kernels = codegen::kernel_generator({{}, KILN_TEST_CACHE_DIR, nullptr});
    Model model(optimized, o);
    for (const graph::KernelSpec& k : model.kernels()) ASSERT_TRUE(graph::is_generated(k));
    ASSERT_TRUE(model.run(ins));
    for (size_t i = 0; i < want.size(); ++i) {
      SCOPED_TRACE("output " + std::to_string(i));
      const TensorView out = model.output(i);
      graph::Tensor got{out.shape, out.layout,
                        std::vector<float>(out.data, out.data + graph::num_elements(out.shape))};
      if (got.layout != want[i].layout) got = graph::to_layout(got, want[i].layout);
      ASSERT_EQ(got.shape, want[i].shape);
      check(i, got);
    }
  }
}

// Seeded random values in [-1, 1) for every input of `g`, in its declared shape and layout
// (input i from seed + its value index).
inline std::vector<graph::Tensor> random_graph_inputs(const graph::Graph& g, uint64_t seed) {
  std::vector<graph::Tensor> ins;
  for (graph::ValueId id : g.inputs) {
    const graph::Value& val = g.value(id);
    ins.push_back(
        {val.shape, val.layout,
         graph::random_uniform(graph::num_elements(val.shape), -1.0f, 1.0f, seed + id.index)});
  }
  return ins;
}

// `optimized` (the passes' graph of `input`) matches the reference run of `input` on random
// inputs, on every CPU target, within rtol / atol.
inline void expect_whole_graph_matches_reference(const graph::Graph& input,
                                                 const graph::Graph& optimized, double rtol = 1e-5,
                                                 double atol = 1e-6) {
  const std::vector<graph::Tensor> ins = random_graph_inputs(input, 20);
  const std::vector<graph::Tensor> want = graph::run_reference(input, ins);
  check_outputs_on_every_target(optimized, ins, want, [&](size_t i, const graph::Tensor& got) {
    EXPECT_LE(graph::worst_error_ratio(got.data, want[i].data, rtol, atol), 1.0);
  });
}

// The kernel specs `g` (a graph after the passes) lowers to, nothing compiled (lower_only). A
// copy: the Model that lowered them is gone when this returns.
inline std::vector<graph::KernelSpec> lowered_kernels(const graph::Graph& g) {
  ModelOptions lower;
  lower.lower_only = true;
  return Model(g, lower).kernels();
}

}  // namespace kiln::testing_util
