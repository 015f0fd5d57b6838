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
  // graph inputs; Kiln compiles weights in. The tensor's shape must match the declared one
  // (a symbolic dimension takes the bound size). Inputs declared INT64/INT32/BOOL take the
  // values rounded (exact up to 2^24, saturating at the int64 limits), for shape-like inputs.
  std::vector<std::pair<std::string, Tensor>> constant_inputs;
  // Shapes of graph inputs (by name) whose declared shape has symbolic dimensions, as exporters
  // write a dynamic batch: bound before anything else, so the rest of the import sees static
  // shapes (`kiln --input-shape NAME=1,3,224,224`). A dimension the model fixes must be given
  // its declared value; a name that is no graph input is an Error, and so is a symbolic
  // dimension left unbound, unless another input's binding gave that dim_param its size.
  std::vector<std::pair<std::string, Shape>> input_shapes;
  // Where the files of initializers stored outside the model (ONNX external data) are looked
  // up; import_model defaults it to the model file's directory. import_model_from_bytes
  // without it refuses external data.
  std::string base_dir;
};

// Parses and imports: initializers and Constant nodes become constants, constant subgraphs
// (Shape -> Gather -> Unsqueeze -> Concat -> Reshape and the like) are folded, Identity and
// inference Dropout disappear, every other supported op becomes a graph node with its shape
// inferred. 4-D activations are NCHW. The graph is verified before it is returned.
Graph import_model(const std::string& path, const ImportOptions& options = {});
Graph import_model_from_bytes(const std::string& bytes, const ImportOptions& options = {});
// The bytes of a model file, with import_model's checks: a regular file of at most 2 GiB
// (protobuf's limit), refused before it is read otherwise.
std::string read_model_file(const std::string& path);
// The shapes a caller may bind by default for a model (serialized bytes) with a dynamic batch:
// for each graph input whose first dimension is symbolic or unknown and not bound by `given`
// (an ImportOptions::input_shapes list, itself or through a shared dim_param), and whose other
// dimensions are fixed or so bound, its shape with `batch` first. Inputs with another free
// dimension are left out (an image of unknown size has no sensible default). Empty for bytes
// that do not parse and for `given` shapes the import would refuse (a name that is no graph
// input, a dim_param given two sizes): the import's error says what is wrong.
// The names of a model's graph inputs (serialized bytes), initializers listed as inputs left
// out, in order, each with whether its declared shape has a symbolic or unknown dimension (or no
// shape at all). Empty for bytes that do not parse.
std::vector<std::pair<std::string, bool>> graph_inputs_with_free_dims(const std::string& bytes);
std::vector<std::pair<std::string, Shape>> default_batch_shapes(
    const std::string& bytes, const std::vector<std::pair<std::string, Shape>>& given,
    int64_t batch);
// The files beside the model that its initializers keep their data in (ONNX external data),
// given the model file's path and bytes: each once, in the order first named, leaving out
// locations the import refuses (absolute, or climbing out with ".."). For cache keys that must
// change when the weights do.
std::vector<std::string> external_data_files(const std::string& model_path,
                                             const std::string& bytes);

// The ONNX op types (default domain) the importer maps to Kiln, sorted.
const std::vector<std::string>& supported_op_types();
bool is_supported_op(const std::string& op_type);

// The inputs of an op the importer needs as import-time constants (weights, shapes, axes,
// bounds...), by position: a graph input feeding one must be bound through constant_inputs.
// Also the integer indices of GatherElements and ScatterElements, which may be computed at run
// time (a float32 index) but which a graph input, float32 in Kiln, cannot carry.
std::vector<int> constant_input_slots(const std::string& op_type);

// A serialized TensorProto file (the input_K.pb / output_K.pb of ONNX's test data) as a
// float tensor in logical (row-major) order (layout NCHW when 4-D, else any). INT64, INT32,
// BOOL, DOUBLE and the small integer types are converted to float (for bound shape inputs and
// comparisons); any other dtype, a bad size or external data is an Error naming the file.
Tensor load_tensor_file(const std::string& path);

}  // namespace kiln::graph::onnx
