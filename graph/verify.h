// Structural verifier: run on user graphs before the passes and after every pass in tests
// and debug builds.
#pragma once

#include <string>
#include <vector>

#include "graph/ir.h"

namespace kiln::graph {

// Every problem found, empty when the graph is well-formed: ids in range, one producer per
// value, nodes in topological order (hence acyclic), every use defined, constants' data sizes,
// dtypes, and each node's output shapes and layouts matching shape inference.
std::vector<std::string> verify_problems(const Graph& g);

// Throws Error listing the problems, prefixed with `context` (e.g. "after fold_batch_norm").
void verify(const Graph& g, const std::string& context = "");

}  // namespace kiln::graph
