// The generated convolution kernels against the reference interpreter: random inputs, a
// NaN-poisoned output, every shape below x every CPU schedule x every CPU target this CPU can
// run. Each kernel is generated for its spec (codegen::kernel_generator) and called through its
// entry point with buffers bound here, the way the runtime binds them.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <sstream>

#include "HalideBuffer.h"
#include "codegen/kernel_library.h"
#include "graph/builder.h"
#include "graph/reference.h"
#include "halide_errors.h"
#include "conv_weights.h"
#include "kernels.h"
#include "kiln/runtime.h"
#include "schedules/conv_params.h"
#include "test_generator.h"

namespace {

using namespace kiln;
using graph::Layout;
using HalideBuffer = Halide::Runtime::Buffer<float>;

struct ConvCase {
  const char* name;
  int64_t n, ci, h, w, co, kh, kw;
  int stride_h, stride_w, pad_top, pad_left, pad_bottom, pad_right, dil_h, dil_w;
};

const ConvCase kCases[] = {
    // The reference example's exact layer.
    {"example_64x56x56_3x3_s2", 1, 64, 56, 56, 64, 3, 3, 2, 2, 1, 1, 1, 1, 1, 1},
    {"rgb_input_7x7_s2", 1, 3, 32, 30, 24, 7, 7, 2, 2, 3, 3, 3, 3, 1, 1},
    {"co_40_not_multiple_of_16", 1, 16, 15, 17, 40, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"spatial_7x7", 1, 64, 7, 7, 96, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"pointwise_1x1_s1", 1, 32, 14, 14, 48, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1},
    {"pointwise_1x1_s2", 1, 24, 13, 13, 32, 1, 1, 2, 2, 0, 0, 0, 0, 1, 1},
    {"pad0_3x3", 1, 8, 10, 12, 20, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1},
    {"dilation_2", 1, 16, 20, 20, 32, 3, 3, 1, 1, 2, 2, 2, 2, 2, 2},
    {"batch_2", 2, 16, 12, 12, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"co_3_below_one_vector", 1, 5, 9, 9, 3, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"asymmetric_3x2_mixed_stride", 1, 8, 9, 11, 16, 3, 2, 2, 1, 0, 1, 2, 0, 1, 2},
    {"wide_row_co_128", 1, 32, 9, 60, 128, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"width_1", 1, 16, 6, 1, 32, 3, 1, 1, 1, 1, 0, 1, 0, 1, 1},
    // The CPU schedule reduces over input channels in chunks (32 for 3x3, 288 for 1x1): a
    // partial last chunk after full ones.
    {"ci_40_two_chunks_3x3", 1, 40, 14, 14, 64, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"ci_300_two_chunks_1x1", 1, 300, 7, 7, 128, 1, 1, 1, 1, 0, 0, 0, 0, 1, 1},
};

const graph::Activation kEpilogues[] = {
    {}, {0.0f, INFINITY}, {0.0f, 6.0f}};

// A one-node graph in the kernel's own layouts; its reference output is the expectation.
struct Problem {
  graph::Graph g;
  graph::Tensor input;
  graph::Tensor expected;
};

Problem make_problem(const ConvCase& c, const graph::Activation& act, uint64_t seed,
                     bool residual = false) {
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {c.n, c.h, c.w, c.ci}, Layout::nhwc);
  const int64_t wsize = c.kh * c.kw * c.ci * c.co;
  const float bound = 1.0f / std::sqrt(static_cast<float>(c.ci * c.kh * c.kw));
  const graph::ValueId w = b.constant("w", {c.kh, c.kw, c.ci, c.co},
                                      graph::random_uniform(wsize, -bound, bound, seed), Layout::hwio);
  // Bias shifted negative so ReLU and ReLU6 both clip a real share of the outputs.
  const graph::ValueId bias = b.constant("b", {c.co}, graph::random_uniform(c.co, -0.6f, 0.4f, seed + 1));
  graph::Conv2d attrs{c.stride_h, c.stride_w, c.pad_top, c.pad_left, c.pad_bottom, c.pad_right,
                      c.dil_h, c.dil_w, act};
  std::vector<graph::ValueId> ins = {x, w, bias};
  if (residual) {
    attrs.residual = true;
    const int64_t oh = (c.h + c.pad_top + c.pad_bottom - c.dil_h * (c.kh - 1) - 1) / c.stride_h + 1;
    const int64_t ow = (c.w + c.pad_left + c.pad_right - c.dil_w * (c.kw - 1) - 1) / c.stride_w + 1;
    ins.push_back(b.constant("residual", {c.n, oh, ow, c.co},
                             graph::random_uniform(c.n * oh * ow * c.co, -1.0f, 1.0f, seed + 3),
                             Layout::nhwc));
  }
  b.output(b.op("conv", attrs, ins));
  Problem p{b.finish(), {}, {}};
  // Inputs up to 8 in magnitude so that ReLU6 saturates too.
  p.input = {{c.n, c.h, c.w, c.ci}, Layout::nhwc,
             graph::random_uniform(c.n * c.h * c.w * c.ci, -8.0f, 8.0f, seed + 2)};
  p.expected = graph::run_reference(p.g, {p.input})[0];
  return p;
}

HalideBuffer wrap(const float* data, const graph::Shape& shape) {
  std::vector<int> sizes(shape.rbegin(), shape.rend());
  return HalideBuffer(const_cast<float*>(data), sizes);
}

// The problem's one convolution, lowered as the runtime lowers it, with `schedule` ("" for the
// default choice).
graph::KernelSpec conv_spec(const Problem& p, const std::string& schedule) {
  ModelOptions lower;
  lower.lower_only = true;
  graph::KernelSpec spec = Model(p.g, lower).kernels().at(0);
  std::get<graph::ConvKernelSpec>(spec).schedule = schedule;
  return spec;
}

// The generated kernel of `spec` for CPU target `target` (an index into runtime::cpu_targets(),
// or -1: every target behind a dispatch wrapper). `keep` holds the loaded code.
const GeneratedKernel& generate_kernel(const graph::KernelSpec& spec, int target,
                                       std::shared_ptr<const GeneratedKernels>* keep) {
  codegen::CodegenOptions o;
  o.cache_dir = KILN_TEST_CACHE_DIR;
  if (target < 0) o.targets = runtime::cpu_targets();
  KernelRequest request;
  if (target >= 0) request.cpu_target = runtime::cpu_targets()[static_cast<size_t>(target)];
  *keep = codegen::kernel_generator(o)({spec}, request);
  return (*keep)->kernels.at(0);
}

GeneratedKernelFn generate(const graph::KernelSpec& spec, int target,
                           std::shared_ptr<const GeneratedKernels>* keep) {
  return generate_kernel(spec, target, keep).fn;
}

// Runs the problem's kernel with `schedule` on `target` and returns the output; the output
// starts as NaN everywhere. The weights are bound as the runtime binds them: Winograd-transformed
// or blocked by output channels where the kernel reads them so.
std::vector<float> run_kernel(const Problem& p, const std::string& schedule, int target) {
  std::shared_ptr<const GeneratedKernels> keep;
  const graph::KernelSpec spec = conv_spec(p, schedule);
  const GeneratedKernel& kernel = generate_kernel(spec, target, &keep);
  const graph::Node& node = p.g.nodes()[0];
  const graph::Value& w = p.g.value(node.inputs[1]);
  const graph::Value& bias = p.g.value(node.inputs[2]);
  std::vector<float> out(p.expected.data.size(), NAN);
  HalideBuffer in_b = wrap(p.input.data.data(), p.input.shape);
  HalideBuffer w_b = wrap(w.data->data(), w.shape);
  const int kh = static_cast<int>(w.shape[0]), kw = static_cast<int>(w.shape[1]);
  const int ci = static_cast<int>(w.shape[2]), co = static_cast<int>(w.shape[3]);
  std::vector<float> copy;
  if (kernel.winograd_tile > 0) {
    copy = runtime::winograd_conv_weights(w.data->data(), ci, co, kernel.winograd_tile);
    const int alpha = kernel.winograd_tile + 2;
    w_b = HalideBuffer(copy.data(), {co, ci, alpha, alpha});
  } else if (runtime::blocks_conv_weights(std::get<graph::ConvKernelSpec>(spec))) {
    copy = runtime::block_conv_weights(w.data->data(), kh, kw, ci, co);
    constexpr int kB = runtime::kConvWeightBlock;
    w_b = HalideBuffer(copy.data(), {kB, ci, kw, kh, static_cast<int>(runtime::conv_weight_blocks(co))});
  }
  HalideBuffer b_b = wrap(bias.data->data(), bias.shape);
  HalideBuffer out_b = wrap(out.data(), p.expected.shape);
  std::vector<void*> args = {in_b.raw_buffer(), w_b.raw_buffer(), b_b.raw_buffer()};
  HalideBuffer res_b;
  if (node.inputs.size() == 4) {
    const graph::Value& r = p.g.value(node.inputs[3]);
    res_b = wrap(r.data->data(), r.shape);
    args.push_back(res_b.raw_buffer());
  }
  args.push_back(out_b.raw_buffer());
  runtime::begin_halide_call();
  const int rc = kernel.fn(args.data());
  EXPECT_EQ(rc, 0) << runtime::last_halide_error();
  return out;
}

const Problem& problem_for(size_t case_index, int epilogue) {
  static std::map<std::pair<size_t, int>, Problem> cache;
  auto key = std::make_pair(case_index, epilogue);
  auto it = cache.find(key);
  if (it == cache.end())
    it = cache.emplace(key, make_problem(kCases[case_index], kEpilogues[epilogue], 1000 + case_index)).first;
  return it->second;
}

void expect_close(const std::vector<float>& got, const graph::Tensor& want, double atol = 1e-5) {
  // fp32 accumulation in a different order than the double reference.
  const double ratio = graph::worst_error_ratio(got, want.data, 1e-4, atol);
  EXPECT_LE(ratio, 1.0) << "max abs error " << graph::max_abs_diff(got, want.data)
                        << " (a NaN means an output element was never written)";
}

// Each schedule family (schedules/conv_params.h) over the layer's default knobs; the wide one
// also reading its input in place.
enum class Sched { wide, deep, naive, wide_in_place };
constexpr Sched kSchedules[] = {Sched::wide, Sched::deep, Sched::naive, Sched::wide_in_place};
std::string name(Sched s) {
  switch (s) {
    case Sched::wide: return "wide";
    case Sched::deep: return "deep";
    case Sched::naive: return "naive";
    case Sched::wide_in_place: return "wide_in_place";
  }
  return "?";
}
std::string schedule_text(Sched s) {
  return s == Sched::wide_in_place ? "wide stage=in_place" : name(s);
}

// The shapes a schedule takes: stage=in_place only unpadded 1x1 windows.
bool applies(Sched s, const ConvCase& c) {
  return s != Sched::wide_in_place || (c.kh == 1 && c.kw == 1 && c.pad_top == 0 &&
                                       c.pad_left == 0 && c.pad_bottom == 0 && c.pad_right == 0);
}

struct KernelParam {
  size_t case_index;
  Sched schedule;
  int target;  // an index into runtime::cpu_targets()
};

std::string describe(const KernelParam& p);
void PrintTo(const KernelParam& p, std::ostream* os) { *os << describe(p); }

std::string param_name(const testing::TestParamInfo<KernelParam>& info) { return describe(info.param); }

std::string describe(const KernelParam& param) {
  const testing::TestParamInfo<KernelParam> info(param, 0);
  std::ostringstream s;
  s << kCases[info.param.case_index].name << "_" << name(info.param.schedule) << "_";
  std::string t = runtime::cpu_targets()[info.param.target];
  for (char& ch : t)
    if (ch == '-') ch = '_';
  s << t;
  return s.str();
}

std::vector<KernelParam> all_params() {
  std::vector<KernelParam> out;
  for (size_t i = 0; i < std::size(kCases); ++i)
    for (auto s : kSchedules)
      if (applies(s, kCases[i]))
        for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t)
          out.push_back({i, s, t});
  return out;
}

class ConvKernelTest : public testing::TestWithParam<KernelParam> {};

// Each shape with one epilogue (rotating through none / relu / relu6).
TEST_P(ConvKernelTest, MatchesReference) {
  const KernelParam& p = GetParam();
  if (!testing_util::runs_target(p.target))
    GTEST_SKIP() << testing_util::target_skip_reason(p.target);
  const int epilogue = static_cast<int>(p.case_index % 3);
  const Problem& prob = problem_for(p.case_index, epilogue);
  expect_close(run_kernel(prob, schedule_text(p.schedule), p.target), prob.expected);
}

INSTANTIATE_TEST_SUITE_P(AllShapes, ConvKernelTest, testing::ValuesIn(all_params()), param_name);

// Every epilogue on two shapes (one on the fast path, one on the scalar fallback), both tuned
// schedules, behind the dispatch wrapper of every CPU target (the best alone under ASan).
TEST(ConvKernelEpilogues, AllEpilogues) {
  for (size_t case_index : {size_t{2}, size_t{9}}) {
    for (int e = 0; e < 3; ++e) {
      const Problem& prob = problem_for(case_index, e);
      size_t clipped = 0;
      for (float v : prob.expected.data) clipped += (v == 0.0f || v == 6.0f);
      if (e > 0) EXPECT_GT(clipped, 0u) << "the epilogue is not exercised";
      for (auto s : {Sched::wide, Sched::deep}) {
        SCOPED_TRACE(std::string(kCases[case_index].name) + " epilogue " + std::to_string(e) +
                     " schedule " + name(s));
        expect_close(run_kernel(prob, schedule_text(s), testing_util::dispatch_or_best_target()), prob.expected);
      }
    }
  }
}

// The residual (ResNet's fused Add): every epilogue, fast path and scalar fallback, every
// schedule, behind the dispatch wrapper (the best target alone under ASan).
TEST(ConvKernelResidual, AllEpilogues) {
  for (size_t case_index : {size_t{0}, size_t{2}, size_t{3}, size_t{4}, size_t{9}}) {
    for (int e = 0; e < 3; ++e) {
      const Problem prob = make_problem(kCases[case_index], kEpilogues[e], 500 + case_index, true);
      for (auto s : kSchedules) {
        if (!applies(s, kCases[case_index])) continue;
        SCOPED_TRACE(std::string(kCases[case_index].name) + " epilogue " + std::to_string(e) +
                     " schedule " + name(s));
        expect_close(run_kernel(prob, schedule_text(s), testing_util::dispatch_or_best_target()), prob.expected);
      }
    }
  }
}

// A schedule that does not apply, or an unknown one, is an error at generation, never a kernel
// that reads outside the input.
TEST(ConvKernelSchedules, ScheduleThatDoesNotApplyIsAnError) {
  const size_t three_by_three = 3;  // spatial_7x7: 3x3, padding 1
  ASSERT_EQ(kCases[three_by_three].kh, 3);
  const Problem& prob = problem_for(three_by_three, 0);
  std::shared_ptr<const GeneratedKernels> keep;
  try {
    generate(conv_spec(prob, "wide stage=in_place"), runtime::best_cpu_target(), &keep);
    ADD_FAILURE() << "a 3x3 window was generated reading its input in place";
  } catch (const graph::Error& e) {
    EXPECT_NE(std::string(e.what()).find("1x1 windows"), std::string::npos) << e.what();
  }
  try {
    generate(conv_spec(prob, "fastest"), runtime::best_cpu_target(), &keep);
    ADD_FAILURE() << "an unknown schedule was accepted";
  } catch (const graph::Error& e) {
    EXPECT_NE(std::string(e.what()).find("'fastest'"), std::string::npos) << e.what();
  }
}

TEST(ConvKernelTargets, BaselineAlwaysRunsAndBestIsFirstSupported) {
  const int n = static_cast<int>(runtime::cpu_targets().size());
  ASSERT_GE(n, 3);
  EXPECT_TRUE(runtime::cpu_target_supported(n - 1)) << "the last target must be the baseline";
  const int best = runtime::best_cpu_target();
  ASSERT_GE(best, 0);
  for (int i = 0; i < best; ++i) EXPECT_FALSE(runtime::cpu_target_supported(i));
}

// A kernel is generated for its shapes: a buffer of another shape is refused by the kernel
// with an error, never read out of bounds.
TEST(ConvKernelErrors, MismatchedChannelsIsAnErrorNotACrash) {
  const ConvCase c = kCases[2];
  const Problem& prob = problem_for(2, 0);
  std::shared_ptr<const GeneratedKernels> keep;
  const GeneratedKernelFn fn = generate(conv_spec(prob, ""), runtime::best_cpu_target(), &keep);
  const graph::Value& w = prob.g.value(prob.g.nodes()[0].inputs[1]);
  const graph::Value& bias = prob.g.value(prob.g.nodes()[0].inputs[2]);
  // An input with one channel fewer than the weights expect.
  std::vector<float> in(c.n * c.h * c.w * (c.ci - 1), 1.0f);
  std::vector<float> out(prob.expected.data.size());
  HalideBuffer in_b = wrap(in.data(), {c.n, c.h, c.w, c.ci - 1});
  HalideBuffer w_b = wrap(w.data->data(), w.shape);
  HalideBuffer b_b = wrap(bias.data->data(), bias.shape);
  HalideBuffer out_b = wrap(out.data(), prob.expected.shape);
  void* args[] = {in_b.raw_buffer(), w_b.raw_buffer(), b_b.raw_buffer(), out_b.raw_buffer()};
  runtime::begin_halide_call();
  EXPECT_NE(fn(args), 0);
  EXPECT_NE(runtime::last_halide_error().find("arg0"), std::string::npos)
      << runtime::last_halide_error();
}

// Winograd (family winograd) against the reference: padding 0 and 1, outputs that are not
// multiples of either tile (tiles overhang the right and bottom edges), channel counts that are
// not multiples of a vector, batch 2, ReLU and ReLU6 epilogues and a residual; both tiles, each
// register block the layer's default, with and without a task per block of channels
// (split=1: the last block shifted onto the one before where the channels are not whole
// blocks), on every CPU target; the weights transformed by
// runtime::winograd_conv_weights as the runtime binds them.
const ConvCase kWinogradCases[] = {
    {"ci13_co20_9x8_pad0", 1, 13, 11, 10, 20, 3, 3, 1, 1, 0, 0, 0, 0, 1, 1},
    {"batch2_ci16_co24_9x13_pad1", 2, 16, 9, 13, 24, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"ci64_co96_7x7_pad1", 1, 64, 7, 7, 96, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1},
    {"ci8_co16_6x5_asymmetric_pad", 1, 8, 6, 5, 16, 3, 3, 1, 1, 1, 0, 0, 1, 1, 1},
};

TEST(ConvKernelWinograd, MatchesReferenceOnEveryTarget) {
  for (size_t i = 0; i < std::size(kWinogradCases); ++i) {
    const ConvCase& c = kWinogradCases[i];
    const Problem prob = make_problem(c, kEpilogues[1 + i % 2], 700 + i, /*residual=*/i == 1);
    for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t) {
      if (!testing_util::runs_target(t)) continue;
      for (const char* tile : {"2", "4"})
        for (const char* split : {"", " split=1"}) {
        SCOPED_TRACE(std::string(c.name) + " tile " + tile + split + " on " + runtime::cpu_targets()[t]);
        std::shared_ptr<const GeneratedKernels> keep;
        const std::string schedule = std::string("winograd tile=") + tile + split;
        EXPECT_EQ(generate_kernel(conv_spec(prob, schedule), t, &keep).winograd_tile,
                  std::stoi(tile));
        // F(4x4)'s transforms (entries up to 8, weights scaled by 1/24) round more: within
        // the model tolerance's atol (1e-4) on these outputs of up to ~10, 2-4e-5 measured.
        expect_close(run_kernel(prob, schedule, t), prob.expected, tile[0] == '4' ? 1e-4 : 1e-5);
        }
    }
  }
}

// Non-default register blocks and tasks on the best target: blocks of 5 tiles running across
// the rows of 7 tiles in tasks of 2 tile rows (the last task has one), and blocks of 3 of a
// row's 4 tiles (the last block overlaps the one before); each also with a task per block of
// channels (split=1), whole-image tasks for F(4x4).
TEST(ConvKernelWinograd, RegisterBlocksAndTasks) {
  const Problem prob = make_problem(kWinogradCases[1], kEpilogues[0], 720);
  for (const char* schedule : {"winograd tile=2 block=1x5 rows=2", "winograd tile=4 block=1x3 rows=1",
                               "winograd tile=2 block=1x5 rows=2 split=1", "winograd tile=4 block=1x3 rows=3 split=1"}) {
    SCOPED_TRACE(schedule);
    expect_close(run_kernel(prob, schedule, runtime::best_cpu_target()), prob.expected, 1e-4);
  }
}

// A Halide autoscheduler on a layer whose default is Winograd gets the direct algorithm and the
// weights as given (what the runtime binds for it: codegen::winograd_weight_tile is 0).
TEST(ConvKernelWinograd, AutoschedulerGetsTheDirectAlgorithm) {
  const ConvCase c{"ci16_co32_14x14_pad1", 1, 16, 14, 14, 32, 3, 3, 1, 1, 1, 1, 1, 1, 1, 1};
  const Problem prob = make_problem(c, kEpilogues[1], 740);
  std::shared_ptr<const GeneratedKernels> keep;
  EXPECT_EQ(generate_kernel(conv_spec(prob, ""), runtime::best_cpu_target(), &keep).winograd_tile, 2);
  EXPECT_EQ(generate_kernel(conv_spec(prob, "auto:Mullapudi2016"), runtime::best_cpu_target(), &keep)
                .winograd_tile,
            0);
  expect_close(run_kernel(prob, "auto:Mullapudi2016", runtime::best_cpu_target()), prob.expected);
}

// The runtime transforms the weights once when it binds them: a model whose kernel a schedule
// lookup sends to Winograd runs twice and matches the reference both times.
TEST(ConvKernelWinograd, ModelBindsTransformedWeights) {
  const Problem prob = make_problem(kWinogradCases[2], kEpilogues[1], 730, /*residual=*/true);
  codegen::CodegenOptions o;
  o.cache_dir = KILN_TEST_CACHE_DIR;
  o.schedules = [](const graph::KernelSpec&, const std::string&) {
    return std::string("winograd tile=4");
  };
  ModelOptions mo;
  mo.generate_kernels = codegen::kernel_generator(o);
  Model m(prob.g, mo);
  EXPECT_EQ(m.winograd_tile(0), 4);  // what `kiln bench --per-layer` shows
  for (int call = 0; call < 2; ++call) {
    ASSERT_TRUE(m.run({prob.input}));
    const TensorView out = m.output(0);
    expect_close(std::vector<float>(out.data, out.data + prob.expected.data.size()), prob.expected);
  }
}

// Winograd's knobs: text form, and the layers and targets it refuses, each with its reason.
TEST(ConvKernelSchedules, WinogradKnobsAndRefusals) {
  const Halide::Target avx2("x86-64-linux-avx-avx2-f16c-fma-sse41");
  schedules::ConvParams p;
  ASSERT_EQ(schedules::parse_conv_params("winograd rows=2 tile=2 block=1x5", &p), "");
  EXPECT_EQ(schedules::to_string(p), "winograd tile=2 block=1x5 rows=2 split=0");
  schedules::ConvParams split = p;
  ASSERT_EQ(schedules::parse_conv_params("split=1", &split), "");
  EXPECT_EQ(schedules::to_string(split), "winograd tile=2 block=1x5 rows=2 split=1");
  for (const char* bad : {"winograd tile=3", "winograd tile=", "winograd chunk=8"}) {
    schedules::ConvParams q = p;
    EXPECT_NE(schedules::parse_conv_params(bad, &q), "") << bad;
  }
  schedules::ConvShape s;
  s.out_height = s.out_width = 14, s.out_channels = 64, s.reduction_channels = 64;
  s.kernel_h = s.kernel_w = 3, s.padded = true;
  EXPECT_EQ(schedules::to_string(schedules::default_winograd_params(s, avx2)),
            "winograd tile=2 block=3x4 rows=1 split=0");  // F(2x2) below 28 pixels wide; 7 tiles: 4 + 3
  s.out_channels = 16;  // too few channels for 3 vectors
  EXPECT_EQ(schedules::to_string(schedules::default_winograd_params(s, avx2)),
            "winograd tile=2 block=2x4 rows=1 split=0");
  // More output channels than tiles and 2 MiB or more of transformed weights (16 x 256 x 256
  // floats, 4 MiB): a task per block of channels over the whole image.
  s.out_channels = s.reduction_channels = 256;
  const Halide::Target avx512("x86-64-linux-avx-avx2-avx512-f16c-fma-sse41");
  EXPECT_EQ(schedules::to_string(schedules::default_winograd_params(s, avx2)),
            "winograd tile=2 block=3x4 rows=7 split=1");
  EXPECT_EQ(schedules::to_string(schedules::default_winograd_params(s, avx512)),
            "winograd tile=2 block=4x7 rows=7 split=1");
  s.out_channels = 128;  // 2 MiB: 2 blocks of 4 vectors
  EXPECT_EQ(schedules::to_string(schedules::default_winograd_params(s, avx512)),
            "winograd tile=2 block=4x7 rows=7 split=1");
  s.reduction_channels = 128;  // 1 MiB: a task per tile row, all 28 accumulators
  EXPECT_EQ(schedules::to_string(schedules::default_winograd_params(s, avx512)),
            "winograd tile=2 block=4x7 rows=1 split=0");
  s.out_width = s.out_height = 56;  // F(4x4): 14 tiles a row, 2x14
  EXPECT_EQ(schedules::to_string(schedules::default_winograd_params(s, avx512)),
            "winograd tile=4 block=2x14 rows=1 split=0");
  s.out_width = s.out_height = 14;
  s.out_channels = s.reduction_channels = 64;
  const schedules::ConvParams w = schedules::default_winograd_params(s, avx2, 4);
  EXPECT_EQ(schedules::to_string(w), "winograd tile=4 block=2x4 rows=1 split=0");
  EXPECT_EQ(schedules::conv_params_error(w, s, avx2), "");
  const auto refused = [&](schedules::ConvShape layer, const Halide::Target& t,
                           const std::string& why, schedules::ConvParams q) {
    const std::string e = schedules::conv_params_error(q, layer, t);
    EXPECT_NE(e.find(why), std::string::npos) << "'" << e << "' lacks '" << why << "'";
  };
  schedules::ConvShape layer = s;
  layer.kernel_w = layer.kernel_h = 1;
  refused(layer, avx2, "3x3 windows only", w);
  layer = s, layer.stride_w = 2;
  refused(layer, avx2, "stride 1 only", w);
  layer = s, layer.dilation_h = 2;
  refused(layer, avx2, "dilation 1 only", w);
  layer = s, layer.grouped = true;
  refused(layer, avx2, "ungrouped", w);
  layer = s, layer.out_channels = 4;
  refused(layer, avx2, "at least one vector of output channels", w);
  refused(s, Halide::Target("x86-64-linux-cuda"), "no GPU schedule", w);
  schedules::ConvParams wide_block = w;
  wide_block.block = {1, 5};  // 14 pixels are 4 tiles of 4
  refused(s, avx2, "does not fit the output", wide_block);
  layer = s, layer.reduction_channels = schedules::kWinograd4MaxChannels + 1;
  refused(layer, avx2, "loses too much precision", w);
  EXPECT_EQ(schedules::default_winograd_params(layer, avx2).tile, 2);
}

}  // namespace

namespace {

// Depthwise kernels (groups == channels) against the reference: odd channel counts (below one
// vector, between vectors), strides, asymmetric pads, dilation, tiny images, batch 2.
struct DwCase {
  const char* name;
  int64_t n, c, h, w, k;
  int stride, pad_top, pad_left, pad_bottom, pad_right, dil;
};
const DwCase kDwCases[] = {
    {"mobilenet_144_56x56_s1", 1, 144, 56, 56, 3, 1, 1, 1, 1, 1, 1},
    {"mobilenet_96_112x112_s2", 1, 96, 23, 30, 3, 2, 0, 0, 1, 1, 1},
    {"channels_40", 1, 40, 9, 11, 3, 1, 1, 1, 1, 1, 1},
    {"channels_5_below_a_vector", 1, 5, 7, 6, 3, 1, 1, 1, 1, 1, 1},
    {"k5_dilation_2_asymmetric", 2, 33, 12, 10, 5, 1, 3, 1, 2, 4, 2},
    {"width_2", 1, 64, 4, 2, 3, 2, 1, 1, 1, 1, 1},
    // 3x3 with dilation: the unrolled-taps branch without the stride-1/2 input sharing.
    {"k3_dilation_2_width_17", 1, 24, 13, 17, 3, 1, 2, 2, 2, 2, 2},
};

// The specs of one-node graphs, lowered as the runtime lowers them.
std::vector<graph::KernelSpec> specs_of(const std::vector<graph::Graph>& graphs) {
  ModelOptions lower;
  lower.lower_only = true;
  std::vector<graph::KernelSpec> specs;
  for (const graph::Graph& g : graphs) specs.push_back(Model(g, lower).kernels().at(0));
  return specs;
}

// Each case with one epilogue (rotating), generated together for each CPU target.
TEST(DepthwiseKernels, MatchReferenceOnEveryTarget) {
  std::vector<graph::Graph> graphs;
  std::vector<graph::Tensor> ins, wants;
  for (size_t i = 0; i < std::size(kDwCases); ++i) {
    const DwCase& d = kDwCases[i];
    graph::GraphBuilder b;
    const graph::ValueId x = b.input("x", {d.n, d.h, d.w, d.c}, Layout::nhwc);
    const graph::ValueId w = b.constant("w", {d.k, d.k, 1, d.c},
                                        graph::random_uniform(d.k * d.k * d.c, -0.5f, 0.5f, 61), Layout::hwio);
    const graph::ValueId bias = b.constant("b", {d.c}, graph::random_uniform(d.c, -0.6f, 0.4f, 62));
    graph::Conv2d attrs{d.stride, d.stride, d.pad_top, d.pad_left, d.pad_bottom, d.pad_right, d.dil, d.dil,
                        kEpilogues[i % 3]};
    attrs.groups = static_cast<int>(d.c);
    b.output(b.op("dw", attrs, {x, w, bias}));
    graphs.push_back(b.finish());
    ins.push_back({{d.n, d.h, d.w, d.c}, Layout::nhwc,
                   graph::random_uniform(d.n * d.h * d.w * d.c, -8.0f, 8.0f, 63 + i)});
    wants.push_back(graph::run_reference(graphs.back(), {ins.back()})[0]);
  }
  const std::vector<graph::KernelSpec> specs = specs_of(graphs);
  for (const graph::KernelSpec& k : specs) ASSERT_TRUE(std::get<graph::ConvKernelSpec>(k).depthwise);
  for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t) {
    if (!testing_util::runs_target(t)) continue;
    std::shared_ptr<const GeneratedKernels> keep;
    codegen::CodegenOptions o;
    o.cache_dir = KILN_TEST_CACHE_DIR;
    keep = codegen::kernel_generator(o)(specs, {Backend::cpu, runtime::cpu_targets()[t]});
    for (size_t i = 0; i < specs.size(); ++i) {
      SCOPED_TRACE(std::string(kDwCases[i].name) + " target " + runtime::cpu_targets()[t]);
      const graph::Graph& g = graphs[i];
      const graph::Value& wv = g.value(g.nodes()[0].inputs[1]);
      const graph::Value& bv = g.value(g.nodes()[0].inputs[2]);
      std::vector<float> out(wants[i].data.size(), NAN);
      HalideBuffer in_b = wrap(ins[i].data.data(), ins[i].shape), w_b = wrap(wv.data->data(), wv.shape),
                   b_b = wrap(bv.data->data(), bv.shape), out_b = wrap(out.data(), wants[i].shape);
      void* args[] = {in_b.raw_buffer(), w_b.raw_buffer(), b_b.raw_buffer(), out_b.raw_buffer()};
      runtime::begin_halide_call();
      ASSERT_EQ(keep->kernels[i].fn(args), 0) << runtime::last_halide_error();
      expect_close(out, wants[i]);
    }
  }
}

}  // namespace

// The NCHW -> NHWC entry transform on every target: three channels with rows of at least one
// vector (the interleaving branch, with a shifted last tile), short rows, and many channels.
TEST(LayoutKernel, NchwToNhwcOnEveryTarget) {
  struct Case {
    int n, c, h, w;
  };
  const Case cases[] = {Case{1, 3, 17, 37}, Case{2, 3, 9, 16}, Case{1, 3, 5, 7}, Case{1, 64, 9, 10},
                        Case{1, 5, 3, 20}};
  std::vector<graph::KernelSpec> specs;
  for (const Case& k : cases) {
    const graph::Shape nchw = {k.n, k.c, k.h, k.w}, nhwc = {k.n, k.h, k.w, k.c};
    specs.push_back(graph::LayoutKernelSpec{"to_nhwc",
                                            {graph::ValueId{0}, "x", nchw, Layout::nchw},
                                            {graph::ValueId{1}, "y", nhwc, Layout::nhwc}});
  }
  for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t) {
    if (!testing_util::runs_target(t)) continue;
    codegen::CodegenOptions o;
    o.cache_dir = KILN_TEST_CACHE_DIR;
    const auto kernels =
        codegen::kernel_generator(o)(specs, {Backend::cpu, runtime::cpu_targets()[t]});
    for (size_t i = 0; i < specs.size(); ++i) {
      const Case k = cases[i];
      SCOPED_TRACE("c " + std::to_string(k.c) + " w " + std::to_string(k.w) + " target " +
                   runtime::cpu_targets()[t]);
      const std::vector<float> in =
          graph::random_uniform(int64_t{k.n} * k.c * k.h * k.w, -1.0f, 1.0f, 77 + i);
      std::vector<float> out(in.size(), NAN);
      HalideBuffer in_b(const_cast<float*>(in.data()), {k.w, k.h, k.c, k.n});
      HalideBuffer out_b(out.data(), {k.c, k.w, k.h, k.n});
      void* args[] = {in_b.raw_buffer(), out_b.raw_buffer()};
      runtime::begin_halide_call();
      ASSERT_EQ(kernels->kernels[i].fn(args), 0) << runtime::last_halide_error();
      for (int n = 0; n < k.n; ++n)
        for (int c = 0; c < k.c; ++c)
          for (int y = 0; y < k.h; ++y)
            for (int x = 0; x < k.w; ++x)
              ASSERT_EQ(out[((size_t(n) * k.h + y) * k.w + x) * k.c + c],
                        in[((size_t(n) * k.c + c) * k.h + y) * k.w + x]);
    }
  }
}
