// Graph inputs' shapes: symbolic dimensions bound by ImportOptions::input_shapes, the errors
// that name the flag, and the CLI's defaults (a dynamic batch, the inputs with free dimensions).
#include "graph/onnx/input_shapes.h"

#include <set>

#include "graph/onnx/importer.h"
#include "graph/onnx/onnx_import.h"

namespace kiln::graph::onnx {
namespace {

// The shape to suggest in an error: the declared dims, a free first dimension (a batch) as 1, and
// every other symbolic dimension by its name ("?" when it has none), for the user to fill in: a
// 1 there would be an image of one pixel. A batch whose name another axis shares is named too.
std::string suggested_shape(const ::onnx::TensorShapeProto& shape) {
  auto shares_name = [&](int axis) {
    for (int k = 0; k < shape.dim_size(); ++k)
      if (k != axis && shape.dim(k).has_dim_param() &&
          shape.dim(k).dim_param() == shape.dim(axis).dim_param())
        return true;
    return false;
  };
  std::string s;
  for (int k = 0; k < shape.dim_size(); ++k) {
    const auto& d = shape.dim(k);
    s += k ? "," : "";
    if (d.has_dim_value())
      s += std::to_string(d.dim_value());
    else if (k == 0 && !(d.has_dim_param() && shares_name(0)))
      s += "1";
    else
      s += d.has_dim_param() && !d.dim_param().empty() ? d.dim_param() : "?";
  }
  return s;
}

}  // namespace

Shape static_shape(const ::onnx::ValueInfoProto& v, const ShapeBindings& b) {
  const std::string what = "graph input '" + v.name() + "'";
  const auto& t = v.type().tensor_type();
  if (!t.has_shape()) throw Error(what + " has no shape; Kiln needs static shapes");
  const int rank = t.shape().dim_size();
  if (rank > static_cast<int>(kMaxRank))
    throw Error(what + " has rank " + std::to_string(rank) + "; Kiln supports up to " +
                std::to_string(kMaxRank));
  const auto given = b.by_input.find(v.name());
  const Shape* bound = given == b.by_input.end() ? nullptr : &given->second;
  if (bound && bound->size() != static_cast<size_t>(rank))
    throw Error(what + " has rank " + std::to_string(rank) + ", but the shape given for it, " +
                to_string(*bound) + ", has rank " + std::to_string(bound->size()));
  Shape s;
  for (int k = 0; k < rank; ++k) {
    const auto& d = t.shape().dim(k);
    const auto param = d.has_dim_param() ? b.by_param.find(d.dim_param()) : b.by_param.end();
    int64_t size = 0;
    if (d.has_dim_value()) {
      size = d.dim_value();
      if (bound && (*bound)[k] != size)
        throw Error(what + " has the fixed dimension " + std::to_string(size) + " on axis " +
                    std::to_string(k) + ", but the shape given for it is " + to_string(*bound) +
                    " (only symbolic dimensions can be bound)");
    } else if (bound) {
      size = (*bound)[k];
    } else if (param != b.by_param.end()) {
      size = param->second.first;
    } else {
      throw Error(what + " has " +
                  (d.has_dim_param() ? "a symbolic dimension '" + d.dim_param() + "'"
                                     : std::string("an unknown dimension")) +
                  " (axis " + std::to_string(k) + "); give its shape with --input-shape " +
                  v.name() + "=" + suggested_shape(t.shape()) +
                  " (C++: ImportOptions::input_shapes)");
    }
    if (size <= 0)
      throw Error(what + " has dimension " + std::to_string(size) + " on axis " +
                  std::to_string(k) + "; dimensions must be positive");
    s.push_back(size);
  }
  if (checked_elements(s, what) > kMaxGraphElements)
    throw Error(what + " is " + to_string(s) + ", too large for any real network");
  return s;
}

ShapeBindings bind_shapes(
    const std::vector<std::pair<std::string, Shape>>& shapes,
    const google::protobuf::RepeatedPtrField<::onnx::ValueInfoProto>& inputs) {
  ShapeBindings b;
  for (const auto& [name, shape] : shapes)
    if (!b.by_input.emplace(name, shape).second)
      throw Error("the shape of input '" + name + "' is given twice");
  for (const auto& in : inputs) {
    const auto given = b.by_input.find(in.name());
    if (given == b.by_input.end() || !in.type().tensor_type().has_shape()) continue;
    const auto& dims = in.type().tensor_type().shape();
    for (int k = 0; k < dims.dim_size() && k < static_cast<int>(given->second.size()); ++k) {
      if (!dims.dim(k).has_dim_param()) continue;
      const int64_t size = given->second[static_cast<size_t>(k)];
      const auto [it, added] =
          b.by_param.emplace(dims.dim(k).dim_param(), std::pair{size, in.name()});
      if (!added && it->second.first != size)
        throw Error("symbolic dimension '" + it->first + "' is given the size " +
                    std::to_string(it->second.first) + " by the shape of input '" +
                    it->second.second + "' and " + std::to_string(size) + " by input '" +
                    in.name() + "'");
    }
  }
  return b;
}

void check_shape_names(const ShapeBindings& shapes, const ::onnx::GraphProto& g) {
  std::set<std::string> initializers, inputs;
  for (const auto& t : g.initializer()) initializers.insert(t.name());
  std::string list;  // the graph inputs that are no initializer's default value
  for (const auto& in : g.input())
    if (!initializers.count(in.name()) && inputs.insert(in.name()).second)
      list += (list.empty() ? "'" : ", '") + in.name() + "'";
  for (const auto& [name, shape] : shapes.by_input) {
    if (!inputs.count(name))
      throw Error("a shape is given for input '" + name +
                  "', which is not a graph input of the model (its inputs: " +
                  (list.empty() ? "none" : list) + ")");
  }
}

std::vector<std::pair<std::string, bool>> graph_inputs_with_free_dims(const std::string& bytes) {
  ::onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) return {};
  std::set<std::string> initializers;
  for (const auto& t : model.graph().initializer()) initializers.insert(t.name());
  std::vector<std::pair<std::string, bool>> inputs;
  for (const auto& in : model.graph().input()) {
    if (initializers.count(in.name())) continue;
    const auto& t = in.type().tensor_type();
    bool free = !t.has_shape();
    for (int k = 0; !free && k < t.shape().dim_size(); ++k)
      free = !t.shape().dim(k).has_dim_value();
    inputs.emplace_back(in.name(), free);
  }
  return inputs;
}

std::vector<std::pair<std::string, Shape>> default_batch_shapes(
    const std::string& bytes, const std::vector<std::pair<std::string, Shape>>& given,
    int64_t batch) {
  ::onnx::ModelProto model;
  if (!model.ParseFromString(bytes)) return {};  // the import reports it
  const auto& g = model.graph();
  ShapeBindings b;
  try {
    b = bind_shapes(given, g.input());
  } catch (const Error&) {
    return {};  // contradictory bindings: the import reports them
  }
  try {
    check_shape_names(b, g);
  } catch (const Error&) {
    return {};  // a misspelt name: the import says so, and a default would only add noise
  }
  std::set<std::string> initializers;
  for (const auto& t : g.initializer()) initializers.insert(t.name());
  std::vector<std::pair<std::string, Shape>> shapes;
  for (const auto& in : g.input()) {
    if (initializers.count(in.name()) || b.by_input.count(in.name()) ||
        !in.type().tensor_type().has_shape())
      continue;
    const auto& dims = in.type().tensor_type().shape();
    if (dims.dim_size() == 0 || dims.dim(0).has_dim_value() ||
        (dims.dim(0).has_dim_param() && b.by_param.count(dims.dim(0).dim_param())))
      continue;
    Shape s{batch};
    for (int k = 1; k < dims.dim_size(); ++k) {
      const auto& d = dims.dim(k);
      const auto p = d.has_dim_param() ? b.by_param.find(d.dim_param()) : b.by_param.end();
      if (d.has_dim_value())
        s.push_back(d.dim_value());
      else if (p != b.by_param.end())
        s.push_back(p->second.first);
      else
        break;  // another free dimension: the import asks for the whole shape
    }
    if (s.size() == static_cast<size_t>(dims.dim_size()))
      shapes.emplace_back(in.name(), std::move(s));
  }
  return shapes;
}

}  // namespace kiln::graph::onnx
