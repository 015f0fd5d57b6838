// ONNX frontend: what the importer refuses, each with one clear error naming the node: ops and
// opsets it does not support, attributes an op does not have, BatchNormalization's training
// outputs, and declared output types that disagree with what Kiln computes.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "onnx_test_models.h"

namespace kiln::graph {
namespace {

using onnx_test::attr_i;
using onnx_test::attr_ints;
using onnx_test::attr_s;
using onnx_test::Dims;
using onnx_test::import_error;
using onnx_test::ModelBuilder;
using onnx_test::rnd;
using testing::HasSubstr;
using TP = ::onnx::TensorProto;

TEST(OnnxImport, UnsupportedOpsAttributesAndTrainingModeAreErrors) {
  auto one_node = [](const std::string& op, int opset) {
    ModelBuilder m(opset);
    m.input("x", {1, 2, 3, 3});
    m.init("s", {2}, {1, 1}), m.init("b", {2}, {0, 0}), m.init("mu", {2}, {0, 0}),
        m.init("v", {2}, {1, 1});
    m.node(op,
           op == "BatchNormalization" ? std::vector<std::string>{"x", "s", "b", "mu", "v"}
                                      : std::vector<std::string>{"x"},
           {"y"}, "n1");
    m.output("y");
    return m;
  };
  EXPECT_EQ(import_error(one_node("Det", 13).bytes()), "node 'n1' (Det): op not supported");
  ModelBuilder bn6 = one_node("BatchNormalization", 5);
  EXPECT_THAT(import_error(bn6.bytes()),
              HasSubstr("opset 5 is not supported for BatchNormalization"));
  ModelBuilder dom = one_node("Relu", 13);
  dom.graph().mutable_node(0)->set_domain("com.microsoft");
  EXPECT_THAT(import_error(dom.bytes()), HasSubstr("domain 'com.microsoft' is not supported"));
  ModelBuilder pad = one_node("AveragePool", 13);
  attr_ints(*pad.graph().mutable_node(0), "kernel_shape", {2, 2});
  attr_s(*pad.graph().mutable_node(0), "auto_pad", "SAME_MIDDLE");
  EXPECT_THAT(import_error(pad.bytes()), HasSubstr("attribute 'auto_pad' is 'SAME_MIDDLE'"));
  ModelBuilder typed = one_node("LeakyRelu", 13);
  attr_i(*typed.graph().mutable_node(0), "alpha", 1);
  EXPECT_THAT(import_error(typed.bytes()), HasSubstr("attribute 'alpha' must be FLOAT, got INT"));
  ModelBuilder weights = one_node("Conv", 13);
  weights.input("w", {2, 2, 1, 1});
  weights.graph().mutable_node(0)->add_input("w");
  EXPECT_THAT(import_error(weights.bytes()), HasSubstr("weights 'w' must be a constant"));
}

// An attribute no ONNX version of the op has (or one Kiln would silently ignore) is an error
// naming the node, the op and the attribute; attributes the op has are accepted, and so is
// Kiln's own export annotation.
TEST(OnnxImport, UnknownAttributesAreErrors) {
  std::mt19937_64 rng(std::random_device{}());
  auto with_attr = [](const std::string& op, const std::string& attr) {
    ModelBuilder m(13);
    m.input("x", {1, 2, 3, 3});
    m.init("w", {2, 2, 1, 1}, rnd(4, 7));
    m.init("s", {2}, {1, 1}), m.init("b", {2}, {0, 0}), m.init("mu", {2}, {0, 0}),
        m.init("v", {2}, {1, 1});
    std::vector<std::string> in = {"x"};
    if (op == "Conv") in = {"x", "w"};
    if (op == "BatchNormalization") in = {"x", "s", "b", "mu", "v"};
    auto& n = m.node(op, in, {"y"}, "n1");
    if (op == "MaxPool") attr_ints(n, "kernel_shape", {2, 2});
    if (!attr.empty()) attr_i(n, attr, 1);
    m.output("y");
    return import_error(m.bytes());
  };
  const char* ops[] = {"Relu", "Conv", "BatchNormalization", "MaxPool", "Sigmoid", "Softmax"};
  for (int round = 0; round < 12; ++round) {
    const std::string op = ops[rng() % 6];
    std::string attr = "x";
    for (int k = 0; k < 6; ++k) attr += static_cast<char>('a' + rng() % 26);
    EXPECT_THAT(with_attr(op, attr),
                HasSubstr("node 'n1' (" + op + "): unknown attribute '" + attr + "'"));
  }
  EXPECT_THAT(with_attr("Relu", "alpha"), HasSubstr("unknown attribute 'alpha'"));
  EXPECT_EQ(with_attr("Conv", "group"), "");
  EXPECT_EQ(with_attr("BatchNormalization", "momentum"), "");
  EXPECT_EQ(with_attr("Relu", "kiln_computes"), "");
}

// BatchNormalization's training outputs (running mean and variance, saved statistics) are
// refused even when nothing reads them: outside training mode, a model that declares them was
// exported for training.
TEST(OnnxImport, BatchNormTrainingOutputsAreErrors) {
  std::mt19937_64 rng(std::random_device{}());
  const int extra = 1 + static_cast<int>(rng() % 4);
  ModelBuilder m(13);
  m.input("x", {1, 2, 3, 3});
  m.init("s", {2}, {1, 1}), m.init("b", {2}, {0, 0}), m.init("mu", {2}, {0, 0}),
      m.init("v", {2}, {1, 1});
  std::vector<std::string> outs = {"y"};
  for (int k = 0; k < extra; ++k) outs.push_back("stat" + std::to_string(k));
  m.node("BatchNormalization", {"x", "s", "b", "mu", "v"}, outs, "bn");
  m.output("y");
  EXPECT_THAT(import_error(m.bytes()),
              HasSubstr("node 'bn' (BatchNormalization): declares " + std::to_string(1 + extra) +
                        " outputs"));
  // In training mode (normalized with the input's own statistics) they may be declared, as
  // PyTorch's export does, but nothing may read them.
  ModelBuilder t(15);
  t.input("x", {1, 2, 3, 3});
  t.init("s", {2}, {1, 1}), t.init("b", {2}, {0, 0}), t.init("mu", {2}, {0, 0}),
      t.init("v", {2}, {1, 1});
  attr_i(t.node("BatchNormalization", {"x", "s", "b", "mu", "v"}, {"y", "mean", "var"}, "bn"),
         "training_mode", 1);
  t.node("Relu", {"mean"}, {"r"}, "reads_mean");
  t.output("y"), t.output("r");
  EXPECT_EQ(import_error(t.bytes()),
            "node 'bn' (BatchNormalization): output #1 'mean' is used, "
            "but Kiln does not support computing it");
}

// A graph output's declared type must agree with what Kiln computes: FLOAT (FLOAT16, BFLOAT16),
// the inferred rank
// and every fixed dimension (symbolic or missing dimensions are fine).
TEST(OnnxImport, DeclaredOutputTypesAreChecked) {
  std::mt19937_64 rng(std::random_device{}());
  const int64_t a = 1 + rng() % 7, b = 1 + rng() % 7;
  auto declared = [&](int dtype, const Dims& dims, bool symbolic_first = false) {
    ModelBuilder m(13);
    m.input("x", {a, b});
    m.node("Relu", {"x"}, {"y"}, "r");
    auto* t = m.graph().add_output();
    t->set_name("y");
    auto* tt = t->mutable_type()->mutable_tensor_type();
    tt->set_elem_type(dtype);
    for (int64_t d : dims) tt->mutable_shape()->add_dim()->set_dim_value(d);
    if (symbolic_first) tt->mutable_shape()->mutable_dim(0)->set_dim_param("N");
    return import_error(m.bytes());
  };
  EXPECT_EQ(declared(TP::FLOAT, {a, b}), "");
  EXPECT_EQ(declared(TP::FLOAT, {a, b}, true), "");
  EXPECT_EQ(declared(TP::UNDEFINED, {}), "");
  // Half-precision outputs are returned as FLOAT (docs/onnx.md, "Half-precision models").
  EXPECT_EQ(declared(TP::FLOAT16, {a, b}), "");
  EXPECT_EQ(declared(TP::BFLOAT16, {a, b}), "");
  for (int dtype : {TP::DOUBLE, TP::STRING, TP::INT64})
    EXPECT_THAT(declared(dtype, {a, b}),
                HasSubstr("graph output 'y' is declared " + TP::DataType_Name(dtype)));
  const std::string computed =
      "Kiln computes [" + std::to_string(a) + ", " + std::to_string(b) + "]";
  for (const Dims& dims : {Dims{a, 0}, Dims{-1, b}, Dims{a, int64_t{1} << 40}, Dims{a, b + 1},
                           Dims{a, b, 1}, Dims{a * b}}) {
    std::string text;
    for (int64_t d : dims) text += (text.empty() ? "" : ", ") + std::to_string(d);
    const std::string err = declared(TP::FLOAT, dims);
    EXPECT_THAT(err, HasSubstr("graph output 'y' is declared [" + text + "]")) << text;
    EXPECT_THAT(err, HasSubstr(computed)) << text;
  }
}

// LayerNormalization: statistics in float32 only, and scale / bias of the normalized shape.
TEST(OnnxImport, LayerNormalizationRefusals) {
  auto layer_norm = [](int64_t stash, Dims scale) {
    ModelBuilder m(17);
    m.input("x", {2, 3, 8});
    m.init("s", scale, std::vector<float>(static_cast<size_t>(scale[0] * (scale.size() > 1 ? scale[1] : 1)), 1.0f));
    attr_i(m.node("LayerNormalization", {"x", "s"}, {"y"}, "ln"), "stash_type", stash);
    m.output("y");
    return m;
  };
  EXPECT_THAT(import_error(layer_norm(11, {8}).bytes()),
              HasSubstr("node 'ln' (LayerNormalization): attribute 'stash_type' is 11"));
  EXPECT_THAT(import_error(layer_norm(1, {3, 8}).bytes()),
              HasSubstr("scale 's' is [3, 8], expected the normalized shape [8]"));
  EXPECT_THAT(import_error(layer_norm(1, {16}).bytes()), HasSubstr("expected the normalized shape"));
}

TEST(OnnxImport, InstanceNormalizationAndLrnRefusals) {
  auto instance_norm = [](Dims x, Dims scale) {
    ModelBuilder m(13);
    m.input("x", x);
    m.init("s", scale, rnd(scale[0], 170)), m.init("b", {x[1]}, rnd(x[1], 171));
    m.node("InstanceNormalization", {"x", "s", "b"}, {"y"}, "in");
    m.output("y");
    return m;
  };
  EXPECT_EQ(import_error(instance_norm({2, 3, 5}, {3}).bytes()), "");
  EXPECT_THAT(import_error(instance_norm({2, 3}, {3}).bytes()),
              HasSubstr("node 'in' (InstanceNormalization): input 'x' is [2, 3], expected [N, C, D1, "
                        "...] (rank 3 or more)"));
  EXPECT_THAT(import_error(instance_norm({2, 3, 5}, {4}).bytes()),
              HasSubstr("scale 's' is FLOAT [4], expected FLOAT [3]"));
  ModelBuilder lrn(13);
  lrn.input("x", {1, 4, 3, 3});
  lrn.node("LRN", {"x"}, {"y"}, "lrn");
  lrn.output("y");
  EXPECT_THAT(import_error(lrn.bytes()), HasSubstr("node 'lrn' (LRN): attribute 'size' is missing"));
}

// The reductions, DepthToSpace, SpaceToDepth and Tile name what does not fit.
TEST(OnnxImport, ReductionAndRearrangementRefusals) {
  ModelBuilder twice(13);
  twice.input("x", {2, 3, 4});
  attr_ints(twice.node("ReduceMax", {"x"}, {"y"}, "mx"), "axes", {1, -2});
  twice.output("y");
  EXPECT_THAT(import_error(twice.bytes()), HasSubstr("node 'mx' (ReduceMax): axes lists axis 1 twice"));
  auto rearrange = [](const std::string& op, Dims x, int64_t block, const std::string& mode) {
    ModelBuilder m(13);
    m.input("x", x);
    auto& n = m.node(op, {"x"}, {"y"}, "r");
    attr_i(n, "blocksize", block);
    if (!mode.empty()) attr_s(n, "mode", mode);
    m.output("y");
    return m;
  };
  EXPECT_EQ(import_error(rearrange("DepthToSpace", {1, 8, 2, 3}, 2, "CRD").bytes()), "");
  EXPECT_THAT(import_error(rearrange("DepthToSpace", {1, 6, 2, 3}, 2, "").bytes()),
              HasSubstr("the channels (6) are not a multiple of blocksize^2 (4)"));
  EXPECT_THAT(import_error(rearrange("DepthToSpace", {1, 8, 2, 3}, 2, "RDC").bytes()),
              HasSubstr("attribute 'mode' is 'RDC', expected DCR or CRD"));
  EXPECT_THAT(import_error(rearrange("SpaceToDepth", {1, 2, 4, 3}, 2, "").bytes()),
              HasSubstr("the spatial size 4x3 is not a multiple of blocksize 2"));
  EXPECT_THAT(import_error(rearrange("SpaceToDepth", {1, 2, 4, 4}, 0, "").bytes()),
              HasSubstr("attribute 'blocksize'"));
  ModelBuilder tile(13);
  tile.input("x", {2, 3});
  tile.init_i64("r", {2}, {2, 0});
  tile.node("Tile", {"x", "r"}, {"y"}, "t");
  tile.output("y");
  EXPECT_THAT(import_error(tile.bytes()), HasSubstr("node 't' (Tile): repeat 0 would make an empty tensor"));
}

// Resize: tf_crop_and_resize without a full roi, and linear or cubic interpolation of a leading
// axis are refused by name; so is a Resize given both scales and sizes.
TEST(OnnxImport, ResizeRefusals) {
  auto resize = [](const std::string& mode, const std::string& coordinates, std::vector<float> scales,
                   bool sizes_too) {
    ModelBuilder m(13);
    m.input("x", {1, 2, 4, 4});
    m.init("roi", {0}, {});
    m.init("scales", {4}, scales);
    std::vector<std::string> in = {"x", "roi", "scales"};
    if (sizes_too) {
      m.init_i64("sizes", {4}, {1, 2, 8, 8});
      in.push_back("sizes");
    }
    auto& n = m.node("Resize", in, {"y"}, "rs");
    attr_s(n, "mode", mode);
    attr_s(n, "coordinate_transformation_mode", coordinates);
    m.output("y");
    return m;
  };
  EXPECT_THAT(import_error(resize("bicubic", "half_pixel", {1, 1, 2, 2}, false).bytes()),
              HasSubstr("node 'rs' (Resize): attribute 'mode' is 'bicubic'"));
  EXPECT_THAT(import_error(resize("nearest", "tf_crop_and_resize", {1, 1, 2, 2}, false).bytes()),
              HasSubstr("node 'rs' (Resize): input 'roi' has 0 entries; tf_crop_and_resize needs 2 * rank = 8"));
  EXPECT_THAT(import_error(resize("cubic", "half_pixel", {1, 2, 2, 2}, false).bytes()),
              HasSubstr("cubic resizing of axis 1: Kiln interpolates only the last two axes"));
  EXPECT_THAT(import_error(resize("linear", "half_pixel", {1, 2, 2, 2}, false).bytes()),
              HasSubstr("linear resizing of axis 1: Kiln interpolates only the last two axes"));
  EXPECT_THAT(import_error(resize("nearest", "half_pixel", {1, 1, 2, 2}, true).bytes()),
              HasSubstr("exactly one of scales and sizes"));
}

}  // namespace
}  // namespace kiln::graph
