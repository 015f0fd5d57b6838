// `kiln run`, `bench` and `compile` end to end: the real binary's exit codes, messages and
// files (the strict .npy reader's own tests: test_npy.cpp).
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <regex>
#include <sstream>

#include "cli.h"
#include "cli_test_util.h"
#include "graph/builder.h"
#include "graph/example.h"
#include "graph/kernel_spec.h"
#include "graph/memory_limit.h"
#include "graph/passes/pipeline.h"
#include "graph/printable.h"
#include "graph/reference.h"
#include "npy.h"
#include "onnx_test_models.h"
#include "sanitizers.h"

namespace {

using namespace kiln::cli_test;  // CliRunBench, Result, kiln(), expect_error, ...

TEST_F(CliRunBench, MissingModelFile) {
  expect_error(kiln("run nope.onnx"), 1, "no such file: nope.onnx");
}

TEST_F(CliRunBench, MalformedModel) {
  std::string junk(4096, '\0');
  for (size_t i = 0; i < junk.size(); ++i) junk[i] = static_cast<char>((i * 2654435761u) >> 13);
  spit(path("junk.onnx"), junk);
  expect_error(kiln("run junk.onnx"), 1, "junk.onnx");
  expect_error(kiln("bench junk.onnx"), 1, "junk.onnx");
}

TEST_F(CliRunBench, UnknownTargetAndOptionAreUsageErrors) {
  expect_error(kiln("run example --target tpu"), 2, "unknown --target 'tpu'");
  expect_error(kiln("bench example --target tpu"), 2, "unknown --target 'tpu'");
  expect_error(kiln("run example --frobnicate"), 2, "unknown option '--frobnicate'");
  expect_error(kiln("bench example --frobnicate"), 2, "unknown option '--frobnicate'");
  expect_error(kiln("run"), 2, "missing MODEL");
}

// A wrong --input fails before the compile: no kernel compiled ([codegen] or [winograd] progress
// lines), nothing in the compile cache.
TEST_F(CliRunBench, InputOfWrongShapeIsNamedBeforeTheCompile) {
  const std::vector<float> small(3 * 5 * 5, 0.5f);
  kiln::cli::write_npy(path("small.npy"), {1, 3, 5, 5}, small.data());
  const Result r = kiln("run example --input small.npy --output-dir D");
  expect_error(r, 1, "input 'A' must have shape [1, 64, 56, 56], got [1, 3, 5, 5]");
  EXPECT_FALSE(contains(r.err, "[codegen]")) << r.err;
  EXPECT_FALSE(contains(r.err, "[winograd]")) << r.err;
  EXPECT_FALSE(fs::exists(path("cache/kiln/compiled")));
  EXPECT_FALSE(fs::exists(path("D/out.npy")));
}

// An .npy file of the example's input shape with dtype `descr` whose data bytes are
// `data` (numpy.save's header: version 1.0, padded to a multiple of 64 bytes).
std::string example_input_npy(const std::string& descr, const std::string& data) {
  std::string header =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (1, 64, 56, 56), }";
  header.append(64 - (10 + header.size() + 1) % 64, ' ');
  header += '\n';
  return std::string("\x93NUMPY\x01\x00", 8) + char(header.size() & 0xff) +
         char(header.size() >> 8) + header + data;
}

TEST_F(CliRunBench, InputOfWrongDtypeIsNamed) {
  spit(path("i64.npy"), example_input_npy("<i8", std::string(8 * 64 * 56 * 56, '\1')));
  expect_error(kiln("run example --input A=i64.npy --output-dir D"), 1,
               "i64.npy: dtype '<i8' is not supported");
  EXPECT_FALSE(fs::exists(path("D/out.npy")));
}

// numpy's default dtype: a float64 file is rounded to float32, said so, and computes what the
// reference does on the rounded values.
TEST_F(CliRunBench, Float64InputIsRoundedToFloat32) {
  using namespace kiln::graph;
  const int64_t n = num_elements(kExampleIn);
  std::vector<double> wide(n);
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  for (double& v : wide) v = u(rng);
  spit(path("f64.npy"),
       example_input_npy("<f8", std::string(reinterpret_cast<const char*>(wide.data()),
                                            wide.size() * sizeof(double))));
  const Result r = kiln("run example --input A=f64.npy --output-dir D");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "f64.npy (float64, rounded to float32)")) << r.out;
  Tensor x{kExampleIn, Layout::nchw, std::vector<float>(n)};
  for (int64_t i = 0; i < n; ++i) x.data[i] = static_cast<float>(wide[i]);
  const Tensor want = run_reference(reference_example(), {x})[0];
  const NpyArray got = kiln::cli::read_npy(path("D/out.npy"));
  ASSERT_EQ(got.shape, want.shape);
  EXPECT_LE(worst_error_ratio(got.data, want.data, 1e-3, 1e-4), 1.0);
}

TEST_F(CliRunBench, UnknownInputNameIsAUsageError) {
  expect_error(kiln("run example --input B=x.npy"), 2, "the model has no input 'B'");
}

TEST_F(CliRunBench, RunWritesEachOutputAsNpy) {
  const Result r = kiln("run example --output-dir D/sub");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "output out [1, 64, 28, 28] -> D/sub/out.npy")) << r.out;
  EXPECT_TRUE(contains(r.out, "median")) << r.out;
  const NpyArray out = kiln::cli::read_npy(path("D/sub/out.npy"));
  EXPECT_EQ(out.shape, kExampleOut);
  int files = 0;
  for (const auto& e : fs::directory_iterator(path("D/sub")))
    files += static_cast<int>(e.is_regular_file());
  EXPECT_EQ(files, 1);  // no temp files left behind
}

// The second run takes the optimized graph from the compile cache; a damaged cache entry is
// recompiled, not an error.
TEST_F(CliRunBench, RunCachesTheCompiledGraph) {
  const Result first = kiln("run example --output-dir A");
  ASSERT_EQ(first.code, 0) << first.err;
  EXPECT_TRUE(contains(first.out, "(compiled in")) << first.out;
  const Result second = kiln("run example --output-dir B");
  ASSERT_EQ(second.code, 0) << second.err;
  EXPECT_TRUE(contains(second.out, "from the cache")) << second.out;
  EXPECT_EQ(kiln::cli::read_npy(path("A/out.npy")).data, kiln::cli::read_npy(path("B/out.npy")).data);
  int entries = 0;
  for (const auto& e : fs::directory_iterator(path("cache/kiln/compiled"))) {
    std::ofstream(e.path(), std::ios::binary | std::ios::trunc) << "garbage";
    ++entries;
  }
  EXPECT_EQ(entries, 1);
  const Result third = kiln("run example --output-dir C");
  ASSERT_EQ(third.code, 0) << third.err;
  EXPECT_TRUE(contains(third.out, "(compiled in")) << third.out;
}

TEST_F(CliRunBench, RunOnGivenInputMatchesTheReference) {
  using namespace kiln::graph;
  const Tensor x{kExampleIn, Layout::nchw,
                 random_uniform(num_elements(kExampleIn), -1.0f, 1.0f, 42)};
  kiln::cli::write_npy(path("x.npy"), x.shape, x.data.data());
  const Tensor want = run_reference(reference_example(), {x})[0];
  for (const std::string input : {"x.npy", "A=x.npy"}) {
    const Result r = kiln("run example --input " + input + " --output-dir D");
    ASSERT_EQ(r.code, 0) << r.err;
    const NpyArray got = kiln::cli::read_npy(path("D/out.npy"));
    ASSERT_EQ(got.shape, want.shape);  // NCHW, the model's declared layout
    EXPECT_LE(worst_error_ratio(got.data, want.data, 1e-3, 1e-4), 1.0) << input;
    fs::remove(path("D/out.npy"));
  }
}

TEST_F(CliRunBench, CheckPrintsOneRowPerKernelWithinTolerance) {
  const Result r = kiln("run example --check --output-dir D");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_FALSE(contains(r.out, "OUT OF TOLERANCE")) << r.out;
  const auto kernels =
      kiln::graph::lower_to_kernels(kiln::graph::run_passes(kiln::graph::reference_example()));
  ASSERT_EQ(kernels.size(), 2u);
  for (const auto& k : kernels) {
    // The kernel's row compares numbers: "NAME  ABS  REL", not "-  -  not compared".
    const std::string head = "\n  " + kiln::graph::kernel_name(k) + " ";
    const size_t at = r.out.find(head);
    ASSERT_NE(at, std::string::npos) << r.out;
    std::istringstream row(r.out.substr(at + head.size(), r.out.find('\n', at + 1) - at - head.size()));
    double max_abs = -1, max_rel = -1, normwise = -1;
    ASSERT_TRUE(row >> max_abs >> max_rel >> normwise)
        << "row of " << kiln::graph::kernel_name(k) << ":\n"
        << r.out;
    EXPECT_GE(max_abs, 0.0);
    EXPECT_LE(max_abs, 1e-3);
    EXPECT_GE(max_rel, 0.0);
    EXPECT_GE(normwise, 0.0);
    EXPECT_LE(normwise, 1e-3);
  }
  EXPECT_FALSE(contains(r.out, "not compared")) << r.out;
  // The model's output is judged elementwise, and says so.
  EXPECT_TRUE(contains(r.out, "(model output: within)")) << r.out;
  EXPECT_TRUE(fs::exists(path("D/out.npy")));
}

TEST_F(CliRunBench, BenchPerLayerWritesJsonAndCachesPeaks) {
  const Result r = kiln("bench example --per-layer --iterations 5 --warmup 1 --json b.json");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "median")) << r.out;
  EXPECT_TRUE(contains(r.out, "conv_out")) << r.out;
  EXPECT_TRUE(contains(r.out, "(measured)")) << r.out;
  const std::string json = slurp(path("b.json"));
  for (const char* key : {"\"model\": \"example\"", "\"latency_ms\"", "\"median\"", "\"p90\"",
                          "\"min\"", "\"layers\"", "\"kernel\": \"conv_out\"", "\"peaks\"",
                          "\"fma_gflops\"", "\"dot_gflops\"", "\"bandwidth_gbs\""})
    EXPECT_TRUE(contains(json, key)) << key << "\n" << json;
  EXPECT_EQ(std::count(json.begin(), json.end(), '{'), std::count(json.begin(), json.end(), '}'));
  EXPECT_EQ(json.front(), '{');

  const Result again = kiln("bench example --per-layer --iterations 2 --warmup 0");
  ASSERT_EQ(again.code, 0) << again.err;
  EXPECT_TRUE(contains(again.out, "cached in " + dir_ + "/cache/kiln/peaks.txt")) << again.out;
  EXPECT_TRUE(contains(again.out, "over 2 runs after 0 warm-up")) << again.out;
}

// The example takes microseconds, so one warm-up run asked for becomes the many that fill the
// minimum warm-up time; the line and the JSON report the rounds that ran.
TEST_F(CliRunBench, BenchWarmsUpForAMinimumTime) {
  const Result r = kiln("bench example --iterations 3 --warmup 1 --json w.json");
  ASSERT_EQ(r.code, 0) << r.err;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.out, m, std::regex("over 3 runs after ([0-9]+) warm-up")))
      << r.out;
  const int rounds = std::stoi(m[1]);
  EXPECT_GT(rounds, 1) << r.out;
  EXPECT_TRUE(contains(slurp(path("w.json")), "\"warmup\": " + std::to_string(rounds)));
}

TEST_F(CliRunBench, HelpListsEveryOption) {
  const Result run = kiln("run --help");
  ASSERT_EQ(run.code, 0);
  for (const char* o : {"--input", "--output-dir", "--target", "--fallback", "--threads", "--seed",
                        "--check", "--input-shape NAME=D0,D1,..."})
    EXPECT_TRUE(contains(run.out, o)) << o;
  const Result bench = kiln("bench --help");
  ASSERT_EQ(bench.code, 0);
  for (const char* o : {"--threads", "--iterations", "--warmup", "--target", "--per-layer",
                        "--json", "--remeasure-peaks", "--input-shape NAME=D0,D1,..."})
    EXPECT_TRUE(contains(bench.out, o)) << o;
  for (const char* cmd : {"compile", "inspect", "tune"}) {
    const Result help = kiln(std::string(cmd) + " --help");
    ASSERT_EQ(help.code, 0);
    EXPECT_TRUE(contains(help.out, "--input-shape NAME=D0,D1,...\n")) << help.out;
    EXPECT_FALSE(contains(help.out, "{input-shape")) << help.out;
  }
}

// Names from the model reach stdout and stderr escaped: errors stay one line, progress lines
// stay one line each, and no escape sequence reaches the terminal.
TEST_F(CliRunBench, ModelControlledNamesAreEscaped) {
  std::mt19937_64 rng(std::random_device{}());
  std::string hostile = "\n\x1b[2J";
  for (int k = 0; k < 3; ++k) hostile += static_cast<char>(1 + rng() % 0x1f);
  const std::string in = "in" + hostile, out = "out" + hostile;
  kiln::onnx_test::ModelBuilder m;
  m.input(in, {2, 3});
  kiln::onnx_test::attr_ints(m.node("Transpose", {in}, {out}, "t" + hostile), "perm", {1, 0});
  m.output(out);
  spit(path("m.onnx"), m.bytes());

  const Result ok = kiln("run m.onnx --output-dir D");
  ASSERT_EQ(ok.code, 0) << ok.err;
  EXPECT_TRUE(terminal_safe(ok.out) && terminal_safe(ok.err)) << ok.out << ok.err;
  EXPECT_TRUE(contains(ok.out, "output " + kiln::graph::printable(out) + " [3, 2] -> D/")) << ok.out;
  EXPECT_EQ(lines(ok.out), 4) << ok.out;  // model, input, time, output
  const Result inspect = kiln("inspect m.onnx");
  EXPECT_EQ(inspect.code, 0) << inspect.err;
  EXPECT_TRUE(terminal_safe(inspect.out) && terminal_safe(inspect.err)) << inspect.out;

  const std::vector<float> wrong(4, 0.5f);
  kiln::cli::write_npy(path("wrong.npy"), {2, 2}, wrong.data());
  const Result bad = kiln("run m.onnx --input wrong.npy --output-dir D");
  expect_error(bad, 1, "input '" + kiln::graph::printable(in) + "' must have shape [2, 3]");
  EXPECT_TRUE(terminal_safe(bad.err)) << bad.err;

  m.node("Frob" + hostile, {out}, {"z"}, "f" + hostile);
  m.output("z");  // a node no output needs is never converted
  spit(path("unknown_op.onnx"), m.bytes());
  const Result unknown = kiln("run unknown_op.onnx");
  expect_error(unknown, 1, "node 'f" + kiln::graph::printable(hostile) + "' (Frob");
  EXPECT_TRUE(terminal_safe(unknown.err)) << unknown.err;
}

// Address space for commands that must fail before they allocate: far below what the inputs
// below would take, far above what kiln needs to start.
constexpr long kVirtualKib = 3 << 20;

// Files that never end (/dev/zero) or that are far larger than they should be (5 GiB sparse
// files) are refused before they are read: fast, one line, exit 1.
TEST_F(CliRunBench, UnboundedInputFilesFailFast) {
  SKIP_WITHOUT_ADDRESS_SPACE_LIMITS();
  std::mt19937_64 rng(std::random_device{}());
  const auto huge = [&] { return (int64_t{5} << 30) + static_cast<int64_t>(rng() % 4096); };
  for (const char* name : {"big.onnx", "big.npy"}) {
    spit(path(name), "");
    fs::resize_file(path(name), huge());
  }
  // A valid header for the example's input, then gigabytes more than that shape holds.
  const std::vector<float> x = kiln::graph::random_uniform(64 * 56 * 56, -1, 1, rng());
  spit(path("long.npy"), kiln::cli::encode_npy(kExampleIn, x.data()));
  fs::resize_file(path("long.npy"), huge());
  const std::pair<std::string, std::string> cases[] = {
      {"run /dev/zero", "not a regular file"},
      {"bench /dev/zero", "not a regular file"},
      {"run big.onnx", "over 2 GiB"},
      {"run example --input /dev/zero", "not a regular file"},
      {"run example --input big.npy", "not an .npy file"},
      {"run example --input long.npy", "bytes after the data"},
  };
  for (const auto& [args, what] : cases) {
    const auto t0 = std::chrono::steady_clock::now();
    const Result r = kiln(args, kVirtualKib);
    expect_error(r, 1, what);
    EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(20)) << args;
  }
}

// A model whose arena is over the limit is refused before anything is allocated: by default
// the machine's physical memory, or --max-memory SIZE on run and bench.
TEST_F(CliRunBench, MemoryLimitRefusesModelsBeforeAllocating) {
  SKIP_WITHOUT_ADDRESS_SPACE_LIMITS();
  std::mt19937_64 rng(std::random_device{}());
  const int64_t side = (int64_t{1} << 18) + static_cast<int64_t>(rng() % 1000);
  kiln::onnx_test::ModelBuilder m;
  m.input("x", {1, 1});
  m.init_i64("pads", {4}, {0, 0, side, side});  // 256 GiB of output
  m.node("Pad", {"x", "pads"}, {"y"}, "pad");
  m.output("y");
  spit(path("pad.onnx"), m.bytes());
  const std::string physical = kiln::graph::byte_size_text(kiln::graph::physical_memory_bytes());
  expect_error(kiln("run pad.onnx", kVirtualKib), 1, "memory limit of " + physical);
  expect_error(kiln("bench pad.onnx", kVirtualKib), 1, "memory limit of " + physical);

  const int kib = 1 + static_cast<int>(rng() % 100);  // the example's arena is megabytes
  for (const char* cmd : {"run", "bench"}) {
    const std::string args = std::string(cmd) + " example --max-memory ";
    expect_error(kiln(args + std::to_string(kib) + "K"), 1,
                 "memory limit of " + kiln::graph::byte_size_text(kib * 1024));
    expect_error(kiln(args + std::to_string(kib * 1024)), 1,
                 "memory limit of " + kiln::graph::byte_size_text(kib * 1024));
    expect_error(kiln(args + "lots"), 2, "--max-memory");
  }
  EXPECT_EQ(kiln("run example --max-memory 1G --output-dir D").code, 0);
  EXPECT_EQ(kiln("bench example --max-memory 1G --iterations 1 --warmup 0").code, 0);
}

TEST(ParseByteSize, SuffixesAreBinaryMultiples) {
  std::mt19937_64 rng(std::random_device{}());
  const std::pair<const char*, int64_t> units[] = {
      {"", 1}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", int64_t{1} << 30}, {"T", int64_t{1} << 40}};
  for (int i = 0; i < 200; ++i) {
    const auto& [suffix, mult] = units[rng() % 5];
    const int64_t n = 1 + static_cast<int64_t>(rng() % 100000);
    EXPECT_EQ(kiln::cli::parse_byte_size("--max-memory", std::to_string(n) + suffix), n * mult);
  }
  for (const char* bad : {"", "G", "-1", "0", "1.5G", "12Q", "99999999999T", "1 G", "1GG"})
    EXPECT_THROW(kiln::cli::parse_byte_size("--max-memory", bad), kiln::cli::UsageError) << bad;
}

// An allocation that fails anyway (here a 3.5 GiB random input under a 3 GiB address space)
// is exit 1 with one line, not an internal error.
TEST_F(CliRunBench, OutOfMemoryIsOneLineAndExitOne) {
  SKIP_WITHOUT_ADDRESS_SPACE_LIMITS();
  std::mt19937_64 rng(std::random_device{}());
  const int64_t n = (int64_t{7} << 27) + static_cast<int64_t>(rng() % 1000);
  kiln::onnx_test::ModelBuilder m;
  m.input("x", {1, n});
  m.init_i64("starts", {1}, {0});
  m.init_i64("ends", {1}, {8});
  m.init_i64("axes", {1}, {1});
  m.node("Slice", {"x", "starts", "ends", "axes"}, {"y"}, "head");
  m.output("y");
  spit(path("wide.onnx"), m.bytes());
  expect_error(kiln("run wide.onnx", kVirtualKib), 1, "out of memory");
}

// Writing the outputs costs no full copy of them: a run whose output is a few hundred MB
// peaks at about the arena (which holds the output) above a run of the same model made tiny.
TEST_F(CliRunBench, OutputsAreWrittenWithoutCopies) {
  std::mt19937_64 rng(std::random_device{}());
  auto pad_model = [&](int64_t rows, int64_t cols) {
    kiln::onnx_test::ModelBuilder m;
    m.input("x", {1, 1});
    m.init_i64("pads", {4}, {0, 0, rows - 1, cols - 1});
    m.node("Pad", {"x", "pads"}, {"y"}, "pad");
    m.output("y");
    return m.bytes();
  };
  const int64_t rows = 6000 + static_cast<int64_t>(rng() % 1000), cols = 10000;
  const long output_kib = static_cast<long>(rows * cols * 4 / 1024);
  spit(path("small.onnx"), pad_model(2, 3));
  spit(path("large.onnx"), pad_model(rows, cols));
  const Result small = kiln("run small.onnx --output-dir S");
  const Result large = kiln("run large.onnx --output-dir L");
  ASSERT_EQ(small.code, 0) << small.err;
  ASSERT_EQ(large.code, 0) << large.err;
  const NpyArray y = kiln::cli::read_npy(path("L/y.npy"));
  EXPECT_EQ(y.shape, (kiln::graph::Shape{rows, cols}));
  EXPECT_EQ(std::count(y.data.begin(), y.data.end(), 0.0f), rows * cols - 1);  // all but x
  EXPECT_LT(large.max_rss_kib - small.max_rss_kib, output_kib * 3 / 2)
      << "output " << output_kib << " KiB";
}

// A Conv whose data input is an initializer (valid ONNX; onnxruntime runs it) runs and matches
// the reference interpreter on the imported graph.
TEST_F(CliRunBench, ConvOfAConstantRuns) {
  std::mt19937_64 rng(std::random_device{}());
  const int64_t c = 1 + rng() % 4, h = 4 + rng() % 6, co = 1 + rng() % 6;
  kiln::onnx_test::ModelBuilder m;
  m.input("s", {1, co, h - 2, h - 2});
  m.init("x", {1, c, h, h}, kiln::onnx_test::rnd(c * h * h, rng()));
  m.init("w", {co, c, 3, 3}, kiln::onnx_test::rnd(co * c * 9, rng()));
  m.node("Conv", {"x", "w"}, {"y"}, "conv");
  m.node("Add", {"y", "s"}, {"z"}, "add");
  m.output("z");
  spit(path("cconv.onnx"), m.bytes());
  const kiln::graph::Shape s_shape = {1, co, h - 2, h - 2};
  const kiln::graph::Tensor s{s_shape, kiln::graph::Layout::nchw,
                              kiln::onnx_test::rnd(co * (h - 2) * (h - 2), rng())};
  kiln::cli::write_npy(path("s.npy"), s.shape, s.data.data());
  const Result r = kiln("run cconv.onnx --input s.npy --check --output-dir D");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  const kiln::graph::Tensor want =
      kiln::graph::run_reference(kiln::onnx_test::import(m), {s})[0];
  const NpyArray got = kiln::cli::read_npy(path("D/z.npy"));
  ASSERT_EQ(got.shape, want.shape);
  EXPECT_LE(kiln::graph::worst_error_ratio(got.data, want.data, 1e-4, 1e-5), 1.0);
}

// Pixels in 0..500 (a Caffe-style model without normalization) through a 3x3 convolution and
// the `Identity:0` output tf2onnx ends a graph with. The output reaches about 1.5e3, where
// float32 resolves 1e-4: --check scales its atol with the output's magnitude (a fixed 1e-4 flagged
// the correct Winograd kernel, whose error against float64 was 2.5e-6 of the largest value), and
// the output keeps its name.
TEST_F(CliRunBench, CheckJudgesLargeValuesAtTheirScaleAndOutputsKeepTheirNames) {
  kiln::onnx_test::ModelBuilder m;
  m.input("x", {1, 16, 64, 64});
  m.init("w", {16, 16, 3, 3}, kiln::onnx_test::rnd(16 * 16 * 9, 5));
  kiln::onnx_test::attr_ints(m.node("Conv", {"x", "w"}, {"y"}, "conv"), "pads", {1, 1, 1, 1});
  m.node("Identity", {"y"}, {"Identity:0"}, "identity");
  m.output("Identity:0");
  spit(path("pixels.onnx"), m.bytes());
  const kiln::graph::Shape shape = {1, 16, 64, 64};
  const kiln::graph::Tensor x{shape, kiln::graph::Layout::nchw,
                              kiln::graph::random_uniform(16 * 64 * 64, 0.0f, 500.0f, 11)};
  kiln::cli::write_npy(path("x.npy"), x.shape, x.data.data());
  const Result r = kiln("run pixels.onnx --input x.npy --check --output-dir D");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_FALSE(contains(r.out, "OUT OF TOLERANCE")) << r.out;
  EXPECT_TRUE(contains(r.out, "output Identity:0 [1, 16, 64, 64]")) << r.out;
  const kiln::graph::Tensor want = kiln::graph::run_reference(kiln::onnx_test::import(m), {x})[0];
  const NpyArray got = kiln::cli::read_npy(path("D/Identity_0.npy"));
  ASSERT_EQ(got.shape, want.shape);
  float largest = 0;
  for (float v : want.data) largest = std::max(largest, std::fabs(v));
  EXPECT_GT(largest, 100.0f);
  EXPECT_LE(kiln::graph::worst_error_ratio(got.data, want.data, 1e-3, 1e-4 * largest), 1.0);
}

// A second `kiln compile` of the same model takes every kernel and the model's object from the
// cache and writes the same library; a damaged cache entry is compiled again.
TEST_F(CliRunBench, CompileTakesUnchangedKernelsFromTheCache) {
  const Result cold = kiln("compile example -o a --targets x86-64-linux");
  ASSERT_EQ(cold.code, 0) << cold.out << cold.err;
  EXPECT_FALSE(contains(cold.out, "(cached)")) << cold.out;
  const Result warm = kiln("compile example -o b --targets x86-64-linux");
  ASSERT_EQ(warm.code, 0) << warm.out << warm.err;
  EXPECT_TRUE(contains(warm.out, "kernel 1/2: A_to_nhwc (cached)")) << warm.out;
  EXPECT_TRUE(contains(warm.out, "kernel 2/2: conv_out (cached)")) << warm.out;
  // The model's source too, though another output directory stages it elsewhere.
  EXPECT_TRUE(contains(cold.out, "      example.cpp\n")) << cold.out;
  EXPECT_TRUE(contains(warm.out, "      example.cpp (cached)")) << warm.out;
  EXPECT_EQ(fs::file_size(path("b/example.a")), fs::file_size(path("a/example.a")));
  for (const auto& e : fs::recursive_directory_iterator(path("cache/kiln/archives")))
    if (e.path().filename() == "example_k1.a") spit(e.path().string(), "damaged");
  const Result repaired = kiln("compile example -o b --targets x86-64-linux");
  ASSERT_EQ(repaired.code, 0) << repaired.out << repaired.err;
  EXPECT_TRUE(contains(repaired.out, "kernel 1/2: A_to_nhwc (cached)")) << repaired.out;
  EXPECT_TRUE(contains(repaired.out, "kernel 2/2: conv_out\n")) << repaired.out;
}

}  // namespace
