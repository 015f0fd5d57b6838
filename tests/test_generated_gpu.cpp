// The GPU schedules of the generated kernels (the cases are in generated_cases.h): each run
// through Halide's OpenCL backend (on the CPU, through pocl) against the reference, a whole model
// on the OpenCL backend, and every kind of kernel's CUDA object, whose PTX is assembled for sm_90.
// Where a GPU and its CUDA driver are usable, the same kernels and model also run through CUDA
// (the *Cuda tests; elsewhere they are skipped and say why).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <set>
#include <string>

#include "codegen/kernel_library.h"
#include "codegen/kernel_pipeline.h"
#include "generated_cases.h"
#include "logic_cases.h"
#include "graph/builder.h"
#include "graph/example.h"
#include "graph/passes/passes.h"
#include "graph/passes/pipeline.h"
#include "graph/reference.h"
#include "kiln/runtime.h"
#include "ptx_util.h"
#include "runtime/conv_weights.h"
#include "runtime/kernels.h"
#include "test_generator.h"

namespace kiln {
namespace {

using namespace testing_util;

std::string test_cache_dir() { return KILN_TEST_CACHE_DIR; }

// The JIT target that runs GPU schedules through `gpu`: the host with OpenCL (pocl runs it on the
// CPU), or the CUDA target the CUDA objects are compiled for.
Halide::Target gpu_jit_target(Backend gpu) {
  return gpu == Backend::cuda ? Halide::Target(runtime::cuda_target())
                              : Halide::get_host_target().with_feature(Halide::Target::OpenCL);
}

// Skips the test (return from it after this when IsSkipped()) where `gpu` cannot run here.
void skip_unless_usable(Backend gpu) {
  const std::string why = backend_unusable_reason(gpu);
  if (!why.empty()) GTEST_SKIP() << gpu_skip_message(gpu, why);
}

// Runs the single generated kernel of `g` with its GPU schedule through `gpu` (OpenCL: pocl runs
// it on the CPU) and compares with the reference. The output is poisoned first. The inputs are
// `given`, or random in [lo, hi).
void expect_gpu_matches_reference(Backend gpu, const graph::Graph& g, float lo, float hi,
                                  double rtol, double atol,
                                  const std::vector<graph::Tensor>* given = nullptr) {
  ModelOptions lower;
  lower.lower_only = true;
  const graph::KernelSpec spec = Model(g, lower).kernels().at(0);
  const Halide::Target target = gpu_jit_target(gpu);
  codegen::KernelPipeline k = codegen::build_kernel_pipeline(spec, target);

  std::vector<graph::Tensor> ins;
  for (graph::ValueId v : g.inputs) {
    const graph::Value& val = g.value(v);
    ins.push_back({val.shape, val.layout,
                   graph::random_uniform(graph::num_elements(val.shape), lo, hi, 40 + v.index)});
  }
  if (given) ins = *given;
  const std::vector<graph::TensorDesc> args = graph::generated_kernel_arguments(spec);
  std::vector<Halide::Buffer<float>> bufs;
  for (size_t i = 0; i < k.inputs.size(); ++i) {
    const graph::Value& val = g.value(args[i].value);
    const std::vector<float>* data = val.data.get();
    for (size_t j = 0; j < g.inputs.size(); ++j)
      if (g.inputs[j] == args[i].value) data = &ins[j].data;
    std::vector<int> sizes(args[i].shape.rbegin(), args[i].shape.rend());
    std::vector<float> widened;  // narrow groups' weights, as the runtime lays them out
    const auto* conv = std::get_if<graph::ConvKernelSpec>(&spec);
    const int merge = conv && i == 1 && !conv->depthwise
                          ? runtime::grouped_conv_merge(conv->groups, conv->output.shape[3])
                          : 1;
    if (merge > 1) {
      const graph::Shape& w = args[i].shape;
      const auto wide = runtime::widen_grouped_conv_weights(data->data(), w[0], w[1], w[2], w[3],
                                                            conv->groups, merge);
      widened.assign(wide.begin(), wide.end());
      data = &widened;
      sizes[1] *= merge;
    }
    bufs.emplace_back(Halide::Buffer<float>(sizes));
    std::copy(data->begin(), data->end(), bufs.back().data());
    bufs.back().set_host_dirty();  // written through a pointer: the device copy must be made
    k.inputs[i].set(bufs.back());
  }
  const graph::Shape& out_shape = args.back().shape;
  Halide::Buffer<float> out(std::vector<int>(out_shape.rbegin(), out_shape.rend()));
  out.fill(NAN);  // poisoned: an element the kernel misses stays NaN
  k.pipeline.realize(out, target);
  out.copy_to_host();
  const graph::Tensor want = graph::run_reference(g, ins)[0];
  const std::vector<float> got(out.data(), out.data() + out.number_of_elements());
  EXPECT_LE(graph::worst_error_ratio(got, want.data, rtol, atol), 1.0);
}

// The GPU schedules (gpu_blocks / gpu_threads) executed through `gpu`: through OpenCL, the same
// pipelines the CUDA objects are compiled from.
void expect_gpu_schedules_match_reference(Backend gpu) {
  skip_unless_usable(gpu);
  if (testing::Test::IsSkipped()) return;
  const auto expect_matches = [gpu](const graph::Graph& g, float lo, float hi, double rtol,
                                    double atol) {
    expect_gpu_matches_reference(gpu, g, lo, hi, rtol, atol);
  };
  for (const ChainCase& c : chain_cases()) {
    SCOPED_TRACE(c.name);
    expect_matches(chain_graph(c, 21), -6.0f, 6.0f, 1e-5, chain_case_atol(c));
  }
  for (const BinaryCase& c : binary_cases()) {
    SCOPED_TRACE(c.name);
    expect_matches(binary_graph(c), 0.5f, 3.0f, 1e-6, 1e-7);  // divisors > 0
  }
  for (const MatMulCase& c : matmul_cases()) {
    SCOPED_TRACE(c.name);
    expect_matches(matmul_graph(c), -1.0f, 1.0f, 1e-4, 1e-5);
  }
  for (const PoolCase& c : pool_cases()) {
    SCOPED_TRACE(c.name);
    expect_matches(pool_graph(c), -3.0f, 3.0f, 1e-5, 1e-6);
  }
  // The newer op cases whose GPU schedule an older case already runs here (pocl compiles each
  // kernel for seconds): the reductions share one whatever their kind, LogSoftmax is Softmax's,
  // Tile an elementwise one, each GridSample mode and TopK output runs once, and one GatherElements
  // and one ScatterElements. A reduction to a rank-0 result and Hardmax's tuple run here; the CUDA
  // PTX test below assembles the rest.
  const std::set<std::string> same_gpu_schedule = {"reduce_sum_inner",
                                                   "reduce_max_middle",
                                                   "reduce_prod_two_axes",
                                                   "reduce_l1_outer_and_inner",
                                                   "reduce_l2_rows",
                                                   "reduce_log_sum_positive",
                                                   "reduce_log_sum_exp_large",
                                                   "reduce_sum_square_leading",
                                                   "log_softmax_middle_axis",
                                                   "log_softmax_last_coerce_2d",
                                                   "hardmax_last_axis",
                                                   "tile_three_axes",
                                                   "resize_cubic_asymmetric_scales_rank3",
                                                   "resize_cubic_pytorch_half_pixel_to_one",
                                                   "resize_nearest_tf_crop_and_resize_one_row",
                                                   "grid_sample_linear_reflection_align_corners",
                                                   "grid_sample_cubic_border_align_corners_wide",
                                                   "grid_sample_nearest_reflection_one_row",
                                                   "grid_sample_cubic_zeros_align_corners_one_row",
                                                   "topk_values_inner_classifier",
                                                   "topk_smallest_indices_middle",
                                                   "topk_one_rank4",
                                                   "gather_elements_inner_rank4",
                                                   "gather_elements_outer",
                                                   "gather_elements_broadcast",
                                                   "scatter_elements_outer_none",
                                                   "scatter_elements_inner_mul",
                                                   "scatter_elements_inner_max",
                                                   "scatter_elements_outer_min",
                                                   "argmin_inner",
                                                   "argmax_last_outer",
                                                   "group_norm_nhwc_one_row_g8",
                                                   "group_norm_nchw_narrow_g2",
                                                   "group_norm_nchw_silu_affine"};
  for (const OpCase& c : op_cases()) {
    if (same_gpu_schedule.count(c.name)) continue;
    SCOPED_TRACE(c.name);
    expect_matches(op_graph(c), c.lo, c.hi, c.rtol, c.atol);
  }
  for (const ConvCase& c : conv_cases()) {
    SCOPED_TRACE(c.name);
    const graph::Graph g = conv_graph(c);
    expect_matches(graph::fuse_elementwise_chains(graph::fuse_epilogues(g)), -2.0f, 2.0f, 1e-4,
                   1e-5);
  }
  // A convolution with its pooling fused: on a GPU the whole convolution, then the pooling.
  for (const ConvPoolCase& c : conv_pool_cases()) {
    if (c.name != "pointwise_in_place_max" && c.name != "avg_include_pad_ceil") continue;
    SCOPED_TRACE(c.name);
    expect_matches(conv_pool_nhwc_graph(c), -2.0f, 2.0f, 1e-4, 1e-5);
  }
  // A convolution with its resize fused: on a GPU the whole convolution, then the resize.
  for (const ConvResizeCase& c : conv_resize_cases()) {
    if (c.name != "head_1x1_linear_x8" && c.name != "winograd_cubic_x2" &&
        c.name != "grouped_nearest_x3")
      continue;
    SCOPED_TRACE(c.name);
    expect_matches(conv_resize_nhwc_graph(c), -2.0f, 2.0f, 1e-4, 1e-5);
  }
  // A shortcut added after the post steps (Conv2d::shortcut): x + SiLU(conv(x)).
  {
    SCOPED_TRACE("shortcut");
    graph::GraphBuilder b;
    const graph::ValueId x = b.input("x", {1, 9, 11, 16}, Layout::nhwc);
    NhwcConvParts p = nhwc_conv_parts(b, 3, 16, 16, 1, 1, 1, 91);
    p.attrs.post = {graph::ChainStep{graph::ChainStepKind::silu}};
    p.attrs.shortcut = true;
    b.output(b.op("conv", p.attrs, {x, p.w, p.bias, x}));
    expect_matches(b.finish(), -2.0f, 2.0f, 1e-4, 1e-5);
  }
  // An average pooling before its 1x1 convolution (graph::pools_before_conv).
  {
    SCOPED_TRACE("pooled_first");
    const graph::Pool2d avg2x2{graph::PoolKind::avg, 2, 2, 2, 2, 0, 0, 0, 0, 1, 1, false, false};
    const ConvPoolCase c{"pooled_first", 1, 14, 18, 24, 40, 1, 1, 0, 1, false, false, avg2x2};
    const graph::Graph g = conv_pool_nhwc_graph(c, /*relu=*/false);
    ASSERT_TRUE(graph::pools_before_conv(std::get<graph::ConvKernelSpec>(lowered_kernels(g)[0])));
    expect_matches(g, -2.0f, 2.0f, 1e-4, 1e-5);
  }
  // Poolings of the input before a 1x1 convolution (Conv2d::pool_first).
  for (const PoolConvCase& c : pool_conv_cases()) {
    if (!c.fused || (c.name != "inception_avg_3x3" && c.name != "resnet_d_avg_2x2_s2_ceil"))
      continue;
    SCOPED_TRACE(c.name);
    const graph::Graph g = pool_conv_nhwc_graph(c);
    ASSERT_TRUE(graph::pools_before_conv(std::get<graph::ConvKernelSpec>(lowered_kernels(g)[0])));
    expect_matches(g, -2.0f, 2.0f, 1e-4, 1e-5);
  }
  // A depthwise convolution with its expansion (Conv2d::expand): on a GPU the expansion first.
  for (const ExpandCase& c : expand_cases()) {
    if (c.name != "batch2_5x5_stride2_partial_vectors") continue;
    SCOPED_TRACE(c.name);
    const graph::Graph fused = expand_fused_graph(expand_graph(c));
    ASSERT_EQ(fused.num_nodes(), 1u);
    expect_matches(fused, -2.0f, 2.0f, 1e-4, 1e-5);
  }
}

TEST(GeneratedKernels, GpuScheduleRunsThroughOpenCl) {
  expect_gpu_schedules_match_reference(Backend::opencl);
}
TEST(GeneratedKernels, GpuScheduleRunsThroughCuda) {
  expect_gpu_schedules_match_reference(Backend::cuda);
}

// Rounding, comparisons, logic ops, Pow and Where (logic_cases.h, with their drawn inputs:
// halves, equal elements, booleans) and a convolution with Greater and Not in its epilogue,
// through the GPU schedules on `gpu`. A subset: the other cases share these kernels' schedule.
void expect_logic_kernels_match_reference(Backend gpu) {
  skip_unless_usable(gpu);
  if (testing::Test::IsSkipped()) return;
  const std::set<std::string> run = {"round_halves_negative", "compare_constant_each_kind",
                                     "equal_same_shape",      "greater_both_broadcast",
                                     "xor_scalar_operand",    "pow_integer_exponents",
                                     "where_broadcast_all"};
  for (const LogicCase& c : logic_cases()) {
    if (!run.count(c.name)) continue;
    SCOPED_TRACE(c.name);
    const graph::Graph g = logic_graph(c);
    const std::vector<graph::Tensor> ins = logic_inputs(c, g, 3);
    expect_gpu_matches_reference(gpu, g, 0.0f, 0.0f, c.name.rfind("pow", 0) == 0 ? 1e-5 : 0.0, 0.0,
                                 &ins);
  }
  const graph::Graph conv = conv_compare_graph(true);
  expect_gpu_matches_reference(gpu, graph::fuse_elementwise_chains(graph::fuse_epilogues(conv)),
                               -1.0f, 1.0f, 0.0, 0.0);
}

TEST(GeneratedKernels, LogicKernelsRunThroughOpenCl) {
  expect_logic_kernels_match_reference(Backend::opencl);
}
TEST(GeneratedKernels, LogicKernelsRunThroughCuda) {
  expect_logic_kernels_match_reference(Backend::cuda);
}

// The CUDA objects of generated kernels, one of each kind (chain, binary, MatMul, pooling, the
// layout transform, Gemm, a batched MatMul, Concat, Softmax, reductions (to a row, to a scalar,
// Hardmax, ArgMax), Tile, LayerNorm, GroupNorm, Resize (linear, cubic cropped), dense
// convolutions with and without post steps or a residual, depthwise (one with its expansion)
// and grouped ones): their PTX
// assembles for the H200 (sm_90).
TEST(GeneratedKernels, CudaObjectPtxAssemblesForSm90) {
  if (!KILN_TESTS_NEED_PTXAS && !ptx_util::have_ptxas())
    GTEST_SKIP() << "this build compiles no CUDA kernels (KILN_BUILD_CUDA=OFF) and found no ptxas";
  ASSERT_TRUE(ptx_util::have_ptxas()) << "ptxas not found: run scripts/setup.sh";
  ModelOptions lower;
  lower.lower_only = true;
  std::vector<graph::KernelSpec> specs =
      Model(chain_graph({"cuda", {1, 14, 14, 96}, Layout::nhwc, kEveryStep}, 8), lower).kernels();
  for (const graph::Graph& g : {binary_graph(binary_cases()[1]), matmul_graph(matmul_cases()[0]),
                                pool_graph(pool_cases()[0]),
                                conv_pool_nhwc_graph(conv_pool_cases()[2]),  // conv + avg pool
                                expand_fused_graph(expand_graph(expand_cases()[1]))})  // expand + dw
    specs.push_back(Model(g, lower).kernels().at(0));
  const std::vector<OpCase> ops = op_cases();
  for (const char* name :
       {"gemm_fc_transposed_b_bias", "matmul_batched_broadcast", "concat_channels_3",
        "softmax_last_axis", "reduce_mean_last_keepdims", "layer_norm_last_axis_c48",
        "group_norm_nhwc_g32_c64", "resize_linear_half_pixel_segmentation_x4",
        "reduce_log_sum_exp_large", "reduce_min_all_to_scalar", "hardmax_coerce_2d",
        "tile_three_axes", "resize_cubic_tf_crop_and_resize_exclude_outside",
        "argmin_last_rank4_keepdims"})
    for (const OpCase& c : ops)
      if (c.name == name) specs.push_back(Model(op_graph(c), lower).kernels().at(0));
  for (const LogicCase& c : logic_cases())  // a comparison, Pow and Where
    if (c.name == "less_broadcast_row" || c.name == "pow_positive_broadcast" ||
        c.name == "where_broadcast_all")
      specs.push_back(Model(logic_graph(c), lower).kernels().at(0));
  for (size_t c : {0, 4, 7, 10}) {  // dense + SiLU, dense + residual, depthwise, grouped
    const graph::Graph conv = conv_graph(conv_cases()[c]);
    specs.push_back(
        Model(graph::fuse_elementwise_chains(graph::fuse_epilogues(conv)), lower).kernels().at(0));
  }
  // The reference example: the layout transform and a conv with only an activation.
  const std::vector<graph::KernelSpec> example =
      Model(graph::run_passes(graph::reference_example()), lower).kernels();
  specs.insert(specs.end(), example.begin(), example.end());
  const std::filesystem::path dir = std::filesystem::path(KILN_TEST_CACHE_DIR) / "cuda_objects";
  std::filesystem::create_directories(dir);
  const auto archives = codegen::write_kernel_archives(specs, {KILN_CUDA_TARGET}, "cuda_test", dir);
  ASSERT_EQ(archives.size(), specs.size());
  for (size_t k = 0; k < archives.size(); ++k) {
    SCOPED_TRACE(graph::kernel_name(specs[k]));
    const std::vector<std::string> modules = ptx_util::extract_ptx(archives[k].string());
    ASSERT_FALSE(modules.empty()) << "no PTX in " << archives[k];
    for (size_t i = 0; i < modules.size(); ++i)
      EXPECT_EQ(
          ptx_util::assemble_sm90(
              modules[i], (dir / ("k" + std::to_string(k) + "_" + std::to_string(i))).string()),
          "");
  }
}

// A whole model on GPU backend `gpu` (OpenCL: the GPU schedules through pocl on the CPU): the
// layout transform, convs with ReLU, one with a BatchNorm + ReLU prologue, a residual branch,
// global pooling, Flatten, Gemm, a MatMul by a vector (its matrix form between Reshapes, which are
// device copies where views are off) and a Sigmoid, every one a GPU kernel. Outputs poisoned;
// compared with the unfused reference.
void expect_whole_model_matches_reference(Backend gpu) {
  skip_unless_usable(gpu);
  if (testing::Test::IsSkipped()) return;
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {2, 5, 9, 11});
  auto conv = [&](const std::string& name, graph::ValueId in, int64_t ci, int64_t co, int k,
                  uint64_t seed) {
    graph::Conv2d attrs;
    attrs.pad_top = attrs.pad_left = attrs.pad_bottom = attrs.pad_right = k / 2;
    return b.conv2d(name, in,
                    b.constant(name + "_w", {co, ci, k, k},
                               graph::random_uniform(co * ci * k * k, -0.4f, 0.4f, seed),
                               Layout::oihw),
                    b.constant(name + "_b", {co}, graph::random_uniform(co, -0.2f, 0.2f, seed + 1)),
                    attrs);
  };
  const graph::ValueId c1 = b.relu("relu1", conv("conv1", x, 5, 24, 3, 1));
  // A pre-activation: c1 has two readers, so the BN cannot fold; it is conv2's prologue.
  auto vec = [&](const std::string& name, float lo, float hi, uint64_t seed) {
    return b.constant(name, {24}, graph::random_uniform(24, lo, hi, seed));
  };
  const graph::ValueId act = b.relu("bn_relu", b.batch_norm("bn", c1, vec("g", 0.5f, 1.5f, 11),
                                                         vec("be", 0.2f, 0.8f, 12), vec("m", -0.3f, 0.3f, 13),
                                                         vec("v", 0.5f, 2.0f, 14)));
  const graph::ValueId c2 = conv("conv2", act, 24, 24, 3, 3);
  const graph::ValueId sum = b.relu("relu2", b.op("add", graph::Binary{graph::BinaryOp::add}, {c2, c1}));
  // A max pooling of conv2's output alone: fused into conv2's kernel (fuse_conv_pooling).
  const graph::ValueId max_pooled = b.op(
      "maxpool", graph::Pool2d{graph::PoolKind::max, 2, 2, 2, 2, 0, 0, 1, 1, 1, 1, false, false}, {sum});
  // A squeeze-and-excitation scale of the pooled tensor, per image, folded into the weights of
  // the 1x1 convolution that alone reads it (Conv2d::input_scale).
  const graph::ValueId excite = b.op(
      "excite", graph::Sigmoid{},
      {conv("se_fc", b.op("se_pool", graph::GlobalPool{graph::PoolKind::avg}, {max_pooled}), 24, 24, 1, 21)});
  const graph::ValueId projected = conv(
      "project", b.op("se_scale", graph::Binary{graph::BinaryOp::mul}, {max_pooled, excite}), 24, 24, 1, 23);
  const graph::ValueId pooled = b.op("gap", graph::GlobalPool{graph::PoolKind::avg}, {projected});
  const graph::ValueId flat = b.op("flatten", graph::Reshape{{2, 24}}, {pooled});
  const graph::ValueId fc = b.op("fc", graph::Gemm{false, true, 1.0f, 1.0f},
                                 {flat, b.constant("fc_w", {10, 24}, graph::random_uniform(240, -0.3f, 0.3f, 5)),
                                  b.constant("fc_b", {10}, graph::random_uniform(10, -0.1f, 0.1f, 6))});
  const graph::ValueId dot = b.op("dot", graph::MatMul{},
                                  {fc, b.constant("v", {10}, graph::random_uniform(10, -1.0f, 1.0f, 7))});
  b.output(b.op("sigmoid", graph::ElementwiseChain{{{ChainStepKind::sigmoid, 0, 0}}}, {dot}));
  const graph::Graph input = b.finish();
  const graph::Graph optimized = graph::run_passes(input);

  ModelOptions o;
  o.backend = gpu;
  o.generate_kernels = codegen::kernel_generator({{}, test_cache_dir(), nullptr});
  const auto m = std::make_unique<Model>(optimized, o);
  ASSERT_EQ(m->backend(), gpu);
  EXPECT_GE(m->kernels().size(), 8u);
  size_t prologues = 0, pooled_convs = 0, scaled_convs = 0;
  for (const graph::KernelSpec& k : m->kernels())
    if (const auto* c = std::get_if<graph::ConvKernelSpec>(&k)) {
      prologues += !c->pre.empty();
      pooled_convs += c->pool.has_value();
      scaled_convs += c->input_scale.has_value();
    }
  EXPECT_EQ(scaled_convs, 1u) << "the projection scales its weights per image";
  EXPECT_EQ(prologues, 1u) << "conv2 reads relu1's output through the BN + ReLU";
  EXPECT_EQ(pooled_convs, 1u) << "conv2's kernel pools its output";
  for (uint64_t seed : {1u, 2u}) {
    const graph::Tensor in{{2, 5, 9, 11}, Layout::nchw, graph::random_uniform(990, -1.0f, 1.0f, seed)};
    const size_t nout = graph::num_elements(m->output(0).shape);
    float* out = const_cast<float*>(m->output(0).data);
    std::fill(out, out + nout, NAN);
    const Status s = m->run(std::vector<graph::Tensor>{in});
    ASSERT_TRUE(s) << s.message();
    const graph::Tensor want = graph::run_reference(input, {in})[0];
    const std::vector<float> got(m->output(0).data, m->output(0).data + nout);
    EXPECT_LE(graph::worst_error_ratio(got, want.data, 1e-4, 1e-5), 1.0)
        << "seed " << seed << ", max abs error " << graph::max_abs_diff(got, want.data);
  }
}

TEST(GeneratedKernels, WholeModelRunsOnTheOpenClBackend) {
  expect_whole_model_matches_reference(Backend::opencl);
}
TEST(GeneratedKernels, WholeModelRunsOnTheCudaBackend) {
  expect_whole_model_matches_reference(Backend::cuda);
}

}  // namespace
}  // namespace kiln
