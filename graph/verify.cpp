// The graph verifier.
#include "graph/verify.h"

#include "graph/kernel_spec.h"
#include "graph/shape_inference.h"

namespace kiln::graph {

std::vector<std::string> verify_problems(const Graph& g) {
  std::vector<std::string> problems;
  const size_t nv = g.values().size();
  auto in_range = [&](ValueId v) { return v.index < nv; };

  std::vector<int> producers(nv, 0);
  std::vector<bool> defined(nv, false);
  for (size_t i = 0; i < nv; ++i) {
    const Value& v = g.values()[i];
    const std::string name = "value '" + v.name + "'";
    for (int64_t d : v.shape)
      if (d <= 0) problems.push_back(name + " has a non-positive dimension " + to_string(v.shape));
    if (v.is_constant()) {
      defined[i] = true;
      if (static_cast<int64_t>(v.data->size()) != num_elements(v.shape))
        problems.push_back(name + " holds " + std::to_string(v.data->size()) +
                           " elements but its shape " + to_string(v.shape) + " needs " +
                           std::to_string(num_elements(v.shape)));
    }
  }
  for (ValueId v : g.inputs) {
    if (!in_range(v)) {
      problems.push_back("graph input id %" + std::to_string(v.index) + " is out of range");
      continue;
    }
    if (g.value(v).is_constant()) problems.push_back("graph input '" + g.value(v).name + "' is a constant");
    defined[v.index] = true;
  }

  for (uint32_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(NodeId{i});
    const std::string where = std::string(op_name(n.op)) + " node '" + n.name + "'";
    bool ids_ok = true;
    for (ValueId v : n.inputs) {
      if (!in_range(v)) {
        problems.push_back(where + " reads an undefined value id %" + std::to_string(v.index));
        ids_ok = false;
      } else if (!defined[v.index]) {
        problems.push_back(where + " reads '" + g.value(v).name +
                           "' before it is produced (a cycle, an out-of-order node, or a "
                           "missing producer)");
      }
    }
    for (ValueId v : n.outputs) {
      if (!in_range(v)) {
        problems.push_back(where + " writes an undefined value id %" + std::to_string(v.index));
        ids_ok = false;
        continue;
      }
      const Value& out = g.value(v);
      if (out.is_constant() || g.is_graph_input(v))
        problems.push_back(where + " overwrites '" + out.name + "', which is a constant or graph input");
      if (++producers[v.index] > 1)
        problems.push_back("value '" + out.name + "' has more than one producer");
      if (out.producer.index != i)
        problems.push_back("value '" + out.name + "' does not record " + where + " as its producer");
      defined[v.index] = true;
    }
    if (n.outputs.size() != 1) {
      problems.push_back(where + " must have exactly one output");
      continue;
    }
    if (!ids_ok) continue;
    try {
      const TypedShape expected = infer_output(g, n);
      const Value& out = g.value(n.outputs[0]);
      if (out.shape != expected.shape || out.layout != expected.layout)
        problems.push_back(where + " output '" + out.name + "' is " + to_string(out.shape) + " " +
                           to_string(out.layout) + ", shape inference says " +
                           to_string(expected.shape) + " " + to_string(expected.layout));
      const auto* conv = std::get_if<Conv2d>(&n.op);
      if (conv && conv->bf16) {
        const std::string why = bf16_conv_refusal(g, n);
        if (!why.empty()) problems.push_back(where + " is marked bf16 but cannot be: " + why);
      }
      const int tile = conv ? conv->max_winograd_tile : 4;
      if (tile != 0 && tile != 2 && tile != 4)
        problems.push_back(where + " has max_winograd_tile " + std::to_string(tile) +
                           " (0, 2 or 4)");
    } catch (const Error& e) {
      problems.push_back(e.what());
    }
  }
  for (ValueId v : g.outputs) {
    if (!in_range(v))
      problems.push_back("graph output id %" + std::to_string(v.index) + " is out of range");
    else if (!defined[v.index])
      problems.push_back("graph output '" + g.value(v).name + "' is never produced");
  }
  for (size_t i = 0; i < nv; ++i) {
    const Value& v = g.values()[i];
    if (!defined[i]) problems.push_back("value '" + v.name + "' is neither produced, a constant nor a graph input");
  }
  return problems;
}

void verify(const Graph& g, const std::string& context) {
  const std::vector<std::string> problems = verify_problems(g);
  if (problems.empty()) return;
  std::string msg = "invalid graph" + (context.empty() ? "" : " " + context) + ": ";
  for (size_t i = 0; i < problems.size(); ++i) msg += (i ? "; " : "") + problems[i];
  throw Error(msg);  // one line, as every Error
}

}  // namespace kiln::graph
