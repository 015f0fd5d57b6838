// Model-local functions (ModelProto.functions, IR version 8 on): the importer sees a model's
// nodes with every call of such a function replaced by the function's body, as the ONNX
// definition of a function call reads.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "onnx/onnx_pb.h"

namespace kiln::graph::onnx {

// A node of the expanded graph: the model's own, or one of a function body's with its names
// bound to the call's.
struct FlatNode {
  std::shared_ptr<const ::onnx::NodeProto> proto;  // a model's node: not owned (the model's)
  std::string name;  // the node's name, or "<OpType>_<index>"; "<call>/<name>" in a body
  int opset = 0;     // the default-domain opset it was written for (its function's, if any)
};

// The model's nodes in order, each call of a model-local function replaced by the function's
// nodes, recursively: the function's formal inputs and outputs renamed to the call's actual
// ones (a formal input the call leaves out reads as a missing optional input), its other
// values prefixed by the call's name, attribute references (ref_attr_name) bound to the call's
// attributes or else the function's defaults (IR version 9's attribute_proto, read from the
// fields Debian's ONNX 1.12 classes do not know), and left out when neither gives one.
// `model_opset` is the model's default-domain opset, `max_opset` the newest a function may
// declare. Errors (throws graph::Error) name the call: a call with more inputs, outputs or
// an attribute the function does not declare, a function defined twice, functions that call
// each other in a cycle, bodies nested deeper than 32 calls, more than kMaxGraphNodes nodes
// in all (importer.h).
std::vector<FlatNode> flatten_functions(const ::onnx::ModelProto& model, int model_opset,
                                        int max_opset);

// The nodes some graph output depends on, in order. The others are never converted: a
// branch that leads nowhere may use ops Kiln lacks (PyTorch's dynamo exporter subtracts
// MaxPool's indices from a second pooling's and never reads the difference).
std::vector<FlatNode> live_nodes(std::vector<FlatNode> nodes, const ::onnx::GraphProto& graph);

}  // namespace kiln::graph::onnx
