// ONNX import (see onnx_import.h).
#include "graph/onnx/onnx_import.h"

namespace kiln::graph::onnx {

Graph import_model(const std::string& path, const ImportOptions& /*options*/) {
  throw Error("ONNX import is not implemented yet (" + path + ")");
}

Graph import_model_from_bytes(const std::string& /*bytes*/, const ImportOptions& /*options*/) {
  throw Error("ONNX import is not implemented yet");
}

Tensor load_tensor_file(const std::string& path) {
  throw Error("ONNX tensor loading is not implemented yet (" + path + ")");
}

}  // namespace kiln::graph::onnx
