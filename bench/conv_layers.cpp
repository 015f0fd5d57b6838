// The layer table of bench_conv and its check against a model file (see conv_layers.h).
#include "conv_layers.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "cli.h"
#include "graph/kernel_spec.h"
#include "graph/passes/pipeline.h"

namespace kiln::bench {
namespace {

constexpr ConvEpilogue kNone = ConvEpilogue::none, kRelu = ConvEpilogue::relu,
                       kRelu6 = ConvEpilogue::relu6;

}  // namespace

// Derived from Kiln's optimized graphs of build/release/tests/models/{resnet50,mobilenetv2}.onnx
// (`bench_conv --print-table FILE` prints these rows; the bench_conv_table_* tests check them).
// What Kiln fuses, as `kiln inspect` shows it: in a ResNet bottleneck with a downsample branch
// torch.onnx exports the downsample conv after conv3, so the downsample conv absorbs the
// residual Add + ReLU and conv3 keeps no epilogue; in the other blocks conv3 absorbs them.
// MobileNetV2's residual Adds are fused into the projection 1x1 conv (epilogue none).
// clang-format off
const ConvLayer kConvLayers[] = {
    // model, layer, Ci, H, W, Co, K, stride, pad, depthwise, epilogue, residual, count
    {"resnet50", "conv1",                     3, 224, 224,   64, 7, 2, 3, false, kRelu,  false, 1},
    {"resnet50", "layer1.0.conv1",           64,  56,  56,   64, 1, 1, 0, false, kRelu,  false, 1},
    {"resnet50", "layer1.0.conv2",           64,  56,  56,   64, 3, 1, 1, false, kRelu,  false, 3},
    {"resnet50", "layer1.0.conv3",           64,  56,  56,  256, 1, 1, 0, false, kNone,  false, 1},
    {"resnet50", "layer1.0.downsample",      64,  56,  56,  256, 1, 1, 0, false, kRelu,  true,  3},
    {"resnet50", "layer1.1.conv1",          256,  56,  56,   64, 1, 1, 0, false, kRelu,  false, 2},
    {"resnet50", "layer2.0.conv1",          256,  56,  56,  128, 1, 1, 0, false, kRelu,  false, 1},
    {"resnet50", "layer2.0.conv2",          128,  56,  56,  128, 3, 2, 1, false, kRelu,  false, 1},
    {"resnet50", "layer2.0.conv3",          128,  28,  28,  512, 1, 1, 0, false, kNone,  false, 1},
    {"resnet50", "layer2.0.downsample",     256,  56,  56,  512, 1, 2, 0, false, kRelu,  true,  1},
    {"resnet50", "layer2.1.conv1",          512,  28,  28,  128, 1, 1, 0, false, kRelu,  false, 3},
    {"resnet50", "layer2.1.conv2",          128,  28,  28,  128, 3, 1, 1, false, kRelu,  false, 3},
    {"resnet50", "layer2.1.conv3",          128,  28,  28,  512, 1, 1, 0, false, kRelu,  true,  3},
    {"resnet50", "layer3.0.conv1",          512,  28,  28,  256, 1, 1, 0, false, kRelu,  false, 1},
    {"resnet50", "layer3.0.conv2",          256,  28,  28,  256, 3, 2, 1, false, kRelu,  false, 1},
    {"resnet50", "layer3.0.conv3",          256,  14,  14, 1024, 1, 1, 0, false, kNone,  false, 1},
    {"resnet50", "layer3.0.downsample",     512,  28,  28, 1024, 1, 2, 0, false, kRelu,  true,  1},
    {"resnet50", "layer3.1.conv1",         1024,  14,  14,  256, 1, 1, 0, false, kRelu,  false, 5},
    {"resnet50", "layer3.1.conv2",          256,  14,  14,  256, 3, 1, 1, false, kRelu,  false, 5},
    {"resnet50", "layer3.1.conv3",          256,  14,  14, 1024, 1, 1, 0, false, kRelu,  true,  5},
    {"resnet50", "layer4.0.conv1",         1024,  14,  14,  512, 1, 1, 0, false, kRelu,  false, 1},
    {"resnet50", "layer4.0.conv2",          512,  14,  14,  512, 3, 2, 1, false, kRelu,  false, 1},
    {"resnet50", "layer4.0.conv3",          512,   7,   7, 2048, 1, 1, 0, false, kNone,  false, 1},
    {"resnet50", "layer4.0.downsample",    1024,  14,  14, 2048, 1, 2, 0, false, kRelu,  true,  1},
    {"resnet50", "layer4.1.conv1",         2048,   7,   7,  512, 1, 1, 0, false, kRelu,  false, 2},
    {"resnet50", "layer4.1.conv2",          512,   7,   7,  512, 3, 1, 1, false, kRelu,  false, 2},
    {"resnet50", "layer4.1.conv3",          512,   7,   7, 2048, 1, 1, 0, false, kRelu,  true,  2},

    {"mobilenetv2", "features.0",             3, 224, 224,   32, 3, 2, 1, false, kRelu6, false, 1},
    {"mobilenetv2", "features.1.conv.0",     32, 112, 112,   32, 3, 1, 1, true,  kRelu6, false, 1},
    {"mobilenetv2", "features.1.conv.1",     32, 112, 112,   16, 1, 1, 0, false, kNone,  false, 1},
    {"mobilenetv2", "features.2.conv.0",     16, 112, 112,   96, 1, 1, 0, false, kRelu6, false, 1},
    {"mobilenetv2", "features.2.conv.1",     96, 112, 112,   96, 3, 2, 1, true,  kRelu6, false, 1},
    {"mobilenetv2", "features.2.conv.2",     96,  56,  56,   24, 1, 1, 0, false, kNone,  false, 1},
    {"mobilenetv2", "features.3.conv.0",     24,  56,  56,  144, 1, 1, 0, false, kRelu6, false, 2},
    {"mobilenetv2", "features.3.conv.1",    144,  56,  56,  144, 3, 1, 1, true,  kRelu6, false, 1},
    {"mobilenetv2", "features.3.conv.2",    144,  56,  56,   24, 1, 1, 0, false, kNone,  true,  1},
    {"mobilenetv2", "features.4.conv.1",    144,  56,  56,  144, 3, 2, 1, true,  kRelu6, false, 1},
    {"mobilenetv2", "features.4.conv.2",    144,  28,  28,   32, 1, 1, 0, false, kNone,  false, 1},
    {"mobilenetv2", "features.5.conv.0",     32,  28,  28,  192, 1, 1, 0, false, kRelu6, false, 3},
    {"mobilenetv2", "features.5.conv.1",    192,  28,  28,  192, 3, 1, 1, true,  kRelu6, false, 2},
    {"mobilenetv2", "features.5.conv.2",    192,  28,  28,   32, 1, 1, 0, false, kNone,  true,  2},
    {"mobilenetv2", "features.7.conv.1",    192,  28,  28,  192, 3, 2, 1, true,  kRelu6, false, 1},
    {"mobilenetv2", "features.7.conv.2",    192,  14,  14,   64, 1, 1, 0, false, kNone,  false, 1},
    {"mobilenetv2", "features.8.conv.0",     64,  14,  14,  384, 1, 1, 0, false, kRelu6, false, 4},
    {"mobilenetv2", "features.8.conv.1",    384,  14,  14,  384, 3, 1, 1, true,  kRelu6, false, 4},
    {"mobilenetv2", "features.8.conv.2",    384,  14,  14,   64, 1, 1, 0, false, kNone,  true,  3},
    {"mobilenetv2", "features.11.conv.2",   384,  14,  14,   96, 1, 1, 0, false, kNone,  false, 1},
    {"mobilenetv2", "features.12.conv.0",    96,  14,  14,  576, 1, 1, 0, false, kRelu6, false, 3},
    {"mobilenetv2", "features.12.conv.1",   576,  14,  14,  576, 3, 1, 1, true,  kRelu6, false, 2},
    {"mobilenetv2", "features.12.conv.2",   576,  14,  14,   96, 1, 1, 0, false, kNone,  true,  2},
    {"mobilenetv2", "features.14.conv.1",   576,  14,  14,  576, 3, 2, 1, true,  kRelu6, false, 1},
    {"mobilenetv2", "features.14.conv.2",   576,   7,   7,  160, 1, 1, 0, false, kNone,  false, 1},
    {"mobilenetv2", "features.15.conv.0",   160,   7,   7,  960, 1, 1, 0, false, kRelu6, false, 3},
    {"mobilenetv2", "features.15.conv.1",   960,   7,   7,  960, 3, 1, 1, true,  kRelu6, false, 3},
    {"mobilenetv2", "features.15.conv.2",   960,   7,   7,  160, 1, 1, 0, false, kNone,  true,  2},
    {"mobilenetv2", "features.17.conv.2",   960,   7,   7,  320, 1, 1, 0, false, kNone,  false, 1},
    {"mobilenetv2", "features.18",          320,   7,   7, 1280, 1, 1, 0, false, kRelu6, false, 1},
};
// clang-format on
const size_t kNumConvLayers = sizeof(kConvLayers) / sizeof(kConvLayers[0]);

const char* epilogue_name(ConvEpilogue e) {
  return e == kNone ? "none" : e == kRelu ? "relu" : "relu6";
}

namespace {

using LayerKey =
    std::tuple<bool, int64_t, int64_t, int64_t, int64_t, int64_t, int, int, ConvEpilogue, bool>;
LayerKey key_of(const ConvLayer& l) {
  return {l.depthwise, l.ci, l.h, l.w, l.co, l.k, l.stride, l.pad, l.epilogue, l.residual};
}
std::string describe_key(const LayerKey& k) {
  char buf[200];
  std::snprintf(buf, sizeof buf, "%s %ldx%ldx%ld -> %ld, %ldx%ld stride %d pad %d, %s%s",
                std::get<0>(k) ? "depthwise" : "conv", static_cast<long>(std::get<1>(k)),
                static_cast<long>(std::get<2>(k)), static_cast<long>(std::get<3>(k)),
                static_cast<long>(std::get<4>(k)), static_cast<long>(std::get<5>(k)),
                static_cast<long>(std::get<5>(k)), std::get<6>(k), std::get<7>(k),
                std::get<9>(k) ? "residual + " : "", epilogue_name(std::get<8>(k)));
  return buf;
}

// "layer1.0.downsample.0.weight'_hwio" -> "layer1.0.downsample"; "features.2.conv.1.0.weight"
// -> "features.2.conv.1": the torchvision module, without the index of the conv inside a
// Sequential (Conv2dNormActivation, downsample).
std::string layer_name(const graph::TensorDesc& weights, const std::string& node) {
  std::string n = weights.name;
  const size_t dot = n.find(".weight");
  if (dot == std::string::npos) return node;  // not a torch.onnx export: the node's name
  n.resize(dot);
  if (n.size() > 2 && n.compare(n.size() - 2, 2, ".0") == 0) n.resize(n.size() - 2);
  return n;
}

struct Found {
  std::string name;
  int count = 0;
  size_t order = 0;
};

// The distinct conv kernels Kiln makes of `path`, in first-occurrence order; throws
// graph::Error for a conv the table's form cannot describe.
std::map<LayerKey, Found> model_convs(const std::string& path) {
  const graph::Graph optimized = graph::run_passes(cli::load_model(path));
  std::map<LayerKey, Found> found;
  size_t order = 0;
  for (const graph::KernelSpec& k : graph::lower_to_kernels(optimized)) {
    if (const auto* op = std::get_if<graph::OpKernelSpec>(&k)) {
      if (std::holds_alternative<graph::Conv2d>(op->op))
        throw graph::Error("conv '" + op->name +
                           "' is not a generated convolution kernel: not in the table's form");
      continue;
    }
    const auto* c = std::get_if<graph::ConvKernelSpec>(&k);
    if (!c) continue;
    // A stem reading its NCHW input in place is the same layer as far as the table goes.
    const graph::Shape in = graph::conv_input_nhwc(*c);
    const graph::Shape& w = c->weights.shape;
    const bool square = in.size() == 4 && w.size() == 4 && in[0] == 1 && w[0] == w[1] &&
                        c->stride_h == c->stride_w && c->pad_top == c->pad_left &&
                        c->pad_top == c->pad_bottom && c->pad_top == c->pad_right &&
                        c->dilation_h == 1 && c->dilation_w == 1 &&
                        (c->input.layout == graph::Layout::nhwc || c->nchw_input);
    if (!square || !graph::conv_epilogue_supported(c->activation))
      throw graph::Error("conv '" + c->name +
                         "' is not in the table's form (batch 1, NHWC, square "
                         "kernel, equal strides, symmetric padding, dilation 1)");
    const LayerKey key{c->depthwise,
                       in[3],
                       in[1],
                       in[2],
                       w[3],
                       w[0],
                       c->stride_h,
                       c->pad_top,
                       conv_epilogue(c->activation),
                       c->residual.has_value()};
    // A depthwise convolution's expansion (Conv2d::expand) is a 1x1 layer of the table too,
    // timed on its own: listed before the depthwise convolution, as the model computes it.
    const auto count = [&](const LayerKey& key, const graph::TensorDesc& weights) {
      Found& f = found[key];
      if (f.count++ == 0) {
        f.name = layer_name(weights, c->name);
        f.order = order++;
      }
    };
    if (c->expand) {
      if (!graph::conv_epilogue_supported(*c->expand))
        throw graph::Error("conv '" + c->name + "': its expansion's activation is not in the table's form");
      count({false, c->input.shape[3], in[1], in[2], in[3], 1, 1, 0, conv_epilogue(*c->expand), false},
            *c->expand_weights);
    }
    count(key, c->weights);
  }
  return found;
}

}  // namespace

std::string model_of_path(const std::string& path) {
  std::string stem = path.substr(path.find_last_of('/') + 1);
  return stem.substr(0, stem.find('.'));
}

int print_layer_table(const std::string& path, const std::string& model) {
  const auto found = model_convs(path);
  std::vector<std::pair<LayerKey, Found>> rows(found.begin(), found.end());
  std::sort(rows.begin(), rows.end(),
            [](const auto& a, const auto& b) { return a.second.order < b.second.order; });
  for (const auto& [k, f] : rows) {
    const std::string head = "{\"" + model + "\", \"" + f.name + "\",";
    const ConvEpilogue e = std::get<8>(k);
    std::printf("    %-38s %4ld, %3ld, %3ld, %4ld, %ld, %d, %d, %-6s %-7s %-6s %d},\n",
                head.c_str(), static_cast<long>(std::get<1>(k)), static_cast<long>(std::get<2>(k)),
                static_cast<long>(std::get<3>(k)), static_cast<long>(std::get<4>(k)),
                static_cast<long>(std::get<5>(k)), std::get<6>(k), std::get<7>(k),
                std::get<0>(k) ? "true," : "false,",
                e == kNone   ? "kNone,"
                : e == kRelu ? "kRelu,"
                             : "kRelu6,",
                std::get<9>(k) ? "true," : "false,", f.count);
  }
  return 0;
}

int check_layer_table(const std::string& path, const std::string& model) {
  const auto found = model_convs(path);
  std::map<LayerKey, const ConvLayer*> table;
  int errors = 0;
  for (const ConvLayer& l : kConvLayers) {
    if (model != l.model) continue;
    if (!table.emplace(key_of(l), &l).second) {
      std::fprintf(stderr, "table mismatch: %s_%s duplicates an earlier row (%s)\n", l.model,
                   l.name, describe_key(key_of(l)).c_str());
      ++errors;
    }
  }
  if (table.empty()) {
    std::fprintf(stderr, "table mismatch: the table has no layers of model '%s'\n", model.c_str());
    return 1;
  }
  int convs = 0;
  for (const auto& [key, f] : found) {
    convs += f.count;
    auto it = table.find(key);
    if (it == table.end()) {
      std::fprintf(stderr, "table mismatch: %s has %d x %s (first: %s), missing from the table\n",
                   path.c_str(), f.count, describe_key(key).c_str(), f.name.c_str());
      ++errors;
      continue;
    }
    const ConvLayer& l = *it->second;
    if (l.count != f.count) {
      std::fprintf(stderr, "table mismatch: %s_%s (%s): the table says %d, the model has %d\n",
                   l.model, l.name, describe_key(key).c_str(), l.count, f.count);
      ++errors;
    }
    if (f.name != l.name) {
      std::fprintf(stderr,
                   "table mismatch: %s (%s) is named '%s' in the table, '%s' in the model\n",
                   describe_key(key).c_str(), model.c_str(), l.name, f.name.c_str());
      ++errors;
    }
  }
  for (const auto& [key, l] : table)
    if (!found.count(key)) {
      std::fprintf(stderr, "table mismatch: %s_%s (%s) is not a conv kernel of %s\n", l->model,
                   l->name, describe_key(key).c_str(), path.c_str());
      ++errors;
    }
  if (errors) {
    std::fprintf(stderr,
                 "%d table mismatches for %s (bench_conv --print-table %s prints the rows)\n",
                 errors, model.c_str(), path.c_str());
    return 1;
  }
  std::printf("table of %s matches %s: %zu distinct conv kernels, %d convs\n", model.c_str(),
              path.c_str(), found.size(), convs);
  return 0;
}

}  // namespace kiln::bench
