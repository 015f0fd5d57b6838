// How the shapes ImportOptions::input_shapes gives bind the graph inputs' symbolic dimensions,
// and each input's static shape from them (input_shapes.cpp). Internal to the ONNX frontend;
// default_batch_shapes and graph_inputs_with_free_dims (onnx_import.h) are built on them.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "graph/ir.h"
#include "onnx/onnx_pb.h"

namespace kiln::graph::onnx {

// The sizes symbolic dimensions of graph inputs take (ImportOptions::input_shapes): whole
// shapes by input name, and per dim_param name the size a bound input gave it, so that binding
// one input's batch binds the batch of every input that shares its dim_param.
struct ShapeBindings {
  std::map<std::string, Shape> by_input;
  std::map<std::string, std::pair<int64_t, std::string>> by_param;  // size, the input binding it
};

// A graph input's static shape: its declared dims, with the symbolic ones bound by `b`. Error
// for anything the graph cannot hold, a binding that contradicts a fixed dim, and a symbolic
// dim left unbound (naming the flag that binds it).
Shape static_shape(const ::onnx::ValueInfoProto& v, const ShapeBindings& b);

// Indexes ImportOptions::input_shapes, and the dim_params they bind in `inputs`. Error for a
// shape given twice and for one dim_param bound to two sizes.
ShapeBindings bind_shapes(const std::vector<std::pair<std::string, Shape>>& shapes,
                          const google::protobuf::RepeatedPtrField<::onnx::ValueInfoProto>& inputs);

// Before any input's shape is read, so a misspelt name is reported as such and not as the
// symbolic dimension it failed to bind.
void check_shape_names(const ShapeBindings& shapes, const ::onnx::GraphProto& g);

}  // namespace kiln::graph::onnx
