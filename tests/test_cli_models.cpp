// `kiln` on model files end to end: symbolic dimensions bound with --input-shape, names that
// must stay inside comments, weights kept in a file beside the model (ONNX external data), the
// Winograd output check and its place in the compile cache.
#include <gtest/gtest.h>

#include <random>

#include "cli_test_util.h"
#include "onnx_test_models.h"

namespace {

using namespace kiln::cli_test;  // CliRunBench, Result, kiln(), expect_error, ...

// x [N, 3, 5, 5] -> Relu -> Mul by w [1, 3, 1, 1] -> x.view(x.size(0), -1): a dynamic batch.
kiln::onnx_test::ModelBuilder dynamic_batch_model(const std::vector<float>& w) {
  kiln::onnx_test::ModelBuilder m;
  m.input("x", {1, 3, 5, 5});
  kiln::onnx_test::make_symbolic(m, "x");
  m.init("w", {1, 3, 1, 1}, w);
  m.node("Relu", {"x"}, {"r"}, "relu");
  m.node("Mul", {"r", "w"}, {"s"}, "mul");
  kiln::onnx_test::add_batch_flatten(m, "s", "x", "y");
  m.output("y");
  return m;
}

// --input-shape binds the batch of every command; runs at two batches compile two graphs (the
// compile cache is keyed by the shapes too) and compute max(x, 0) * w per channel.
TEST_F(CliRunBench, InputShapeBindsASymbolicBatch) {
  const std::vector<float> w = kiln::onnx_test::rnd(3, 160);
  spit(path("dyn.onnx"), dynamic_batch_model(w).bytes());
  for (int64_t batch : {1, 3}) {
    const kiln::graph::Shape shape = {batch, 3, 5, 5};
    const std::vector<float> x = kiln::onnx_test::rnd(batch * 75, 161 + batch);
    kiln::cli::write_npy(path("x.npy"), shape, x.data());
    const std::string dims = std::to_string(batch) + ",3,5,5";
    const Result r = kiln("run dyn.onnx --input-shape x=" + dims + " --input x.npy --output-dir D");
    ASSERT_EQ(r.code, 0) << r.err;
    const NpyArray got = kiln::cli::read_npy(path("D/y.npy"));
    ASSERT_EQ(got.shape, (kiln::graph::Shape{batch, 75}));
    for (size_t i = 0; i < x.size(); ++i)
      EXPECT_FLOAT_EQ(got.data[i], std::max(x[i], 0.0f) * w[(i / 25) % 3]) << i;
    const Result inspect = kiln("inspect dyn.onnx --after input --input-shape x=" + dims);
    ASSERT_EQ(inspect.code, 0) << inspect.err;
    EXPECT_TRUE(contains(inspect.out, "[" + std::to_string(batch) + ", 3, 5, 5]")) << inspect.out;
  }
}

// Without --input-shape, a dynamic batch is 1 in every command, with a note, or, for `kiln run`,
// the batch of its input file; a free dimension elsewhere is still an error that names the flag.
TEST_F(CliRunBench, DynamicBatchDefaultsToOne) {
  const std::vector<float> w = kiln::onnx_test::rnd(3, 162);
  spit(path("dyn.onnx"), dynamic_batch_model(w).bytes());
  const std::string note =
      "note: input 'x' has a dynamic batch; compiling for batch 1, shape [1, 3, 5, 5]";
  const Result r = kiln("run dyn.onnx --output-dir D --seed 7");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, note)) << r.err;
  const std::vector<float> x = kiln::onnx_test::rnd(75, 163);
  kiln::cli::write_npy(path("x.npy"), {1, 3, 5, 5}, x.data());
  const Result with_file = kiln("run dyn.onnx --input x.npy --output-dir D");
  ASSERT_EQ(with_file.code, 0) << with_file.err;
  const NpyArray got = kiln::cli::read_npy(path("D/y.npy"));
  ASSERT_EQ(got.shape, (kiln::graph::Shape{1, 75}));
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_FLOAT_EQ(got.data[i], std::max(x[i], 0.0f) * w[i / 25]) << i;
  for (const std::string cmd : {"bench dyn.onnx --iterations 2", "inspect dyn.onnx --after input",
                                "compile dyn.onnx -o out"}) {
    const Result other = kiln(cmd);
    ASSERT_EQ(other.code, 0) << cmd << "\n" << other.err;
    EXPECT_TRUE(contains(other.err, note)) << cmd << "\n" << other.err;
  }
  EXPECT_TRUE(contains(kiln("inspect dyn.onnx --after input").out, "[1, 3, 5, 5]"));
  // `kiln run` with an input file compiles for the file's batch (--input-shape still wins).
  const std::vector<float> x3 = kiln::onnx_test::rnd(3 * 75, 164);
  kiln::cli::write_npy(path("x3.npy"), {3, 3, 5, 5}, x3.data());
  const Result batch3 = kiln("run dyn.onnx --input x=x3.npy --output-dir D3");
  ASSERT_EQ(batch3.code, 0) << batch3.err;
  EXPECT_TRUE(contains(batch3.err,
                       "note: input 'x' has free dimensions; compiling for [3, 3, 5, 5], "
                       "its input file's shape"))
      << batch3.err;
  const NpyArray got3 = kiln::cli::read_npy(path("D3/y.npy"));
  ASSERT_EQ(got3.shape, (kiln::graph::Shape{3, 75}));
  for (size_t i = 0; i < x3.size(); ++i)
    EXPECT_FLOAT_EQ(got3.data[i], std::max(x3[i], 0.0f) * w[(i / 25) % 3]) << i;
  expect_error(kiln("run dyn.onnx --input x3.npy --input-shape x=2,3,5,5"), 1, "x3.npy");

  kiln::onnx_test::ModelBuilder height = dynamic_batch_model(w);
  kiln::onnx_test::make_symbolic(height, "x", 2);  // batch and height share 'N'
  spit(path("dyn_h.onnx"), height.bytes());
  for (const std::string cmd : {"run dyn_h.onnx", "bench dyn_h.onnx", "inspect dyn_h.onnx",
                                "compile dyn_h.onnx -o out", "tune dyn_h.onnx --db t.db"})
    expect_error(kiln(cmd), 1,
                 "graph input 'x' has a symbolic dimension 'N' (axis 0); give its shape with "
                 "--input-shape x=N,3,N,5");
}

TEST_F(CliRunBench, InputShapeErrors) {
  spit(path("dyn.onnx"), dynamic_batch_model({0.5f, -1.0f, 2.0f}).bytes());
  expect_error(kiln("run dyn.onnx --input-shape x=2,4,5,5"), 1,
               "graph input 'x' has the fixed dimension 3 on axis 1, but the shape given for it "
               "is [2, 4, 5, 5]");
  expect_error(kiln("bench dyn.onnx --input-shape y=2,3,5,5"), 1,
               "a shape is given for input 'y', which is not a graph input of the model (its "
               "inputs: 'x')");
  expect_error(kiln("run dyn.onnx --input-shape x=2,,5,5"), 2, "--input-shape x=2,,5,5");
  expect_error(kiln("run dyn.onnx --input-shape x=2,0,5,5"), 2, "--input-shape x=2,0,5,5");
  expect_error(kiln("run dyn.onnx --input-shape 2,3,5,5"), 2,
               "--input-shape 2,3,5,5: expected NAME=D0,D1,...");
  expect_error(kiln("run example --input-shape A=1,64,56,56"), 2, "the built-in example has none");
}

// kiln compile writes the model's input and output names into comments of NAME.h: a name with
// a newline must not end the comment and put its own code into the user's program.
TEST_F(CliRunBench, CompiledHeaderKeepsNamesInComments) {
  std::mt19937_64 rng(std::random_device{}());
  const std::string marker = "injected" + std::to_string(rng() % 100000);
  const std::string hostile = "x\nint " + marker + "() { return 1; }\n//";
  kiln::onnx_test::ModelBuilder m;
  m.input(hostile, {2, 3});
  kiln::onnx_test::attr_ints(m.node("Transpose", {hostile}, {"y"}, "t"), "perm", {1, 0});
  m.output("y");
  spit(path("m.onnx"), m.bytes());
  const Result r = kiln("compile m.onnx -o out --name m");
  ASSERT_EQ(r.code, 0) << r.out << r.err;
  EXPECT_TRUE(terminal_safe(r.out) && terminal_safe(r.err)) << r.out << r.err;
  std::istringstream header(slurp(path("out/m.h")));
  int mentions = 0;
  for (std::string line; std::getline(header, line);) {
    if (!contains(line, marker)) continue;
    ++mentions;
    EXPECT_EQ(line.rfind("//", 0), 0u) << line;
  }
  EXPECT_EQ(mentions, 1);
}

// Weights in a file beside the model (ONNX external data, as PyTorch's dynamo exporter writes
// them): `kiln run` reads them from the model's directory, and a changed data file with the
// same .onnx is another model, not the compile cache's old one.
TEST_F(CliRunBench, ExternalDataIsReadAndKeysTheCache) {
  kiln::onnx_test::ModelBuilder m;
  m.input("x", {1, 4});
  m.init("w", {1, 4}, {0, 0, 0, 0});
  m.node("Mul", {"x", "w"}, {"y"}, "mul");
  m.output("y");
  auto& w = *m.graph().mutable_initializer(0);
  w.clear_float_data();
  w.clear_raw_data();
  w.set_data_location(::onnx::TensorProto::EXTERNAL);
  auto entry = [&](const std::string& key, const std::string& value) {
    auto* kv = w.add_external_data();
    kv->set_key(key);
    kv->set_value(value);
  };
  entry("location", "weights.bin");
  entry("offset", "8");
  entry("length", "16");
  fs::create_directories(path("model"));
  spit(path("model/m.onnx"), m.bytes());
  const std::vector<float> x = {1.5f, -2.0f, 3.0f, 0.25f};
  kiln::cli::write_npy(path("x.npy"), {1, 4}, x.data());
  for (const std::vector<float>& weights : {std::vector<float>{1, 2, 3, 4}, {-1, 0.5f, 2, 8}}) {
    std::string bytes(8, 'J');  // bytes before the offset that must not be read
    bytes.append(reinterpret_cast<const char*>(weights.data()), 16);
    spit(path("model/weights.bin"), bytes + "tail");
    const Result r = kiln("run model/m.onnx --input x.npy --output-dir out");
    ASSERT_EQ(r.code, 0) << r.err;
    const NpyArray y = kiln::cli::read_npy(path("out/y.npy"));
    ASSERT_EQ(y.data.size(), 4u);
    for (size_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(y.data[i], x[i] * weights[i]) << i;
  }
  fs::remove(path("model/weights.bin"));
  expect_error(kiln("run model/m.onnx"), 1, "does not exist");
}

// A model with a Winograd F(4x4) layer (3x3, 32 -> 32 channels, 32x32): the first `kiln run`
// checks it on the outputs and says so on stderr, the next one takes the checked graph from
// the compile cache (no check line), and `kiln inspect`, which runs nothing, says whether the
// cache holds the check.
TEST_F(CliRunBench, WinogradOutputCheckRunsOnceAndInspectShowsIt) {
  kiln::onnx_test::ModelBuilder m;
  m.input("x", {1, 32, 32, 32});
  std::mt19937 rng(5);
  std::uniform_real_distribution<float> u(-0.06f, 0.06f);
  std::vector<float> w(32 * 32 * 9), b(32);
  for (float& v : w) v = u(rng);
  for (float& v : b) v = u(rng);
  m.init("w", {32, 32, 3, 3}, w);
  m.init("b", {32}, b);
  kiln::onnx_test::attr_ints(m.node("Conv", {"x", "w", "b"}, {"y"}, "conv"), "pads", {1, 1, 1, 1});
  m.output("y");
  spit(path("m.onnx"), m.bytes());
  Result r = kiln("inspect m.onnx");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "== Winograd output check ==\n  not run yet")) << r.out;
  r = kiln("run m.onnx --output-dir out");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "[winograd] 1 Winograd layers, 1 of them F(4x4): outputs at "))
      << r.err;
  r = kiln("run m.onnx --output-dir out");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_FALSE(contains(r.err, "[winograd]")) << r.err;
  EXPECT_TRUE(contains(r.out, "compiled graph from the cache")) << r.out;
  r = kiln("inspect m.onnx");
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_TRUE(contains(r.out, "== Winograd output check ==\n  no layer capped: the outputs were within")) << r.out;
}

}  // namespace
