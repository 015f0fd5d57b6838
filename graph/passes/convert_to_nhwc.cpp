// convert_to_nhwc: the layout decision. Convolution slides over space with channels
// innermost, so NHWC gives contiguous vector access; the input is converted once at the entry
// and conv weights once, ahead of time.
#include <map>

#include "graph/passes/passes.h"
#include "graph/shape_inference.h"

namespace kiln::graph {
namespace {

std::vector<float> oihw_to_hwio(const std::vector<float>& w, const FilterDims& f) {
  std::vector<float> out(w.size());
  for (int64_t o = 0; o < f.co; ++o)
    for (int64_t i = 0; i < f.ci; ++i)
      for (int64_t y = 0; y < f.kh; ++y)
        for (int64_t x = 0; x < f.kw; ++x)
          out[((y * f.kw + x) * f.ci + i) * f.co + o] = w[((o * f.ci + i) * f.kh + y) * f.kw + x];
  return out;
}

}  // namespace

Graph convert_to_nhwc(const Graph& input) {
  Graph g = input;
  std::vector<Node> nodes;

  // Entry transforms: an NCHW graph input is read once and written NHWC. Existing transforms
  // keep reading the NCHW input, so running the pass twice changes nothing.
  auto is_transform = [](const Node& n) { return std::holds_alternative<LayoutTransform>(n.op); };
  const auto uses = g.consumers();
  std::map<uint32_t, ValueId> replaced;
  for (ValueId in : g.inputs) {
    const Value v = g.value(in);
    if (v.layout != Layout::nchw) continue;
    bool needs_transform = false;
    for (NodeId u : uses[in.index]) needs_transform |= !is_transform(g.node(u));
    if (!needs_transform) continue;
    Value t{v.name + "_nhwc", image_shape(image_dims(v.shape, Layout::nchw), Layout::nhwc),
            v.dtype, Layout::nhwc};
    const ValueId tv = g.add_value(std::move(t));
    Node n{v.name + "_to_nhwc", LayoutTransform{Layout::nchw, Layout::nhwc}, {in}, {tv}, {}};
    n.computes = {"layout_transform (NCHW -> NHWC)"};
    nodes.push_back(std::move(n));
    replaced[in.index] = tv;
  }

  // Every other activation is simply declared NHWC: its producer now writes that layout.
  for (uint32_t i = 0; i < g.values().size(); ++i) {
    Value& v = g.value(ValueId{i});
    if (v.is_constant() || v.layout != Layout::nchw || g.is_graph_input(ValueId{i})) continue;
    v.shape = image_shape(image_dims(v.shape, Layout::nchw), Layout::nhwc);
    v.layout = Layout::nhwc;
  }

  std::map<uint32_t, ValueId> relaid_weights;  // shared weights are converted once
  for (Node n : g.nodes()) {
    if (!is_transform(n))
      for (ValueId& v : n.inputs)
        if (auto it = replaced.find(v.index); it != replaced.end()) v = it->second;
    if (std::holds_alternative<Conv2d>(n.op)) {
      const ValueId wid = n.inputs[1];
      const Value& w = g.value(wid);
      if (w.layout == Layout::oihw) {
        if (!w.is_constant())
          throw Error("Conv2d node '" + n.name + "': weights '" + w.name +
                      "' are not a constant; Kiln compiles weights into the model");
        auto it = relaid_weights.find(wid.index);
        if (it == relaid_weights.end()) {
          const FilterDims f = filter_dims(w.shape, Layout::oihw);
          Value hw{w.name + "_hwio", filter_shape(f, Layout::hwio), w.dtype, Layout::hwio};
          hw.data = std::make_shared<const std::vector<float>>(oihw_to_hwio(*w.data, f));
          it = relaid_weights.emplace(wid.index, g.add_value(std::move(hw))).first;
        }
        n.inputs[1] = it->second;
      }
    }
    nodes.push_back(std::move(n));
  }
  g.rebuild(std::move(nodes));
  return g;
}

}  // namespace kiln::graph
