// Fuzz target: ONNX bytes -> importer -> the pass pipeline (verifier after every pass) ->
// lowering to kernel specs -> arena plan -> the .weights format and back. No kernel runs.
// A malformed model must end in graph::Error; anything else (another exception, a crash, a
// sanitizer report) is a finding.
#include <cstdint>
#include <stdexcept>
#include <string>

#include "fuzz/fuzz_input.h"
#include "graph/kernel_spec.h"
#include "graph/memory_plan.h"
#include "graph/onnx/onnx_import.h"
#include "graph/passes/pipeline.h"
#include "graph/serialize.h"

namespace {

using namespace kiln;

void check(bool ok, const char* what) {
  if (!ok) throw std::logic_error(std::string("fuzz_onnx: ") + what);
}

void lower_and_plan(const graph::Graph& g) {
  for (const graph::KernelSpec& k : graph::lower_to_kernels(g)) {
    graph::describe(k);
    if (!graph::is_generated(k)) continue;  // a portable kernel: no signature, no arguments
    graph::kernel_signature(k);
    graph::generated_kernel_arguments(k);
  }
  graph::plan_arena(g, graph::PlanOptions{64, true});
  graph::plan_arena(g, graph::PlanOptions{256, false, false});
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > fuzz::kMaxInputBytes) return 0;
  graph::Graph optimized;
  try {
    const graph::Graph imported =
        graph::onnx::import_model_from_bytes(std::string(reinterpret_cast<const char*>(data), size));
    graph::PipelineOptions options;
    options.verify_each = true;
    optimized = graph::run_passes(imported, options);
    lower_and_plan(optimized);
  } catch (const graph::Error&) {
    return 0;  // refused with a message: the expected outcome for most inputs
  }
  // A graph Kiln accepted and optimized is what `kiln compile` writes as .weights: it must read
  // back, and writing it again must give the same bytes.
  const std::string bytes = graph::serialize(optimized);
  check(graph::serialize(graph::deserialize(bytes)) == bytes, "the .weights round trip changed the graph");
  return 0;
}
