// 3-D convolutions through the whole flow: ONNX import (2-D convolutions over the depth-gathered
// input), the passes, and the generated kernels on each CPU target and on the OpenCL backend (the
// GPU schedules, run by pocl on the CPU), against the reference interpreter on the imported graph.
// Random inputs and weights, batch 2.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <memory>

#include "codegen/kernel_library.h"
#include "graph/passes/pipeline.h"
#include "graph/reference.h"
#include "kiln/runtime.h"
#include "onnx_test_models.h"
#include "runtime/kernels.h"
#include "test_generator.h"

namespace kiln {
namespace {

using onnx_test::attr_i;
using onnx_test::attr_ints;
using onnx_test::attr_s;
using onnx_test::ModelBuilder;
using onnx_test::rnd;

// Runs `imported` optimized on `target` (an index into runtime::cpu_targets(), or a GPU backend:
// testing_util::kOpenClTarget, kCudaTarget) and compares every output with the reference
// interpreter on the imported graph.
void expect_kernels_match_reference(const graph::Graph& imported, int target) {
  if (target >= 0 && !testing_util::runs_target(target))
    GTEST_SKIP() << testing_util::target_skip_reason(target);
  const graph::Graph optimized = graph::run_passes(imported);
  ModelOptions o;
  o.generate_kernels = codegen::kernel_generator({{}, KILN_TEST_CACHE_DIR, nullptr});
  testing_util::set_target(o, target);
  if (target < 0) {
    const std::string why = backend_unusable_reason(o.backend);
    if (!why.empty()) GTEST_SKIP() << testing_util::gpu_skip_message(o.backend, why);
  }
  const auto m = std::make_unique<Model>(optimized, o);
  std::vector<graph::Tensor> in;
  for (graph::ValueId v : imported.inputs) {
    const graph::Value& val = imported.value(v);
    in.push_back(
        {val.shape, val.layout,
         graph::random_uniform(graph::num_elements(val.shape), -1.0f, 1.0f, 77 + v.index)});
  }
  for (size_t k = 0; k < imported.outputs.size(); ++k) {  // poisoned: a missed element stays NaN
    float* out = const_cast<float*>(m->output(k).data);
    std::fill(out, out + graph::num_elements(m->output(k).shape), NAN);
  }
  const Status s = m->run(in);
  ASSERT_TRUE(s.is_ok()) << s.message();
  const std::vector<graph::Tensor> want = graph::run_reference(imported, in);
  for (size_t k = 0; k < want.size(); ++k) {
    const TensorView out = m->output(k);
    graph::Tensor got{out.shape, out.layout,
                      std::vector<float>(out.data, out.data + graph::num_elements(out.shape))};
    if (got.layout == graph::Layout::nhwc) got = graph::to_layout(got, graph::Layout::nchw);
    ASSERT_EQ(got.shape, want[k].shape) << "output " << k;
    EXPECT_LE(graph::worst_error_ratio(got.data, want[k].data, 1e-4, 1e-5), 1.0)
        << "output " << k << ": max abs error " << graph::max_abs_diff(got.data, want[k].data);
  }
}

// Conv3d -> BatchNormalization -> Relu -> MaxPool3d -> Conv3d (grouped, strided) ->
// GlobalAveragePool -> Flatten -> Gemm: a small video classifier, batch 2.
graph::Graph video_model() {
  ModelBuilder m(13);
  m.input("clip", {2, 3, 6, 10, 10});
  m.init("w1", {8, 3, 3, 3, 3}, rnd(648, 1, -0.3f, 0.3f));
  m.init("b1", {8}, rnd(8, 2));
  attr_ints(m.node("Conv", {"clip", "w1", "b1"}, {"c1"}, "conv1"), "pads", {1, 1, 1, 1, 1, 1});
  m.init("scale", {8}, rnd(8, 3, 0.5f, 1.5f));
  m.init("shift", {8}, rnd(8, 4));
  m.init("mean", {8}, rnd(8, 5));
  m.init("var", {8}, rnd(8, 6, 0.5f, 2.0f));
  m.node("BatchNormalization", {"c1", "scale", "shift", "mean", "var"}, {"bn"}, "bn1");
  m.node("Relu", {"bn"}, {"r1"}, "relu1");
  auto& pool = m.node("MaxPool", {"r1"}, {"p1"}, "pool1");
  attr_ints(pool, "kernel_shape", {2, 2, 2});
  attr_ints(pool, "strides", {2, 2, 2});
  m.init("w2", {16, 4, 3, 3, 3}, rnd(1728, 7, -0.3f, 0.3f));
  m.init("b2", {16}, rnd(16, 8));
  auto& conv2 = m.node("Conv", {"p1", "w2", "b2"}, {"c2"}, "conv2");
  attr_i(conv2, "group", 2);
  attr_ints(conv2, "strides", {1, 2, 2});
  attr_ints(conv2, "pads", {1, 1, 1, 1, 1, 1});
  m.node("GlobalAveragePool", {"c2"}, {"g"}, "gap");
  attr_i(m.node("Flatten", {"g"}, {"f"}, "flatten"), "axis", 1);
  m.init("fc_w", {5, 16}, rnd(80, 9, -0.5f, 0.5f));
  m.init("fc_b", {5}, rnd(5, 10));
  attr_i(m.node("Gemm", {"f", "fc_w", "fc_b"}, {"logits"}, "fc"), "transB", 1);
  m.output("logits");
  m.output("c2");  // the 3-D feature map too, so a wrong element cannot hide in the average
  return onnx_test::import(m);
}

// Branches of one input, one per kind of 3-D convolution: strided and dilated with uneven pads,
// grouped without bias, depthwise, SAME_UPPER with a depth stride, a grouped strided
// ConvTranspose with output_padding, BatchNorms of 5-D tensors that stay elementwise kernels, and
// a 3-D LpPool with ceil_mode.
graph::Graph conv3d_spread_model() {
  ModelBuilder m(18);
  m.input("x", {2, 4, 5, 6, 6});
  m.init("wa", {6, 4, 3, 2, 3}, rnd(432, 11, -0.4f, 0.4f));
  m.init("ba", {6}, rnd(6, 12));
  auto& a = m.node("Conv", {"x", "wa", "ba"}, {"ya"}, "strided_dilated");
  attr_ints(a, "strides", {2, 1, 2});
  attr_ints(a, "dilations", {1, 2, 1});
  attr_ints(a, "pads", {1, 0, 2, 0, 1, 1});
  m.init("wb", {6, 2, 2, 3, 3}, rnd(216, 13, -0.4f, 0.4f));
  auto& b = m.node("Conv", {"x", "wb"}, {"yb"}, "grouped");
  attr_i(b, "group", 2);
  attr_ints(b, "pads", {0, 1, 1, 1, 1, 1});
  m.init("wc", {4, 1, 3, 3, 3}, rnd(108, 14, -0.4f, 0.4f));
  m.init("bc", {4}, rnd(4, 15));
  auto& c = m.node("Conv", {"x", "wc", "bc"}, {"yc"}, "depthwise");
  attr_i(c, "group", 4);
  attr_ints(c, "pads", {1, 1, 1, 1, 1, 1});
  m.init("wd", {5, 4, 2, 3, 3}, rnd(360, 16, -0.4f, 0.4f));
  m.init("bd", {5}, rnd(5, 17));
  auto& d = m.node("Conv", {"x", "wd", "bd"}, {"yd"}, "same_upper");
  attr_s(d, "auto_pad", "SAME_UPPER");
  attr_ints(d, "strides", {2, 2, 1});
  m.init("we", {4, 3, 2, 3, 2}, rnd(144, 18, -0.4f, 0.4f));
  m.init("be", {6}, rnd(6, 19));
  auto& e = m.node("ConvTranspose", {"x", "we", "be"}, {"ye"}, "deconv");
  attr_i(e, "group", 2);
  attr_ints(e, "strides", {2, 2, 1});
  attr_ints(e, "pads", {0, 1, 1, 1, 0, 0});
  attr_ints(e, "output_padding", {1, 0, 0});
  // A BatchNormalization of 5-D tensors that cannot fold: of the input, and of a 3-D convolution
  // whose output is also read elsewhere (an elementwise kernel, channel axis 1 of 5).
  m.init("scale", {4}, rnd(4, 20, 0.5f, 1.5f));
  m.init("shift", {4}, rnd(4, 21));
  m.init("mean", {4}, rnd(4, 22));
  m.init("var", {4}, rnd(4, 23, 0.5f, 2.0f));
  m.node("BatchNormalization", {"x", "scale", "shift", "mean", "var"}, {"yf"}, "bn_input");
  m.node("BatchNormalization", {"yc", "scale", "shift", "mean", "var"}, {"yg"}, "bn_shared");
  // LpPool with ceil_mode (opset 18): the last windows reach past the end padding.
  auto& lp = m.node("LpPool", {"x"}, {"yh"}, "lp_ceil");
  attr_ints(lp, "kernel_shape", {2, 3, 2});
  attr_ints(lp, "strides", {2, 2, 2});
  attr_ints(lp, "pads", {0, 1, 0, 0, 0, 1});
  attr_i(lp, "p", 2);
  attr_i(lp, "ceil_mode", 1);
  for (const char* y : {"ya", "yb", "yc", "yd", "ye", "yf", "yg", "yh"}) m.output(y);
  return onnx_test::import(m);
}

// The CPU targets of the build, then the GPU backends.
std::vector<int> all_targets() {
  std::vector<int> t;
  for (size_t i = 0; i < runtime::cpu_targets().size(); ++i) t.push_back(static_cast<int>(i));
  t.push_back(testing_util::kOpenClTarget);
  t.push_back(testing_util::kCudaTarget);
  return t;
}

std::string target_name(const testing::TestParamInfo<int>& p) {
  std::string s = testing_util::target_label(p.param);
  for (char& ch : s)
    if (!std::isalnum(static_cast<unsigned char>(ch))) ch = '_';
  return s;
}

class Conv3dOnTarget : public testing::TestWithParam<int> {};

TEST_P(Conv3dOnTarget, VideoModelMatchesReference) {
  const graph::Graph g = video_model();
  // The BatchNorm folded and the ReLU fused into the first convolution's kernel.
  const graph::Graph optimized = graph::run_passes(g);  // alive through the loop
  for (const graph::Node& n : optimized.nodes())
    ASSERT_FALSE(std::holds_alternative<graph::BatchNorm>(n.op));
  expect_kernels_match_reference(g, GetParam());
}

INSTANTIATE_TEST_SUITE_P(Targets, Conv3dOnTarget, testing::ValuesIn(all_targets()), target_name);

// The spread of attributes on the best CPU target and through the GPU schedules.
TEST(Conv3dKernels, SpreadMatchesReferenceOnTheBestCpuTarget) {
  expect_kernels_match_reference(conv3d_spread_model(), runtime::best_cpu_target());
}

TEST(Conv3dKernels, SpreadMatchesReferenceOnOpenCl) {
  expect_kernels_match_reference(conv3d_spread_model(), testing_util::kOpenClTarget);
}

TEST(Conv3dKernels, SpreadMatchesReferenceOnCuda) {
  expect_kernels_match_reference(conv3d_spread_model(), testing_util::kCudaTarget);
}

}  // namespace
}  // namespace kiln
