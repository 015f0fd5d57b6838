// ONNX export of Kiln graphs (usually the optimized one), to look at what the compiler did.
#pragma once

#include <string>

#include "graph/ir.h"

namespace kiln::graph::onnx {

struct ExportOptions {
  // With false, every initializer keeps its name, dims and layout but carries no data, so a
  // 100 MB model exports as a few kilobytes. Such a file is for viewing only: no runtime (Kiln's
  // importer included) can run it. Operands that ONNX wants as inputs rather than attributes
  // (Clip's min and max, Reshape's shape) are always written, as they are parameters, not weights.
  bool include_weights = true;
};

// The graph as a ModelProto (ir_version 8, producer "kiln", opsets: default domain 13 and
// "ai.kiln" 1), serialized.
//
// - Tensors have their stored (physical) shapes: an NHWC value is [N, H, W, C]. Every value
//   with a layout (each 4-D value, OIHW/HWIO weights) names it in its doc_string ("NHWC").
//   Graph inputs and outputs are declared, and so is every intermediate value (value_info).
// - Constants are FLOAT initializers (raw_data, little-endian float32).
// - One NodeProto per Kiln node, named as the node; value names are made unique if two values
//   share one. A node that is a plain ONNX op with the same semantics on the exported tensors
//   gets its ONNX name (Relu, Clip, Add, Gemm, Reshape, Concat, Softmax, MaxPool on NCHW...);
//   every other node is an "ai.kiln" op (FusedConv, ElementwiseChain, LayoutTransform,
//   BatchNorm and Pool2d on NHWC, Slice, Pad...) with one attribute per field of the Kiln op.
//   Every node also has a string attribute "kiln_computes": the original operators it
//   computes joined with " + " ("conv2d + batchnorm (folded) + relu").
// A file made only of plain ONNX ops imports back (import_model) to the same graph semantics.
// kiln_computes is in no ONNX op's schema, so onnx.checker and onnxruntime refuse the file
// (Netron ignores unknown attributes, and Kiln's importer accepts this one, refusing any other
// unknown attribute): the export is for looking, not running.
// Throws Error when the model would exceed protobuf's 2 GiB limit (export without weights).
std::string export_model_bytes(const Graph& g, const ExportOptions& options = {});

// The same, written to `path` through a temporary file renamed into place, so a failed export
// never leaves a truncated model behind. Throws Error naming the path when it cannot be written.
void export_model(const Graph& g, const std::string& path, const ExportOptions& options = {});

}  // namespace kiln::graph::onnx
