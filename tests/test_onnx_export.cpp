// ONNX export: op types and domains, attributes, provenance, initializers, interface, round trips.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "graph/builder.h"
#include "graph/example.h"
#include "graph/onnx/onnx_export.h"
#include "graph/passes/pipeline.h"
#include "graph_test_util.h"
#include "onnx_test_models.h"

namespace kiln::graph {
namespace {

using onnx_test::rnd;
using testing::HasSubstr;
using AP = ::onnx::AttributeProto;
using NP = ::onnx::NodeProto;
using TP = ::onnx::TensorProto;

::onnx::ModelProto exported(const Graph& g, bool weights = true) {
  ::onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(onnx::export_model_bytes(g, {weights})));
  return m;
}

// The attribute `name` of `type`; a test failure (and an empty attribute) when there is none.
AP attr(const NP& n, const std::string& name, AP::AttributeType type) {
  for (const AP& a : n.attribute())
    if (a.name() == name && a.type() == type) return a;
  ADD_FAILURE() << "node " << n.name() << " has no " << AP::AttributeType_Name(type)
                << " attribute " << name;
  return AP();
}
std::string attr_s(const NP& n, const std::string& name) { return attr(n, name, AP::STRING).s(); }
// Provenance: an attribute on Kiln ops, the doc_string on standard ops (kept valid ONNX).
std::string computes_of(const NP& n) {
  if (n.domain() == "ai.kiln") return attr_s(n, "kiln_computes");
  const std::string prefix = "kiln_computes: ";
  return n.doc_string().rfind(prefix, 0) == 0 ? n.doc_string().substr(prefix.size()) : "";
}
int64_t attr_i(const NP& n, const std::string& name) { return attr(n, name, AP::INT).i(); }
float attr_f(const NP& n, const std::string& name) { return attr(n, name, AP::FLOAT).f(); }
std::vector<int64_t> attr_ints(const NP& n, const std::string& name) {
  const AP a = attr(n, name, AP::INTS);
  return {a.ints().begin(), a.ints().end()};
}

Shape dims_of(const ::onnx::ValueInfoProto& v) {
  Shape s;
  for (const auto& d : v.type().tensor_type().shape().dim()) s.push_back(d.dim_value());
  return s;
}

const TP& initializer(const ::onnx::ModelProto& m, const std::string& name) {
  for (const TP& t : m.graph().initializer())
    if (t.name() == name) return t;
  throw std::runtime_error("no initializer " + name);
}

int count_constants(const Graph& g) {
  int n = 0;
  for (const Value& v : g.values()) n += v.is_constant();
  return n;
}

// One op named "node" on fresh operands: graph inputs, or seeded constants.
struct In {
  Shape shape;
  Layout layout = Layout::nchw;
  bool constant = false;
};
Graph one_op(const Op& op, const std::vector<In>& ins) {
  GraphBuilder b;
  std::vector<ValueId> ids;
  for (size_t k = 0; k < ins.size(); ++k) {
    const In& in = ins[k];
    const std::string name = (in.constant ? "c" : "x") + std::to_string(k);
    ids.push_back(
        in.constant
            ? b.constant(name, in.shape, rnd(num_elements(in.shape), k + 1, 0.5f, 1.5f), in.layout)
            : b.input(name, in.shape, in.layout));
  }
  b.output(b.op("node", op, ids));
  return b.finish();
}

struct Case {
  std::string what;
  Graph g;
  std::string op_type, domain;
};

Pool2d pool(PoolKind kind, int dilation = 1) {
  Pool2d p;
  p.kind = kind;
  p.kernel_h = p.kernel_w = 2;
  p.stride_h = p.stride_w = 2;
  p.dilation_h = p.dilation_w = dilation;
  return p;
}

// Every op of the IR, with its layout variants where the mapping depends on them.
std::vector<Case> every_op() {
  const In x{{1, 4, 6, 6}}, xh{{1, 6, 6, 4}, Layout::nhwc}, c4{{4}, Layout::any, true};
  const In per_channel{{1, 4, 1, 1}, Layout::nchw, true};
  const std::string k = "ai.kiln";
  Conv2d fused;
  fused.pad_top = fused.pad_left = fused.pad_bottom = fused.pad_right = 1;
  fused.activation = {0.0f, 6.0f}, fused.residual = true;
  std::vector<Case> cs;
  auto add = [&](std::string what, const Op& op, std::vector<In> ins, std::string type,
                 std::string domain = "") {
    cs.push_back({std::move(what), one_op(op, ins), std::move(type), std::move(domain)});
  };
  add("conv nchw", Conv2d{}, {{{1, 3, 6, 6}}, {{4, 3, 3, 3}, Layout::oihw, true}, c4}, "FusedConv",
      k);
  add("conv nhwc fused", fused,
      {{{1, 6, 6, 3}, Layout::nhwc}, {{3, 3, 3, 4}, Layout::hwio, true}, c4, xh}, "FusedConv", k);
  add("batchnorm nchw", BatchNorm{}, {x, c4, c4, c4, c4}, "BatchNormalization");
  add("batchnorm nhwc", BatchNorm{}, {xh, c4, c4, c4, c4}, "BatchNorm", k);
  add("relu", Relu{}, {x}, "Relu");
  add("clip", Clip{0.0f, 6.0f}, {x}, "Clip");
  add("leaky_relu", LeakyRelu{0.1f}, {x}, "LeakyRelu");
  add("sigmoid", Sigmoid{}, {x}, "Sigmoid");
  add("hard_sigmoid", HardSigmoid{}, {x}, "HardSigmoid");
  add("hard_swish", HardSwish{}, {x}, "HardSwish", k);
  add("add", Binary{BinaryOp::add}, {x, per_channel}, "Add");
  add("sub", Binary{BinaryOp::sub}, {x, per_channel}, "Sub");
  add("mul", Binary{BinaryOp::mul}, {xh, {{1, 1, 1, 4}, Layout::nhwc, true}}, "Mul");
  add("div", Binary{BinaryOp::div}, {x, per_channel}, "Div");
  add("maxpool nchw", pool(PoolKind::max), {x}, "MaxPool");
  add("avgpool nchw", pool(PoolKind::avg), {x}, "AveragePool");
  add("maxpool nhwc", pool(PoolKind::max), {xh}, "Pool2d", k);
  add("avgpool dilated", pool(PoolKind::avg, 2), {x}, "Pool2d", k);
  add("global avg nchw", GlobalPool{PoolKind::avg}, {x}, "GlobalAveragePool");
  add("global max nchw", GlobalPool{PoolKind::max}, {x}, "GlobalMaxPool");
  add("global avg nhwc", GlobalPool{PoolKind::avg}, {xh}, "GlobalPool", k);
  add("gemm", Gemm{false, true, 0.5f, 2.0f},
      {{{2, 3}, Layout::any}, {{5, 3}, Layout::any, true}, {{5}, Layout::any, true}}, "Gemm");
  add("matmul", MatMul{}, {{{2, 3}, Layout::any}, {{3, 5}, Layout::any, true}}, "MatMul");
  add("reshape", Reshape{{1, 144}}, {x}, "Reshape");
  add("transpose", Transpose{{0, 2, 3, 1}}, {x}, "Transpose");
  add("concat", Concat{1}, {x, x}, "Concat");
  add("slice", Slice{{0, 0, 1, 1}, {1, 4, 6, 6}, {1, 1, 2, 2}}, {x}, "Slice", k);
  add("pad", Pad{{0, 0, 1, 1, 0, 0, 1, 1}, 0.5f}, {x}, "Pad", k);
  add("softmax", Softmax{1, false}, {{{2, 5}, Layout::any}}, "Softmax");
  add("softmax coerce_2d", Softmax{1, true}, {{{2, 3, 4}, Layout::any}}, "Softmax", k);
  add("reduce_mean", Reduce{{2, 3}, true}, {x}, "ReduceMean");
  add("reduce_sum", Reduce{{1}, false, ReduceKind::sum}, {x}, "ReduceSum");
  add("reduce_l2", Reduce{{1}, false, ReduceKind::l2}, {x}, "ReduceL2");
  add("log_softmax", Softmax{1, false, SoftmaxKind::log_softmax}, {{{2, 5}, Layout::any}}, "LogSoftmax");
  add("hardmax coerce_2d", Softmax{1, true, SoftmaxKind::hardmax}, {{{2, 3, 4}, Layout::any}}, "Hardmax", k);
  add("max", Binary{BinaryOp::max}, {x, per_channel}, "Max");
  add("tile", Tile{{1, 1, 2, 1}}, {x}, "Tile");
  add("pow", Binary{BinaryOp::pow}, {x, per_channel}, "Pow");
  add("less", Binary{BinaryOp::less}, {x, per_channel}, "Less", k);  // float 0/1: Kiln's op
  add("where", Where{}, {x, x, per_channel}, "Where", k);
  add("layer_norm", LayerNorm{3, 1e-6f}, {x, {{6}, Layout::any, true}}, "LayerNorm", k);
  add("group_norm", GroupNorm{2, 1e-5f}, {xh, c4, c4}, "GroupNorm", k);
  add("resize", Resize{ResizeMode::linear, ResizeCoordinates::half_pixel, NearestRounding::floor,
                       {1, 4, 12, 12}, {1, 1, 2, 2}},
      {x}, "Resize", k);
  add("topk", TopK{1, 2, false, true}, {x}, "TopK", k);
  add("gather_elements", GatherElements{2}, {x, {{1, 4, 3, 6}, Layout::any}}, "GatherElements", k);
  add("scatter_elements", ScatterElements{1, ScatterReduction::max},
      {x, {{1, 2, 6, 6}, Layout::any}, {{1, 2, 6, 6}, Layout::any}}, "ScatterElements", k);
  add("grid_sample", GridSample{GridSampleMode::cubic, GridSamplePadding::border, true},
      {x, {{1, 5, 7, 2}, Layout::any}}, "GridSample", k);
  const ElementwiseChain chain{{{ChainStepKind::clamp, 0.0f, 6.0f}, {ChainStepKind::affine}}};
  add("chain", chain, {xh, c4, c4}, "ElementwiseChain", k);
  add("layout_transform", LayoutTransform{Layout::nchw, Layout::nhwc}, {x}, "LayoutTransform", k);
  return cs;
}

const Case& find_case(const std::vector<Case>& cs, const std::string& what) {
  for (const Case& c : cs)
    if (c.what == what) return c;
  throw std::runtime_error("no case " + what);
}

TEST(OnnxExport, EveryOpGetsItsOnnxOrKilnName) {
  std::set<size_t> covered;
  for (const Case& c : every_op()) {
    SCOPED_TRACE(c.what);
    const Node& n = c.g.node(NodeId{0});
    covered.insert(n.op.index());
    const ::onnx::ModelProto m = exported(c.g);
    ASSERT_EQ(m.graph().node_size(), 1);
    const NP& p = m.graph().node(0);
    EXPECT_EQ(p.name(), "node");
    EXPECT_EQ(p.op_type(), c.op_type);
    EXPECT_EQ(p.domain(), c.domain);
    EXPECT_EQ(computes_of(p), op_label(n.op));
    // Clip's bounds, Reshape's shape, Tile's repeats and ReduceSum's axes are ONNX inputs, as
    // small extra initializers.
    const int extra = c.op_type == "Clip" ? 2
                      : c.op_type == "Reshape" || c.op_type == "Tile" || c.op_type == "ReduceSum" ? 1
                                                                                                 : 0;
    EXPECT_EQ(p.input_size(), static_cast<int>(n.inputs.size()) + extra);
    EXPECT_EQ(m.graph().initializer_size(), count_constants(c.g) + extra);
    ASSERT_EQ(p.output_size(), 1);
    EXPECT_EQ(p.output(0), "node");
    ASSERT_EQ(m.graph().output_size(), 1);
    EXPECT_EQ(dims_of(m.graph().output(0)), c.g.value(c.g.outputs[0]).shape);
    EXPECT_EQ(m.graph().input_size(), static_cast<int>(c.g.inputs.size()));
  }
  EXPECT_EQ(covered.size(), std::variant_size_v<Op>) << "a Kiln op has no case";
}

TEST(OnnxExport, AttributesCarryEveryField) {
  const std::vector<Case> cs = every_op();
  const NP conv = exported(find_case(cs, "conv nhwc fused").g).graph().node(0);
  EXPECT_EQ(attr_ints(conv, "kernel_shape"), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(attr_ints(conv, "strides"), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(attr_ints(conv, "pads"), (std::vector<int64_t>{1, 1, 1, 1}));
  EXPECT_EQ(attr_ints(conv, "dilations"), (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(attr_i(conv, "group"), 1);
  EXPECT_EQ(attr_i(conv, "residual"), 1);
  EXPECT_EQ(attr_s(conv, "activation"), "relu6");
  EXPECT_EQ(attr_f(conv, "activation_max"), 6.0f);
  EXPECT_EQ(attr_s(conv, "layout"), "NHWC");
  EXPECT_EQ(attr_s(conv, "weight_layout"), "HWIO");

  const NP pool = exported(find_case(cs, "maxpool nhwc").g).graph().node(0);
  EXPECT_EQ(attr_s(pool, "kind"), "max");
  EXPECT_EQ(attr_ints(pool, "kernel_shape"), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(attr_i(pool, "ceil_mode"), 0);
  EXPECT_EQ(attr_i(pool, "count_include_pad"), 0);
  EXPECT_EQ(attr_s(pool, "layout"), "NHWC");

  const NP chain = exported(find_case(cs, "chain").g).graph().node(0);
  EXPECT_THAT(attr(chain, "steps", AP::STRINGS).strings(), testing::ElementsAre("clamp", "affine"));
  EXPECT_THAT(attr(chain, "step_b", AP::FLOATS).floats(), testing::ElementsAre(6.0f, 0.0f));

  const NP lt = exported(find_case(cs, "layout_transform").g).graph().node(0);
  EXPECT_EQ(attr_s(lt, "from"), "NCHW");
  EXPECT_EQ(attr_s(lt, "to"), "NHWC");
  EXPECT_EQ(attr_ints(lt, "perm"), (std::vector<int64_t>{0, 2, 3, 1}));

  const NP slice = exported(find_case(cs, "slice").g).graph().node(0);
  EXPECT_EQ(attr_ints(slice, "steps"), (std::vector<int64_t>{1, 1, 2, 2}));
  const NP pad = exported(find_case(cs, "pad").g).graph().node(0);
  EXPECT_EQ(attr_ints(pad, "pads"), (std::vector<int64_t>{0, 0, 1, 1, 0, 0, 1, 1}));
  EXPECT_EQ(attr_f(pad, "value"), 0.5f);
  const NP gemm = exported(find_case(cs, "gemm").g).graph().node(0);
  EXPECT_EQ(attr_i(gemm, "transB"), 1);
  EXPECT_EQ(attr_f(gemm, "alpha"), 0.5f);
  const NP soft = exported(find_case(cs, "softmax coerce_2d").g).graph().node(0);
  EXPECT_EQ(attr_i(soft, "coerce_2d"), 1);

  const ::onnx::ModelProto clip = exported(find_case(cs, "clip").g);
  const TP& hi = initializer(clip, clip.graph().node(0).input(2));
  ASSERT_EQ(hi.raw_data().size(), 4u);
  float v = 0.0f;
  std::memcpy(&v, hi.raw_data().data(), 4);
  EXPECT_EQ(v, 6.0f);
}

TEST(OnnxExport, OptimizedReferenceExampleShowsFusionLayoutsAndWeights) {
  const Graph g = run_passes(reference_example({1, 8, 9, 9, 12}));
  SCOPED_TRACE(dump(g));
  const ::onnx::ModelProto m = exported(g);
  EXPECT_EQ(m.ir_version(), 8);
  EXPECT_EQ(m.producer_name(), "kiln");
  ASSERT_EQ(m.opset_import_size(), 2);
  EXPECT_EQ(m.opset_import(0).domain(), "");
  EXPECT_EQ(m.opset_import(0).version(), 13);
  EXPECT_EQ(m.opset_import(1).domain(), "ai.kiln");
  EXPECT_EQ(m.opset_import(1).version(), 1);

  ASSERT_EQ(m.graph().node_size(), static_cast<int>(g.num_nodes()));
  int fused = 0;
  for (uint32_t i = 0; i < g.num_nodes(); ++i) {
    const Node& n = g.node(NodeId{i});
    const NP& p = m.graph().node(static_cast<int>(i));
    EXPECT_EQ(p.name(), n.name);
    ASSERT_FALSE(n.computes.empty());
    std::string computes = n.computes[0];
    for (size_t k = 1; k < n.computes.size(); ++k) computes += " + " + n.computes[k];
    EXPECT_EQ(computes_of(p), computes);
    if (p.op_type() == "FusedConv") {
      ++fused;
      EXPECT_EQ(p.domain(), "ai.kiln");
      EXPECT_EQ(computes, "conv2d + batchnorm (folded) + relu");
      EXPECT_EQ(attr_s(p, "activation"), "relu");
      EXPECT_EQ(attr_s(p, "layout"), "NHWC");
    }
  }
  EXPECT_EQ(fused, 1);

  auto check_interface = [&](const auto& infos, const std::vector<ValueId>& ids) {
    ASSERT_EQ(infos.size(), static_cast<int>(ids.size()));
    for (size_t k = 0; k < ids.size(); ++k) {
      const Value& v = g.value(ids[k]);
      EXPECT_EQ(infos[k].name(), v.name);
      EXPECT_EQ(infos[k].type().tensor_type().elem_type(), TP::FLOAT);
      EXPECT_EQ(dims_of(infos[k]), v.shape);
      EXPECT_EQ(infos[k].doc_string(), to_string(v.layout));
    }
  };
  check_interface(m.graph().input(), g.inputs);
  check_interface(m.graph().output(), g.outputs);

  const ::onnx::ModelProto bare = exported(g, false);
  ASSERT_EQ(m.graph().initializer_size(), count_constants(g));
  ASSERT_EQ(bare.graph().initializer_size(), count_constants(g));
  for (int k = 0; k < m.graph().initializer_size(); ++k) {
    const TP& t = m.graph().initializer(k);
    Shape dims(t.dims().begin(), t.dims().end());
    EXPECT_EQ(t.data_type(), TP::FLOAT);
    EXPECT_EQ(t.raw_data().size(), static_cast<size_t>(num_elements(dims)) * 4) << t.name();
    const TP& b = bare.graph().initializer(k);
    EXPECT_EQ(b.name(), t.name());
    EXPECT_TRUE(std::equal(b.dims().begin(), b.dims().end(), t.dims().begin(), t.dims().end()));
    EXPECT_TRUE(b.raw_data().empty());
    EXPECT_EQ(b.float_data_size(), 0);
  }
}

TEST(OnnxExport, InitializersHoldTheConstantsOrOnlyTheirDims) {
  GraphBuilder b;
  const std::vector<float> w = rnd(512 * 512, 3);
  const ValueId x = b.input("x", {2, 512}, Layout::any);
  b.output(b.op("fc", MatMul{}, {x, b.constant("w", {512, 512}, w)}));
  const Graph g = b.finish();

  const std::string full = onnx::export_model_bytes(g);
  const std::string bare = onnx::export_model_bytes(g, {false});
  EXPECT_GT(full.size(), w.size() * 4);
  EXPECT_LT(bare.size(), 2048u);
  ::onnx::ModelProto m;
  ASSERT_TRUE(m.ParseFromString(full));
  const TP& t = initializer(m, "w");
  ASSERT_EQ(t.raw_data().size(), w.size() * 4);
  EXPECT_EQ(std::memcmp(t.raw_data().data(), w.data(), t.raw_data().size()), 0);
  // Viewing only: the importer refuses the missing data.
  EXPECT_THROW(onnx::import_model_from_bytes(bare), Error);
}

TEST(OnnxExport, ValuesSharingANameGetUniqueNames) {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 3}, Layout::any);
  const ValueId r = b.op("x", Relu{}, {x});  // its output value is named "x" too
  b.output(b.op("y", Sigmoid{}, {r}));
  const ::onnx::ModelProto m = exported(b.finish());
  ASSERT_EQ(m.graph().node_size(), 2);
  EXPECT_EQ(m.graph().input(0).name(), "x");
  EXPECT_EQ(m.graph().node(0).input(0), "x");
  EXPECT_NE(m.graph().node(0).output(0), "x");
  EXPECT_EQ(m.graph().node(1).input(0), m.graph().node(0).output(0));
  EXPECT_EQ(m.graph().node(0).name(), "x");  // node names are kept as they are
}

// Export with weights, import back: the same ops and the same reference outputs.
void expect_round_trip(const Graph& g) {
  SCOPED_TRACE(dump(g));
  const ::onnx::ModelProto m = exported(g);
  for (const NP& p : m.graph().node()) EXPECT_EQ(p.domain(), "") << p.op_type();
  const Graph back = onnx::import_model_from_bytes(onnx::export_model_bytes(g));
  ASSERT_EQ(back.num_nodes(), g.num_nodes());
  for (uint32_t i = 0; i < g.num_nodes(); ++i)
    EXPECT_STREQ(op_name(back.node(NodeId{i}).op), op_name(g.node(NodeId{i}).op));
  const std::vector<Tensor> in = testing_util::random_inputs(g, 17);
  const std::vector<Tensor> want = run_reference(g, in), got = run_reference(back, in);
  ASSERT_EQ(got.size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(got[k].shape, want[k].shape);
    EXPECT_EQ(got[k].data, want[k].data);  // the same ops on the same data: bit for bit
  }
}

TEST(OnnxExport, GemmReluSoftmaxRoundTripsThroughTheImporter) {
  GraphBuilder b;
  const ValueId x = b.input("x", {3, 6}, Layout::any);
  const ValueId w = b.constant("w", {5, 6}, rnd(30, 1)), c = b.constant("c", {5}, rnd(5, 2));
  const ValueId y = b.op("gemm", Gemm{false, true, 0.5f, 2.0f}, {x, w, c});
  b.output(b.op("softmax", Softmax{1}, {b.op("relu", Relu{}, {y})}));
  expect_round_trip(b.finish());
}

TEST(OnnxExport, NchwGraphOfPlainOpsRoundTripsThroughTheImporter) {
  GraphBuilder b;
  auto cst = [&](const std::string& name, Shape s, uint64_t seed, float lo = -1.0f) {
    return b.constant(name, s, rnd(num_elements(s), seed, lo, 1.0f));
  };
  const ValueId x = b.input("x", {1, 4, 8, 8});
  ValueId a = b.batch_norm("bn", x, cst("s", {4}, 1), cst("bb", {4}, 2), cst("m", {4}, 3),
                           cst("v", {4}, 4, 0.5f), 1e-3f);
  a = b.clip("clip", a, 0.0f, 0.8f);
  Pool2d mp = pool(PoolKind::max);
  mp.kernel_h = mp.kernel_w = 3, mp.pad_top = mp.pad_left = mp.pad_bottom = mp.pad_right = 1;
  a = b.op("maxpool", mp, {a});
  a = b.op("add", Binary{BinaryOp::add},
           {a, b.constant("k", {1, 4, 1, 1}, rnd(4, 5), Layout::nchw)});
  a = b.op("div", Binary{BinaryOp::div}, {a, b.constant("two", {1}, {2.0f})});
  a = b.op("leaky", LeakyRelu{0.2f}, {a});
  a = b.op("hsig", HardSigmoid{0.3f, 0.4f}, {a});
  Pool2d ap = pool(PoolKind::avg);
  ap.stride_h = ap.stride_w = 1, ap.pad_bottom = ap.pad_right = 1, ap.count_include_pad = true;
  const ValueId p = b.op("avgpool", ap, {a});
  const ValueId s =
      b.op("sub", Binary{BinaryOp::sub}, {p, b.op("gmax", GlobalPool{PoolKind::max}, {a})});
  const ValueId cat = b.op("cat", Concat{1}, {s, b.op("sig", Sigmoid{}, {p})});
  const ValueId t = b.op("transpose", Transpose{{0, 2, 3, 1}}, {cat});
  const ValueId rm = b.op("mean", Reduce{{3}, false}, {t});
  const ValueId r = b.op("reshape", Reshape{{1, 16}}, {rm});
  const ValueId mm = b.op("matmul", MatMul{}, {r, cst("wm", {16, 3}, 6)});
  b.output(b.op("softmax", Softmax{1}, {mm}));
  b.output(
      b.op("gap", GlobalPool{PoolKind::avg}, {b.op("mul", Binary{BinaryOp::mul}, {cat, cat})}));
  expect_round_trip(b.finish());
}

TEST(OnnxExport, WritesTheFileAndNamesAPathItCannotWrite) {
  const Graph g = reference_example({1, 8, 9, 9, 12});
  const std::string path = testing_util::unique_temp_path("export_test.onnx");
  onnx::export_model(g, path);
  std::ifstream in(path, std::ios::binary);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), onnx::export_model_bytes(g));
  for (const auto& e : std::filesystem::directory_iterator(::testing::TempDir()))
    EXPECT_THAT(e.path().filename().string(), testing::Not(HasSubstr("export_test.onnx.tmp")));
  std::remove(path.c_str());

  const std::string missing = ::testing::TempDir() + "/kiln_no_such_dir/model.onnx";
  try {
    onnx::export_model(g, missing);
    ADD_FAILURE() << "wrote into a missing directory";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(missing));
  }
}

}  // namespace
}  // namespace kiln::graph
