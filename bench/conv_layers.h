// The convolution layers bench_conv measures: every distinct conv kernel Kiln makes of
// torchvision's ResNet-50 and MobileNetV2, hard-coded so the benchmark needs no model file, and
// the check of that table against a model file (bench_conv --check-table / --print-table).
#pragma once

#include <cstddef>
#include <string>

#include "conv_peers.h"

namespace kiln::bench {

// One distinct convolution kernel of a model: batch 1, square kernel, equal strides, symmetric
// padding, dilation 1 (--check-table refuses anything else). `residual`: the kernel adds a
// tensor of the output's shape before the activation (a fused residual Add). `count`: how
// many kernels of the model have exactly this shape and epilogue; `name` is the first one's.
struct ConvLayer {
  const char* model;
  const char* name;
  int64_t ci, h, w, co, k;
  int stride, pad;
  bool depthwise;
  ConvEpilogue epilogue;
  bool residual;
  int count;

  ConvShape shape() const { return {1, ci, h, w, co, k, k, stride, pad, depthwise}; }
  ConvEpilogueSpec epilogue_spec() const { return {epilogue, residual}; }
  std::string id() const { return std::string(model) + "_" + name; }
};

extern const ConvLayer kConvLayers[];
extern const size_t kNumConvLayers;

const char* epilogue_name(ConvEpilogue e);

// The table model a file is for: its name up to the first dot ("resnet50.onnx" -> "resnet50").
std::string model_of_path(const std::string& path);
// Prints the conv kernels Kiln makes of the model at `path` as table rows; returns 0.
int print_layer_table(const std::string& path, const std::string& model);
// Returns 0 when the table's rows of `model` are exactly the distinct conv kernels (shape,
// epilogue, residual, depthwise, count, name) Kiln makes of the model at `path`; otherwise
// prints every difference to stderr and returns 1. Throws graph::Error for a conv the table's
// form cannot describe.
int check_layer_table(const std::string& path, const std::string& model);

}  // namespace kiln::bench
