// The whole reference example (NCHW in) through the passes and the runtime, against the
// unfused graph run by the reference interpreter.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "codegen/kernel_library.h"
#include "codegen/kernel_pipeline.h"
#include "graph/builder.h"
#include "graph/example.h"
#include "graph/passes/pipeline.h"
#include "graph/reference.h"
#include "graph/serialize.h"
#include "graph_test_util.h"
#include "kernels.h"
#include "kiln/model_api.h"
#include "kiln/runtime.h"
#include "test_generator.h"

namespace {

using namespace kiln;

graph::Tensor random_input(const graph::Graph& g, uint64_t seed) {
  const graph::Value& v = g.value(g.inputs[0]);
  return {v.shape, v.layout, graph::random_uniform(graph::num_elements(v.shape), -1.0f, 1.0f, seed)};
}

graph::Tensor output_as(const Model& m, graph::Layout layout) {
  const TensorView out = m.output(0);
  graph::Tensor t{out.shape, out.layout,
                  std::vector<float>(out.data, out.data + graph::num_elements(out.shape))};
  return graph::to_layout(t, layout);
}

struct E2EParam {
  graph::ExampleShape shape;
  Schedule schedule;
  int target;
};

void PrintTo(const E2EParam& p, std::ostream* os) {
  *os << "shape n" << p.shape.n << " c" << p.shape.c << " h" << p.shape.h << " w" << p.shape.w
      << " co" << p.shape.co << ", schedule " << to_string(p.schedule) << ", cpu target " << p.target;
}

class ExampleEndToEnd : public testing::TestWithParam<E2EParam> {};

TEST_P(ExampleEndToEnd, MatchesUnfusedReference) {
  const E2EParam& p = GetParam();
  if (p.target >= 0 && !testing_util::runs_target(p.target))
    GTEST_SKIP() << testing_util::target_skip_reason(p.target);
  const graph::Graph input = graph::reference_example(p.shape, 7);
  graph::PipelineOptions opts;
  opts.verify_each = true;
  const graph::Graph optimized = graph::run_passes(input, opts);
  // Layout transform + fused conv; an input of at most 4 channels is read NCHW by the conv.
  ASSERT_EQ(optimized.num_nodes(), p.shape.c <= 4 ? 1u : 2u) << graph::dump(optimized);

  ModelOptions mo;
  mo.schedule = p.schedule;
  mo.cpu_target = p.target;
  mo.generate_kernels = testing_util::test_generator(p.target < 0);
  Model model(optimized, mo);
  const graph::Tensor x = random_input(input, 99);
  const graph::Tensor want = graph::run_reference(input, {x})[0];

  // Poison the arena's output so that an unwritten element cannot pass.
  float* out = const_cast<float*>(model.output(0).data);
  std::fill(out, out + want.data.size(), NAN);
  const Status s = model.run({x});
  ASSERT_TRUE(s.is_ok()) << s.message();
  const graph::Tensor got = output_as(model, want.layout);
  EXPECT_LE(graph::worst_error_ratio(got.data, want.data, 1e-4, 1e-5), 1.0)
      << "max abs error " << graph::max_abs_diff(got.data, want.data);

  // A second run on new data must not see stale state.
  const graph::Tensor x2 = random_input(input, 100);
  ASSERT_TRUE(model.run({x2}).is_ok());
  const graph::Tensor want2 = graph::run_reference(input, {x2})[0];
  EXPECT_LE(graph::worst_error_ratio(output_as(model, want2.layout).data, want2.data, 1e-4, 1e-5), 1.0);
}

std::vector<E2EParam> e2e_params() {
  std::vector<E2EParam> out;
  const graph::ExampleShape shapes[] = {
      {},                                     // the MISSION example: 1x64x56x56 -> 64
      {2, 3, 17, 23, 10, 3, 2, 1},            // odd everything, batch 2
  };
  for (const auto& s : shapes)
    for (Schedule sch : {Schedule::tuned, Schedule::naive})
      for (int t = -1; t < static_cast<int>(runtime::cpu_targets().size()); ++t)
        out.push_back({s, sch, t});
  return out;
}

INSTANTIATE_TEST_SUITE_P(Shapes, ExampleEndToEnd, testing::ValuesIn(e2e_params()),
                         [](const testing::TestParamInfo<E2EParam>& info) {
                           const auto& s = info.param.shape;
                           std::string t = info.param.target < 0 ? "dispatch" : "target" + std::to_string(info.param.target);
                           return "n" + std::to_string(s.n) + "c" + std::to_string(s.c) + "h" +
                                  std::to_string(s.h) + "w" + std::to_string(s.w) + "co" +
                                  std::to_string(s.co) + "_" + to_string(info.param.schedule) + "_" + t;
                         });

// The mission's example takes Winograd F(2x2) at stride 2 by default (the cases above); the
// direct plan MISSION.md sketches (output tiles, FMAs over input channels into register
// accumulators, the bias and ReLU as a vector max) stays a schedule it can run: the direct
// default, on every CPU target, within the same tolerance.
TEST(ExampleEndToEndDirect, DirectPlanMatchesUnfusedReference) {
  const graph::Graph input = graph::reference_example({}, 7);
  const graph::Graph optimized = graph::run_passes(input);
  for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t) {
    if (!testing_util::runs_target(t)) continue;
    SCOPED_TRACE(runtime::cpu_targets()[t]);
    codegen::CodegenOptions o;
    o.cache_dir = KILN_TEST_CACHE_DIR;
    o.schedules = [](const graph::KernelSpec& k, const std::string& target) {
      return std::holds_alternative<graph::ConvKernelSpec>(k)
                 ? codegen::schedule_for_weight_tile(k, Halide::Target(target), "", 0)
                 : std::string();
    };
    ModelOptions mo;
    mo.cpu_target = t;
    mo.generate_kernels = codegen::kernel_generator(o);
    Model model(optimized, mo);
    ASSERT_EQ(model.kernels().size(), 2u);
    EXPECT_EQ(model.winograd_tile(1), 0);  // direct
    testing_util::expect_model_matches_reference(model, input, 101, 1e-4, 1e-5);
  }
}

// Two conv branches concatenated along channels (SqueezeNet's fire module): the runtime binds
// the convs' outputs as strided views of the Concat's output and skips the Concat. The result
// must equal the unfused reference, on every CPU target.
TEST(InPlaceConcat, FireModuleMatchesReference) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {1, 16, 13, 11});
  auto conv = [&](const std::string& name, graph::ValueId in, int64_t ci, int64_t co, int k,
                  uint64_t seed) {
    const graph::ValueId w =
        b.constant(name + "_w", {co, ci, k, k},
                   graph::random_uniform(co * ci * k * k, -0.3f, 0.3f, seed), graph::Layout::oihw);
    const graph::ValueId bias =
        b.constant(name + "_b", {co}, graph::random_uniform(co, -0.2f, 0.2f, seed + 1));
    graph::Conv2d attrs;
    attrs.pad_top = attrs.pad_left = attrs.pad_bottom = attrs.pad_right = k / 2;
    return b.relu(name + "_relu", b.conv2d(name, in, w, bias, attrs));
  };
  const graph::ValueId squeeze = conv("squeeze", x, 16, 8, 1, 1);
  const graph::ValueId e1 = conv("expand1x1", squeeze, 8, 24, 1, 3);  // 24: not a vector multiple
  const graph::ValueId e3 = conv("expand3x3", squeeze, 8, 32, 3, 5);
  const graph::ValueId cat = b.op("cat", graph::Concat{1}, {e1, e3});
  b.output(conv("next", cat, 56, 16, 3, 7));
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);
  const graph::Tensor xt = random_input(input, 11);
  const graph::Tensor want = graph::run_reference(input, {xt})[0];
  for (int t = -1; t < static_cast<int>(runtime::cpu_targets().size()); ++t) {
    if (t >= 0 && !testing_util::runs_target(t)) continue;
    SCOPED_TRACE("cpu target " + std::to_string(t));
    ModelOptions mo;
    mo.cpu_target = t;
    mo.generate_kernels = testing_util::test_generator(t < 0);
    Model model(optimized, mo);
    EXPECT_EQ(model.kernels().size(), optimized.num_nodes() - 1) << "the Concat should be elided";
    float* out = const_cast<float*>(model.output(0).data);
    std::fill(out, out + want.data.size(), NAN);
    const Status s = model.run({xt});
    ASSERT_TRUE(s.is_ok()) << s.message();
    const graph::Tensor got = output_as(model, want.layout);
    EXPECT_LE(graph::worst_error_ratio(got.data, want.data, 1e-4, 1e-5), 1.0)
        << "max abs error " << graph::max_abs_diff(got.data, want.data);
  }
}

// The kernels of the compiled-model test below, as a compiled model's archive would link them.
std::shared_ptr<const GeneratedKernels> g_compiled_kernels;
const GeneratedKernel* compiled_kernel_table(std::size_t* count) {
  *count = g_compiled_kernels->kernels.size();
  return g_compiled_kernels->kernels.data();
}

// Generates `optimized`'s kernels into compiled_kernel_table's table, as a compiled model's
// archive would link them, and returns a seeded random tensor for `input`'s first input.
graph::Tensor link_kernels(const graph::Graph& input, const graph::Graph& optimized, uint64_t seed) {
  ModelOptions lower;
  lower.lower_only = true;
  std::vector<graph::KernelSpec> specs = Model(optimized, lower).kernels();
  g_compiled_kernels = testing_util::test_generator(true)(specs, {});
  const graph::Value& in = input.value(input.inputs[0]);
  return {in.shape, in.layout, graph::random_uniform(graph::num_elements(in.shape), -1.0f, 1.0f, seed)};
}

// The weights file of an optimized graph runs like the unoptimized graph in the reference
// interpreter, with outputs converted back to NCHW (kiln::CompiledModel, the engine of the
// classes `kiln compile` generates).
TEST(CompiledModel, RunsAWeightsFileWithLogicalOutputs) {
  const graph::Graph input = graph::reference_example({2, 8, 10, 10, 16});
  const graph::Graph optimized = graph::run_passes(input);
  const std::string path = graph::testing_util::unique_temp_path("compiled_model.weights");
  graph::write_graph_file(optimized, path);
  const graph::Tensor x = link_kernels(input, optimized, 5);
  const graph::Value& in = input.value(input.inputs[0]);
  const graph::Tensor want = graph::run_reference(input, {x})[0];
  for (const std::vector<int>& targets : {std::vector<int>{}, std::vector<int>{2, 1, 0}}) {
    CompiledModelOptions o;
    o.cpu_targets = targets;
    o.threads = 1;
    o.kernel_table = compiled_kernel_table;
    CompiledModel m(path, o);
    ASSERT_EQ(m.num_inputs(), 1u);
    EXPECT_EQ(m.input_shape(0), in.shape);
    EXPECT_EQ(m.output_shape(0), want.shape);  // NCHW, though the graph's output is NHWC
    m.run({x.data.data()});
    const std::vector<float> got(m.output(0), m.output(0) + m.output_size(0));
    EXPECT_LE(graph::worst_error_ratio(got, want.data, 1e-4, 1e-5), 1.0);
    EXPECT_EQ(m.backend(), "cpu");
    EXPECT_THROW(m.run({}), std::runtime_error);
  }
  CompiledModelOptions bad_target;
  bad_target.cpu_targets = {99};
  bad_target.kernel_table = compiled_kernel_table;
  EXPECT_THROW(CompiledModel(path, bad_target), graph::Error);
  // Without its kernel table, a model is refused with a message, not run.
  try {
    CompiledModel(path, {});
    ADD_FAILURE() << "a model without its kernels was accepted";
  } catch (const graph::Error& e) {
    EXPECT_NE(std::string(e.what()).find("compiled without kernels"), std::string::npos) << e.what();
  }
  std::filesystem::remove(path);
  try {
    CompiledModelOptions o;
    o.kernel_table = compiled_kernel_table;
    CompiledModel(path, o);
    ADD_FAILURE() << "a missing weights file was accepted";
  } catch (const graph::Error& e) {
    EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
  }
  g_compiled_kernels.reset();
}

// A bf16 model's weights file holds its convolution's weights as bfloat16 (half the bytes of
// the float32 file) and runs as the bf16 graph does in the reference interpreter, which rounds
// the same operands.
TEST(CompiledModel, RunsABf16WeightsFile) {
  const graph::Graph input = graph::reference_example({1, 8, 20, 20, 32});
  graph::PipelineOptions bf16;
  bf16.precision = graph::Precision::bf16;
  const graph::Graph optimized = graph::run_passes(input, bf16);
  const std::string path = graph::testing_util::unique_temp_path("compiled_bf16.weights");
  const std::string f32_path = graph::testing_util::unique_temp_path("compiled_f32.weights");
  graph::write_graph_file(optimized, path);
  graph::write_graph_file(graph::run_passes(input), f32_path);
  const int64_t weights = 3 * 3 * 8 * 32;
  // Two bytes less a weight, less the few bytes the bf16 flag adds (the node's notes).
  const int64_t saved = static_cast<int64_t>(std::filesystem::file_size(f32_path)) -
                        static_cast<int64_t>(std::filesystem::file_size(path));
  EXPECT_LE(saved, 2 * weights);
  EXPECT_GE(saved, 2 * weights - 64);
  const graph::Tensor x = link_kernels(input, optimized, 6);
  // The optimized graph's output is NHWC; the compiled model's is the input graph's NCHW.
  const graph::Tensor want = graph::to_layout(graph::run_reference(optimized, {x})[0], graph::Layout::nchw);
  CompiledModelOptions o;
  o.threads = 1;
  o.kernel_table = compiled_kernel_table;
  CompiledModel m(path, o);
  m.run({x.data.data()});
  const std::vector<float> got(m.output(0), m.output(0) + m.output_size(0));
  EXPECT_LE(graph::worst_error_ratio(got, want.data, 1e-4, 1e-5), 1.0);
  // The float32 file does not run with the bf16 kernels.
  EXPECT_THROW(CompiledModel(f32_path, o), graph::Error);
  std::filesystem::remove(path);
  std::filesystem::remove(f32_path);
  g_compiled_kernels.reset();
}

}  // namespace
