// Whole CNNs from ONNX files (written by scripts/make_models.py in the form torch.onnx writes
// them) through Kiln, against onnxruntime's output on the same file and input
// (scripts/ort_reference.py). Prints per model the node counts before and after the passes,
// the kernel count and the planned arena against the sum of all intermediate tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>

#include "graph/memory_plan.h"
#include "codegen/kernel_library.h"
#include "graph/onnx/onnx_import.h"
#include "graph/passes/pipeline.h"
#include "graph/reference.h"
#include "kiln/runtime.h"
#include "runtime/kernels.h"
#include "test_generator.h"

namespace {

using namespace kiln;

std::vector<float> read_floats(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) throw std::runtime_error("cannot open " + path);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

// A zoo model on one CPU target (an index into runtime::cpu_targets()), or on a GPU backend
// (testing_util::kOpenClTarget: the GPU schedules, run on the CPU by pocl; kCudaTarget: the CUDA
// kernels, where a GPU is usable).
struct ModelParam {
  std::string name;
  int target;
};

void PrintTo(const ModelParam& p, std::ostream* os) {
  *os << p.name << " on " << testing_util::target_label(p.target);
}

class ModelTest : public testing::TestWithParam<ModelParam> {};

// Runs `imported` (optimized here) on the input of the reference files `prefix`.input.bin and
// compares the output with `prefix`.output.bin; prints one line on the model. `half_kernels`:
// set to how many of its kernels call their half-width kernel (Model::half_width).
void expect_matches_reference(const graph::Graph& imported, const std::string& prefix,
                              const std::string& label, int target,
                              HalfWidth half_width = HalfWidth::where_faster,
                              int* half_kernels = nullptr) {
  const graph::Graph optimized = graph::run_passes(imported);
  ModelOptions o;
  o.half_width = half_width;
  o.generate_kernels = codegen::kernel_generator({{}, KILN_TEST_CACHE_DIR, nullptr});
  testing_util::set_target(o, target);
  if (target < 0) {
    const std::string why = backend_unusable_reason(o.backend);
    if (!why.empty()) GTEST_SKIP() << testing_util::gpu_skip_message(o.backend, why);
  }
  Model m(optimized, o);
  if (half_kernels) {
    *half_kernels = 0;
    for (size_t k = 0; k < m.kernels().size(); ++k) *half_kernels += m.half_width(k);
  }

  const graph::Value& in = imported.value(imported.inputs.at(0));
  const std::vector<float> x = read_floats(prefix + ".input.bin");
  const std::vector<float> want = read_floats(prefix + ".output.bin");
  ASSERT_EQ(static_cast<int64_t>(x.size()), graph::num_elements(in.shape));
  const Status s = m.run({x.data()});
  ASSERT_TRUE(s.is_ok()) << s.message();
  const TensorView out = m.output(0);
  graph::Tensor got{out.shape, out.layout,
                    std::vector<float>(out.data, out.data + graph::num_elements(out.shape))};
  if (got.layout == graph::Layout::nhwc) got = graph::to_layout(got, graph::Layout::nchw);
  ASSERT_EQ(got.data.size(), want.size());
  const double ratio = graph::worst_error_ratio(got.data, want, 1e-3, 1e-4);
  EXPECT_LE(ratio, 1.0) << "max abs error " << graph::max_abs_diff(got.data, want);

  std::printf(
      "%s on %s: %zu nodes imported, %zu after passes, %zu kernels; arena %lld bytes vs "
      "%lld bytes of intermediate tensors; max abs error vs onnxruntime %.3g\n",
      label.c_str(), testing_util::target_label(target).c_str(), imported.num_nodes(),
      optimized.num_nodes(), m.kernels().size(), static_cast<long long>(m.arena_plan().arena_bytes),
      static_cast<long long>(graph::naive_activation_bytes(imported)),
      graph::max_abs_diff(got.data, want));
}

TEST_P(ModelTest, MatchesOnnxRuntime) {
  const std::string dir = KILN_MODELS_DIR;
  const std::string name = GetParam().name;
  const int target = GetParam().target;
  if (target >= 0 && !testing_util::runs_target(target))
    GTEST_SKIP() << testing_util::target_skip_reason(target);
  const std::string model = dir + "/" + name + ".onnx";
  ASSERT_TRUE(std::filesystem::exists(model)) << model << " (run scripts/make_models.py)";
  expect_matches_reference(graph::onnx::import_model(model), dir + "/" + name, name, target);
}

// The half-width kernels (GeneratedKernel::half_fn: 8-lane vectors for convolutions of 24, 40,
// ... channels), which only CPUs that split 512-bit multiply-adds run by default, on any
// AVX-512 CPU: inception_tiny (six distinct ones, two of them Winograd) and MobileNetV2 (its
// 24-channel projections), against onnxruntime.
TEST(HalfWidthKernels, MatchOnnxRuntimeOnAvx512) {
  const std::string dir = KILN_MODELS_DIR;
  int target = -1;
  for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()) && target < 0; ++t)
    if (runtime::cpu_targets()[t].find("avx512") != std::string::npos) target = t;
  if (target < 0) GTEST_SKIP() << "this build has no AVX-512 target";
  if (!testing_util::runs_target(target)) GTEST_SKIP() << testing_util::target_skip_reason(target);
  for (const std::string name : {"inception_tiny", "mobilenetv2"}) {
    const std::string model = dir + "/" + name + ".onnx";
    ASSERT_TRUE(std::filesystem::exists(model)) << model << " (run scripts/make_models.py)";
    int half = 0;
    expect_matches_reference(graph::onnx::import_model(model), dir + "/" + name,
                             name + " (half-width kernels)", target, HalfWidth::always, &half);
    EXPECT_GE(half, 2) << name;
  }
}

// preact_se exported with a dynamic batch (input [batch_size, 3, 224, 224], the head's
// x.view(x.size(0), -1) as Shape -> ... -> Reshape) and bound to batch 1 and to batch 4, as
// `kiln --input-shape` binds it, against onnxruntime at the same batch, on the best CPU target.
TEST(DynamicBatch, PreactSeMatchesOnnxRuntimeAtBatch1And4) {
  const std::string dir = KILN_MODELS_DIR;
  const std::string model = dir + "/preact_se_dynamic.onnx";
  ASSERT_TRUE(std::filesystem::exists(model)) << model << " (run scripts/model_refs.sh)";
  for (int64_t batch : {1, 4}) {
    graph::onnx::ImportOptions options;
    options.input_shapes = {{"input", {batch, 3, 224, 224}}};
    const graph::Graph imported = graph::onnx::import_model(model, options);
    ASSERT_EQ(imported.value(imported.outputs.at(0)).shape, (graph::Shape{batch, 1000}));
    const std::string b = "b" + std::to_string(batch);
    expect_matches_reference(imported, dir + "/preact_se_dynamic_" + b, "preact_se_dynamic " + b,
                             runtime::best_cpu_target());
  }
}

// bf16 (--precision bf16) against onnxruntime's float32 output, on the best CPU target (with AMX
// where the CPU has it): the largest error relative to the largest logit, as the bf16 issue
// measures OpenVINO's default precision, within 1e-2. Four families: plain residual, inverted
// residual (its many f32 depthwise layers between bf16 ones), pre-activation with SiLU and SE,
// and ConvNeXt's MLP convolutions with GELU.
class Bf16ModelTest : public testing::TestWithParam<std::string> {};

TEST_P(Bf16ModelTest, WithinOnePercentOfOnnxRuntime) {
  const std::string dir = KILN_MODELS_DIR;
  const std::string prefix = dir + "/" + GetParam();
  const graph::Graph imported = graph::onnx::import_model(prefix + ".onnx");
  graph::PipelineOptions passes;
  passes.precision = graph::Precision::bf16;
  const graph::Graph optimized = graph::run_passes(imported, passes);
  ModelOptions o;
  o.generate_kernels = codegen::kernel_generator({{}, KILN_TEST_CACHE_DIR, nullptr});
  Model m(optimized, o);
  const std::vector<float> x = read_floats(prefix + ".input.bin");
  const std::vector<float> want = read_floats(prefix + ".output.bin");
  ASSERT_TRUE(m.run({x.data()}).is_ok());
  const TensorView out = m.output(0);
  ASSERT_EQ(static_cast<size_t>(graph::num_elements(out.shape)), want.size());
  double largest = 0;
  for (float v : want) largest = std::max<double>(largest, std::fabs(v));
  const std::vector<float> got(out.data, out.data + want.size());
  const double error = graph::max_abs_diff(got, want) / largest;
  std::printf("%s in bf16: max abs error / max |logit| vs onnxruntime f32 = %.3g\n",
              GetParam().c_str(), error);
  EXPECT_LE(error, 1e-2);
}

INSTANTIATE_TEST_SUITE_P(Zoo, Bf16ModelTest,
                         testing::Values("resnet18", "mobilenetv2", "preact_se", "convnext_tiny2"),
                         [](const testing::TestParamInfo<std::string>& i) { return i.param; });

std::vector<ModelParam> model_params() {
  std::vector<ModelParam> out;
  for (const char* name : {"resnet18", "resnet50", "mobilenetv2", "squeezenet1_1", "preact_se",
                           "convnext_tiny2", "resnext_tiny", "inception_tiny", "seg_tiny",
                           "preact_se_b4"})
    for (int t = testing_util::kCudaTarget; t < static_cast<int>(runtime::cpu_targets().size());
         ++t)
      out.push_back({name, t});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Zoo, ModelTest, testing::ValuesIn(model_params()),
                         [](const testing::TestParamInfo<ModelParam>& i) {
                           std::string t = testing_util::target_label(i.param.target);
                           for (char& c : t)
                             if (c == '-') c = '_';
                           return i.param.name + "_" + t;
                         });

}  // namespace
