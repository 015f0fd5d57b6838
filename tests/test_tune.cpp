// Schedule tuning: the schedule database (round trip, malformed files, stale records that must
// never apply), schedules from it reaching the generated kernels, `kiln tune` end to end on
// the reference model with a budget of seconds (records written, a rerun resumes, a schedule
// tried by hand, nonsense refused), and `kiln bench --targets`.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "codegen/kernel_library.h"
#include "codegen/kernel_pipeline.h"
#include "codegen/schedule_db.h"
#include "graph/builder.h"
#include "graph/example.h"
#include "graph/passes/pipeline.h"
#include "graph/reference.h"
#include "kiln/runtime.h"
#include "runtime/kernels.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream s;
  s << f.rdbuf();
  return s.str();
}

class TuneTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kiln_tune_test_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string path(const std::string& name) const { return (dir_ / name).string(); }

  // The kiln binary with its caches in the test's directory; exit code, stdout + stderr.
  int kiln(const std::string& args, std::string* output) const {
    const std::string cmd = "cd '" + dir_.string() + "' && XDG_CACHE_HOME='" + dir_.string() +
                            "/cache' '" KILN_BINARY "' " + args + " >out.txt 2>&1";
    const int status = std::system(cmd.c_str());
    *output = slurp(dir_ / "out.txt");
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  fs::path dir_;
};

// The reference model's convolution, lowered: the kernel the records below are about.
graph::KernelSpec example_conv() {
  ModelOptions o;
  o.lower_only = true;
  const Model m(graph::run_passes(graph::reference_example()), o);
  for (const graph::KernelSpec& k : m.kernels())
    if (std::holds_alternative<graph::ConvKernelSpec>(k)) return k;
  throw std::logic_error("the example has no convolution");
}

std::string best_target() {
  return runtime::cpu_targets()[static_cast<size_t>(runtime::best_cpu_target())];
}

codegen::ScheduleRecord record_for(const graph::KernelSpec& k, const std::string& target,
                                   const std::string& schedule) {
  codegen::ScheduleRecord r;
  r.kernel = graph::kernel_name(k);
  r.signature = graph::kernel_signature(k);
  r.target = target;
  r.schedule = schedule;
  r.median_us = 12.5;
  r.default_us = 20.25;
  r.spread = 0.03;
  r.threads = 2;
  r.cpu = "a \"quoted\"\nname";  // escaping is the JSON library's job
  return r;
}

TEST_F(TuneTest, DatabaseRoundTripsSortedAndReplacesByKey) {
  const graph::KernelSpec k = example_conv();
  codegen::ScheduleDb db;
  db.put(record_for(k, "x86-64-linux", "deep chunk=144"));
  db.put(record_for(k, "x86-64-linux-sse41-avx-f16c-fma-avx2", "wide rows=1"));
  db.put(record_for(k, "x86-64-linux", "deep chunk=576"));  // same key: replaces
  ASSERT_EQ(db.records().size(), 2u);
  db.save(path("db.jsonl"));
  const std::string text = slurp(path("db.jsonl"));
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 2) << "one record per line:\n" << text;
  EXPECT_LT(text.find("\"target\":\"x86-64-linux\""), text.find("avx2")) << "sorted by target";

  const codegen::ScheduleDb back = codegen::ScheduleDb::load(path("db.jsonl"));
  ASSERT_EQ(back.records().size(), 2u);
  const codegen::ScheduleRecord* r = back.find(graph::kernel_signature(k), "x86-64-linux");
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->schedule, "deep chunk=576");
  EXPECT_EQ(r->cpu, "a \"quoted\"\nname");
  EXPECT_DOUBLE_EQ(r->default_us, 20.25);
  EXPECT_EQ(back.find(graph::kernel_signature(k) + " ", "x86-64-linux"), nullptr);
  EXPECT_TRUE(codegen::ScheduleDb::load(path("missing.jsonl")).records().empty());
}

TEST_F(TuneTest, MalformedDatabaseNamesTheLine) {
  std::ofstream(path("bad.jsonl")) << "\n{\"signature\":\"s\",\"target\":\"t\",\"schedule\":\"naive\"}\n"
                                   << "{\"signature\": 3}\n";
  try {
    codegen::ScheduleDb::load(path("bad.jsonl"));
    ADD_FAILURE() << "a malformed record was accepted";
  } catch (const graph::Error& e) {
    EXPECT_NE(std::string(e.what()).find("line 3"), std::string::npos) << e.what();
  }
}

// Records for another target, a changed kernel or a schedule that no longer fits are reported
// and never applied; the exact record applies.
TEST_F(TuneTest, StaleRecordsAreReportedAndNeverApplied) {
  const graph::KernelSpec k = example_conv();
  const std::string target = best_target();
  const std::string other = target == "x86-64-linux" ? "x86-64-linux-sse41-avx-f16c-fma-avx2"
                                                     : "x86-64-linux";
  codegen::ScheduleDb db;
  db.put(record_for(k, other, "deep chunk=144"));
  codegen::ScheduleRecord changed = record_for(k, target, "deep chunk=144");
  changed.signature += "[changed]";
  db.put(changed);
  const codegen::ScheduleLookup lookup = db.lookup();
  EXPECT_EQ(lookup(k, target), "");
  std::vector<std::string> stale = codegen::stale_records(db, {k}, {target});
  ASSERT_EQ(stale.size(), 2u);
  EXPECT_NE(stale[0].find("different kernel signature"), std::string::npos) << stale[0];
  EXPECT_NE(stale[1].find("tuned for target " + other), std::string::npos) << stale[1];

  db.put(record_for(k, target, "wide block=9x28"));  // too large a tile for any target here
  EXPECT_EQ(db.lookup()(k, target), "");
  stale = codegen::stale_records(db, {k}, {target});
  ASSERT_EQ(stale.size(), 1u);
  EXPECT_NE(stale[0].find("no longer applies"), std::string::npos) << stale[0];

  db.put(record_for(k, target, "deep chunk=144"));
  EXPECT_EQ(db.lookup()(k, target).rfind("deep ", 0), 0u);
  EXPECT_NE(db.lookup()(k, target).find("chunk=144"), std::string::npos);
  EXPECT_TRUE(codegen::stale_records(db, {k}, {target}).empty());
  const std::vector<codegen::ScheduleUse> uses = codegen::schedule_uses({k}, target, &db);
  ASSERT_EQ(uses.size(), 1u);
  EXPECT_EQ(uses[0].origin, "tuned (DB)");
  EXPECT_EQ(uses[0].schedule.rfind("deep ", 0), 0u) << uses[0].schedule;
  EXPECT_NE(uses[0].schedule.find("chunk=144"), std::string::npos) << uses[0].schedule;
}

// A record reaches the compiled kernel: the model runs with the tuned schedule and matches the
// reference; the kernel cache tells the tuned kernels from the default ones.
TEST_F(TuneTest, TunedRecordCompilesAndMatchesTheReference) {
  const graph::Graph g = graph::reference_example();
  const graph::Tensor x{{1, 64, 56, 56}, graph::Layout::nchw,
                        graph::random_uniform(64 * 56 * 56, -1.0f, 1.0f, 11)};
  const graph::Tensor want = graph::run_reference(g, {x})[0];
  codegen::ScheduleDb db;
  const std::string target = best_target();
  db.put(record_for(example_conv(), target, "deep block=1x4 chunk=144 tasks=8"));
  for (const bool tuned : {false, true}) {
    codegen::CodegenOptions c;
    c.cache_dir = path("cache");
    if (tuned) c.schedules = db.lookup();
    ModelOptions o;
    o.generate_kernels = codegen::kernel_generator(c);
    Model m(graph::run_passes(g), o);
    ASSERT_TRUE(m.run({x}));
    const TensorView out = m.output(0);
    const graph::Tensor got = graph::to_layout(out.data, out.shape, out.layout, graph::Layout::nchw);
    EXPECT_LE(graph::worst_error_ratio(got.data, want.data, 1e-4, 1e-5), 1.0) << "tuned " << tuned;
  }
  int entries = 0;
  for (const auto& e : fs::directory_iterator(path("cache") + "/kernels")) entries += e.is_directory();
  EXPECT_EQ(entries, 2) << "the tuned kernels must not share the default's cache entry";
}

// The tuner measures Winograd where it applies: a 3x3 stride-1 convolution gets winograd
// candidates (both tiles), the reference model's 3x3 stride-2 one none.
TEST_F(TuneTest, WinogradCandidatesOnlyForEligibleLayers) {
  const Halide::Target target(best_target());
  const auto winograd_tiles = [&](const graph::KernelSpec& k) {
    std::set<std::string> tiles;
    for (const std::string& c : codegen::schedule_candidates(k, target, 2, 1000))
      if (c.rfind("winograd ", 0) == 0) tiles.insert(c.substr(c.find("tile="), 6));
    return tiles;
  };
  // Stride 2 takes F(2x2) only.
  EXPECT_EQ(winograd_tiles(example_conv()), std::set<std::string>{"tile=2"});
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {1, 28, 28, 32}, graph::Layout::nhwc);
  const graph::ValueId w = b.constant("w", {3, 3, 32, 32},
                                      graph::random_uniform(9 * 32 * 32, -0.1f, 0.1f, 5),
                                      graph::Layout::hwio);
  const graph::ValueId bias = b.constant("b", {32}, graph::random_uniform(32, -0.1f, 0.1f, 6));
  b.output(b.op("conv", graph::Conv2d{1, 1, 1, 1, 1, 1, 1, 1, {}}, {x, w, bias}));
  ModelOptions o;
  o.lower_only = true;
  const graph::KernelSpec k = Model(b.finish(), o).kernels().at(0);
  EXPECT_EQ(winograd_tiles(k), (std::set<std::string>{"tile=2", "tile=4"}));
  // A text that switches to winograd (as `--set winograd --set tile=T` writes it) takes
  // Winograd's default knobs for that tile, not the direct schedule's block and rows.
  for (const char* tile : {"2", "4"}) {
    const std::string text = codegen::default_schedule(k, target) + " winograd tile=" + tile;
    const std::string resolved = codegen::resolve_schedule(k, target, text);
    EXPECT_EQ(resolved.rfind(std::string("winograd tile=") + tile + " block=", 0), 0u) << resolved;
    EXPECT_EQ(resolved.substr(resolved.size() - 25), "rows=1 split=0 prefetch=0") << resolved;
  }
  // And one that switches from Winograd to a direct family (`--set wide` on a Winograd layer)
  // takes the direct default, with the knobs named after the family: not Winograd's block (of
  // tiles) and rows (of tiles).
  const std::string winograd = codegen::default_schedule(k, target);
  ASSERT_EQ(winograd.rfind("winograd ", 0), 0u) << winograd;
  const std::string direct = codegen::schedule_for_weight_tile(k, target, winograd, 0);
  ASSERT_EQ(direct.rfind("winograd", 0), std::string::npos) << direct;
  const std::string family = direct.substr(0, direct.find(' '));
  EXPECT_EQ(codegen::resolve_schedule(k, target, winograd + " " + family), direct);
  EXPECT_EQ(codegen::resolve_schedule(k, target, winograd + "  " + family + " block=1x4"),
            codegen::resolve_schedule(k, target, direct + " block=1x4"));
  // Within the tuner's usual cut of 16, at least one.
  size_t in_cut = 0;
  for (const std::string& c : codegen::schedule_candidates(k, target, 2, 16))
    in_cut += c.rfind("winograd ", 0) == 0;
  EXPECT_GT(in_cut, 0u);
}

// Depthwise convolutions are tunable (family depthwise): each knob away from its default, and
// Halide's default (naive), applied through a schedule database to every depthwise kernel of
// a model (3x3 at stride 1 and 2 with asymmetric padding, a 5x5 with dilation 2, a 7x7, and one
// on a 6-pixel-wide row with 12 channels, less than two vectors), runs the schedule it names
// and matches the reference on the best CPU target.
TEST_F(TuneTest, DepthwiseKnobsMatchTheReference) {
  graph::GraphBuilder b;
  struct Case {
    const char* name;
    int64_t c, h, w;
    int k, stride, dilation, pad_top, pad_left, pad_bottom, pad_right;
  };
  const Case cases[] = {
      {"dw3", 40, 14, 17, 3, 1, 1, 1, 1, 1, 1},    {"dw3_s2", 40, 15, 18, 3, 2, 1, 0, 1, 1, 0},
      {"dw5_d2", 24, 13, 16, 5, 1, 2, 4, 4, 4, 4}, {"dw7", 16, 11, 12, 7, 1, 1, 3, 3, 3, 3},
      {"dw9", 16, 12, 13, 9, 1, 1, 4, 4, 4, 4},    {"dw3_narrow", 12, 7, 6, 3, 1, 1, 1, 1, 1, 1}};
  std::vector<graph::Tensor> inputs;
  uint64_t seed = 40;
  for (const Case& c : cases) {
    const graph::ValueId x = b.input(std::string(c.name) + "_x", {1, c.h, c.w, c.c}, graph::Layout::nhwc);
    inputs.push_back({{1, c.h, c.w, c.c}, graph::Layout::nhwc,
                      graph::random_uniform(c.h * c.w * c.c, -2.0f, 2.0f, seed)});
    graph::Conv2d attrs{c.stride, c.stride, c.pad_top, c.pad_left, c.pad_bottom, c.pad_right,
                        c.dilation, c.dilation, {}};
    attrs.groups = static_cast<int>(c.c);
    const graph::ValueId w = b.constant(std::string(c.name) + "_w", {c.k, c.k, 1, c.c},
                                        graph::random_uniform(c.k * c.k * c.c, -0.5f, 0.5f, seed + 1),
                                        graph::Layout::hwio);
    const graph::ValueId bias = b.constant(std::string(c.name) + "_b", {c.c},
                                           graph::random_uniform(c.c, -0.2f, 0.2f, seed + 2));
    b.output(b.op(c.name, attrs, {x, w, bias}));
    seed += 10;
  }
  const graph::Graph g = graph::run_passes(b.finish());
  const std::vector<graph::Tensor> want = graph::run_reference(g, inputs);
  ModelOptions lower;
  lower.lower_only = true;
  const Model lowered(g, lower);
  std::vector<graph::KernelSpec> depthwise;
  for (const graph::KernelSpec& k : lowered.kernels())
    if (const auto* c = std::get_if<graph::ConvKernelSpec>(&k); c && c->depthwise) depthwise.push_back(k);
  ASSERT_EQ(depthwise.size(), std::size(cases));
  const std::string target = best_target();
  const Halide::Target t(target);
  // The defaults: windows up to 7 wide read in place with the channel loop inside; wider ones
  // staged.
  for (const graph::KernelSpec& k : depthwise) {
    const std::string d = codegen::default_schedule(k, t);
    const bool in_place = graph::kernel_name(k).rfind("dw9", 0) != 0;
    EXPECT_EQ(d.rfind("depthwise block=", 0), 0u) << d;
    EXPECT_NE(d.find(in_place ? "inner=channels stage=in_place" : "inner=pixels stage=copy"),
              std::string::npos)
        << graph::kernel_name(k) << ": " << d;
    EXPECT_GT(codegen::schedule_candidates(k, t, 2, 16).size(), 5u) << graph::kernel_name(k);
  }
  for (const std::string text :
       {"depthwise stage=copy inner=channels", "depthwise stage=in_place inner=pixels",
        "depthwise block=1x2 rows=1", "depthwise block=1x6 rows=3 stage=copy", "naive"}) {
    SCOPED_TRACE(text);
    codegen::ScheduleDb db;
    for (const graph::KernelSpec& k : depthwise)
      db.put(record_for(k, target, codegen::resolve_schedule(k, t, text)));
    codegen::CodegenOptions c;
    c.cache_dir = path("cache");
    c.schedules = db.lookup();
    ModelOptions o;
    o.generate_kernels = codegen::kernel_generator(c);
    Model m(g, o);
    ASSERT_TRUE(m.run(inputs));
    for (size_t i = 0; i < want.size(); ++i) {
      const TensorView out = m.output(i);
      const std::vector<float> got(out.data, out.data + want[i].data.size());
      EXPECT_LE(graph::worst_error_ratio(got, want[i].data, 1e-4, 1e-5), 1.0) << cases[i].name;
    }
  }
  // The knobs reach the loop nest: the staged band is a stage of its own, in place it is not;
  // naive leaves Halide's default (nothing parallel).
  const auto statement = [&](const std::string& text) {
    codegen::KernelPipeline kp = codegen::build_kernel_pipeline(depthwise[0], t, text);
    const std::string file = path("dw.stmt");
    kp.pipeline.compile_to_lowered_stmt(file, kp.arguments(), Halide::Text, t);
    return slurp(file);
  };
  EXPECT_EQ(statement("").find("produce input_padded"), std::string::npos);
  EXPECT_NE(statement("depthwise stage=copy").find("produce input_padded"), std::string::npos);
  EXPECT_NE(statement("").find("parallel"), std::string::npos);
  EXPECT_EQ(statement("naive").find("parallel"), std::string::npos);
  // Knobs the depthwise family refuses.
  const graph::KernelSpec& narrow = depthwise.back();  // 6 pixels x 7 rows
  for (const char* bad : {"wide", "depthwise block=2x4", "depthwise block=1x8", "depthwise rows=8",
                          "depthwise inner=rows"})
    EXPECT_THROW(codegen::resolve_schedule(narrow, t, bad), graph::Error) << bad;
}

// `kiln tune` on the reference model with a budget of seconds: a record per tunable kernel,
// then a rerun that measures nothing, a schedule tried by hand, and refusals.
TEST_F(TuneTest, TuneWritesResumesAndTriesByHand) {
  std::string out;
  ASSERT_EQ(kiln("tune example --db db.jsonl --budget 1 --candidates 3 --local-rounds 1 --rounds 3 "
                 "--json t.json",
                 &out),
            0)
      << out;
  // The table as JSON, drawn by the plot script.
  const std::string plot = "'" KILN_PYTHON "' '" KILN_SOURCE_DIR "/scripts/plot_results.py' '" +
                           path("t.json") + "' '" + path("t.png") + "' >/dev/null";
  ASSERT_EQ(std::system(plot.c_str()), 0) << slurp(path("t.json"));
  EXPECT_EQ(slurp(path("t.png")).substr(1, 3), "PNG");
  // oneDNN's time for the same convolution (+ bias + ReLU), where the build has oneDNN.
  const nlohmann::json table = nlohmann::json::parse(slurp(path("t.json")));
  const nlohmann::json& row = table.at("kernels").at(0);
  EXPECT_NE(out.find("oneDNN us"), std::string::npos) << out;
  if (KILN_TOOL_HAS_ONEDNN) {
    EXPECT_GT(row.at("onednn_us").get<double>(), 0.0) << row.dump();
  } else {
    EXPECT_TRUE(row.at("onednn_us").is_null()) << row.dump();
    EXPECT_EQ(row.at("onednn_note"), "this kiln was built without oneDNN");
  }
  EXPECT_NE(out.find("[1/1] conv_out"), std::string::npos) << out;
  EXPECT_NE(out.find("geometric-mean speedup"), std::string::npos) << out;
  const codegen::ScheduleDb db = codegen::ScheduleDb::load(path("db.jsonl"));
  ASSERT_EQ(db.records().size(), 1u);
  const codegen::ScheduleRecord& r = db.records()[0];
  EXPECT_EQ(r.signature, graph::kernel_signature(example_conv()));
  EXPECT_EQ(r.target, best_target());
  EXPECT_GT(r.median_us, 0);
  EXPECT_GT(r.default_us, 0);
  EXPECT_LE(r.median_us, r.default_us) << "a record never holds a schedule slower than the default";
  // The ranked list's 3, then one round of the best's neighbours (every schedule has some).
  EXPECT_GT(r.candidates, 3);

  // --isolated: the kernel timed alone; no local search with --local-rounds 0.
  ASSERT_EQ(kiln("tune example --db alone.jsonl --budget 1 --candidates 2 --local-rounds 0 "
                 "--rounds 3 --isolated",
                 &out),
            0)
      << out;
  const codegen::ScheduleDb alone = codegen::ScheduleDb::load(path("alone.jsonl"));
  ASSERT_EQ(alone.records().size(), 1u);
  EXPECT_EQ(alone.records()[0].candidates, 2);
  EXPECT_LE(alone.records()[0].median_us, alone.records()[0].default_us);

  const std::string before = slurp(path("db.jsonl"));
  ASSERT_EQ(kiln("tune example --db db.jsonl --budget 0.5", &out), 0) << out;  // 30 s
  EXPECT_NE(out.find("budget 0:30"), std::string::npos) << out;
  EXPECT_NE(out.find("1 kernels kept from the database"), std::string::npos) << out;
  EXPECT_EQ(out.find("compiling"), std::string::npos) << "a rerun compiled candidates:\n" << out;
  EXPECT_EQ(slurp(path("db.jsonl")), before);

  ASSERT_EQ(kiln("tune example --db db.jsonl --kernel conv_out --set deep --set chunk=144 --rounds 3",
                 &out), 0) << out;
  EXPECT_NE(out.find("trial:"), std::string::npos) << out;
  EXPECT_NE(out.find("chunk=144"), std::string::npos) << out;
  EXPECT_EQ(slurp(path("db.jsonl")), before) << "--set must not change the database";

  // Halide's autoscheduler on the same kernel: checked against the reference, timed.
  ASSERT_EQ(kiln("tune example --db db.jsonl --kernel conv_out --set auto:Mullapudi2016 --rounds 3",
                 &out), 0) << out;
  EXPECT_NE(out.find("trial:                auto:Mullapudi2016"), std::string::npos) << out;
  EXPECT_EQ(kiln("tune example --db db.jsonl --kernel conv_out --set auto:Nobody", &out), 1) << out;
  EXPECT_NE(out.find("no CPU autoscheduler is called 'Nobody'"), std::string::npos) << out;
  EXPECT_EQ(kiln("tune example --db db.jsonl --autoschedulers Nobody", &out), 2) << out;

  EXPECT_EQ(kiln("tune example --db db.jsonl --kernel conv_out --set deep --set split=1", &out), 1)
      << out;
  EXPECT_NE(out.find("'split' is not a knob of schedule family deep"), std::string::npos) << out;
  EXPECT_EQ(kiln("tune example --db db.jsonl --kernel A_to_nhwc --set rows=1", &out), 1) << out;
  EXPECT_NE(out.find("no schedule knobs"), std::string::npos) << out;
  EXPECT_EQ(kiln("tune example --db db.jsonl --kernel nope", &out), 2) << out;
  EXPECT_EQ(kiln("tune example --set rows=1 --db db.jsonl", &out), 2) << out;
  EXPECT_EQ(kiln("tune example", &out), 2) << out;
  for (const char* budget : {"0", "-1", "abc", "1.5x", "1e9"}) {
    EXPECT_EQ(kiln(std::string("tune example --db db.jsonl --budget ") + budget, &out), 2) << out;
    EXPECT_NE(out.find("--budget expects minutes"), std::string::npos) << budget << ": " << out;
  }
  EXPECT_EQ(kiln("run example --schedules missing.jsonl", &out), 1) << out;
  EXPECT_NE(out.find("no such file"), std::string::npos) << out;
}

// `kiln bench --targets`: each target's kernels in one interleaved run, one JSON entry each.
TEST_F(TuneTest, BenchComparesTargetsInOneRun) {
  std::string out;
  const std::string best = best_target(), base = runtime::cpu_targets().back();
  if (best == base) GTEST_SKIP() << "this CPU runs only the baseline target: nothing to compare";
  ASSERT_EQ(kiln("bench example --targets " + best + ",baseline --iterations 3 --warmup 1 --json b.json",
                 &out), 0) << out;
  EXPECT_NE(out.find("speedup of each over the baseline"), std::string::npos) << out;
  EXPECT_NE(out.find("conv_out"), std::string::npos) << out;
  const std::string json = slurp(path("b.json"));
  EXPECT_NE(json.find("\"baseline\": \"" + base + "\""), std::string::npos) << json;
  EXPECT_NE(json.find("\"cpu_target\": \"" + best + "\""), std::string::npos) << json;
  EXPECT_EQ(kiln("bench example --targets avx2", &out), 2) << out;
  EXPECT_EQ(kiln("bench example --targets avx9,baseline", &out), 2) << out;
}

}  // namespace
}  // namespace kiln
