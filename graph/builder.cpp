// GraphBuilder: node-at-a-time construction with shapes inferred as it goes.
#include "graph/builder.h"

#include "graph/shape_inference.h"
#include "graph/verify.h"

namespace kiln::graph {

ValueId GraphBuilder::input(const std::string& name, Shape shape, Layout layout) {
  const ValueId v = g_.add_value(Value{name, std::move(shape), DType::f32, layout});
  g_.inputs.push_back(v);
  return v;
}

ValueId GraphBuilder::constant(const std::string& name, Shape shape, std::vector<float> data,
                               Layout layout) {
  if (static_cast<int64_t>(data.size()) != num_elements(shape))
    throw Error("constant '" + name + "' has " + std::to_string(data.size()) +
                " elements but shape " + to_string(shape));
  Value v{name, std::move(shape), DType::f32, layout};
  v.data = std::make_shared<const std::vector<float>>(std::move(data));
  return g_.add_value(std::move(v));
}

ValueId GraphBuilder::op(const std::string& name, Op op, std::vector<ValueId> inputs) {
  Node n{name, std::move(op), std::move(inputs), {}, {}};
  n.computes = {op_label(n.op)};
  const TypedShape out = infer_output(g_, n);
  n.outputs = {g_.add_value(Value{name, out.shape, DType::f32, out.layout})};
  g_.add_node(std::move(n));
  return g_.nodes().back().outputs[0];
}

ValueId GraphBuilder::conv2d(const std::string& name, ValueId x, ValueId weights, ValueId bias,
                             const Conv2d& attrs) {
  return op(name, attrs, {x, weights, bias});
}

ValueId GraphBuilder::batch_norm(const std::string& name, ValueId x, ValueId scale,
                                 ValueId bias, ValueId mean, ValueId variance, float epsilon) {
  return op(name, BatchNorm{epsilon}, {x, scale, bias, mean, variance});
}

ValueId GraphBuilder::relu(const std::string& name, ValueId x) { return op(name, Relu{}, {x}); }

ValueId GraphBuilder::clip(const std::string& name, ValueId x, float min, float max) {
  if (!(min <= max)) throw Error("Clip node '" + name + "': min must be <= max");
  return op(name, Clip{min, max}, {x});
}

void GraphBuilder::output(ValueId v) { g_.outputs.push_back(v); }

Graph GraphBuilder::finish() {
  verify(g_, "from the builder");
  return std::move(g_);
}

std::vector<float> random_uniform(size_t count, float lo, float hi, uint64_t seed) {
  std::vector<float> out(count);
  uint64_t state = seed;
  for (float& f : out) {
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    const double unit = static_cast<double>(z >> 11) * (1.0 / 9007199254740992.0);
    f = static_cast<float>(lo + (hi - lo) * unit);
  }
  return out;
}

}  // namespace kiln::graph
