// C++ API for constructing graphs: each call appends one node and returns its output value,
// with the output shape inferred.
#pragma once

#include <string>
#include <vector>

#include "graph/ir.h"

namespace kiln::graph {

class GraphBuilder {
 public:
  ValueId input(const std::string& name, Shape shape, Layout layout = Layout::nchw);
  ValueId constant(const std::string& name, Shape shape, std::vector<float> data,
                   Layout layout = Layout::any);

  ValueId conv2d(const std::string& name, ValueId x, ValueId weights, ValueId bias,
                 const Conv2d& attrs);
  ValueId batch_norm(const std::string& name, ValueId x, ValueId scale, ValueId bias,
                     ValueId mean, ValueId variance, float epsilon = 1e-5f);
  ValueId relu(const std::string& name, ValueId x);
  ValueId clip(const std::string& name, ValueId x, float min, float max);

  // Any op: shape inference gives the output (throws Error naming the node if inputs do not fit).
  ValueId op(const std::string& name, Op op, std::vector<ValueId> inputs);

  void output(ValueId v);

  // Verifies and returns the graph; throws Error naming the first problems found.
  Graph finish();

 private:
  Graph g_;
};

// Deterministic uniform floats in [lo, hi) (SplitMix64), identical on every platform.
std::vector<float> random_uniform(size_t count, float lo, float hi, uint64_t seed);

}  // namespace kiln::graph
