// What `kiln compile` generates as text: the model's C++ header and source, and the optimized
// graph as Graphviz DOT.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "graph/ir.h"

namespace kiln::cli {

// Where a compiled model runs.
struct Targets {
  std::vector<int> cpu;  // indices into runtime::cpu_targets(), best first; empty: all, dispatched
  bool cuda = false;     // CUDA first, the CPU targets as fallback
};

// NAME.h: class NAME::Model, standard library only (pimpl), with the model's inputs and outputs
// described in comments. `source` names the model file in the header comment.
std::string model_header(const std::string& name, const std::string& source, const graph::Graph& g,
                         int default_threads);
// NAME.cpp: NAME::Model on top of kiln::CompiledModel (kiln/model_api.h), which loads only the
// weights file whose checksum is `weights_checksum` (graph::write_graph_file's).
std::string model_source(const std::string& name, const Targets& targets, uint64_t weights_checksum);

// `s` with every occurrence of `key` replaced by `value`.
std::string replace_all(std::string s, const std::string& key, const std::string& value);

// Nodes labelled with op, name and fused `computes`; edges with tensor shapes and layouts.
// Constants are counted in their node's label rather than drawn.
std::string graph_to_dot(const graph::Graph& g, const std::string& name);

}  // namespace kiln::cli
