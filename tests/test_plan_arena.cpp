// plan_arena: tensors alive at the same time never share bytes; reuse happens; who gets memory.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "graph/builder.h"
#include "graph/example.h"
#include "graph/memory_plan.h"
#include "graph/passes/pipeline.h"
#include "graph/shape_inference.h"
#include "graph/verify.h"

namespace kiln::graph {
namespace {

struct Interval {
  int first, last;  // node indices, inclusive: a node's inputs and output are live together
};

// Live intervals recomputed here, independently of the planner: from the producing node to the
// last reader, or to the end (num_nodes) for graph outputs.
std::map<uint32_t, Interval> live_intervals(const Graph& g) {
  std::map<uint32_t, Interval> live;
  for (int i = 0; i < static_cast<int>(g.num_nodes()); ++i) {
    const Node& n = g.node(NodeId{static_cast<uint32_t>(i)});
    for (ValueId v : n.inputs)
      if (auto it = live.find(v.index); it != live.end()) it->second.last = i;
    for (ValueId v : n.outputs) live[v.index] = {i, i};
  }
  for (ValueId v : g.outputs)
    if (auto it = live.find(v.index); it != live.end())
      it->second.last = static_cast<int>(g.num_nodes());
  return live;
}

void expect_valid_plan(const Graph& g, const ArenaPlan& plan, int64_t alignment = 64) {
  std::map<uint32_t, Interval> live = live_intervals(g);
  // A tensor written in place into a Concat's output makes that output alive from the
  // tensor's producer on and until the tensor's last reader; a Reshape's or a Slice's view
  // keeps the viewed buffer alive until its own last reader. None owns a buffer. Bases are
  // buffers of their own (a slice of a slice is of the outermost tensor), but for a Slice's
  // view of a Reshape's.
  std::map<uint32_t, Interval> own = live;
  // A Slice's view may be of a Reshape's view: of the buffer under both.
  const auto root = [&](ValueId v) {
    const ArenaAlias* view = plan.find_alias(v);
    return view ? view->base : v;
  };
  for (const ArenaAlias& a : plan.aliases) {
    Interval& base = live.at(root(a.base).index);
    const Interval& v = own.at(a.value.index);
    base.last = std::max(base.last, v.last);
    if (!a.is_view()) base.first = std::min(base.first, v.first);
  }
  for (const ArenaAlias& a : plan.aliases) {
    const ArenaAlias* base = plan.find_alias(a.base);
    const bool slice_of_view = base && base->is_view() && std::holds_alternative<Slice>(g.node(a.node).op);
    EXPECT_TRUE(!base || slice_of_view) << "'" << g.value(a.base).name << "' is itself an alias";
    if (base) EXPECT_EQ(plan.find_alias(base->base), nullptr) << "a view of a view";
    live.erase(a.value.index);
  }
  ASSERT_EQ(plan.buffers.size(), live.size()) << "one buffer per tensor a node writes\n"
                                              << describe(plan, g);
  int64_t sum = 0;
  for (const ArenaBuffer& b : plan.buffers) {
    const Value& v = g.value(b.value);
    ASSERT_EQ(live.count(b.value.index), 1u) << "'" << v.name << "' is not written by a node";
    EXPECT_EQ(b.bytes, v.size_bytes()) << v.name;
    EXPECT_EQ(b.first, live.at(b.value.index).first) << v.name;
    EXPECT_EQ(b.last, live.at(b.value.index).last) << v.name;
    EXPECT_GE(b.offset, 0) << v.name;
    EXPECT_EQ(b.offset % alignment, 0) << v.name << " at " << b.offset;
    EXPECT_GE(plan.arena_bytes, b.offset + b.bytes) << v.name;
    sum += b.bytes;
  }
  EXPECT_LE(plan.arena_bytes, plan.unshared_bytes) << describe(plan, g);
  EXPECT_GE(plan.unshared_bytes, sum);
  for (size_t i = 0; i < plan.buffers.size(); ++i)
    for (size_t j = i + 1; j < plan.buffers.size(); ++j) {
      const ArenaBuffer& a = plan.buffers[i];
      const ArenaBuffer& b = plan.buffers[j];
      const Interval la = live.at(a.value.index), lb = live.at(b.value.index);
      if (la.first > lb.last || lb.first > la.last) continue;  // never alive together
      EXPECT_TRUE(a.offset + a.bytes <= b.offset || b.offset + b.bytes <= a.offset)
          << "'" << g.value(a.value).name << "' and '" << g.value(b.value).name
          << "' are alive together but overlap\n"
          << describe(plan, g);
    }
}

ValueId add_conv(GraphBuilder& b, const std::string& name, ValueId x, int64_t ci, int64_t co, int k,
                 int stride, uint64_t seed) {
  const ValueId w = b.constant(name + "_w", {co, ci, k, k},
                               random_uniform(co * ci * k * k, -0.5f, 0.5f, seed), Layout::oihw);
  const ValueId bias = b.constant(name + "_b", {co}, random_uniform(co, -0.5f, 0.5f, seed + 1));
  Conv2d attrs;
  attrs.stride_h = attrs.stride_w = stride;
  attrs.pad_top = attrs.pad_left = attrs.pad_bottom = attrs.pad_right = k / 2;
  return b.conv2d(name, x, w, bias, attrs);
}

// A random DAG of convs (some followed by a relu): each conv reads a random earlier activation,
// so tensors fan out to several readers; unread tensors, and a few read ones, are outputs.
Graph random_conv_dag(uint64_t seed, int num_convs) {
  GraphBuilder b;
  const std::vector<float> r = random_uniform(6 * num_convs, 0.0f, 1.0f, seed);
  struct Act {
    ValueId v;
    int64_t c;
    int readers = 0;
    bool output = false;
  };
  std::vector<Act> acts{{b.input("x", {1, 5, 13, 11}), 5}};
  for (int i = 0; i < num_convs; ++i) {
    const float* ri = &r[6 * i];
    Act& src = acts[std::min(acts.size() - 1, static_cast<size_t>(ri[0] * acts.size()))];
    src.readers++;
    const int64_t co = 2 + static_cast<int64_t>(ri[1] * 15);  // 2 .. 16: sizes not 64-aligned
    const std::string name = "c" + std::to_string(i);
    ValueId out = add_conv(b, name, src.v, src.c, co, ri[2] < 0.5f ? 1 : 3, ri[3] < 0.3f ? 2 : 1,
                           seed * 100 + i);
    if (ri[4] < 0.5f) out = b.relu(name + "_relu", out);
    acts.push_back({out, co, 0, ri[5] < 0.15f});
  }
  for (size_t k = 1; k < acts.size(); ++k)
    if (acts[k].output || acts[k].readers == 0) b.output(acts[k].v);
  return b.finish();
}

TEST(PlanArena, RandomConvDagsNeverOverlapLiveBuffers) {
  for (uint64_t seed = 1; seed <= 60; ++seed) {
    const Graph g = random_conv_dag(seed, 3 + static_cast<int>(seed % 12));
    SCOPED_TRACE("seed " + std::to_string(seed) + "\n" + dump(g));
    expect_valid_plan(g, plan_arena(g));
    expect_valid_plan(g, plan_arena(g, 256), 256);
    const Graph opt = run_passes(g);
    verify(opt, "after run_passes");
    expect_valid_plan(opt, plan_arena(opt));
  }
}

// Four equally sized tensors in a chain: each is alive only with its neighbours, so two
// buffers (ping-pong) suffice.
TEST(PlanArena, ChainOfFourEqualConvsReusesMemory) {
  GraphBuilder b;
  ValueId v = b.input("x", {1, 8, 16, 16});
  for (int i = 0; i < 4; ++i) v = add_conv(b, "c" + std::to_string(i), v, 8, 8, 3, 1, 10 + i);
  b.output(v);
  const Graph g = b.finish();
  const ArenaPlan plan = plan_arena(g);
  expect_valid_plan(g, plan);
  const int64_t one = 8 * 16 * 16 * 4;
  EXPECT_EQ(plan.unshared_bytes, 4 * one);
  EXPECT_LT(plan.arena_bytes, plan.unshared_bytes) << describe(plan, g);
  EXPECT_EQ(plan.arena_bytes, 2 * one) << describe(plan, g);
}

// c0 feeds c1 and c2: it must stay alive (and untouched) until c2 has read it.
TEST(PlanArena, BranchKeepsSharedInputAliveUntilLastReader) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 8, 10, 10});
  const ValueId c0 = add_conv(b, "c0", x, 8, 8, 3, 1, 1);
  const ValueId c1 = add_conv(b, "c1", c0, 8, 8, 3, 1, 2);
  const ValueId c1b = add_conv(b, "c1b", c1, 8, 8, 1, 1, 3);
  const ValueId c2 = add_conv(b, "c2", c0, 8, 16, 3, 2, 4);
  b.output(c1b);
  b.output(c2);
  const Graph g = b.finish();
  const ArenaPlan plan = plan_arena(g);
  expect_valid_plan(g, plan);
  const ArenaBuffer* a = plan.find(c0);
  ASSERT_NE(a, nullptr);
  EXPECT_EQ(a->last, 3) << "c0 is last read by c2, the fourth node";
  for (ValueId other : {c1, c1b, c2}) {
    const ArenaBuffer* o = plan.find(other);
    ASSERT_NE(o, nullptr);
    EXPECT_TRUE(a->offset + a->bytes <= o->offset || o->offset + o->bytes <= a->offset)
        << g.value(other).name << "\n"
        << describe(plan, g);
  }
}

const ExampleShape kSmall{1, 8, 9, 9, 12};

// After the pipeline only the NHWC copy of the input and the output are written by kernels:
// conv_out and bn_out no longer exist as values.
TEST(PlanArena, OptimizedReferenceExampleHasTwoBuffers) {
  const Graph g = run_passes(reference_example(kSmall, 1));
  const ArenaPlan plan = plan_arena(g);
  expect_valid_plan(g, plan);
  ASSERT_EQ(plan.buffers.size(), 2u) << describe(plan, g);
  for (const Value& v : g.values()) {
    EXPECT_NE(v.name, "conv_out") << dump(g);
    EXPECT_NE(v.name, "bn_out") << dump(g);
  }
  EXPECT_EQ(plan.find(g.inputs[0]), nullptr) << "the caller binds the input";

  const ArenaBuffer* copy = nullptr;
  const ArenaBuffer* out = plan.find(g.outputs[0]);
  ASSERT_NE(out, nullptr);
  for (const ArenaBuffer& b : plan.buffers)
    if (&b != out) copy = &b;
  ASSERT_NE(copy, nullptr);
  const Node& transform = g.node(g.value(copy->value).producer);
  EXPECT_TRUE(std::holds_alternative<LayoutTransform>(transform.op));
  EXPECT_EQ(transform.inputs[0], g.inputs[0]);
  EXPECT_EQ(g.value(copy->value).layout, Layout::nhwc);
  EXPECT_EQ(g.value(copy->value).name, g.value(g.inputs[0]).name + "_nhwc");
  EXPECT_TRUE(std::holds_alternative<Conv2d>(g.node(g.value(out->value).producer).op));
  EXPECT_EQ(copy->bytes, kSmall.n * kSmall.c * kSmall.h * kSmall.w * 4);
}

// The reference example's ops on an input already NHWC (HWIO weights): no transform, so only
// the output is written by a kernel.
TEST(PlanArena, NhwcInputExampleOnlyOutputGetsMemory) {
  GraphBuilder b;
  const ValueId x = b.input("A", {1, 9, 9, 8}, Layout::nhwc);
  const ValueId w =
      b.constant("w", {3, 3, 8, 12}, random_uniform(3 * 3 * 8 * 12, -0.3f, 0.3f, 1), Layout::hwio);
  Conv2d attrs;
  attrs.stride_h = attrs.stride_w = 2;
  attrs.pad_top = attrs.pad_left = attrs.pad_bottom = attrs.pad_right = 1;
  const ValueId conv =
      b.conv2d("conv_out", x, w, b.constant("b", {12}, random_uniform(12, -0.1f, 0.1f, 2)), attrs);
  const ValueId bn =
      b.batch_norm("bn_out", conv, b.constant("gamma", {12}, random_uniform(12, 0.5f, 1.5f, 3)),
                   b.constant("beta", {12}, random_uniform(12, -0.5f, 0.5f, 4)),
                   b.constant("mean", {12}, random_uniform(12, -0.3f, 0.3f, 5)),
                   b.constant("var", {12}, random_uniform(12, 0.01f, 4.0f, 6)));
  b.output(b.relu("out", bn));
  const Graph g = run_passes(b.finish());
  ASSERT_EQ(g.num_nodes(), 1u) << dump(g);
  const ArenaPlan plan = plan_arena(g);
  expect_valid_plan(g, plan);
  ASSERT_EQ(plan.buffers.size(), 1u) << describe(plan, g);
  EXPECT_EQ(plan.buffers[0].value, g.outputs[0]);
  EXPECT_EQ(plan.arena_bytes, (5 * 5 * 12 * 4 + 63) / 64 * 64);
}

// Two convs concatenated along channels, then read by a third: after the passes (NHWC) both
// convs write straight into their channel slices of the Concat's output. `extra_reader`: the
// right conv's output is also read by another conv (which reads it as a slice), or by a
// Softmax (whose kernel reads dense inputs only, so the Concat copies).
enum class ExtraReader { none, conv, softmax };
Graph concat_of_two_convs(ExtraReader extra_reader) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 8, 12, 12});
  const ValueId left = b.relu("left_relu", add_conv(b, "left", x, 8, 16, 1, 1, 1));
  const ValueId right = b.relu("right_relu", add_conv(b, "right", x, 8, 24, 3, 1, 2));
  const ValueId cat = b.op("cat", Concat{1}, {left, right});
  b.output(add_conv(b, "after", cat, 40, 8, 3, 1, 3));
  if (extra_reader == ExtraReader::conv) b.output(add_conv(b, "also_reads_right", right, 24, 8, 1, 1, 4));
  if (extra_reader == ExtraReader::softmax) b.output(b.op("softmax", Softmax{1}, {right}));
  return run_passes(b.finish());
}

TEST(PlanArena, ConcatInputsAreWrittenInPlace) {
  const Graph g = concat_of_two_convs(ExtraReader::none);
  const ArenaPlan plan = plan_arena(g);
  expect_valid_plan(g, plan);
  ASSERT_EQ(plan.aliases.size(), 2u) << describe(plan, g);
  const ArenaAlias& a = plan.aliases[0];
  const ArenaAlias& b = plan.aliases[1];
  EXPECT_EQ(a.base, b.base);
  EXPECT_EQ(a.axis, 3);  // channels of the NHWC tensor
  EXPECT_EQ(a.offset, 0);
  EXPECT_EQ(b.offset, 16);
  EXPECT_TRUE(plan.elides(a.node));
  EXPECT_EQ(plan.find(a.value), nullptr);
  // The Concat's output is alive from the first conv on, so nothing written in between can
  // take its bytes.
  const ArenaBuffer* base = plan.find(a.base);
  ASSERT_NE(base, nullptr);
  EXPECT_LT(base->first, static_cast<int>(a.node.index));
  // Without the option everything is copied as before.
  PlanOptions copy;
  copy.in_place_concat = false;
  const ArenaPlan copied = plan_arena(g, copy);
  EXPECT_TRUE(copied.aliases.empty());
  expect_valid_plan(g, copied);
}

// Another reader of a slice reads it at the Concat output's strides: planned_kernels gives its
// input those strides, and the Concat's output stays alive until that reader has run.
TEST(PlanArena, ConcatInputReadByAnotherConvIsStillInPlace) {
  const Graph g = concat_of_two_convs(ExtraReader::conv);
  const ArenaPlan plan = plan_arena(g);
  expect_valid_plan(g, plan);
  ASSERT_EQ(plan.aliases.size(), 2u) << describe(plan, g);
  int strided = 0;
  for (const KernelSpec& k : planned_kernels(g, plan)) {
    if (std::holds_alternative<LayoutKernelSpec>(k)) continue;  // the entry transform
    const auto* c = std::get_if<ConvKernelSpec>(&k);
    ASSERT_NE(c, nullptr) << kernel_name(k) << ": the Concat runs no kernel";
    if (c->name != "also_reads_right") {
      EXPECT_TRUE(c->input.strides.empty()) << c->name;
      continue;
    }
    ++strided;
    EXPECT_EQ(c->input.shape, (Shape{1, 12, 12, 24}));
    EXPECT_EQ(c->input.strides, (std::vector<int64_t>{12 * 12 * 40, 12 * 40, 40, 1}));
    EXPECT_NE(kernel_signature(k).find("@[5760, 480, 40, 1]"), std::string::npos)
        << "the strides are part of what the kernel is compiled for: " << kernel_signature(k);
  }
  EXPECT_EQ(strided, 1);
}

TEST(PlanArena, ConcatInputWithADenseOnlyReaderIsCopied) {
  const Graph g = concat_of_two_convs(ExtraReader::softmax);
  const ArenaPlan plan = plan_arena(g);
  expect_valid_plan(g, plan);
  EXPECT_TRUE(plan.aliases.empty()) << describe(plan, g);
}

// A dense block: each layer's BN + ReLU + conv reads the running Concat and its output is
// concatenated to it. Every Concat is in place, nested: each slice is of the last Concat's
// output, at the sum of the offsets, and that buffer lives from the block's first conv on.
TEST(PlanArena, DenseBlockConcatsNestInPlace) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 3, 10, 10});
  ValueId cat = add_conv(b, "stem", x, 3, 8, 3, 1, 1);
  int64_t channels = 8;
  const int64_t growth = 6;
  for (int layer = 0; layer < 3; ++layer) {
    const std::string p = "l" + std::to_string(layer);
    const ValueId act = b.relu(p + "_relu", b.batch_norm(p + "_bn", cat,
        b.constant(p + "_g", {channels}, random_uniform(channels, 0.5f, 1.5f, 10 + layer)),
        b.constant(p + "_be", {channels}, random_uniform(channels, -0.5f, 0.5f, 20 + layer)),
        b.constant(p + "_m", {channels}, random_uniform(channels, -0.3f, 0.3f, 30 + layer)),
        b.constant(p + "_v", {channels}, random_uniform(channels, 0.5f, 2.0f, 40 + layer))));
    const ValueId y = add_conv(b, p + "_conv", act, channels, growth, 3, 1, 50 + layer);
    cat = b.op(p + "_cat", Concat{1}, {cat, y});
    channels += growth;
  }
  b.output(add_conv(b, "transition", cat, channels, 4, 1, 1, 60));
  const Graph g = run_passes(b.finish());
  const ArenaPlan plan = plan_arena(g);
  expect_valid_plan(g, plan);
  ASSERT_EQ(plan.aliases.size(), 6u) << describe(plan, g);  // two inputs of each Concat
  const ValueId root = plan.aliases.back().base;
  std::map<std::string, int64_t> offset;
  for (const ArenaAlias& a : plan.aliases) {
    EXPECT_EQ(a.base, root) << describe(plan, g);
    EXPECT_EQ(a.axis, 3);
    offset[g.value(a.value).name] = a.offset;
  }
  EXPECT_EQ(offset.at("stem"), 0);
  EXPECT_EQ(offset.at("l0_conv"), 8);
  EXPECT_EQ(offset.at("l1_conv"), 14);
  EXPECT_EQ(offset.at("l2_conv"), 20);
  EXPECT_EQ(offset.at("l0_cat"), 0);
  EXPECT_EQ(offset.at("l1_cat"), 0);
  const ArenaBuffer* base = plan.find(root);
  ASSERT_NE(base, nullptr);
  EXPECT_EQ(g.node(NodeId{static_cast<uint32_t>(base->first)}).name, "stem") << "alive from the stem conv on";
  // Each layer's convolution (its BN + ReLU the prologue, fuse_conv_prologues) reads the
  // running Concat at the full tensor's strides.
  int strided = 0;
  for (const KernelSpec& k : planned_kernels(g, plan)) {
    const auto* o = std::get_if<OpKernelSpec>(&k);
    EXPECT_TRUE(!o || !std::holds_alternative<Concat>(o->op)) << "a Concat still copies";
    for (const TensorDesc& t : generated_kernel_arguments(k)) {
      if (t.strides.empty()) continue;
      EXPECT_EQ(t.strides[2], channels) << kernel_name(k);
      ++strided;
    }
  }
  EXPECT_EQ(strided, 3);
}

// Reshapes of tensors the arena holds are views: two in a chain both view the conv's output,
// which then lives until the last view's reader; a Reshape of the graph input copies.
TEST(PlanArena, ReshapesAreViewsOfTheBufferTheyRead) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 8, 6, 6});
  const ValueId flat_in = b.op("flat_in", Reshape{{1, 288}}, {x});
  const ValueId conv = add_conv(b, "conv", x, 8, 4, 3, 1, 1);
  const ValueId r1 = b.op("r1", Reshape{{1, 4, 36}}, {conv});
  const ValueId r2 = b.op("r2", Reshape{{4, 36}}, {r1});
  const ValueId s = b.relu("s", r2);
  b.output(s);
  b.output(b.op("flat_out", Reshape{{1, 288}}, {flat_in}));
  const Graph g = b.finish();
  const ArenaPlan plan = plan_arena(g);
  expect_valid_plan(g, plan);
  const ValueId conv_v = g.node(NodeId{1}).outputs[0];
  ASSERT_EQ(plan.aliases.size(), 3u) << describe(plan, g);  // r1, r2, flat_out (of flat_in)
  for (const ArenaAlias& a : plan.aliases) {
    EXPECT_TRUE(a.is_view());
    EXPECT_TRUE(plan.elides(a.node));
    EXPECT_EQ(plan.find(a.value), nullptr);
  }
  EXPECT_EQ(plan.aliases[0].base, conv_v);
  EXPECT_EQ(plan.aliases[1].base, conv_v) << "a view of a view is of the root buffer";
  EXPECT_FALSE(plan.elides(NodeId{0})) << "the Reshape of the graph input copies";
  ASSERT_NE(plan.find(conv_v), nullptr);
  EXPECT_EQ(plan.find(conv_v)->last, 4) << "alive until s, which reads r2";
  PlanOptions copy;
  copy.reshape_views = false;
  const ArenaPlan copied = plan_arena(g, copy);
  EXPECT_TRUE(copied.aliases.empty());
  expect_valid_plan(g, copied);
}

// A channel split (ShuffleNet's, a CSP block's): Slices of a conv's output with unit steps,
// each cutting the channel axis, read only by kernels that read strided inputs (a conv, a
// Concat), store nothing and run nothing; the conv's buffer lives until the last reader of
// either half. A Slice that is a graph output, one with a step, one read by a kernel of dense
// inputs (a Softmax) and one of a graph input still copy.
TEST(PlanArena, ChannelSplitsAreViewsOfTheBufferTheyCut) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 16, 6, 6});
  const ValueId c0 = add_conv(b, "c0", x, 16, 16, 3, 1, 1);
  const ValueId left = b.op("left", Slice{{0, 0, 0, 0}, {1, 6, 6, 6}, {1, 1, 1, 1}}, {c0});
  const ValueId right = b.op("right", Slice{{0, 6, 0, 0}, {1, 16, 6, 6}, {1, 1, 1, 1}}, {c0});
  const ValueId c1 = add_conv(b, "c1", right, 10, 10, 1, 1, 5);
  b.output(b.op("cat", Concat{1}, {left, c1}));
  b.output(b.op("out_slice", Slice{{0, 2, 0, 0}, {1, 4, 6, 6}, {1, 1, 1, 1}}, {c0}));
  b.output(add_conv(b, "c2", b.op("strided", Slice{{0, 0, 0, 0}, {1, 16, 6, 6}, {1, 2, 1, 1}}, {c0}),
                    8, 4, 1, 1, 9));
  b.output(b.op("softmax", Softmax{1}, {b.op("dense_reader", Slice{{0, 0, 0, 0}, {1, 4, 6, 6}, {1, 1, 1, 1}}, {c0})}));
  b.output(add_conv(b, "c3", b.op("of_input", Slice{{0, 0, 0, 0}, {1, 8, 6, 6}, {1, 1, 1, 1}}, {x}), 8, 4, 1, 1, 13));
  const Graph g = run_passes(b.finish());
  const ArenaPlan plan = plan_arena(g);
  expect_valid_plan(g, plan);
  std::map<std::string, const ArenaAlias*> views;
  for (const ArenaAlias& a : plan.aliases)
    if (std::holds_alternative<Slice>(g.node(a.node).op)) views[g.node(a.node).name] = &a;
  ASSERT_EQ(views.size(), 2u) << describe(plan, g);
  const ArenaAlias &l = *views.at("left"), &r = *views.at("right");
  EXPECT_EQ(l.base, r.base);
  EXPECT_EQ(g.node(g.value(l.base).producer).name, "c0");
  EXPECT_EQ(l.axis, 3) << "the channel axis of the NHWC tensor";
  EXPECT_EQ(l.offset, 0);
  EXPECT_EQ(r.offset, 6);
  EXPECT_TRUE(plan.elides(l.node));
  EXPECT_EQ(plan.find(l.value), nullptr);
  const std::string text = describe(plan, g);
  EXPECT_NE(text.find("(its Slice copies nothing)"), std::string::npos) << text;
  PlanOptions copy;
  copy.slice_views = false;
  const ArenaPlan copied = plan_arena(g, copy);
  for (const ArenaAlias& a : copied.aliases) EXPECT_FALSE(std::holds_alternative<Slice>(g.node(a.node).op));
  expect_valid_plan(g, copied);
}

// A Concat of all the parts of a split, in order, and of other convolutions' outputs (a CSP
// block: Concat(split(cv1), bottleneck)) copies nothing: the split convolution writes where its
// parts go, each part is a view of its place (its Slice copies nothing), and the bottleneck
// writes after them. Parts out of order, or not all of the split tensor, keep the copy.
TEST(PlanArena, ConcatOfTheWholeSplitIsWrittenInPlace) {
  GraphBuilder b;
  const ValueId x = b.input("x", {1, 8, 6, 6});
  auto csp = [&](const std::string& p, bool in_order, bool all_parts, uint64_t seed) {
    const ValueId c = add_conv(b, p + "_cv1", x, 8, 12, 1, 1, seed);
    const ValueId lo = b.op(p + "_lo", Slice{{0, 0, 0, 0}, {1, 5, 6, 6}, {1, 1, 1, 1}}, {c});
    const ValueId hi = b.op(p + "_hi", Slice{{0, 5, 0, 0}, {1, 12, 6, 6}, {1, 1, 1, 1}}, {c});
    const ValueId m = add_conv(b, p + "_m", hi, 7, 7, 3, 1, seed + 2);
    std::vector<ValueId> parts = in_order ? std::vector<ValueId>{lo, hi} : std::vector<ValueId>{hi, lo};
    if (!all_parts) parts = {hi};
    parts.push_back(m);
    b.output(add_conv(b, p + "_cv2", b.op(p + "_cat", Concat{1}, parts), all_parts ? 19 : 14, 4, 1, 1, seed + 4));
  };
  csp("in_place", true, true, 10);
  csp("swapped", false, true, 20);
  csp("half", true, false, 30);
  const Graph g = run_passes(b.finish());
  const ArenaPlan plan = plan_arena(g);
  expect_valid_plan(g, plan);
  std::set<std::string> elided;
  for (uint32_t i = 0; i < g.num_nodes(); ++i)
    if (plan.elides(NodeId{i})) elided.insert(g.node(NodeId{i}).name);
  // swapped and half: their Slices are views of the split tensor (slice_views), the Concat
  // copies (half_lo, read by nothing, is gone).
  EXPECT_EQ(elided, (std::set<std::string>{"in_place_lo", "in_place_hi", "in_place_cat", "swapped_lo",
                                          "swapped_hi", "half_hi"}))
      << describe(plan, g);
  for (const ArenaAlias& a : plan.aliases) {
    const std::string& node = g.node(a.node).name;
    if (node.rfind("in_place", 0) != 0) continue;
    EXPECT_EQ(g.node(g.value(a.base).producer).name, "in_place_cat") << node;
    EXPECT_EQ(a.axis, 3) << node;
    const std::string& value = g.node(g.value(a.value).producer).name;
    const int64_t want = value == "in_place_cv1" || value == "in_place_lo" ? 0 : value == "in_place_hi" ? 5 : 12;
    EXPECT_EQ(a.offset, want) << value;
  }
}

}  // namespace
}  // namespace kiln::graph
