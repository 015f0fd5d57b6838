// The pass pipeline: a plain named list, run in order, with the verifier after each pass and
// a hook to dump the graph after any of them.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "graph/ir.h"

namespace kiln::graph {

struct Pass {
  const char* name;
  Graph (*run)(const Graph&);
};

// The passes in the order they run, from fuse_layer_norm to fuse_pooling_into_conv (pipeline.cpp;
// docs/design.md says what each does).
const std::vector<Pass>& default_passes();

// The arithmetic of the convolutions' multiply-adds: float32, or bfloat16 where a convolution
// can (the use_bf16 pass).
enum class Precision { f32, bf16 };
const char* to_string(Precision p);
// "f32" or "bf16"; Error otherwise.
Precision parse_precision(const std::string& text);

struct PipelineOptions {
#ifdef NDEBUG
  bool verify_each = false;
#else
  bool verify_each = true;
#endif
  std::string stop_after;  // empty: run every pass; else a pass name (Error if unknown)
  Precision precision = Precision::f32;  // bf16: the use_bf16 pass runs last
  // bf16 only: whether the bf16 convolutions will run on AMX tiles (the CPU has AMX), which
  // moves use_bf16's line between bf16 and float32 Winograd (see use_bf16). The tools set it
  // from the CPU that compiles (runtime::amx_usable).
  bool bf16_amx = false;
  // Called with "input" first, then after each pass.
  std::function<void(const std::string& stage, const Graph&)> on_stage;
};

Graph run_passes(const Graph& g, const PipelineOptions& options = {});

}  // namespace kiln::graph
