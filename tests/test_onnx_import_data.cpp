// ONNX frontend: shape and data-movement ops (Reshape chains, Flatten, Split, Slice, Pad,
// Gather, Squeeze/Unsqueeze), Softmax, ReduceMean and pooling attributes, and pass-throughs and
// ops that leave the tensor as it is, against the reference interpreter. Convolutions, Clip
// bounds and constant folding are in test_onnx_import.cpp.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "graph/builder.h"
#include "graph/passes/pipeline.h"
#include "graph_test_util.h"
#include "onnx_test_models.h"

namespace kiln::graph {
namespace {

using onnx_test::attr_f;
using onnx_test::attr_i;
using onnx_test::attr_ints;
using onnx_test::attr_s;
using onnx_test::Dims;
using onnx_test::import;
using onnx_test::import_error;
using onnx_test::input_tensor;
using onnx_test::ModelBuilder;
using onnx_test::op_at;
using onnx_test::rnd;
using testing::HasSubstr;
using testing_util::count_ops;
using TP = ::onnx::TensorProto;

// What torch.onnx emits for x.view(x.size(0), x.size(1) * x.size(2), -1).
TEST(OnnxImport, TorchShapeChainFoldsIntoOneReshape) {
  ModelBuilder m(13);
  m.input("x", {2, 3, 4, 5});
  m.node("Shape", {"x"}, {"s"});
  TP idx[3];
  for (int k = 0; k < 3; ++k) {
    ModelBuilder::fill(idx[k], "", {}, TP::INT64);
    idx[k].add_int64_data(k);
    auto& a = onnx_test::add_attr(m.node("Constant", {}, {"i" + std::to_string(k)}), "value",
                                  ::onnx::AttributeProto::TENSOR);
    *a.mutable_t() = idx[k];
    m.node("Gather", {"s", "i" + std::to_string(k)}, {"d" + std::to_string(k)});
  }
  attr_i(m.node("Cast", {"d0"}, {"d0c"}), "to", TP::INT64);
  m.node("Mul", {"d1", "d2"}, {"d12"});
  m.init_i64("ax0", {1}, {0});
  m.node("Unsqueeze", {"d0c", "ax0"}, {"u0"});
  m.node("Unsqueeze", {"d12", "ax0"}, {"u1"});
  attr_ints(m.node("Constant", {}, {"minus1"}), "value_ints", {-1});
  attr_i(m.node("Concat", {"u0", "u1", "minus1"}, {"shape"}), "axis", 0);
  m.node("Reshape", {"x", "shape"}, {"y"}, "view");
  m.output("y");
  const Graph g = import(m);
  ASSERT_EQ(g.num_nodes(), 1u);
  EXPECT_EQ(g.node(NodeId{0}).name, "view");
  EXPECT_EQ(op_at<Reshape>(g, 0).shape, (Shape{2, 12, 5}));
  const std::vector<Tensor> in{input_tensor(g, 0, 51)};
  KILN_REFERENCE_OR_SKIP(out, g, in);  // needs Reshape
  EXPECT_EQ(out[0].data, in[0].data);
}

TEST(OnnxImport, FlattenThenGemm) {
  const auto w = rnd(5 * 12, 61), bias = rnd(5, 62);
  ModelBuilder m(13);
  m.input("x", {2, 3, 2, 2});
  m.init("w", {5, 12}, w), m.init("c", {5}, bias);
  attr_i(m.node("Flatten", {"x"}, {"f"}), "axis", -3);
  auto& gemm = m.node("Gemm", {"f", "w", "c"}, {"y"});
  attr_i(gemm, "transB", 1);
  attr_f(gemm, "alpha", 0.5f);
  attr_f(gemm, "beta", 2.0f);
  m.output("y");
  const Graph g = import(m);
  ASSERT_EQ(g.num_nodes(), 2u);
  EXPECT_EQ(op_at<Reshape>(g, 0).shape, (Shape{2, 12}));
  const Gemm& gm = op_at<Gemm>(g, 1);
  EXPECT_TRUE(gm.trans_b);
  EXPECT_FALSE(gm.trans_a);
  EXPECT_EQ(gm.alpha, 0.5f);
  EXPECT_EQ(gm.beta, 2.0f);
  const std::vector<Tensor> in{input_tensor(g, 0, 63)};
  KILN_REFERENCE_OR_SKIP(out, g, in);  // needs Reshape and Gemm
  Tensor want{{2, 5}, Layout::any, std::vector<float>(10)};
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 5; ++j) {
      double acc = 0;
      for (int k = 0; k < 12; ++k) acc += in[0].data[i * 12 + k] * w[j * 12 + k];
      want.data[i * 5 + j] = static_cast<float>(0.5 * acc + 2.0 * bias[j]);
    }
  onnx_test::expect_close(out[0], want);
}

TEST(OnnxImport, SplitBecomesOneSlicePerOutput) {
  ModelBuilder m(13);
  m.input("x", {2, 6});
  m.init_i64("sizes", {3}, {1, 2, 3});
  attr_i(m.node("Split", {"x", "sizes"}, {"a", "b", "c"}, "split"), "axis", -1);
  for (const char* o : {"a", "b", "c"}) m.output(o);
  const Graph g = import(m);
  ASSERT_EQ(count_ops<Slice>(g), 3);
  const int64_t starts[] = {0, 1, 3}, ends[] = {1, 3, 6};
  for (uint32_t k = 0; k < 3; ++k) {
    EXPECT_EQ(op_at<Slice>(g, k).starts, (std::vector<int64_t>{0, starts[k]}));
    EXPECT_EQ(op_at<Slice>(g, k).ends, (std::vector<int64_t>{2, ends[k]}));
    EXPECT_EQ(g.value(g.outputs[k]).shape, (Shape{2, ends[k] - starts[k]}));
  }
  EXPECT_EQ(g.value(g.outputs[1]).name, "b");

  ModelBuilder eq(11);  // opset 11: equal split, sizes from the outputs
  eq.input("x", {4, 3});
  eq.node("Split", {"x"}, {"p", "q"});
  eq.output("p"), eq.output("q");
  const Graph ge = import(eq);
  EXPECT_EQ(op_at<Slice>(ge, 1).starts, (std::vector<int64_t>{2, 0}));
  const std::vector<Tensor> in{input_tensor(ge, 0, 71)};
  KILN_REFERENCE_OR_SKIP(out, ge, in);  // needs Slice
  EXPECT_EQ(out[1].data, std::vector<float>(in[0].data.begin() + 6, in[0].data.end()));
}

// Negative steps, negative and out-of-range indices normalize as graph/shape_inference wants.
TEST(OnnxImport, SliceNormalizesNegativeStepsAndClampsIndices) {
  const int64_t min64 = std::numeric_limits<int64_t>::min();
  ModelBuilder m(13);
  m.input("x", {3, 5});
  m.init_i64("starts", {2}, {-1, 100}), m.init_i64("ends", {2}, {min64, -100});
  m.init_i64("axes", {2}, {1, -2}), m.init_i64("steps", {2}, {-2, -1});
  m.node("Slice", {"x", "starts", "ends", "axes", "steps"}, {"y"});
  m.output("y");
  const Graph g = import(m);
  const Slice& s = op_at<Slice>(g, 0);
  EXPECT_EQ(s.starts, (std::vector<int64_t>{2, 4}));
  EXPECT_EQ(s.ends, (std::vector<int64_t>{-1, -1}));
  EXPECT_EQ(s.steps, (std::vector<int64_t>{-1, -2}));
  EXPECT_EQ(g.value(g.outputs[0]).shape, (Shape{3, 3}));
  const std::vector<Tensor> in{input_tensor(g, 0, 81)};
  KILN_REFERENCE_OR_SKIP(out, g, in);  // needs Slice
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      EXPECT_EQ(out[0].data[i * 3 + j], in[0].data[(2 - i) * 5 + 4 - 2 * j]);
}

TEST(OnnxImport, PadModes) {
  ModelBuilder m(13);
  m.input("x", {1, 2, 3, 3});
  m.init_i64("pads", {8}, {0, 0, 1, 2, 0, 0, 3, 0});
  m.init("v", {}, {1.5f});
  m.node("Pad", {"x", "pads", "v"}, {"y"});
  m.output("y");
  const Graph g = import(m);
  EXPECT_EQ(op_at<Pad>(g, 0).pads, (std::vector<int64_t>{0, 0, 1, 2, 0, 0, 3, 0}));
  EXPECT_EQ(op_at<Pad>(g, 0).value, 1.5f);
  EXPECT_EQ(g.value(g.outputs[0]).shape, (Shape{1, 2, 7, 5}));

  const std::vector<Tensor> in{input_tensor(g, 0, 91)};
  KILN_REFERENCE_OR_SKIP(out, g, in);  // needs Pad
  EXPECT_EQ(out[0].data[0], 1.5f);
  EXPECT_EQ(out[0].data[(1 * 7 + 1) * 5 + 2], in[0].data[9]);  // x[0, 1, 0, 0]

  // numpy's reflect (the edge not repeated) and edge; pads [h: 1, 2; w: 2, 0] on 3x3.
  ModelBuilder r(13);
  r.input("x", {1, 2, 3, 3});
  r.init_i64("pads", {8}, {0, 0, 1, 2, 0, 0, 2, 0});
  attr_s(r.node("Pad", {"x", "pads"}, {"y"}), "mode", "reflect");
  r.output("y");
  const Graph gr = import(r);
  EXPECT_EQ(op_at<Pad>(gr, 0).mode, PadMode::reflect);
  EXPECT_EQ(gr.value(gr.outputs[0]).shape, (Shape{1, 2, 6, 5}));
  const std::vector<Tensor> rin{input_tensor(gr, 0, 92)};
  const std::vector<Tensor> rout = run_reference(gr, rin);
  auto x = [&](int c, int h, int w) { return rin[0].data[(c * 3 + h) * 3 + w]; };
  EXPECT_EQ(rout[0].data[(1 * 6 + 0) * 5 + 0], x(1, 1, 2));  // h -1 -> 1, w -2 -> 2
  EXPECT_EQ(rout[0].data[(0 * 6 + 5) * 5 + 4], x(0, 0, 2));  // h 4 -> 0 (2 * 2 - 4), w 2
  r.graph().mutable_node(0)->mutable_attribute()->RemoveLast();
  attr_s(*r.graph().mutable_node(0), "mode", "edge");
  const Graph ge = import(r);
  const std::vector<Tensor> eout = run_reference(ge, rin);
  EXPECT_EQ(eout[0].data[(1 * 6 + 0) * 5 + 0], x(1, 0, 0));
  EXPECT_EQ(eout[0].data[(0 * 6 + 5) * 5 + 4], x(0, 2, 2));

  r.graph().mutable_node(0)->mutable_attribute()->RemoveLast();
  attr_s(*r.graph().mutable_node(0), "mode", "wrap");
  EXPECT_THAT(import_error(r.bytes()),
              HasSubstr("attribute 'mode' is 'wrap'; expected constant, reflect or edge"));
  r.graph().mutable_node(0)->mutable_attribute()->RemoveLast();
  attr_s(*r.graph().mutable_node(0), "mode", "reflect");
  r.graph().mutable_initializer(0)->set_int64_data(2, 3);  // h: 3 before, on an axis of 3
  EXPECT_THAT(import_error(r.bytes()), HasSubstr("each pad must be smaller than the axis"));
}

TEST(OnnxImport, SoftmaxReduceMeanAndDataMovementAttributes) {
  for (int opset : {11, 13}) {
    ModelBuilder m(opset);
    m.input("x", {2, 3, 4, 5});
    m.node("Softmax", {"x"}, {"s"});
    attr_ints(m.node("ReduceMean", {"s"}, {"r"}), "axes", {-1, 1});
    attr_i(*m.graph().mutable_node(1), "keepdims", 0);
    m.node("Transpose", {"r"}, {"t"});
    attr_i(m.node("Concat", {"t", "t"}, {"y"}), "axis", -1);
    m.output("y");
    const Graph g = import(m);
    const Softmax& sm = op_at<Softmax>(g, 0);
    EXPECT_EQ(sm.coerce_2d, opset < 13);
    EXPECT_EQ(sm.axis, opset < 13 ? 1 : 3);
    EXPECT_EQ(op_at<Reduce>(g, 1).axes, (std::vector<int>{1, 3}));
    EXPECT_FALSE(op_at<Reduce>(g, 1).keepdims);
    EXPECT_EQ(op_at<Transpose>(g, 2).perm, (std::vector<int>{1, 0}));
    EXPECT_EQ(op_at<Concat>(g, 3).axis, 1);
    EXPECT_EQ(g.value(g.outputs[0]).shape, (Shape{4, 4}));
  }
}

TEST(OnnxImport, PoolingAttributesAndNumerics) {
  ModelBuilder m(12);
  m.input("x", {1, 2, 9, 9});
  auto& mp = m.node("MaxPool", {"x"}, {"p"});
  attr_ints(mp, "kernel_shape", {3, 3});
  attr_ints(mp, "strides", {2, 2});
  attr_ints(mp, "pads", {1, 1, 0, 0});
  attr_i(mp, "ceil_mode", 1);
  auto& ap = m.node("AveragePool", {"p"}, {"a"});
  attr_ints(ap, "kernel_shape", {2, 2});
  attr_s(ap, "auto_pad", "SAME_UPPER");
  attr_i(ap, "count_include_pad", 1);
  m.node("GlobalAveragePool", {"a"}, {"y"});
  m.output("y");
  const Graph g = import(m);
  const Pool2d& p = op_at<Pool2d>(g, 0);
  EXPECT_EQ(p.kind, PoolKind::max);
  EXPECT_TRUE(p.ceil_mode);
  EXPECT_EQ(p.pad_top, 1);
  EXPECT_EQ(p.pad_bottom, 0);
  const Pool2d& a = op_at<Pool2d>(g, 1);
  EXPECT_TRUE(a.count_include_pad);
  EXPECT_EQ(a.pad_bottom, 1);
  EXPECT_EQ(a.pad_top, 0);
  EXPECT_EQ(op_at<GlobalPool>(g, 2).kind, PoolKind::avg);

  // The expected pools written out from the ONNX attributes, not copied from the import: the
  // reference interpreter then checks kernels, strides and pads the asserts above do not.
  Pool2d want_max;
  want_max.kind = PoolKind::max;
  want_max.kernel_h = want_max.kernel_w = 3;
  want_max.stride_h = want_max.stride_w = 2;
  want_max.pad_top = want_max.pad_left = 1;
  want_max.ceil_mode = true;
  Pool2d want_avg;  // SAME_UPPER on the 5x5 max-pool output: one row and column of padding after
  want_avg.kind = PoolKind::avg;
  want_avg.kernel_h = want_avg.kernel_w = 2;
  want_avg.pad_bottom = want_avg.pad_right = 1;
  want_avg.count_include_pad = true;
  GraphBuilder e;
  const ValueId x = e.input("x", {1, 2, 9, 9});
  const ValueId pv = e.op("p", want_max, {x});
  e.output(e.op("y", GlobalPool{PoolKind::avg}, {e.op("a", want_avg, {pv})}));
  const std::vector<Tensor> in{input_tensor(g, 0, 101)};
  KILN_REFERENCE_OR_SKIP(out, g, in);  // needs Pool2d and GlobalPool
  onnx_test::expect_close(out[0], run_reference(e.finish(), in)[0]);

  // The Indices output may be declared, as PyTorch's dynamo exporter does, but not read.
  m.graph().mutable_node(0)->add_output("indices");
  EXPECT_EQ(import_error(m.bytes()), "");
  m.output("indices");
  EXPECT_THAT(import_error(m.bytes()),
              HasSubstr("output #1 'indices' is used, but Kiln does not support computing it"));
}

TEST(OnnxImport, GatherOnRuntimeTensorBecomesSliceOrGatherElements) {
  struct Case {
    std::vector<int64_t> idx;
    Dims dims;
    int axis;
    int slices, gathers, reshapes;
  };
  std::vector<int64_t> many;  // 300 indices, negative ones among them, in no even steps
  for (int64_t k = 0; k < 300; ++k) many.push_back((k * 7 + k / 5) % 12 - 6);
  const Case cases[] = {{{1, 3, 5}, {3}, 1, 1, 0, 0},  // evenly stepped: one strided slice
                        {{3, 0, 1}, {3}, 0, 0, 1, 0},  // arbitrary: one GatherElements
                        {{-2}, {}, 1, 1, 0, 1},        // scalar index drops the axis
                        // all of the axis in order, as [2, 3]: a view (as_strided, exported)
                        {{0, 1, 2, 3, 4, 5}, {2, 3}, 1, 0, 0, 1},
                        {many, {3, 100}, 1, 0, 1, 1}};  // [4, 300] as [4, 3, 100]
  for (const Case& k : cases) {
    ModelBuilder m(13);
    m.input("x", {4, 6});
    m.init_i64("i", k.dims, k.idx);
    attr_i(m.node("Gather", {"x", "i"}, {"y"}, "g"), "axis", k.axis);
    m.output("y");
    const Graph g = import(m);
    EXPECT_EQ(count_ops<Slice>(g), k.slices);
    EXPECT_EQ(count_ops<GatherElements>(g), k.gathers);
    EXPECT_EQ(count_ops<Concat>(g), 0);
    EXPECT_EQ(count_ops<Reshape>(g), k.reshapes);
    EXPECT_EQ(g.value(g.outputs[0]).name, "y");
    const std::vector<Tensor> in{input_tensor(g, 0, 111)};
    KILN_REFERENCE_OR_SKIP(out, g, in);  // needs Slice, GatherElements, Reshape
    const Tensor& y = out[0];
    const int64_t n = static_cast<int64_t>(k.idx.size());
    for (int64_t r = 0; r < (k.axis == 0 ? n : 4); ++r)
      for (int64_t c = 0; c < (k.axis == 1 ? n : 6); ++c) {
        const int64_t i = (k.axis == 0 ? k.idx[r] : r), j = (k.axis == 1 ? (k.idx[c] + 6) % 6 : c);
        EXPECT_EQ(y.data[r * (k.axis == 1 ? n : 6) + c], in[0].data[i * 6 + j]);
      }
  }
}

TEST(OnnxImport, IdentityDropoutSqueezeUnsqueezeAreFreeOrReshapes) {
  ModelBuilder m(13);
  m.input("x", {1, 3, 1, 4});
  m.node("Identity", {"x"}, {"i"});
  m.node("Dropout", {"i"}, {"d"});
  m.init_i64("axes", {2}, {0, -2});
  m.node("Squeeze", {"d", "axes"}, {"s"});
  m.init_i64("ax", {1}, {-1});
  m.node("Unsqueeze", {"s", "ax"}, {"u"});
  attr_f(m.node("LeakyRelu", {"u"}, {"y"}), "alpha", 0.2f);
  m.output("y");
  const Graph g = import(m);
  ASSERT_EQ(g.num_nodes(), 3u);
  EXPECT_EQ(g.node(NodeId{0}).inputs[0], g.inputs[0]);  // Identity and Dropout vanished
  EXPECT_EQ(op_at<Reshape>(g, 0).shape, (Shape{3, 4}));
  EXPECT_EQ(op_at<Reshape>(g, 1).shape, (Shape{3, 4, 1}));
  EXPECT_EQ(op_at<LeakyRelu>(g, 2).alpha, 0.2f);

  m.graph().mutable_node(1)->add_output("mask");
  m.output("mask");
  EXPECT_THAT(import_error(m.bytes()),
              HasSubstr("node 'Dropout_1' (Dropout): the mask output 'mask' is used"));
}

// tf2onnx ends a graph with `Identity:0`; other exporters put an inference Dropout or a Cast to
// float last. The graph outputs keep the model's names: the tensor before the pass-through is
// renamed, or copied where the caller binds it or reads it under another name too.
TEST(OnnxImport, GraphOutputsKeepTheirNamesThroughPassThroughs) {
  ModelBuilder m(13);
  m.input("x", {1, 2, 3, 3});
  m.node("Relu", {"x"}, {"r"});
  m.node("Identity", {"r"}, {"Identity:0"});
  m.node("Sigmoid", {"x"}, {"s"});
  m.node("Dropout", {"s"}, {"d"});
  m.node("Identity", {"s"}, {"s2"});
  attr_i(m.node("Cast", {"s"}, {"c"}), "to", TP::FLOAT);
  m.node("Identity", {"x"}, {"x_out"});
  for (const char* out : {"Identity:0", "d", "s2", "c", "x_out", "r"}) m.output(out);
  const Graph g = import(m);

  std::vector<std::string> names;
  for (ValueId v : g.outputs) names.push_back(g.value(v).name);
  EXPECT_EQ(names, (std::vector<std::string>{"Identity:0", "d", "s2", "c", "x_out", "r"}));
  // Relu and Sigmoid, then copies for the three outputs that are a graph input or an earlier
  // output under another name: s2 and c (of d's tensor), x_out, r (of Identity:0's).
  EXPECT_EQ(count_ops<Relu>(g), 1);
  EXPECT_EQ(count_ops<Sigmoid>(g), 1);
  EXPECT_EQ(count_ops<Reshape>(g), 4);
  EXPECT_TRUE(std::holds_alternative<Relu>(g.node(g.value(g.outputs[0]).producer).op));
  EXPECT_TRUE(std::holds_alternative<Sigmoid>(g.node(g.value(g.outputs[1]).producer).op));

  const std::vector<Tensor> in = {input_tensor(g, 0, 7)};
  const std::vector<Tensor> out = run_reference(g, in);
  ASSERT_EQ(out.size(), 6u);
  for (size_t i = 0; i < in[0].data.size(); ++i) {
    const float x = in[0].data[i], r = std::max(x, 0.0f), s = 1.0f / (1.0f + std::exp(-x));
    for (size_t k : {0u, 5u}) EXPECT_FLOAT_EQ(out[k].data[i], r) << names[k] << " at " << i;
    for (size_t k : {1u, 2u, 3u}) EXPECT_FLOAT_EQ(out[k].data[i], s) << names[k] << " at " << i;
    EXPECT_EQ(out[4].data[i], x) << "x_out at " << i;
  }
}

// Ops that leave their input as it is (GhostNet's out[:, :C] of a Concat of C channels, an
// identity Transpose, a Pad of zeros, a Concat of one input, a Reshape to the same shape) are no
// nodes, so no kernel copies the tensor; the graph output keeps its name.
TEST(OnnxImport, OpsThatLeaveTheTensorAsItIsAreNoNodes) {
  ModelBuilder m(13);
  m.input("x", {1, 4, 5, 6});
  m.node("Sigmoid", {"x"}, {"a"});
  m.init_i64("starts", {2}, std::vector<int64_t>{0, 0});
  m.init_i64("ends", {2}, std::vector<int64_t>{4, 100});
  m.init_i64("axes", {2}, std::vector<int64_t>{1, 3});
  m.node("Slice", {"a", "starts", "ends", "axes"}, {"b"});
  attr_ints(m.node("Transpose", {"b"}, {"c"}), "perm", {0, 1, 2, 3});
  m.init_i64("pads", {8}, std::vector<int64_t>(8, 0));
  m.node("Pad", {"c", "pads"}, {"d"});
  attr_i(m.node("Concat", {"d"}, {"e"}), "axis", 1);
  m.init_i64("shape", {4}, std::vector<int64_t>{1, 4, -1, 6});
  m.node("Reshape", {"e", "shape"}, {"f"});
  m.node("Relu", {"f"}, {"y"});
  m.node("Slice", {"y", "starts", "ends", "axes"}, {"out"});
  m.output("out");
  const Graph g = import(m);
  ASSERT_EQ(g.num_nodes(), 2u) << dump(g);
  EXPECT_EQ(count_ops<Sigmoid>(g), 1);
  EXPECT_EQ(count_ops<Relu>(g), 1);
  EXPECT_EQ(g.value(g.outputs[0]).name, "out");
  const std::vector<Tensor> in = {input_tensor(g, 0, 11)};
  const std::vector<Tensor> out = run_reference(g, in);
  ASSERT_EQ(out[0].data.size(), in[0].data.size());
  for (size_t i = 0; i < in[0].data.size(); ++i)
    EXPECT_FLOAT_EQ(out[0].data[i], 1.0f / (1.0f + std::exp(-in[0].data[i]))) << i;
}

// PyTorch's export of Conv -> PRelu(num_parameters=C) -> Mish before opset 18: the slope a
// [C, 1, 1] initializer, Mish as Softplus, Tanh and Mul. After the passes the convolution alone
// computes all of it (post steps prelu and mish), with the unoptimized graph's numbers.
TEST(OnnxImport, TorchPreluAndMishFuseIntoTheConvolution) {
  ModelBuilder m(13);
  m.input("x", {1, 4, 9, 11});
  m.init("w", {24, 4, 3, 3}, random_uniform(24 * 4 * 9, -0.3f, 0.3f, 41));
  m.init("b", {24}, random_uniform(24, -0.2f, 0.2f, 42));
  attr_ints(m.node("Conv", {"x", "w", "b"}, {"c"}), "pads", {1, 1, 1, 1});
  m.init("slope", {24, 1, 1}, random_uniform(24, -0.5f, 1.5f, 43));
  m.node("PRelu", {"c", "slope"}, {"p"});
  m.node("Softplus", {"p"}, {"sp"});
  m.node("Tanh", {"sp"}, {"t"});
  m.node("Mul", {"p", "t"}, {"y"});
  m.output("y");
  const Graph g = import(m);
  const Graph opt = run_passes(g);
  ASSERT_EQ(count_ops<Conv2d>(opt), 1) << dump(opt);
  EXPECT_EQ(count_ops<ElementwiseChain>(opt) + count_ops<Binary>(opt) + count_ops<Relu>(opt) +
                count_ops<Clip>(opt),
            0)
      << dump(opt);
  for (const Node& n : opt.nodes())
    if (const auto* c = std::get_if<Conv2d>(&n.op)) {
      ASSERT_EQ(c->post.size(), 2u) << dump(opt);
      EXPECT_EQ(c->post[0].kind, ChainStepKind::prelu);
      EXPECT_EQ(c->post[1].kind, ChainStepKind::mish);
    }
  testing_util::expect_same_outputs(g, opt, testing_util::random_inputs(g, 44, -2.0f, 2.0f), 1e-5,
                                    1e-6);
}

}  // namespace
}  // namespace kiln::graph
