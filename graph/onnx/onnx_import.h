// ONNX frontend: reads a .onnx file (protobuf classes from libonnx) into a Kiln graph. Every
// problem with the file is an Error naming the node, tensor and what was expected.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "graph/ir.h"
#include "graph/reference.h"

namespace kiln::graph::onnx {

struct ImportOptions {
  // Graph inputs to bind as constants (by name), as ONNX node tests feed weights through
  // graph inputs; Kiln compiles weights in.
  std::vector<std::pair<std::string, Tensor>> constant_inputs;
  // Directory that external data paths are resolved against (the model's directory).
  std::string base_dir;
};

// Parses and imports: initializers and Constant nodes become constants, constant subgraphs
// (Shape -> Gather -> Unsqueeze -> Concat -> Reshape and the like) are folded, Identity and
// inference Dropout disappear, every other supported op becomes a graph node with its shape
// inferred. 4-D activations are NCHW. The graph is verified before it is returned.
Graph import_model(const std::string& path, const ImportOptions& options = {});
Graph import_model_from_bytes(const std::string& bytes, const ImportOptions& options = {});

// A serialized TensorProto file (the input_K.pb / output_K.pb of ONNX's test data) as a
// float tensor in logical (row-major) order.
Tensor load_tensor_file(const std::string& path);

}  // namespace kiln::graph::onnx
