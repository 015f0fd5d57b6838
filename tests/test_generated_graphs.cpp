// Whole graphs through the passes and the generated kernels, against the reference run of the
// unoptimized graph on every CPU target: corner cases (scalars, vectors, NCHW inputs read in
// place), convolutions of every group width and window, fused poolings, resizes, prologues and
// shortcuts, NaN semantics. Tensors written and read in place (Concat slices, channel splits):
// test_generated_in_place.cpp; the kernels one at a time: test_generated_kernels.cpp; graph
// rewrites (pooling first, channel shuffles and Resizes kept NHWC): test_generated_rewrites.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <set>
#include <string>

#include "codegen/kernel_library.h"
#include "codegen/kernel_pipeline.h"
#include "codegen/pipeline_parts.h"
#include "generated_cases.h"
#include "graph/builder.h"
#include "graph/passes/passes.h"
#include "graph/passes/pipeline.h"
#include "graph/reference.h"
#include "graph_test_util.h"
#include "kiln/runtime.h"
#include "runtime/conv_weights.h"
#include "runtime/kernels.h"
#include "test_generator.h"

namespace kiln {
namespace {

using namespace testing_util;

// The corner cases the runtime once ran as portable C++: rank-0 tensors (a scalar graph input
// scaling an image, a mean over every axis without kept dims), MatMuls with a 1-D operand on
// either side or both, and global max pooling of an NCHW graph input. Through the passes each
// is generated (the Model refuses a kernel that is not) and matches the reference.
TEST(GeneratedKernels, ScalarsVectorsAndNchwGlobalMaxPool) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {2, 3, 4, 5});
  const graph::ValueId s = b.input("s", {}, Layout::any);
  const graph::ValueId scaled = b.op("scaled", graph::Binary{graph::BinaryOp::mul}, {x, s});
  b.output(scaled);
  b.output(b.op("mean_all", graph::Reduce{{}, false}, {scaled}));
  b.output(b.op("gmp", graph::GlobalPool{graph::PoolKind::max}, {x}));
  const graph::ValueId v = b.input("v", {5}, Layout::any);
  const graph::ValueId m = b.input("m", {4, 5}, Layout::any);
  b.output(b.op("vec_mat", graph::MatMul{}, {v, b.constant("w", {5, 6}, graph::random_uniform(30, -1, 1, 3))}));
  b.output(b.op("mat_vec", graph::MatMul{}, {m, v}));
  b.output(b.op("dot", graph::MatMul{}, {v, v}));
  b.output(b.op("batch_vec", graph::MatMul{}, {x, v}));
  const graph::Graph input = b.finish();

  expect_whole_graph_matches_reference(input, graph::run_passes(input));
}

// A depthwise convolution takes a residual Add into its epilogue like a dense one (it once fell
// back to a portable kernel with it). Of its own input the sum is one convolution: the input goes
// into the weights (merge_parallel_convs), and the kernel reads no residual.
TEST(GeneratedKernels, DepthwiseConvolutionWithAResidual) {
  for (bool own_input : {false, true}) {
    SCOPED_TRACE(own_input ? "the convolution's own input" : "another tensor");
    graph::GraphBuilder b;
    const graph::ValueId x = b.input("x", {1, 24, 9, 11});
    const graph::ValueId r = own_input ? x : b.input("r", {1, 24, 9, 11});
    graph::Conv2d dw;
    dw.groups = 24;
    dw.pad_top = dw.pad_left = dw.pad_bottom = dw.pad_right = 1;
    const graph::ValueId d = b.conv2d(
        "dw", x, b.constant("dw_w", {24, 1, 3, 3}, graph::random_uniform(216, -0.4f, 0.4f, 1), Layout::oihw),
        b.constant("dw_b", {24}, graph::random_uniform(24, -0.2f, 0.2f, 2)), dw);
    b.output(b.relu("relu", b.op("add", graph::Binary{graph::BinaryOp::add}, {d, r})));
    const graph::Graph input = b.finish();
    const graph::Graph optimized = graph::run_passes(input);
    size_t fused = 0;
    for (const graph::Node& n : optimized.nodes())
      if (const auto* c = std::get_if<graph::Conv2d>(&n.op))
        fused += c->residual != !own_input ? 0 : c->activation.is_relu();
    ASSERT_EQ(fused, 1u) << graph::dump(optimized);
    // The entry transforms (one per input), the conv.
    ASSERT_EQ(optimized.num_nodes(), own_input ? 2u : 3u) << graph::dump(optimized);
    expect_whole_graph_matches_reference(input, optimized);
  }
}

// Convolutions of an NCHW graph input read in place (Conv2d::nchw_input: the wide schedule
// stages it, vectors of pixels with the channels unrolled, the vectors past a padded row's
// ends split off): padding along both axes, along y only (a 7x1: nothing to split), along x
// only, asymmetric, a right padding the stride never reaches, none (a 4x4/4 patchify), rows
// narrower than a vector, a stride of 2 with an odd width, batch 2. Each reads its input in
// place and matches the reference on every CPU target.
TEST(GeneratedKernels, ConvolutionsReadingNchwInputs) {
  struct Case {
    const char* name;
    int64_t n, c, h, w, co;
    int kh, kw, stride, pad_top, pad_left, pad_bottom, pad_right;
  };
  const Case cases[] = {
      {"stem_3x3_s2", 1, 3, 33, 41, 32, 3, 3, 2, 1, 1, 1, 1},
      {"column_7x1", 1, 3, 20, 37, 16, 7, 1, 1, 3, 0, 3, 0},
      {"row_1x7", 2, 4, 9, 35, 24, 1, 7, 1, 0, 3, 0, 3},
      {"asymmetric", 1, 3, 17, 23, 16, 3, 3, 2, 0, 1, 1, 0},
      {"right_pad_never_read", 1, 3, 8, 32, 16, 2, 2, 2, 0, 0, 1, 1},  // stride 2 skips it
      {"patchify_4x4_s4", 1, 3, 32, 48, 48, 4, 4, 4, 0, 0, 0, 0},
      {"narrow_rows", 1, 3, 12, 6, 16, 3, 3, 1, 1, 1, 1, 1},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    graph::GraphBuilder b;
    const graph::ValueId x = b.input("x", {c.n, c.c, c.h, c.w});
    graph::Conv2d attrs;
    attrs.stride_h = attrs.stride_w = c.stride;
    attrs.pad_top = c.pad_top, attrs.pad_left = c.pad_left;
    attrs.pad_bottom = c.pad_bottom, attrs.pad_right = c.pad_right;
    const float r = 1.0f / std::sqrt(static_cast<float>(c.c * c.kh * c.kw));
    b.output(b.conv2d("conv", x,
                      b.constant("w", {c.co, c.c, c.kh, c.kw},
                                 graph::random_uniform(c.co * c.c * c.kh * c.kw, -r, r, 7),
                                 Layout::oihw),
                      b.constant("b", {c.co}, graph::random_uniform(c.co, -0.2f, 0.2f, 8)), attrs));
    const graph::Graph input = b.finish();
    const graph::Graph optimized = graph::run_passes(input);
    bool in_place = false;
    for (const graph::Node& node : optimized.nodes())
      if (const auto* conv = std::get_if<graph::Conv2d>(&node.op)) in_place = conv->nchw_input;
    EXPECT_TRUE(in_place) << graph::dump(optimized);
    expect_whole_graph_matches_reference(input, optimized);
  }
}

// Grouped convolutions of every group width the schedules treat differently, on every CPU
// target against the reference: groups that tile a vector (2, 4 and 8 output channels: the
// grouped schedule's permuted inputs), a channel multiplier (one input channel per group), groups
// that fit no vector (3 channels: gathered), groups merged into blocks (12 channels), groups of
// whole 8-channel vectors (24 channels: 8 lanes on AVX-512, codegen::conv_schedule_target),
// strides, asymmetric padding, dilation, a 5x5 kernel, batch 2, rows narrower than a register tile,
// and a one-pixel column (whose default tile is one pixel wide).
TEST(GeneratedKernels, GroupedConvolutionsOfEveryGroupWidth) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {2, 48, 13, 15});
  const graph::ValueId narrow = b.input("narrow", {1, 16, 6, 3});
  const graph::ValueId column = b.input("column", {1, 16, 5, 1});
  const graph::ValueId wide = b.input("wide", {1, 32, 7, 9});
  struct Case {
    const char* name;
    int input;  // 0: x, 1: narrow, 2: column, 3: wide
    int64_t co;
    int groups, k, stride, dilation, pad_top, pad_left, pad_bottom, pad_right;
  };
  const Case cases[] = {
      {"resnext_4", 0, 48, 12, 3, 1, 1, 1, 1, 1, 1},
      {"resnext_4_stride2", 0, 48, 12, 3, 2, 1, 0, 1, 1, 0},
      {"expand_4_to_8", 0, 96, 12, 3, 1, 1, 1, 1, 1, 1},
      {"out_2_in_8", 0, 12, 6, 3, 1, 1, 1, 1, 1, 1},
      {"multiplier_2", 0, 96, 48, 3, 1, 1, 1, 1, 1, 1},
      {"groups_of_3", 0, 48, 16, 3, 1, 1, 1, 1, 1, 1},
      {"merged_12", 0, 48, 4, 3, 1, 1, 1, 1, 1, 1},
      {"lanes8_24", 0, 48, 2, 3, 1, 1, 1, 1, 1, 1},
      {"lanes8_24_of_3_stride2", 0, 72, 3, 3, 2, 1, 1, 1, 0, 0},
      {"k5_dilation2", 0, 48, 12, 5, 1, 2, 4, 3, 4, 5},
      {"pointwise_4", 0, 48, 12, 1, 1, 1, 0, 0, 0, 0},
      {"width_3", 1, 16, 4, 3, 1, 1, 1, 1, 1, 1},
      {"width_1", 2, 16, 4, 3, 1, 1, 1, 1, 1, 1},  // a one-pixel tile: one specialization
      // Interleaved by group (runtime::conv_weight_interleave), besides the 4-channel groups
      // above: 8-channel groups (ResNeXt-style 3x3, stride 2), 2-channel groups, and groups
      // with twice as many inputs as outputs.
      {"interleave_8_stride2", 0, 48, 6, 3, 2, 1, 1, 1, 1, 1},
      {"interleave_2", 0, 48, 24, 3, 1, 1, 1, 1, 1, 1},
      {"interleave_2_of_4", 3, 16, 8, 3, 1, 1, 0, 1, 2, 0},
  };
  uint64_t seed = 500;
  for (const Case& c : cases) {
    const std::string p = c.name;
    const int64_t ci = (c.input == 0 ? 48 : c.input == 3 ? 32 : 16) / c.groups;
    graph::Conv2d attrs;
    attrs.groups = c.groups;
    attrs.stride_h = attrs.stride_w = c.stride;
    attrs.dilation_h = attrs.dilation_w = c.dilation;
    attrs.pad_top = c.pad_top, attrs.pad_left = c.pad_left;
    attrs.pad_bottom = c.pad_bottom, attrs.pad_right = c.pad_right;
    const float r = 1.0f / std::sqrt(static_cast<float>(ci * c.k * c.k));
    b.output(b.conv2d(p, c.input == 0 ? x : c.input == 1 ? narrow : c.input == 2 ? column : wide,
                      b.constant(p + "_w", {c.co, ci, c.k, c.k},
                                 graph::random_uniform(c.co * ci * c.k * c.k, -r, r, seed), Layout::oihw),
                      b.constant(p + "_b", {c.co}, graph::random_uniform(c.co, -0.2f, 0.2f, seed + 1)),
                      attrs));
    seed += 10;
  }
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);
  std::map<std::string, int> interleave, merge, avx512_lanes;
  const Halide::Target avx512("x86-64-linux-sse41-avx-f16c-fma-avx2-avx512-avx512_skylake");
  for (const graph::KernelSpec& k : lowered_kernels(optimized))
    if (const auto* conv = std::get_if<graph::ConvKernelSpec>(&k)) {
      interleave[conv->name] = runtime::conv_weight_interleave(*conv);
      merge[conv->name] = runtime::grouped_conv_merge(conv->groups, conv->output.shape[3]);
      avx512_lanes[conv->name] =
          codegen::conv_schedule_target(*conv, avx512).natural_vector_size<float>();
    }
  EXPECT_EQ(merge["merged_12"], 4);
  for (const Case& c : cases) {
    const bool lanes8 = std::string(c.name).rfind("lanes8", 0) == 0;
    EXPECT_EQ(avx512_lanes[c.name], lanes8 ? 8 : 16) << c.name;
    if (std::string(c.name) != "merged_12") EXPECT_EQ(merge[c.name], 1) << c.name;
  }
  const std::map<std::string, int> expected = {
      {"resnext_4", 4},  {"resnext_4_stride2", 4},    {"k5_dilation2", 4},
      {"pointwise_4", 4}, {"width_3", 4},             {"width_1", 4},
      {"interleave_8_stride2", 2}, {"interleave_2", 8}, {"interleave_2_of_4", 8}};
  for (const Case& c : cases) {
    const auto it = expected.find(c.name);
    EXPECT_EQ(interleave[c.name], it == expected.end() ? 1 : it->second) << c.name;
  }
  expect_whole_graph_matches_reference(input, optimized);
}

// Convolutions with their pooling fused (graph::fuse_conv_pooling, the cases of
// generated_cases.h): every pooling goes into its convolution, the stem reads its NCHW input in
// place as well, the schedules the cases are named for are the defaults on the best CPU target
// (so the banded and the whole-output paths both run), and the model matches the reference on
// every CPU target with poisoned outputs.
TEST(GeneratedKernels, ConvolutionsWithTheirPoolingFused) {
  const std::vector<ConvPoolCase> cases = conv_pool_cases();
  const graph::Graph input = conv_pool_graph(cases);
  const graph::Graph optimized = graph::run_passes(input);
  size_t pooled = 0;
  for (const graph::Node& n : optimized.nodes()) {
    EXPECT_FALSE(std::holds_alternative<graph::Pool2d>(n.op)) << n.name << " was not fused";
    if (const auto* c = std::get_if<graph::Conv2d>(&n.op)) {
      pooled += c->pool.has_value();
      EXPECT_EQ(c->nchw_input, n.name.rfind("stem", 0) == 0) << n.name;
    }
  }
  EXPECT_EQ(pooled, cases.size()) << graph::dump(optimized);
  const Halide::Target best(runtime::cpu_targets()[static_cast<size_t>(runtime::best_cpu_target())]);
  for (const graph::KernelSpec& k : lowered_kernels(optimized)) {
    if (!std::holds_alternative<graph::ConvKernelSpec>(k)) continue;  // the inputs' transforms
    const std::string& name = graph::kernel_name(k);
    const std::string schedule = codegen::default_schedule(k, best);
    for (const char* family : {"deep", "winograd", "depthwise", "grouped"})
      if (name.rfind(family, 0) == 0) EXPECT_EQ(schedule.rfind(family, 0), 0u) << name << ": " << schedule;
    if (name.rfind("stem", 0) == 0 || name.rfind("pointwise", 0) == 0)
      EXPECT_EQ(schedule.rfind("wide", 0), 0u) << name << ": " << schedule;
  }
  expect_whole_graph_matches_reference(input, optimized);
}

// Poolings before 1x1 convolutions (graph::fuse_pooling_into_conv, the cases of
// generated_conv_cases.h): each goes into its convolution as the pooling of its input, but for
// the one read twice and the one before a 3x3 convolution; the optimized graph's reference
// agrees with the input graph's, and the model matches the input graph's reference on every
// CPU target with poisoned outputs.
TEST(GeneratedKernels, PoolingsBeforeOneByOneConvolutionsFused) {
  const std::vector<PoolConvCase> cases = pool_conv_cases();
  const graph::Graph input = pool_conv_graph(cases);
  const graph::Graph optimized = graph::run_passes(input);
  std::map<std::string, bool> pooled_first, pool_kernel;
  for (const graph::Node& n : optimized.nodes()) {
    const std::string block = n.name.substr(0, n.name.rfind('_'));
    if (std::holds_alternative<graph::Pool2d>(n.op)) pool_kernel[block] = true;
    if (const auto* c = std::get_if<graph::Conv2d>(&n.op)) {
      pooled_first[block] = c->pool_first;
      EXPECT_EQ(c->pool.has_value(), c->pool_first) << n.name;
      EXPECT_TRUE(c->pool_first || !c->pool) << n.name;
    }
  }
  for (const PoolConvCase& c : cases) {
    EXPECT_EQ(pooled_first[c.name], c.fused) << c.name << "\n" << graph::dump(optimized);
    EXPECT_EQ(pool_kernel[c.name], !c.fused) << c.name;
  }
  for (const graph::KernelSpec& k : lowered_kernels(optimized))
    if (const auto* conv = std::get_if<graph::ConvKernelSpec>(&k))
      EXPECT_EQ(graph::pools_before_conv(*conv), conv->pool_first) << graph::kernel_name(k);
  const std::vector<graph::Tensor> ins = random_graph_inputs(input, 5);
  const std::vector<graph::Tensor> want = graph::run_reference(input, ins);
  const std::vector<graph::Tensor> fused = graph::run_reference(optimized, ins);
  ASSERT_EQ(fused.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)  // the optimized graph's outputs may be NHWC
    EXPECT_LE(graph::worst_error_ratio(graph::to_layout(fused[i], want[i].layout).data,
                                       want[i].data, 1e-5, 1e-6),
              1.0)
        << i;
  expect_whole_graph_matches_reference(input, optimized);
}

// Convolutions with their Resize fused (graph::fuse_conv_resize, the cases of
// generated_conv_cases.h): every Resize goes into its convolution, through the transform back to
// NCHW where it interpolates, where it lies (NHWC) where it is nearest; no Resize or transform to
// NCHW stays a kernel of its own but after a nearest one; and the model matches the reference on
// every CPU target with poisoned outputs.
TEST(GeneratedKernels, ConvolutionsWithTheirResizeFused) {
  const std::vector<ConvResizeCase> cases = conv_resize_cases();
  const graph::Graph input = conv_resize_graph(cases);
  const graph::Graph optimized = graph::run_passes(input);
  size_t resized = 0;
  for (const graph::Node& n : optimized.nodes()) {
    EXPECT_FALSE(std::holds_alternative<graph::Resize>(n.op)) << n.name << " was not fused";
    if (const auto* c = std::get_if<graph::Conv2d>(&n.op)) {
      resized += c->resize.has_value();
      EXPECT_EQ(c->nchw_output, n.name.find("nearest") == std::string::npos) << n.name;
    }
  }
  EXPECT_EQ(resized, cases.size()) << graph::dump(optimized);
  expect_whole_graph_matches_reference(input, optimized);
}

// Shortcuts after the epilogue (graph::fuse_conv_shortcut): a YOLO C2f block (1x1 -> split ->
// two bottlenecks x + SiLU(conv(SiLU(conv(x)))) -> Concat -> 1x1), a depthwise convolution with
// ReLU6 plus its input, and a Winograd-class 3x3 of 64 channels at 14x14 plus its input (each
// input a ReLU convolution's output). Every such Add goes into the convolution before it, the readers take
// the split at its strides, and the model matches the reference on every CPU target with
// poisoned outputs.
TEST(GeneratedKernels, ShortcutsAfterTheEpilogueFused) {
  graph::GraphBuilder b;
  auto conv = [&](const std::string& name, graph::ValueId x, int64_t ci, int64_t co, int k,
                  int groups, uint64_t seed) {
    return graph::testing_util::random_conv(b, name, x, ci, co, k, groups, seed);
  };
  auto silu = [&](const std::string& name, graph::ValueId x) {
    return b.op(name, graph::Binary{graph::BinaryOp::mul}, {x, b.op(name + "_sig", graph::Sigmoid{}, {x})});
  };
  auto add = [&](const std::string& name, graph::ValueId x, graph::ValueId y) {
    return b.op(name, graph::Binary{graph::BinaryOp::add}, {x, y});
  };
  const graph::ValueId x = b.input("x", {1, 16, 20, 18});
  const graph::ValueId cv1 = silu("cv1_silu", conv("cv1", x, 16, 24, 1, 1, 1));
  const graph::ValueId a = b.op("split_a", graph::Slice{{0, 0, 0, 0}, {1, 12, 20, 18}, {1, 1, 1, 1}}, {cv1});
  const graph::ValueId s = b.op("split_b", graph::Slice{{0, 12, 0, 0}, {1, 24, 20, 18}, {1, 1, 1, 1}}, {cv1});
  graph::ValueId m = s;
  std::vector<graph::ValueId> parts = {a, s};
  for (int i = 0; i < 2; ++i) {
    const std::string p = "m" + std::to_string(i);
    const graph::ValueId h = silu(p + "_cv1_silu", conv(p + "_cv1", m, 12, 12, 3, 1, 10 + 10 * i));
    m = add(p + "_add", m, silu(p + "_cv2_silu", conv(p + "_cv2", h, 12, 12, 3, 1, 15 + 10 * i)));
    parts.push_back(m);
  }
  b.output(silu("cv2_silu", conv("cv2", b.op("cat", graph::Concat{1}, parts), 48, 20, 1, 1, 40)));
  const graph::ValueId d = b.relu("pre_dw_relu", conv("pre_dw", b.input("d", {1, 24, 11, 13}), 24, 24, 1, 1, 45));
  b.output(add("dw_add", b.op("dw_clip", graph::Clip{0.0f, 6.0f}, {conv("dw", d, 24, 24, 3, 24, 50)}), d));
  const graph::ValueId w = b.input("w", {1, 64, 14, 14});
  const graph::ValueId r = b.relu("pre_relu", conv("pre", w, 64, 64, 1, 1, 60));
  b.output(add("wino_add", r, b.relu("wino_relu", conv("wino", r, 64, 64, 3, 1, 70))));
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);
  std::set<std::string> fused;
  for (const graph::Node& n : optimized.nodes()) {
    EXPECT_FALSE(std::holds_alternative<graph::Binary>(n.op)) << n.name << " was not fused";
    if (const auto* c = std::get_if<graph::Conv2d>(&n.op); c && c->shortcut) fused.insert(n.name);
  }
  EXPECT_EQ(fused, (std::set<std::string>{"m0_cv2", "m1_cv2", "dw", "wino"})) << graph::dump(optimized);
  expect_whole_graph_matches_reference(input, optimized);
}

// BatchNorm + ReLU before convolutions of each schedule family become their prologues
// (fuse_conv_prologues): 3x3 with padding (the padding is zero after the prologue, and the BN's
// shift makes the prologue of zero nonzero, so the order shows), strided, grouped, 1x1, and a
// layer large enough for Winograd. Each BN reads one conv's output, which the others read too,
// so none folds. On every CPU target, against the unfused reference.
TEST(GeneratedKernels, ConvProloguesMatchTheReference) {
  graph::GraphBuilder b;
  auto vec = [&](const std::string& name, int64_t n, float lo, float hi, uint64_t seed) {
    return b.constant(name, {n}, graph::random_uniform(n, lo, hi, seed));
  };
  // Read by every case's BN, so none folds into it.
  const graph::ValueId x = b.conv2d("stem", b.input("input", {1, 8, 20, 22}),
                                    b.constant("stem_w", {32, 8, 1, 1}, graph::random_uniform(256, -0.4f, 0.4f, 1), Layout::oihw),
                                    vec("stem_b", 32, -0.2f, 0.2f, 2), graph::Conv2d{});
  struct Case {
    const char* name;
    int64_t co;
    int k, stride, groups;
  };
  const Case cases[] = {{"pad3x3", 24, 3, 1, 1}, {"stride2", 16, 3, 2, 1}, {"grouped", 32, 3, 1, 4},
                        {"pointwise", 40, 1, 1, 1}, {"wide3x3", 64, 3, 1, 1}};
  uint64_t seed = 300;
  for (const Case& c : cases) {
    const std::string p = c.name;
    const graph::ValueId act = b.relu(p + "_relu", b.batch_norm(p + "_bn", x,
        vec(p + "_g", 32, 0.5f, 1.5f, seed), vec(p + "_be", 32, 0.2f, 0.8f, seed + 1),
        vec(p + "_m", 32, -0.3f, 0.3f, seed + 2), vec(p + "_v", 32, 0.5f, 2.0f, seed + 3)));
    graph::Conv2d attrs;
    attrs.stride_h = attrs.stride_w = c.stride;
    attrs.groups = c.groups;
    attrs.pad_top = attrs.pad_left = attrs.pad_bottom = attrs.pad_right = c.k / 2;
    const int64_t ci = 32 / c.groups;
    const float r = 1.0f / std::sqrt(static_cast<float>(ci * c.k * c.k));
    b.output(b.conv2d(p, act,
                      b.constant(p + "_w", {c.co, ci, c.k, c.k},
                                 graph::random_uniform(c.co * ci * c.k * c.k, -r, r, seed + 4), Layout::oihw),
                      vec(p + "_b", c.co, -0.2f, 0.2f, seed + 5), attrs));
    seed += 10;
  }
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);
  size_t prologues = 0;
  for (const graph::Node& n : optimized.nodes()) {
    EXPECT_FALSE(std::holds_alternative<graph::ElementwiseChain>(n.op)) << n.name << " runs on its own";
    if (const auto* c = std::get_if<graph::Conv2d>(&n.op)) prologues += c->pre.size() == 2;
  }
  EXPECT_EQ(prologues, std::size(cases)) << graph::dump(optimized);
  expect_whole_graph_matches_reference(input, optimized);
}

// Reductions of an NHWC image that keep their axes (ConvNeXt-V2's global response norm: the L2
// norm over H and W, the mean of that over C) reduce the NHWC tensor with their axes remapped:
// the image is never transformed back to NCHW. Sums over H and W with one row of channels
// left (40: not a whole number of vectors) are summed in parallel bands of rows (37: the last
// band short); a maximum and a reduction over one spatial axis take the plain schedule. Every
// CPU target against the reference.
TEST(GeneratedKernels, ReductionsOfNhwcImagesKeepTheLayout) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {1, 8, 37, 19});
  graph::Conv2d attrs;
  attrs.pad_top = attrs.pad_left = attrs.pad_bottom = attrs.pad_right = 1;
  const graph::ValueId y =
      b.conv2d("conv", x,
               b.constant("w", {40, 8, 3, 3}, graph::random_uniform(40 * 8 * 9, -0.3f, 0.3f, 61),
                          Layout::oihw),
               b.constant("bias", {40}, graph::random_uniform(40, -0.2f, 0.2f, 62)), attrs);
  using K = graph::ReduceKind;
  const graph::ValueId norm = b.op("l2", graph::Reduce{{2, 3}, true, K::l2}, {y});
  const graph::ValueId mean = b.op("mean_c", graph::Reduce{{1}, true, K::mean}, {norm});
  b.output(b.op("grn", graph::Binary{graph::BinaryOp::div}, {norm, mean}));
  b.output(b.op("sum", graph::Reduce{{2, 3}, true, K::sum}, {y}));
  b.output(b.op("sum_rows", graph::Reduce{{2}, true, K::sum_square}, {y}));
  b.output(b.op("max", graph::Reduce{{2, 3}, true, K::max}, {y}));
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);
  EXPECT_EQ(graph::testing_util::count_ops<graph::LayoutTransform>(optimized), 1)
      << "only the input's\n"
      << dump(optimized);
  for (const graph::Node& n : optimized.nodes())
    if (std::holds_alternative<graph::Reduce>(n.op))
      EXPECT_EQ(optimized.value(n.inputs[0]).layout, Layout::nhwc) << n.name;
  expect_whole_graph_matches_reference(input, optimized, 1e-5, 1e-5);
}

// Bilinear and bicubic upsampling of an image of 16 or more channels runs NHWC, along H and W
// with the channels in vectors, also when its input is NCHW (transformed before, on the smaller
// tensor); with fewer channels, or as a graph output, it stays NCHW. Every CPU target against
// the reference, with 40 channels (not a whole number of vectors) and odd sizes.
TEST(GeneratedKernels, UpsamplingInterpolationRunsNhwc) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {1, 40, 7, 9});
  const graph::ValueId narrow = b.input("narrow", {1, 8, 7, 9});
  graph::Conv2d attrs;
  const auto conv = [&](const std::string& name, graph::ValueId in, int64_t ci, uint64_t seed) {
    return b.conv2d(name, in,
                    b.constant(name + "_w", {24, ci, 1, 1},
                               graph::random_uniform(24 * ci, -0.3f, 0.3f, seed), Layout::oihw),
                    b.constant(name + "_b", {24}, graph::random_uniform(24, -0.2f, 0.2f, seed + 1)),
                    attrs);
  };
  const auto resize = [&](const std::string& name, graph::ValueId in, graph::ResizeMode mode,
                          int64_t channels) {
    graph::Resize r;
    r.mode = mode;
    r.sizes = {1, channels, 14, 17};
    r.scales = {1.0f, 1.0f, 2.0f, 17.0f / 9.0f};
    return b.op(name, r, {in});
  };
  using M = graph::ResizeMode;
  b.output(conv("after_linear", resize("linear", x, M::linear, 40), 40, 71));
  b.output(conv("after_cubic", resize("cubic", conv("before", x, 40, 73), M::cubic, 24), 24, 75));
  b.output(conv("after_narrow", resize("narrow_linear", narrow, M::linear, 8), 8, 77));
  b.output(resize("out_linear", x, M::linear, 40));
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);
  std::map<std::string, Layout> layouts;
  for (const graph::Node& n : optimized.nodes())
    if (std::holds_alternative<graph::Resize>(n.op))
      layouts[n.name] = optimized.value(n.inputs[0]).layout;
  EXPECT_EQ(layouts["linear"], Layout::nhwc) << dump(optimized);
  EXPECT_EQ(layouts["cubic"], Layout::nhwc) << dump(optimized);
  EXPECT_EQ(layouts["narrow_linear"], Layout::nchw) << dump(optimized);
  EXPECT_EQ(layouts["out_linear"], Layout::nchw) << dump(optimized);
  expect_whole_graph_matches_reference(input, optimized, 1e-5, 1e-5);
}

// ONNX's NaN semantics: max(0, NaN) is NaN. A NaN in the input must reach the output through a
// conv with fused ReLU or Clip(0, 6), max pooling, global max pooling, HardSigmoid, HardSwish,
// ReduceMax, ReduceMin and Max, as it does in onnxruntime, on every CPU target; numbers elsewhere
// still match the reference. (Before the fix every one of these outputs had no NaN at all: the
// clamps were Halide's max and min, and a floating-point NaN test on a value computed in registers
// is folded away under fast math.) One NaN is positive, one negative (sign bit set, as x86's
// default NaN).
TEST(GeneratedKernels, NanPropagatesThroughClampsAndMaxima) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {1, 8, 10, 10});
  auto conv = [&](const std::string& name, uint64_t seed) {
    graph::Conv2d attrs;
    attrs.pad_top = attrs.pad_left = attrs.pad_bottom = attrs.pad_right = 1;
    return b.conv2d(name, x,
                    b.constant(name + "_w", {16, 8, 3, 3},
                               graph::random_uniform(16 * 8 * 9, -0.3f, 0.3f, seed), Layout::oihw),
                    b.constant(name + "_b", {16}, graph::random_uniform(16, -0.2f, 0.2f, seed + 1)),
                    attrs);
  };
  graph::Pool2d pool;
  pool.kind = graph::PoolKind::max;
  pool.kernel_h = pool.kernel_w = pool.stride_h = pool.stride_w = 2;
  b.output(b.op("maxpool", pool, {b.relu("relu", conv("conv_relu", 1))}));
  b.output(b.op("gmp", graph::GlobalPool{graph::PoolKind::max}, {b.clip("clip", conv("conv_clip", 3), 0.0f, 6.0f)}));
  b.output(b.op("hsig", graph::HardSigmoid{0.2f, 0.5f}, {conv("conv_hsig", 5)}));
  b.output(b.op("hswish", graph::HardSwish{}, {conv("conv_hswish", 7)}));
  // ReduceMax over a row, ReduceMin over two axes, the elementwise Max of ONNX (a Binary).
  b.output(b.op("reduce_max", graph::Reduce{{3}, true, graph::ReduceKind::max}, {x}));
  b.output(b.op("reduce_min", graph::Reduce{{1, 2}, false, graph::ReduceKind::min}, {x}));
  b.output(b.op("max", graph::Binary{graph::BinaryOp::max}, {x, b.constant("zero", {1}, {0.0f})}));
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);

  graph::Tensor in{{1, 8, 10, 10}, Layout::nchw, graph::random_uniform(800, -1.0f, 1.0f, 9)};
  in.data[3 * 100 + 4 * 10 + 5] = NAN;   // channel 3, row 4, column 5
  in.data[6 * 100 + 1 * 10 + 8] = -NAN;  // channel 6, row 1, column 8
  const std::vector<graph::Tensor> want = graph::run_reference(input, {in});
  for (const graph::Tensor& w : want) {
    size_t nans = 0;
    for (float v : w.data) nans += std::isnan(v);
    ASSERT_GT(nans, 0u) << "the reference must propagate the NaN";
  }
  check_outputs_on_every_target(optimized, {in}, want, [&](size_t i, const graph::Tensor& got) {
    size_t got_nans = 0, want_nans = 0;
    for (size_t j = 0; j < got.data.size(); ++j) {
      got_nans += std::isnan(got.data[j]);
      want_nans += std::isnan(want[i].data[j]);
    }
    EXPECT_EQ(got_nans, want_nans) << "NaN swallowed or made up";
    EXPECT_LE(graph::worst_error_ratio(got.data, want[i].data, 1e-4, 1e-5), 1.0)
        << "numbers that differ from the reference";
  });
}

}  // namespace
}  // namespace kiln
