// ONNX loader safety: malformed files, bad dims and sizes, duplicate names, cycles, opsets and
// external data all give a clear error naming the problem, never a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>

#include "graph/builder.h"
#include "graph/printable.h"
#include "graph_test_util.h"
#include "onnx_test_models.h"

namespace kiln::graph {
namespace {

using onnx_test::attr_f;
using onnx_test::attr_i;
using onnx_test::attr_ints;
using onnx_test::attr_s;
using onnx_test::Dims;
using onnx_test::import;
using onnx_test::import_error;
using onnx_test::ModelBuilder;
using onnx_test::rnd;
using testing::HasSubstr;
using testing_util::count_ops;
using TP = ::onnx::TensorProto;

ModelBuilder relu_model() {
  ModelBuilder m(13);
  m.input("x", {2, 2});
  m.node("Relu", {"x"}, {"y"}, "r");
  m.output("y");
  return m;
}

std::string temp_file(const std::string& name, const std::string& bytes) {
  const std::string path = testing_util::unique_temp_path(name);
  std::ofstream(path, std::ios::binary) << bytes;
  return path;
}

TEST(OnnxLoader, GarbageTruncatedAndMissingFiles) {
  EXPECT_THAT(import_error("\x08\x07garbage\xff\xff\xff"), HasSubstr("cannot parse the model"));
  ModelBuilder m = relu_model();
  m.init("big", {64}, rnd(64, 131));
  const std::string bytes = m.bytes();
  const std::string path = temp_file("truncated.onnx", bytes.substr(0, bytes.size() / 2));
  try {
    onnx::import_model(path);
    ADD_FAILURE() << "a truncated model imported";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(path));
    EXPECT_THAT(e.what(), HasSubstr("truncated"));
  }
  std::remove(path.c_str());
  EXPECT_THROW(
      {
        try {
          onnx::import_model("/nonexistent/model.onnx");
        } catch (const Error& e) {
          EXPECT_THAT(e.what(), HasSubstr("'/nonexistent/model.onnx' does not exist"));
          throw;
        }
      },
      Error);
}

TEST(OnnxLoader, BadDimensionsAndDataSizes) {
  auto with_init = [](auto edit) {
    ModelBuilder m = relu_model();
    TP& t = *m.graph().add_initializer();
    ModelBuilder::fill(t, "w", {2, 2}, TP::FLOAT);
    edit(t);
    return import_error(m.bytes());
  };
  EXPECT_THAT(with_init([](TP& t) { t.set_dims(1, -3); }),
              HasSubstr("initializer 'w' has a negative dimension"));
  EXPECT_THAT(
      with_init([](TP& t) { t.set_dims(0, int64_t{1} << 40), t.set_dims(1, int64_t{1} << 40); }),
      HasSubstr("overflows int64"));
  EXPECT_THAT(with_init([](TP& t) { t.set_raw_data(std::string(12, '\0')); }),
              HasSubstr("initializer 'w' has 12 bytes of raw_data"));
  EXPECT_THAT(with_init([](TP& t) { t.add_float_data(1.0f); }),
              HasSubstr("initializer 'w' has 1 values in float_data; its dims [2, 2] need 4"));
  EXPECT_THAT(with_init([](TP& t) {
                t.set_data_type(TP::INT64);
                for (int k = 0; k < 5; ++k) t.add_int64_data(k);
              }),
              HasSubstr("5 values in int64_data"));
  EXPECT_THAT(with_init([](TP& t) {
                t.set_data_type(TP::INT32);
                t.add_int32_data(1);
              }),
              HasSubstr("1 values in int32_data"));
  EXPECT_THAT(
      with_init([](TP& t) {
        t.set_data_location(TP::EXTERNAL);
        auto* e = t.add_external_data();
        e->set_key("location"), e->set_value("../../etc/passwd");
      }),
      HasSubstr("initializer 'w' keeps its data in '../../etc/passwd'; an external data location "
                "must be a relative path inside the model's directory"));
  EXPECT_THAT(with_init([](TP& t) { t.set_data_type(TP::STRING); }), HasSubstr("dtype STRING"));
  EXPECT_THAT(with_init([](TP& t) {
                for (int k = 0; k < 40; ++k) t.add_dims(1);
              }),
              HasSubstr("initializer 'w' has rank 42"));
}

TEST(OnnxLoader, DuplicateNamesCyclesAndMissingProducers) {
  ModelBuilder twice = relu_model();
  twice.node("Sigmoid", {"x"}, {"y"}, "s");
  EXPECT_THAT(import_error(twice.bytes()),
              HasSubstr("node 's' (Sigmoid): output 'y' is already produced by node 'r' (Relu)"));
  ModelBuilder shadow = relu_model();
  shadow.init("y", {2, 2}, rnd(4, 141));
  EXPECT_THAT(import_error(shadow.bytes()),
              HasSubstr("output 'y' is already produced by an initializer"));
  ModelBuilder inputs = relu_model();
  inputs.input("x", {2, 2});
  EXPECT_THAT(import_error(inputs.bytes()), HasSubstr("graph input 'x' is listed twice"));
  ModelBuilder inits = relu_model();
  inits.init("w", {1}, {1.0f}), inits.init("w", {1}, {2.0f});
  EXPECT_THAT(import_error(inits.bytes()),
              HasSubstr("initializer 'w' has the same name as an initializer"));

  ModelBuilder cycle(13);
  cycle.input("x", {2, 2});
  cycle.node("Add", {"x", "b"}, {"a"}, "first");
  cycle.node("Relu", {"a"}, {"b"}, "second");
  cycle.output("b");
  EXPECT_THAT(import_error(cycle.bytes()),
              HasSubstr("node 'first' (Add): input 'b' is not produced by any earlier node, "
                        "initializer or graph input"));
  ModelBuilder missing = relu_model();
  missing.graph().mutable_output(0)->set_name("z");
  EXPECT_THAT(import_error(missing.bytes()), HasSubstr("graph output 'z' is not produced"));
}

TEST(OnnxLoader, OpsetsShapesAndDtypes) {
  ModelBuilder future = relu_model();
  future.model().mutable_opset_import(0)->set_version(99);
  EXPECT_THAT(import_error(future.bytes()), HasSubstr("opset 99 of the default ONNX domain"));
  ModelBuilder none = relu_model();
  none.model().mutable_opset_import(0)->set_domain("ai.onnx.ml");
  EXPECT_THAT(import_error(none.bytes()), HasSubstr("imports no opset of the default ONNX domain"));
  ModelBuilder symbolic = relu_model();
  symbolic.graph()
      .mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->set_dim_param("N");
  EXPECT_THAT(import_error(symbolic.bytes()),
              HasSubstr("graph input 'x' has a symbolic dimension 'N'"));
  ModelBuilder dtype = relu_model();
  dtype.graph().mutable_input(0)->mutable_type()->mutable_tensor_type()->set_elem_type(TP::DOUBLE);
  EXPECT_THAT(import_error(dtype.bytes()), HasSubstr("graph input 'x' has dtype DOUBLE"));
  ModelBuilder huge = relu_model();
  huge.init_i64("shape", {3}, {int64_t{1} << 20, int64_t{1} << 20, 1 << 10});
  huge.node("ConstantOfShape", {"shape"}, {"z"}, "fill");
  huge.output("z");
  EXPECT_THAT(import_error(huge.bytes()), HasSubstr("node 'fill' (ConstantOfShape): shape"));
}

// A model exported with a dynamic batch: x and z share the symbolic batch 'N'; x's shape is
// folded into the Reshape's target (x.view(x.size(0), -1)), so the output's shape follows it.
ModelBuilder dynamic_batch_model() {
  ModelBuilder m(13);
  for (const char* name : {"x", "z"}) {
    m.input(name, {1, 3, 2, 2});
    onnx_test::make_symbolic(m, name);
  }
  m.node("Add", {"x", "z"}, {"s"}, "add");
  onnx_test::add_batch_flatten(m, "s", "x", "y");
  m.output("y");
  return m;
}

TEST(OnnxLoader, InputShapesBindSymbolicDimensions) {
  const ModelBuilder m = dynamic_batch_model();
  for (int64_t batch : {1, 4}) {
    onnx::ImportOptions o;
    o.input_shapes = {{"x", {batch, 3, 2, 2}}};  // z shares 'N', so it takes the same size
    const Graph g = import(m, o);
    EXPECT_EQ(g.value(g.inputs[0]).shape, (Shape{batch, 3, 2, 2}));
    EXPECT_EQ(g.value(g.inputs[1]).shape, (Shape{batch, 3, 2, 2}));
    EXPECT_EQ(g.value(g.outputs[0]).shape, (Shape{batch, 12}));
    const Tensor x{{batch, 3, 2, 2}, Layout::nchw, rnd(static_cast<size_t>(batch) * 12, 150)};
    const Tensor z{{batch, 3, 2, 2}, Layout::nchw, rnd(static_cast<size_t>(batch) * 12, 151)};
    const std::vector<float> y = run_reference(g, {x, z})[0].data;
    ASSERT_EQ(y.size(), x.data.size());
    for (size_t i = 0; i < y.size(); ++i) EXPECT_EQ(y[i], x.data[i] + z.data[i]) << i;
  }
}

TEST(OnnxLoader, InputShapeErrorsNameTheInputAndTheFlag) {
  const std::string m = dynamic_batch_model().bytes();
  auto with = [&](std::vector<std::pair<std::string, Shape>> shapes) {
    onnx::ImportOptions o;
    o.input_shapes = std::move(shapes);
    return import_error(m, o);
  };
  EXPECT_THAT(with({}), HasSubstr("graph input 'x' has a symbolic dimension 'N' (axis 0); give "
                                  "its shape with --input-shape x=1,3,2,2"));
  EXPECT_THAT(with({{"x", {2, 4, 2, 2}}}),
              HasSubstr("graph input 'x' has the fixed dimension 3 on axis 1, but the shape given "
                        "for it is [2, 4, 2, 2] (only symbolic dimensions can be bound)"));
  EXPECT_THAT(with({{"x", {2, 3, 2}}}),
              HasSubstr("graph input 'x' has rank 4, but the shape given for it, [2, 3, 2], has rank 3"));
  EXPECT_THAT(with({{"w", {2, 3, 2, 2}}}),
              HasSubstr("a shape is given for input 'w', which is not a graph input of the model "
                        "(its inputs: 'x', 'z')"));
  EXPECT_THAT(with({{"x", {2, 3, 2, 2}}, {"z", {4, 3, 2, 2}}}),
              HasSubstr("symbolic dimension 'N' is given the size 2 by the shape of input 'x' and "
                        "4 by input 'z'"));
  EXPECT_THAT(with({{"x", {2, 3, 2, 2}}, {"x", {2, 3, 2, 2}}}),
              HasSubstr("the shape of input 'x' is given twice"));
  EXPECT_THAT(with({{"x", {0, 3, 2, 2}}}), HasSubstr("dimensions must be positive"));
  // An image of free size: the suggestion names the dimensions to fill in (a 1 there would be
  // a one-pixel image), and "?" for one without a name.
  ModelBuilder image(13);
  image.input("x", {1, 3, 8, 8});
  auto* dims =
      image.graph().mutable_input(0)->mutable_type()->mutable_tensor_type()->mutable_shape();
  dims->mutable_dim(0)->set_dim_param("batch");
  dims->mutable_dim(2)->set_dim_param("height");
  dims->mutable_dim(3)->clear_dim_value();
  image.node("Relu", {"x"}, {"y"}, "relu");
  image.output("y");
  EXPECT_THAT(import_error(image.bytes()),
              HasSubstr("give its shape with --input-shape x=1,3,height,?"));
  // A fixed model takes its own shape and refuses any other.
  EXPECT_EQ(import_error(relu_model().bytes(), [] {
              onnx::ImportOptions o;
              o.input_shapes = {{"x", {2, 2}}};
              return o;
            }()),
            "");
}

// The CLI's default for a dynamic batch: 1 for each input whose free dimension is its first,
// nothing for an input a given shape binds (itself or through a shared dim_param), nothing for
// an input with another free dimension, nothing for initializers listed as inputs.
TEST(OnnxLoader, DefaultBatchShapesBindOnlyAFreeFirstDimension) {
  using Shapes = std::vector<std::pair<std::string, Shape>>;
  const std::string shared = dynamic_batch_model().bytes();  // x and z share 'N'
  EXPECT_EQ(onnx::default_batch_shapes(shared, {}, 1),
            (Shapes{{"x", {1, 3, 2, 2}}, {"z", {1, 3, 2, 2}}}));
  EXPECT_EQ(onnx::default_batch_shapes(shared, {}, 3),
            (Shapes{{"x", {3, 3, 2, 2}}, {"z", {3, 3, 2, 2}}}));
  EXPECT_EQ(onnx::default_batch_shapes(shared, {{"z", {4, 3, 2, 2}}}, 1), Shapes{});
  onnx::ImportOptions o;
  o.input_shapes = onnx::default_batch_shapes(shared, {}, 1);
  const Graph g = import(dynamic_batch_model(), o);
  EXPECT_EQ(g.value(g.outputs[0]).shape, (Shape{1, 12}));

  ModelBuilder m(13);  // a: unknown batch; b: free batch and height; c: fixed; w: an initializer
  for (const char* name : {"a", "b", "c"}) m.input(name, {2, 3, 4, 4});
  m.graph()
      .mutable_input(0)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(0)
      ->clear_dim_value();
  onnx_test::make_symbolic(m, "b", 0);
  m.graph()
      .mutable_input(1)
      ->mutable_type()
      ->mutable_tensor_type()
      ->mutable_shape()
      ->mutable_dim(2)
      ->set_dim_param("H");
  m.input("w", {2, 3, 4, 4});
  onnx_test::make_symbolic(m, "w", 0);
  m.init("w", {2, 3, 4, 4}, rnd(96, 152));
  m.node("Add", {"a", "b"}, {"s"}, "add");
  m.node("Add", {"s", "c"}, {"t"}, "add2");
  m.node("Add", {"t", "w"}, {"y"}, "add3");
  m.output("y");
  EXPECT_EQ(onnx::default_batch_shapes(m.bytes(), {}, 1), (Shapes{{"a", {1, 3, 4, 4}}}));
  EXPECT_EQ(onnx::default_batch_shapes(m.bytes(), {{"a", {2, 3, 4, 4}}}, 1), Shapes{});
  EXPECT_EQ(onnx::default_batch_shapes(m.bytes(), {{"q", {2, 3, 4, 4}}}, 1), Shapes{});
  EXPECT_TRUE(onnx::default_batch_shapes("not a model", {}, 1).empty());
}

// Names, op types and domains come from the file: in an error they are escaped, so the
// message stays one line and sends nothing to the terminal.
TEST(OnnxLoader, ModelControlledTextInErrorsIsEscaped) {
  std::mt19937_64 rng(std::random_device{}());
  auto hostile = [&] {
    std::string s = rng() % 2 ? "\n" : "\x1b[2J";
    for (int k = 0; k < 4; ++k) s += static_cast<char>(rng() % 0x20);
    return s + (rng() % 2 ? "\r" : "\x1b]0;title\x07");
  };
  auto expect_safe = [](const std::string& msg, const std::string& name) {
    EXPECT_THAT(msg, HasSubstr(printable(name)));
    for (unsigned char c : msg) EXPECT_TRUE(c >= 0x20 && c != 0x7f) << testing::PrintToString(msg);
  };
  for (int round = 0; round < 8; ++round) {
    const std::string node = "n" + hostile(), value = "v" + hostile(), op = "Op" + hostile();
    ModelBuilder unknown_op = relu_model();
    unknown_op.node(op, {"y"}, {"z"}, node);
    unknown_op.output("z");  // nodes no output needs are not converted
    expect_safe(import_error(unknown_op.bytes()), node);
    expect_safe(import_error(unknown_op.bytes()), op);
    ModelBuilder missing_input = relu_model();
    missing_input.node("Relu", {value}, {"z"}, node);
    missing_input.output("z");
    expect_safe(import_error(missing_input.bytes()), value);
    ModelBuilder domain = relu_model();
    domain.node("Relu", {"y"}, {"z"}, node).set_domain(value);
    domain.output("z");
    expect_safe(import_error(domain.bytes()), value);
    ModelBuilder duplicate = relu_model();
    duplicate.input(value, {2, 2});
    duplicate.input(value, {2, 2});
    expect_safe(import_error(duplicate.bytes()), value);
    ModelBuilder no_output = relu_model();
    no_output.graph().mutable_output(0)->set_name(value);
    expect_safe(import_error(no_output.bytes()), value);
  }
}

TEST(OnnxLoader, TensorFiles) {
  TP t;
  ModelBuilder::fill(t, "t", {1, 2, 1, 2}, TP::FLOAT);
  const auto data = rnd(4, 151);
  t.set_raw_data(std::string(reinterpret_cast<const char*>(data.data()), 16));
  const std::string path = temp_file("t.pb", t.SerializeAsString());
  const Tensor got = onnx::load_tensor_file(path);
  EXPECT_EQ(got.shape, (Shape{1, 2, 1, 2}));
  EXPECT_EQ(got.layout, Layout::nchw);
  EXPECT_EQ(got.data, data);

  TP ints;
  ModelBuilder::fill(ints, "i", {3}, TP::INT64);
  for (int64_t v : {-4, 0, 7}) ints.add_int64_data(v);
  const std::string ipath = temp_file("i.pb", ints.SerializeAsString());
  EXPECT_EQ(onnx::load_tensor_file(ipath).data, (std::vector<float>{-4, 0, 7}));

  t.set_raw_data(std::string(15, '\0'));
  const std::string bad = temp_file("bad.pb", t.SerializeAsString());
  EXPECT_THROW(onnx::load_tensor_file(bad), Error);
  const std::string junk = temp_file("junk.pb", "\xff\xff\xff\xff");
  try {
    onnx::load_tensor_file(junk);
    ADD_FAILURE() << "junk parsed";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(junk));
  }
  for (const std::string& p : {path, ipath, bad, junk}) std::remove(p.c_str());
}

// Initializers kept in a file beside the model (ONNX external data): read at their offset and
// length from the model's directory; every claim checked before anything is read.
TEST(OnnxLoader, ExternalData) {
  const std::string dir = testing_util::unique_temp_path("external");
  std::filesystem::create_directories(dir);
  const std::vector<float> w = rnd(6, 141);
  std::string data(12, 'J');
  data.append(reinterpret_cast<const char*>(w.data()), 24);
  std::ofstream(dir + "/w.bin", std::ios::binary) << data;
  auto model = [&](const std::string& location, const std::string& offset,
                   const std::string& length) {
    ModelBuilder m(13);
    m.input("x", {2, 3});
    m.init("w", {2, 3}, std::vector<float>(6, 0.0f));
    m.node("Add", {"x", "w"}, {"y"}, "add");
    m.output("y");
    auto& t = *m.graph().mutable_initializer(0);
    t.clear_float_data();
    t.set_data_location(TP::EXTERNAL);
    for (const auto& [key, value] : {std::pair<std::string, std::string>{"location", location},
                                     {"offset", offset},
                                     {"length", length}}) {
      if (value.empty()) continue;
      auto* kv = t.add_external_data();
      kv->set_key(key);
      kv->set_value(value);
    }
    const std::string path = dir + "/m.onnx";
    std::ofstream(path, std::ios::binary | std::ios::trunc) << m.bytes();
    return std::make_pair(path, m.bytes());
  };
  auto error = [&](const std::string& location, const std::string& offset,
                   const std::string& length) {
    try {
      onnx::import_model(model(location, offset, length).first);
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const Graph g = onnx::import_model(model("w.bin", "12", "24").first);
  const std::vector<float> x = rnd(6, 142);
  const Tensor y = run_reference(g, {Tensor{{2, 3}, Layout::any, x}})[0];
  for (size_t i = 0; i < 6; ++i) EXPECT_EQ(y.data[i], x[i] + w[i]) << i;
  EXPECT_EQ(error("w.bin", "12", ""), "");   // the length defaults to the rest of the file
  EXPECT_EQ(error("w.bin", "0", "24"), "");  // 24 bytes, the wrong ones: nothing can tell
  EXPECT_EQ(error("w.bin", "", "24"), "");   // the offset defaults to 0
  EXPECT_THAT(error("w.bin", "12", "20"), HasSubstr("has 20 bytes in"));
  EXPECT_THAT(error("w.bin", "30", "24"), HasSubstr("claims bytes [30, 54)"));
  EXPECT_THAT(error("w.bin", "-4", "24"), HasSubstr("external_data offset '-4'"));
  EXPECT_THAT(error("../w.bin", "12", "24"), HasSubstr("must be a relative path inside"));
  EXPECT_THAT(error(dir + "/w.bin", "12", "24"), HasSubstr("must be a relative path inside"));
  EXPECT_THAT(error("nope.bin", "12", "24"), HasSubstr("does not exist"));
  EXPECT_THAT(import_error(model("w.bin", "12", "24").second),
              HasSubstr("but the model was given as bytes"));
  std::filesystem::remove_all(dir);
}

// Nodes no graph output depends on are never converted, so an op Kiln lacks there is no error
// (PyTorch's dynamo exporter leaves such branches); on the way to an output it still is.
TEST(OnnxLoader, NodesNoOutputNeedsAreSkipped) {
  ModelBuilder m(13);
  m.input("x", {2, 3});
  m.node("Relu", {"x"}, {"y"}, "relu");
  m.node("Det", {"x"}, {"dead"}, "unsupported_and_unread");
  m.node("Sub", {"dead", "y"}, {"dead2"}, "reads_it");
  m.output("y");
  const Graph g = import(m);
  EXPECT_EQ(g.num_nodes(), 1u);
  m.output("dead2");
  EXPECT_EQ(import_error(m.bytes()), "node 'unsupported_and_unread' (Det): op not supported");
}

}  // namespace
}  // namespace kiln::graph
