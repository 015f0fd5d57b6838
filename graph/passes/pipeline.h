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

// fold_pad_into_conv -> fold_batch_norm -> fuse_epilogues -> convert_to_nhwc ->
// fuse_elementwise_chains.
const std::vector<Pass>& default_passes();

struct PipelineOptions {
#ifdef NDEBUG
  bool verify_each = false;
#else
  bool verify_each = true;
#endif
  std::string stop_after;  // empty: run every pass; else a pass name (Error if unknown)
  // Called with "input" first, then after each pass.
  std::function<void(const std::string& stage, const Graph&)> on_stage;
};

Graph run_passes(const Graph& g, const PipelineOptions& options = {});

}  // namespace kiln::graph
