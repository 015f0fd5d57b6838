// Graph serialization: round trips of every op type, and corrupted or truncated files rejected
// with graph::Error (never a crash, never another exception). A weights file run through
// kiln::CompiledModel is test_example_end_to_end.cpp's.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "graph/bf16.h"
#include "graph/builder.h"
#include "graph/example.h"
#include "graph/passes/pipeline.h"
#include "graph/reference.h"
#include "graph/serialize.h"
#include "graph/shape_inference.h"
#include "graph_test_util.h"
#include "sanitizers.h"

namespace kiln::graph {
namespace {

ValueId constant(GraphBuilder& b, const std::string& name, Shape shape, uint64_t seed,
                 Layout layout = Layout::any, float lo = -1.0f) {
  const int64_t n = num_elements(shape);
  return b.constant(name, std::move(shape), random_uniform(n, lo, 1.0f, seed), layout);
}

Conv2d conv_attrs(int stride, int pad, int groups, Activation act, bool residual) {
  Conv2d c;
  c.stride_h = c.stride_w = stride;
  c.pad_top = c.pad_left = pad;
  c.pad_bottom = c.pad_right = pad;
  c.groups = groups;
  c.activation = act;
  c.residual = residual;
  return c;
}

// One graph holding every op type, every attribute away from its default where it can be.
Graph every_op_graph() {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 4, 6, 6});
  const ValueId c1 = b.op("conv", conv_attrs(1, 1, 1, {}, false),
                          {x, constant(b, "w1", {8, 4, 3, 3}, 1, Layout::oihw), constant(b, "b1", {8}, 2)});
  const ValueId bn = b.op("bn", BatchNorm{1e-3f},
                          {c1, constant(b, "s", {8}, 3), constant(b, "bb", {8}, 4),
                           constant(b, "m", {8}, 5), constant(b, "v", {8}, 6, Layout::any, 0.5f)});
  ValueId h = b.op("relu", Relu{}, {bn});
  h = b.op("clip", Clip{-1.0f, 4.0f}, {h});
  h = b.op("leaky", LeakyRelu{0.2f}, {h});
  h = b.op("sigmoid", Sigmoid{}, {h});
  h = b.op("hsig", HardSigmoid{0.3f, 0.4f}, {h});
  h = b.op("hswish", HardSwish{}, {h});
  Conv2d grouped = conv_attrs(2, 1, 2, Activation{0.0f, 6.0f}, false);
  grouped.pad_right = 0;
  grouped.dilation_w = 2;
  const ValueId c2 = b.op("grouped", grouped,
                          {h, constant(b, "w2", {8, 4, 3, 3}, 7, Layout::oihw), constant(b, "b2", {8}, 8)});
  Conv2d with_post = conv_attrs(1, 0, 1, Activation{0.0f}, true);
  with_post.post = {{ChainStepKind::silu}, {ChainStepKind::affine}, {ChainStepKind::clamp, -1.0f, 3.0f}};
  with_post.pre = {{ChainStepKind::affine}, {ChainStepKind::clamp, 0.0f, 6.0f}};
  const ValueId c3 = b.op("residual", with_post,
                          {h, constant(b, "w3", {8, 8, 1, 1}, 9, Layout::oihw), constant(b, "b3", {8}, 10), c1,
                           constant(b, "ps", {8}, 20), constant(b, "pt", {8}, 21),
                           constant(b, "qs", {8}, 22), constant(b, "qt", {8}, 23)});
  ValueId e = b.op("add", Binary{BinaryOp::add}, {c3, h});
  e = b.op("sub", Binary{BinaryOp::sub}, {e, constant(b, "k1", {8, 1, 1}, 11)});
  e = b.op("mul", Binary{BinaryOp::mul}, {e, constant(b, "k2", {1}, 12)});
  e = b.op("div", Binary{BinaryOp::div}, {e, constant(b, "k3", {8, 1, 1}, 13, Layout::any, 0.5f)});
  ElementwiseChain chain{{{ChainStepKind::clamp, -2.0f, 5.0f},
                          {ChainStepKind::affine},
                          {ChainStepKind::leaky_relu, 0.1f},
                          {ChainStepKind::sigmoid},
                          {ChainStepKind::hard_sigmoid, 0.3f, 0.6f},
                          {ChainStepKind::hard_swish},
                          {ChainStepKind::mish}}};
  e = b.op("chain", chain, {e, constant(b, "cs", {8}, 18), constant(b, "ct", {8}, 19)});
  Pool2d maxp{PoolKind::max, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, false};
  const ValueId mp = b.op("maxpool", maxp, {e});
  Pool2d avgp{PoolKind::avg, 2, 2, 1, 1, 1, 1, 0, 0, 1, 2, false, true};
  const ValueId ap = b.op("avgpool", avgp, {e});
  ValueId t = b.op("gmax", GlobalPool{PoolKind::max}, {ap});
  t = b.op("flatten", Reshape{{1, 8}}, {t});
  t = b.op("gemm", Gemm{false, true, 0.5f, 2.0f}, {t, constant(b, "gw", {10, 8}, 14), constant(b, "gc", {10}, 15)});
  t = b.op("matmul", MatMul{}, {t, constant(b, "mw", {10, 6}, 16)});
  t = b.op("transpose", Transpose{{1, 0}}, {t});
  t = b.op("concat", Concat{0}, {t, constant(b, "cc", {2, 1}, 17)});
  t = b.op("slice", Slice{{1, 0}, {7, 1}, {2, 1}}, {t});
  t = b.op("pad", Pad{{0, 1, 1, 0}, 0.5f}, {t});
  t = b.op("softmax", Softmax{1, true}, {t});
  t = b.op("log_softmax", Softmax{0, false, SoftmaxKind::log_softmax}, {t});  // since v8
  t = b.op("tile", Tile{{2, 1}}, {t});                                         // since v8
  t = b.op("max", Binary{BinaryOp::max}, {t, constant(b, "mx", {1}, 22)});     // since v8
  t = b.op("sum_square", Reduce{{1}, true, ReduceKind::sum_square}, {t});      // since v8
  t = b.op("pow", Binary{BinaryOp::pow}, {t, constant(b, "pw", {1}, 23)});      // since v9
  const ValueId gt = b.op("gt", Binary{BinaryOp::greater_equal}, {t, constant(b, "th", {1}, 24)});
  const ValueId lx = b.op("xor", Binary{BinaryOp::logical_xor}, {gt, gt});      // since v9
  const ElementwiseChain round{{{ChainStepKind::round}, {ChainStepKind::less_equal, 0.5f},
                                {ChainStepKind::logical_not}}};             // since v9
  t = b.op("where", Where{}, {b.op("round", round, {lx}), t, gt});              // since v9
  t = b.op("mean", Reduce{{0}, false}, {t});
  const ValueId ln = b.op("layer_norm", LayerNorm{1, 1e-3f},
                          {b.op("flat", Reshape{{4, 36}}, {x}), constant(b, "lg", {36}, 18), constant(b, "lb", {36}, 19)});
  const ValueId lt = b.op("to_nhwc", LayoutTransform{Layout::nchw, Layout::nhwc}, {x});
  const ValueId ga = b.op("gavg", GlobalPool{PoolKind::avg}, {lt});
  const ValueId rl = b.op("relabel", Reshape{{1, 6, 6, 4}, Layout::nchw}, {lt});  // since v7
  const ValueId rs = b.op("resize", Resize{ResizeMode::nearest, ResizeCoordinates::asymmetric,
                                           NearestRounding::ceil, {1, 4, 3, 9}, {1, 1, 0.5f, 1.5f}},
                          {x});
  Resize cubic_crop{ResizeMode::cubic, ResizeCoordinates::tf_crop_and_resize, NearestRounding::floor,
                    {1, 4, 5, 7}, {1, 1, 0.75f, 1.25f}};  // since v9
  cubic_crop.cubic_a = -0.5f;
  cubic_crop.exclude_outside = true;
  cubic_crop.extrapolation = 2.5f;
  cubic_crop.roi = {0, 0, 0.1f, -0.2f, 1, 1, 0.9f, 1.3f};
  const ValueId cc = b.op("cubic_crop", cubic_crop, {x});
  const ValueId am = b.op("argmax", Reduce{{1}, false, ReduceKind::argmin_last}, {x});  // since v9
  Conv2d pooled = conv_attrs(1, 1, 1, Activation{0.0f}, false);  // since v12
  pooled.pool = Pool2d{PoolKind::avg, 3, 3, 2, 2, 1, 0, 1, 1, 1, 1, true, true};
  pooled.bf16 = true;  // since v13
  const ValueId pc = b.op("pooled_conv", pooled,
                          {lt, constant(b, "w4", {3, 3, 4, 8}, 25, Layout::hwio), constant(b, "b4", {8}, 26)});
  Conv2d expanded = conv_attrs(2, 1, 8, Activation{0.0f, 6.0f}, false);  // since v15
  expanded.expand = Activation{0.0f};
  expanded.expand_post = {ChainStep{ChainStepKind::hard_swish}};  // since v16
  const ValueId ec = b.op("expanded_depthwise", expanded,
                          {lt, constant(b, "w5", {3, 3, 1, 8}, 27, Layout::hwio), constant(b, "b5", {8}, 28),
                           constant(b, "w6", {1, 1, 4, 8}, 29, Layout::hwio), constant(b, "b6", {8}, 30)});
  Conv2d scaled = conv_attrs(1, 0, 1, Activation{}, false);
  scaled.input_scale = true;  // since v16
  const ValueId sc = b.op("scaled_conv", scaled,
                          {lt, constant(b, "w7", {1, 1, 4, 8}, 31, Layout::hwio), constant(b, "b7", {8}, 32), ga});
  Conv2d resized = conv_attrs(1, 1, 1, Activation{0.0f}, false);  // since v17
  resized.resize = Resize{ResizeMode::linear, ResizeCoordinates::align_corners,
                          NearestRounding::round_prefer_ceil, {1, 8, 12, 11}, {1, 1, 2, 1.875f}};
  resized.nchw_output = true;
  const ValueId rc = b.op("resized_conv", resized,
                          {lt, constant(b, "w8", {3, 3, 4, 8}, 33, Layout::hwio), constant(b, "b8", {8}, 34)});
  Conv2d added = conv_attrs(1, 1, 1, Activation{0.0f}, false);  // since v17
  added.post = {ChainStep{ChainStepKind::silu}};
  added.shortcut = true;
  const ValueId ac = b.op("shortcut_conv", added,
                          {lt, constant(b, "w9", {3, 3, 4, 4}, 35, Layout::hwio), constant(b, "b9", {4}, 36), lt});
  Conv2d pooled_first = conv_attrs(1, 0, 1, Activation{0.0f}, false);  // since v19
  pooled_first.pool = Pool2d{PoolKind::max, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1, true, false};
  pooled_first.pool_first = true;
  const ValueId pf =
      b.op("pooled_first_conv", pooled_first,
           {lt, constant(b, "w10", {1, 1, 4, 8}, 37, Layout::hwio), constant(b, "b10", {8}, 38)});
  const ValueId gn = b.op(
      "group_norm",  // since v20
      GroupNorm{2, 1e-3f, true, {ChainStep{ChainStepKind::silu}, ChainStep{ChainStepKind::affine}}},
      {lt, constant(b, "gg", {4}, 39), constant(b, "gb", {4}, 40), lt, constant(b, "gs", {4}, 41),
       constant(b, "gt", {4}, 42)});
  const ValueId gs = b.op("grid_sample",  // since v24
                          GridSample{GridSampleMode::cubic, GridSamplePadding::reflection, true},
                          {x, constant(b, "grid", {1, 3, 5, 2}, 43)});
  const ValueId tr = b.op("trig", ElementwiseChain{{{ChainStepKind::tan}, {ChainStepKind::atanh}}},
                          {x});  // since v22 and v23
  const ValueId tk = b.op("topk", TopK{2, 3, false, true}, {x});  // since v25
  const ValueId ge =
      b.op("gather_elements", GatherElements{3}, {x, constant(b, "gi", {1, 4, 6, 2}, 44)});  // v27
  const ValueId se =
      b.op("scatter_elements", ScatterElements{1, ScatterReduction::mul},
           {x, constant(b, "si", {1, 2, 6, 6}, 45), constant(b, "su", {1, 2, 6, 6}, 46)});
  for (ValueId out :
       {t, c2, mp, ga, ln, rs, rl, cc, am, pc, ec, sc, rc, ac, pf, gn, gs, tr, tk, ge, se})
    b.output(out);
  return b.finish();
}

Graph small_graph() {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 2, 2, 2});
  const ValueId y = b.op("scale", Binary{BinaryOp::mul}, {x, constant(b, "k", {2, 1, 1}, 1)});
  b.output(b.op("relu", Relu{}, {y}));
  return b.finish();
}

void expect_same(const Graph& a, const Graph& b) {
  EXPECT_EQ(dump(a), dump(b));
  ASSERT_EQ(a.values().size(), b.values().size());
  for (size_t i = 0; i < a.values().size(); ++i) {
    const Value &va = a.values()[i], &vb = b.values()[i];
    EXPECT_EQ(va.producer, vb.producer) << va.name;
    ASSERT_EQ(va.is_constant(), vb.is_constant()) << va.name;
    if (va.is_constant()) EXPECT_EQ(*va.data, *vb.data) << va.name;
  }
  ASSERT_EQ(a.num_nodes(), b.num_nodes());
  for (size_t i = 0; i < a.num_nodes(); ++i) {
    EXPECT_EQ(a.nodes()[i].computes, b.nodes()[i].computes) << a.nodes()[i].name;
    EXPECT_EQ(a.nodes()[i].op.index(), b.nodes()[i].op.index()) << a.nodes()[i].name;
  }
  // Every stored field, attributes included, survives: the re-serialized bytes are identical.
  EXPECT_EQ(serialize(a), serialize(b));
}

// `g` with the weights of its bf16 convolutions rounded to bfloat16: what a round trip gives
// back (the graphs here read no such weights anywhere else).
Graph bf16_weights_rounded(Graph g) {
  for (const Node& n : g.nodes()) {
    const auto* c = std::get_if<Conv2d>(&n.op);
    if (!c || !c->bf16) continue;
    Value& w = g.value(n.inputs[1]);
    auto rounded = std::make_shared<std::vector<float>>(*w.data);
    for (float& f : *rounded) f = round_to_bf16(f);
    w.data = std::move(rounded);
  }
  return g;
}

TEST(Serialize, EveryOpRoundTrips) {
  const Graph g = every_op_graph();
  std::vector<bool> seen(std::variant_size_v<Op>, false);
  for (const Node& n : g.nodes()) seen[n.op.index()] = true;
  for (size_t i = 0; i < seen.size(); ++i) EXPECT_TRUE(seen[i]) << "op tag " << i << " not covered";
  expect_same(bf16_weights_rounded(g), deserialize(serialize(g)));
}

TEST(Serialize, OptimizedGraphsRoundTrip) {
  for (const Graph& g : {run_passes(every_op_graph()), run_passes(reference_example({1, 8, 10, 10, 16}))}) {
    const Graph back = deserialize(serialize(g));
    expect_same(bf16_weights_rounded(g), back);
  }
}

// A bf16 convolution's weights are stored as bfloat16 (2 bytes a weight), rounded as the
// kernels round them, so the reference gives the same outputs before and after; a constant
// another op reads as well keeps every float32 bit.
TEST(Serialize, Bf16WeightsAreStoredAsBf16) {
  const auto build = [](bool bf16, bool shared) {
    GraphBuilder b;
    const ValueId x = b.input("x", {1, 6, 6, 8}, Layout::nhwc);
    Conv2d c = conv_attrs(1, 1, 1, Activation{0.0f}, false);
    c.bf16 = bf16;
    const ValueId w = constant(b, "w", {3, 3, 8, 16}, 7, Layout::hwio);
    const ValueId y = b.op("cv", c, {x, w, constant(b, "b", {16}, 8)});
    b.output(y);
    if (shared) b.output(b.op("wsq", Binary{BinaryOp::mul}, {w, w}));
    return b.finish();
  };
  const Graph f32 = build(false, false), bf16 = build(true, false), shared = build(true, true);
  const std::string f32_bytes = serialize(f32), bf16_bytes = serialize(bf16);
  EXPECT_EQ(f32_bytes.size() - bf16_bytes.size(), size_t{3 * 3 * 8 * 16 * 2});

  const Graph back = deserialize(bf16_bytes);
  const std::vector<float>& original = *bf16.value(bf16.nodes()[0].inputs[1]).data;
  const std::vector<float>& stored = *back.value(back.nodes()[0].inputs[1]).data;
  ASSERT_EQ(stored.size(), original.size());
  int inexact = 0;
  for (size_t i = 0; i < stored.size(); ++i) {
    EXPECT_EQ(stored[i], round_to_bf16(original[i])) << i;
    inexact += stored[i] != original[i];
  }
  EXPECT_GT(inexact, 0);  // random weights: the rounding did happen
  // The bias, read as float32, is exact.
  EXPECT_EQ(*back.value(back.nodes()[0].inputs[2]).data, *bf16.value(bf16.nodes()[0].inputs[2]).data);

  const std::vector<Tensor> in = testing_util::random_inputs(bf16, 9);
  EXPECT_EQ(run_reference(bf16, in)[0].data, run_reference(back, in)[0].data);

  const Graph shared_back = deserialize(serialize(shared));
  EXPECT_EQ(*shared_back.value(shared_back.nodes()[0].inputs[1]).data,
            *shared.value(shared.nodes()[0].inputs[1]).data);
}

TEST(Serialize, FileRoundTripLeavesNoTemporary) {
  const std::string path = testing_util::unique_temp_path("serialize_test.weights");
  const Graph g = small_graph();
  write_graph_file(g, path);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  expect_same(g, read_graph_file(path));
  std::filesystem::remove(path);
  EXPECT_THROW(read_graph_file(path), Error);
  EXPECT_THROW(write_graph_file(g, ::testing::TempDir() + "/no/such/dir/x.weights"), Error);
}

// read_graph_file in a child process with a 1 GiB address space: 0 when it refuses `path`
// with an Error whose message holds `what`, else a code saying what happened instead.
int refused_within_1gib(const std::string& path, const std::string& what) {
  const pid_t pid = fork();
  if (pid == 0) {
    const rlimit limit{rlim_t{1} << 30, rlim_t{1} << 30};
    setrlimit(RLIMIT_AS, &limit);
    try {
      read_graph_file(path);
      _exit(1);
    } catch (const Error& e) {
      _exit(std::string(e.what()).find(what) == std::string::npos ? 2 : 0);
    } catch (...) {
      _exit(3);  // bad_alloc: the reader allocated for the whole file first
    }
  }
  int status = 0;
  if (pid < 0 || waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

// A .weights path that never ends or that is gigabytes of something else fails before the
// reader allocates for it.
TEST(Serialize, UnboundedFilesAreRefusedBeforeReading) {
#ifdef KILN_TEST_ASAN
  GTEST_SKIP() << "built with AddressSanitizer, which reserves more address space than the "
                  "1 GiB limit (RLIMIT_AS) this test reads under";
#endif
  std::mt19937_64 rng(std::random_device{}());
  const std::string sparse = testing_util::unique_temp_path("sparse.weights");
  std::ofstream(sparse, std::ios::trunc) << "";
  std::filesystem::resize_file(sparse, (uint64_t{5} << 30) + rng() % 4096);
  EXPECT_EQ(refused_within_1gib(sparse, "KILNGRF1"), 0);
  EXPECT_EQ(refused_within_1gib("/dev/zero", "not a regular file"), 0);
  std::filesystem::remove(sparse);
}

TEST(Serialize, EveryTruncationIsAnError) {
  const std::string bytes = serialize(small_graph());
  for (size_t n = 0; n < bytes.size(); ++n)
    EXPECT_THROW(deserialize(bytes.substr(0, n)), Error) << "truncated to " << n << " bytes";
}

TEST(Serialize, EveryFlippedByteIsAnError) {
  const std::string bytes = serialize(small_graph());
  for (size_t i = 0; i < bytes.size(); ++i)
    for (unsigned char mask : {0x01, 0x80, 0xff}) {
      std::string bad = bytes;
      bad[i] = static_cast<char>(bad[i] ^ mask);
      EXPECT_THROW(deserialize(bad), Error) << "byte " << i << " ^ " << int{mask};
    }
}

// Re-sealed corruption passes the checksum and must be caught by the structural checks (or
// give a graph that verifies): never a crash or another exception type.
std::string reseal(std::string body) {
  const uint64_t sum = format_checksum(body.data(), body.size());
  for (int b = 0; b < 8; ++b) body.push_back(static_cast<char>(sum >> (8 * b)));
  return body;
}

TEST(Serialize, ResealedCorruptionIsCaughtStructurally) {
  const std::string bytes = serialize(every_op_graph());
  const std::string body = bytes.substr(0, bytes.size() - 8);
  int rejected = 0;
  // Every byte takes two values: its complement, and one of five edge values in turn (a zero
  // count, one, the sign bit either side, all ones). Each value costs a copy, a checksum and a
  // parse of the whole graph, so the test grows with the square of the graph's size: all five
  // at every byte took 33 s under ASan for the every-op graph, these two 12.6 s.
  const unsigned char edges[] = {0x00, 0x01, 0x7f, 0x80, 0xff};
  for (size_t i = 0; i < body.size(); ++i)
    for (unsigned char v : {static_cast<unsigned char>(~body[i]), edges[i % 5]}) {
      std::string bad = body;
      if (static_cast<unsigned char>(bad[i]) == v) continue;
      bad[i] = static_cast<char>(v);
      try {
        deserialize(reseal(bad));
      } catch (const Error&) {
        ++rejected;
      } catch (const std::exception& e) {
        ADD_FAILURE() << "byte " << i << " = " << int{v} << ": " << e.what();
      }
    }
  EXPECT_GT(rejected, 0);
  // Truncated but correctly sealed: the structure says it is short.
  for (size_t n = 0; n < body.size(); n += 7) EXPECT_THROW(deserialize(reseal(body.substr(0, n))), Error) << n;
  EXPECT_THROW(deserialize(reseal(body + "x")), Error);
}

// Found by fuzz_weights (fuzz/regressions/weights/): a Reshape whose target dimensions are each
// in range but whose product is past int64. Verifying it overflowed a signed count (undefined
// behaviour, an UBSan report in the asan build); it is an Error.
TEST(Serialize, ReshapeToMoreElementsThanInt64IsAnError) {
  Graph g;
  Value x, y;
  x.name = "x", x.shape = {1, 4};
  y.name = "y", y.shape = {1, 4};
  const ValueId xi = g.add_value(x), yi = g.add_value(y);
  g.add_node(Node{"reshape", Reshape{{int64_t{1} << 40, int64_t{1} << 40, 4}}, {xi}, {yi}, {"reshape"}});
  g.inputs = {xi};
  g.outputs = {yi};
  EXPECT_THROW(deserialize(serialize(g)), Error);
}

// Version 7 had Softmax and ReduceMean without a kind byte: such a file reads as the softmax and
// the mean it holds.
TEST(Serialize, Version7SoftmaxAndReduceMeanStillRead) {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 3});
  b.output(b.op("rm", Reduce{{1}, true}, {b.op("sm", Softmax{1, false}, {x})}));
  const Graph g = b.finish();
  std::string body = serialize(g);
  body.resize(body.size() - 8);
  // Each node: u32 name length, name, u8 tag, attributes; the kind is the attributes' last byte.
  auto drop_kind = [&](const std::string& name, size_t attr_bytes) {
    // The last match: the values (which share the names) come before the nodes.
    const size_t at = body.rfind(std::string(1, static_cast<char>(name.size())) + std::string(3, '\0') + name);
    ASSERT_NE(at, std::string::npos) << name;
    const size_t kind = at + 4 + name.size() + 1 + attr_bytes - 1;
    ASSERT_EQ(body[kind], 0) << name;  // SoftmaxKind::softmax, ReduceKind::mean
    body.erase(kind, 1);
  };
  drop_kind("sm", 4 + 1 + 1);          // i32 axis, flag coerce_2d, u8 kind
  drop_kind("rm", 4 + 4 + 1 + 1);      // u32 count + i32 axis, flag keepdims, u8 kind
  body[8] = 7;
  EXPECT_EQ(dump(deserialize(reseal(body))), dump(g));
}

// Version 8 had Resize without the cubic and crop attributes: such a file reads as the Resize
// it holds.
TEST(Serialize, Version8ResizeStillRead) {
  GraphBuilder b;
  const ValueId x = b.input("x", {2, 3});
  b.output(b.op("rz", Resize{ResizeMode::linear, ResizeCoordinates::half_pixel, NearestRounding::floor,
                             {2, 5}, {1, 5.0f / 3}},
                {x}));
  const Graph g = b.finish();
  std::string body = serialize(g);
  body.resize(body.size() - 8);
  const std::string name = "rz";
  const size_t at = body.rfind(std::string(1, static_cast<char>(name.size())) + std::string(3, '\0') + name);
  ASSERT_NE(at, std::string::npos);
  // u8 mode, coordinates, rounding; u32 count + 2 i64 sizes; u32 count + 2 f32 scales; then
  // f32 cubic_a, flag exclude_outside, f32 extrapolation, u32 roi count (0).
  const size_t extra = at + 4 + name.size() + 1 + 3 + (4 + 16) + (4 + 8);
  ASSERT_EQ(body.substr(extra + 9, 4), std::string(4, '\0'));
  body.erase(extra, 4 + 1 + 4 + 4);
  body[8] = 8;
  EXPECT_EQ(dump(deserialize(reseal(body))), dump(g));
}

// Version 10 had Conv2d without pre steps, 11 without pooling, 12 without the bf16 flag, 14
// without the expansion, 15 without the input scale, 16 without the resize and the shortcut,
// 17 without the Winograd tile cap, 18 without pool_first: such files read as the convolution
// they hold.
TEST(Serialize, Versions10To18ConvStillRead) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 4, 5, 5});
  b.output(b.op("cv", conv_attrs(1, 1, 1, Activation{0.0f}, false),
                {x, constant(b, "w", {6, 4, 3, 3}, 1, Layout::oihw), constant(b, "b", {6}, 2)}));
  const Graph g = b.finish();
  std::string current = serialize(g);
  current.resize(current.size() - 8);
  const std::string name = "cv";
  const size_t at = current.rfind(std::string(1, static_cast<char>(name.size())) + std::string(3, '\0') + name);
  ASSERT_NE(at, std::string::npos);
  // The op tag; 8 i32 window fields, f32 activation bounds, i32 groups, flag residual; u32
  // post-step count (0); then what version 10 lacks: the u32 pre-step count (0) and the flag
  // nchw_input (0); then what version 11 lacks: the flag of a pooling (0); then what version 12
  // lacks: the flag bf16 (0); then what version 14 lacks: the flag of an expansion (0); then
  // what version 15 lacks: the flag of an input scale (0); then what version 16 lacks: the flags
  // of a resize (0) and a shortcut (0); then what version 17 lacks: the i32 Winograd tile cap
  // (4); then what version 18 lacks: the flag pool_first (0).
  const size_t pre = at + 4 + name.size() + 1 + 32 + 8 + 4 + 1 + 4;
  ASSERT_EQ(current.substr(pre - 4, 15), std::string(15, '\0'));
  ASSERT_EQ(current.substr(pre + 11, 5), std::string("\x04\0\0\0\0", 5));
  std::string v18 = current;
  v18.erase(pre + 15, 1);
  v18[8] = 18;
  EXPECT_EQ(dump(deserialize(reseal(v18))), dump(g));
  std::string v17 = v18;
  v17.erase(pre + 11, 4);
  v17[8] = 17;
  EXPECT_EQ(dump(deserialize(reseal(v17))), dump(g));
  std::string v16 = v17;
  v16.erase(pre + 9, 2);
  v16[8] = 16;
  EXPECT_EQ(dump(deserialize(reseal(v16))), dump(g));
  std::string v15 = v16;
  v15.erase(pre + 8, 1);
  v15[8] = 15;
  EXPECT_EQ(dump(deserialize(reseal(v15))), dump(g));
  std::string v14 = v15;
  v14.erase(pre + 7, 1);
  v14[8] = 14;
  EXPECT_EQ(dump(deserialize(reseal(v14))), dump(g));
  std::string v13 = v14;  // no constant stored as bfloat16: the same bytes
  v13[8] = 13;
  EXPECT_EQ(dump(deserialize(reseal(v13))), dump(g));
  std::string v12 = v14;
  v12.erase(pre + 6, 1);
  v12[8] = 12;
  EXPECT_EQ(dump(deserialize(reseal(v12))), dump(g));
  std::string v11 = v14;
  v11.erase(pre + 5, 2);
  v11[8] = 11;
  EXPECT_EQ(dump(deserialize(reseal(v11))), dump(g));
  std::string v10 = v14;
  v10.erase(pre, 7);
  v10[8] = 10;
  EXPECT_EQ(dump(deserialize(reseal(v10))), dump(g));
}

// Version 15 had expansions (Conv2d::expand) without post steps: such a file reads as the
// expansion it holds.
TEST(Serialize, Version15ExpansionStillReads) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 5, 5, 4}, Layout::nhwc);
  Conv2d attrs = conv_attrs(1, 1, 8, Activation{0.0f, 6.0f}, false);
  attrs.expand = Activation{0.0f, 6.0f};
  b.output(b.op("ev", attrs,
                {x, constant(b, "w", {3, 3, 1, 8}, 1, Layout::hwio), constant(b, "b", {8}, 2),
                 constant(b, "we", {1, 1, 4, 8}, 3, Layout::hwio), constant(b, "be", {8}, 4)}));
  const Graph g = b.finish();
  std::string current = serialize(g);
  current.resize(current.size() - 8);
  const std::string name = "ev";
  const size_t at = current.rfind(std::string(1, static_cast<char>(name.size())) + std::string(3, '\0') + name);
  ASSERT_NE(at, std::string::npos);
  // As in Versions10To18ConvStillRead: the pre-step count, nchw_input, pooling and bf16 flags;
  // then the expansion's flag (1), its bounds (2 f32) and what version 15 lacks: the u32 count
  // of its post steps (0), the flag of an input scale (0), (version 17's) of a resize (0) and
  // a shortcut (0), (version 18's) the Winograd tile cap (i32 4) and (version 19's) the flag
  // pool_first (0).
  const size_t pre = at + 4 + name.size() + 1 + 32 + 8 + 4 + 1 + 4;
  ASSERT_EQ(current[pre + 7], 1);
  ASSERT_EQ(current.substr(pre + 16, 7), std::string(7, '\0'));
  ASSERT_EQ(current.substr(pre + 23, 5), std::string("\x04\0\0\0\0", 5));
  std::string v15 = current;
  v15.erase(pre + 16, 12);
  v15[8] = 15;
  EXPECT_EQ(dump(deserialize(reseal(v15))), dump(g));
}

TEST(Serialize, MessagesNameTheProblem) {
  const std::string bytes = serialize(small_graph());
  auto message = [](const std::string& b) {
    try {
      deserialize(b);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message("GARBAGE!").find("not a Kiln graph file"), std::string::npos);
  std::string v2 = bytes;
  v2[8] = 2;
  EXPECT_NE(message(v2).find("version 2 is not supported"), std::string::npos) << message(v2);
  std::string v1 = bytes.substr(0, bytes.size() - 8);  // the same bytes: no ElementwiseChain
  v1[8] = 1;
  EXPECT_EQ(dump(deserialize(reseal(v1))), dump(small_graph()));
  // Storage 2 (bfloat16) in a version 13 file: version 13 had none.
  std::string storage = bytes.substr(0, bytes.size() - 8);
  storage[8] = 13;
  const size_t k = storage.find(std::string("\x01\x00\x00\x00k", 5));  // the constant's name
  ASSERT_NE(k, std::string::npos);
  const size_t flag = k + 5 + 2 + 4 + 3 * 8;  // name, dtype, layout, rank, 3 dims
  ASSERT_EQ(storage[flag], 1);
  storage[flag] = 2;
  EXPECT_NE(message(reseal(storage)).find("unknown storage kind 2"), std::string::npos)
      << message(reseal(storage));
  std::string newer = bytes;
  newer[8] = static_cast<char>(kGraphFormatVersion + 1);
  EXPECT_NE(message(newer).find("version " + std::to_string(kGraphFormatVersion + 1) + " is not supported"),
            std::string::npos)
      << message(newer);
  std::string flipped = bytes;
  flipped[20] ^= 1;
  EXPECT_NE(message(flipped).find("checksum"), std::string::npos) << message(flipped);
  // A graph input id past the last value.
  std::string body = bytes.substr(0, bytes.size() - 8);
  const size_t ids = body.size() - 16;  // inputs: count, id; outputs: count, id
  body[ids + 4] = 99;
  EXPECT_NE(message(reseal(body)).find("graph inputs refer to value %99"), std::string::npos)
      << message(reseal(body));
  // A huge value count fails before allocating anything.
  std::string counts = bytes.substr(0, bytes.size() - 8);
  counts[12] = counts[13] = counts[14] = counts[15] = static_cast<char>(0xff);
  EXPECT_NE(message(reseal(counts)).find("count of values exceeds the file"), std::string::npos)
      << message(reseal(counts));
}

}  // namespace
}  // namespace kiln::graph
