// The Winograd tile cap (Conv2d::max_winograd_tile): what it does to a kernel's schedule, its
// signatures and file form, and the model's output check that sets it (tools/winograd_check.h),
// measured here against the reference interpreter on its own.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "codegen/kernel_library.h"
#include "codegen/kernel_pipeline.h"
#include "codegen/schedule_db.h"
#include "graph/builder.h"
#include "graph/kernel_spec.h"
#include "graph/passes/pipeline.h"
#include "graph/reference.h"
#include "graph/serialize.h"
#include "graph/verify.h"
#include "graph_test_util.h"
#include "runtime/kernels.h"
#include "schedules/conv_params.h"
#include "winograd_check.h"

namespace {

using namespace kiln;

// Three 3x3 convolutions of 32 channels on a 56x56 image (the second with a ReLU): each a
// Winograd F(4x4) layer by default, optimized.
graph::Graph three_convs() {
  graph::GraphBuilder b;
  graph::ValueId x = b.input("x", {1, 32, 56, 56});
  x = graph::testing_util::random_conv(b, "c1", x, 32, 32, 3, 1, 11);
  x = b.relu("r2", graph::testing_util::random_conv(b, "c2", x, 32, 32, 3, 1, 21));
  b.output(graph::testing_util::random_conv(b, "c3", x, 32, 32, 3, 1, 31));
  return graph::run_passes(b.finish());
}

ModelOptions jit() {
  codegen::CodegenOptions o;
  o.cache_dir = KILN_TEST_CACHE_DIR;
  ModelOptions m;
  m.generate_kernels = codegen::kernel_generator(o);
  return m;
}

// The caps of the graph's convolutions, in node order.
std::vector<int> caps(const graph::Graph& g) {
  std::vector<int> out;
  for (const graph::Node& n : g.nodes())
    if (const auto* c = std::get_if<graph::Conv2d>(&n.op)) out.push_back(c->max_winograd_tile);
  return out;
}

graph::Graph with_caps(graph::Graph g, const std::vector<int>& c) {
  size_t i = 0;
  for (uint32_t id = 0; id < g.nodes().size(); ++id)
    if (auto* conv = std::get_if<graph::Conv2d>(&g.node(graph::NodeId{id}).op))
      conv->max_winograd_tile = c.at(i++);
  return g;
}

const graph::ConvKernelSpec& conv_kernel(const std::vector<graph::KernelSpec>& ks,
                                         const std::string& name) {
  for (const graph::KernelSpec& k : ks)
    if (graph::kernel_name(k) == name) return std::get<graph::ConvKernelSpec>(k);
  throw std::runtime_error("no kernel " + name);
}

TEST(WinogradCap, ChangesTheDefaultScheduleAndRefusesLargerTiles) {
  const Halide::Target t(runtime::cpu_targets()[static_cast<size_t>(runtime::best_cpu_target())]);
  schedules::ConvShape s;
  s.out_channels = s.reduction_channels = 32;
  s.out_width = s.out_height = 56;
  s.kernel_w = s.kernel_h = 3;
  s.padded = true;
  EXPECT_EQ(schedules::default_conv_params(s, t).tile, 4);
  EXPECT_EQ(schedules::default_conv_params(s, t).family, schedules::ConvFamily::winograd);
  schedules::ConvShape capped = s;
  capped.max_winograd_tile = 2;
  EXPECT_EQ(schedules::default_conv_params(capped, t).family, schedules::ConvFamily::winograd);
  EXPECT_EQ(schedules::default_conv_params(capped, t).tile, 2);
  const std::string why =
      schedules::conv_params_error(schedules::default_conv_params(s, t), capped, t);
  EXPECT_NE(why.find("over this layer's cap of tile=2"), std::string::npos) << why;
  capped.max_winograd_tile = 0;
  EXPECT_NE(schedules::default_conv_params(capped, t).family, schedules::ConvFamily::winograd);
  EXPECT_NE(schedules::winograd_tile_error(2, capped).find("winograd is off"), std::string::npos);
}

// The cap is in the graph file and the kernel's signature, not in the key of its tuned
// schedule; verify refuses a cap other than 0, 2 or 4.
TEST(WinogradCap, SignaturesFileFormAndVerify) {
  const graph::Graph g = with_caps(three_convs(), {2, 0, 4});
  const graph::Graph back = graph::deserialize(graph::serialize(g));
  EXPECT_EQ(caps(back), (std::vector<int>{2, 0, 4}));
  const std::vector<graph::KernelSpec> ks = graph::lower_to_kernels(g);
  const std::vector<graph::KernelSpec> uncapped = graph::lower_to_kernels(three_convs());
  const graph::ConvKernelSpec& c1 = conv_kernel(ks, "c1");
  EXPECT_EQ(c1.max_winograd_tile, 2);
  EXPECT_NE(graph::kernel_signature(c1), graph::kernel_signature(conv_kernel(uncapped, "c1")));
  EXPECT_EQ(graph::schedule_signature(c1), graph::kernel_signature(conv_kernel(uncapped, "c1")));
  EXPECT_NE(graph::describe(c1).find("F(2x2, 3x3) at most"), std::string::npos);
  EXPECT_NE(graph::kernel_signature(conv_kernel(ks, "c2")),
            graph::kernel_signature(conv_kernel(ks, "c1")));
  EXPECT_NO_THROW(graph::verify(g));
  EXPECT_THROW(graph::verify(with_caps(three_convs(), {3, 4, 4})), graph::Error);
}

// A capped kernel runs the tile its cap allows, a tuned record asking for more is not applied
// (it is reported as stale), and the tuner does not try more.
TEST(WinogradCap, KernelsKeepToTheirCap) {
  Model m(with_caps(three_convs(), {2, 0, 4}), jit());
  std::vector<int> tiles;
  for (size_t k = 0; k < m.kernels().size(); ++k)
    if (std::holds_alternative<graph::ConvKernelSpec>(m.kernels()[k]))
      tiles.push_back(m.winograd_tile(k));
  EXPECT_EQ(tiles, (std::vector<int>{2, 0, 4}));

  const std::string target =
      runtime::cpu_targets()[static_cast<size_t>(runtime::best_cpu_target())];
  const graph::KernelSpec capped = conv_kernel(m.kernels(), "c1");
  codegen::ScheduleRecord r;
  r.kernel = "c1";
  r.signature = graph::schedule_signature(capped);
  r.target = target;
  r.schedule = codegen::resolve_schedule(conv_kernel(lower_to_kernels(three_convs()), "c1"),
                                         Halide::Target(target), "");
  ASSERT_NE(r.schedule.find("tile=4"), std::string::npos) << r.schedule;
  codegen::ScheduleDb db;
  db.put(r);
  EXPECT_EQ(db.lookup()(capped, target), "");
  const std::vector<std::string> stale = codegen::stale_records(db, {capped}, {target});
  ASSERT_EQ(stale.size(), 1u);
  EXPECT_NE(stale[0].find("cap of tile=2"), std::string::npos) << stale[0];
  // The tuner's candidates keep to the cap: F(2x2) among them, F(4x4) not.
  const std::vector<std::string> candidates =
      codegen::schedule_candidates(capped, Halide::Target(target), 2, 64);
  EXPECT_TRUE(std::any_of(candidates.begin(), candidates.end(), [](const std::string& c) {
    return c.find("winograd tile=2") != std::string::npos;
  }));
  for (const std::string& c : candidates) EXPECT_EQ(c.find("tile=4"), std::string::npos) << c;
}

// The outputs' worst error over the tolerance, measured here: the model run on the check's
// inputs (seeded random in [-1, 1)) against the reference interpreter.
double measured_error(const graph::Graph& g, double rtol, double atol) {
  const graph::Value& in = g.value(g.inputs[0]);
  const graph::Tensor x{in.shape, in.layout,
                        graph::random_uniform(graph::num_elements(in.shape), -1.0f, 1.0f, 1)};
  const graph::Tensor ref = graph::run_reference(g, {x})[0];
  Model m(g, jit());
  EXPECT_TRUE(m.run({x}));
  const TensorView v = m.output(0);
  const graph::Tensor got = graph::to_layout(v.data, v.shape, v.layout, ref.layout);
  double largest = 0;
  for (float r : ref.data) largest = std::max<double>(largest, std::fabs(r));
  return graph::worst_error_ratio(got.data, ref.data, rtol, atol * std::max(1.0, largest));
}

TEST(WinogradCheck, WithinToleranceChangesNothing) {
  const graph::Graph g = three_convs();
  cli::WinogradCheck r;
  const graph::Graph out = cli::check_winograd_tiles(g, jit(), {}, &r);
  EXPECT_EQ(r.winograd_layers, 3);
  EXPECT_EQ(r.runs, 1);
  EXPECT_GT(r.error, 0.0);  // F(4x4) rounds: the outputs differ from the reference
  EXPECT_LT(r.error, 1.0);
  EXPECT_NEAR(r.error, measured_error(g, cli::kRtol, cli::kAtol), 1e-6 * r.error);
  EXPECT_EQ(caps(out), (std::vector<int>{4, 4, 4}));
}

// With the tolerance at a quarter of the error the three F(4x4) layers leave, the check caps
// the fewest layers it finds from the earliest or from the latest, and the capped graph's
// error, measured here, is what it reports and within its bound.
TEST(WinogradCheck, CapsTheFewestLayersUntilWithinTolerance) {
  const graph::Graph g = three_convs();
  cli::WinogradCheck first;
  cli::check_winograd_tiles(g, jit(), {}, &first);
  cli::WinogradCheckOptions tight;
  tight.rtol = cli::kRtol * first.error / 4;
  tight.atol = cli::kAtol * first.error / 4;
  std::vector<std::string> lines;
  tight.log = [&](const std::string& line) { lines.push_back(line); };
  cli::WinogradCheck r;
  const graph::Graph out = cli::check_winograd_tiles(g, jit(), tight, &r);
  EXPECT_NEAR(r.error, 4.0, 1e-6);
  ASSERT_GE(r.direct_error, 0.0);
  const double bound = std::max(1.0, 2 * r.direct_error);
  EXPECT_LE(r.final_error, bound);
  EXPECT_NEAR(r.final_error, measured_error(out, tight.rtol, tight.atol), 1e-6 * r.final_error);
  const std::vector<int> c = caps(out);
  // A run of the earliest layers or of the latest: the caps ascend or descend.
  EXPECT_TRUE(std::is_sorted(c.begin(), c.end()) || std::is_sorted(c.rbegin(), c.rend()))
      << c[0] << " " << c[1] << " " << c[2];
  // Capping more than one layer, it tried the latest first as well.
  const long tried_latest = std::count_if(lines.begin(), lines.end(), [](const std::string& l) {
    return l.find(" on the last ") != std::string::npos;
  });
  if (r.capped_to_2 + r.capped_to_direct > 1) EXPECT_GT(tried_latest, 0);
  EXPECT_EQ(r.capped_to_2, std::count(c.begin(), c.end(), 2));
  EXPECT_EQ(r.capped_to_direct, std::count(c.begin(), c.end(), 0));
  if (r.error > bound)
    EXPECT_GT(r.capped_to_2 + r.capped_to_direct, 0);
  else
    EXPECT_EQ(c, (std::vector<int>{4, 4, 4}));
  EXPECT_EQ(r.runs, static_cast<int>(lines.size()) - (r.error > bound ? 1 : 0));
  EXPECT_NE(lines.front().find("3 Winograd layers, 3 of them F(4x4)"), std::string::npos)
      << lines.front();
}

// Direct convolution and GPU backends have nothing to check: nothing runs. A model the check
// cannot run keeps its tiles, and the log says why.
TEST(WinogradCheck, NothingToCheck) {
  cli::WinogradCheck r;
  cli::check_winograd_tiles(with_caps(three_convs(), {0, 0, 0}), jit(), {}, &r);
  EXPECT_EQ(r.winograd_layers, 0);
  EXPECT_EQ(r.runs, 0);
  ModelOptions gpu = jit();
  gpu.backend = Backend::opencl;
  cli::check_winograd_tiles(three_convs(), gpu, {}, &r);
  EXPECT_EQ(r.runs, 0);
  ModelOptions small = jit();
  small.max_memory_bytes = 1024;  // less than the model's arena
  cli::WinogradCheckOptions o;
  std::string said;
  o.log = [&](const std::string& line) { said += line; };
  const graph::Graph kept = cli::check_winograd_tiles(three_convs(), small, o, &r);
  EXPECT_EQ(caps(kept), (std::vector<int>{4, 4, 4}));
  EXPECT_EQ(r.runs, 0);
  EXPECT_NE(said.find("output check skipped: "), std::string::npos) << said;
}

}  // namespace
