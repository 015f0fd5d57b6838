// ONNX frontend: model-local functions (ModelProto.functions), inlined at import. Each model
// here is compared with the same network written without functions, or with values computed
// from the ONNX definitions; the refusals name the call.
#include <gmock/gmock.h>
#include <google/protobuf/unknown_field_set.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "onnx_test_models.h"

namespace kiln::graph {
namespace {

using namespace onnx_test;  // ModelBuilder, import, import_error, run_one, attr_*, rnd, Dims
using ::onnx::AttributeProto;
using ::onnx::FunctionProto;
using testing::HasSubstr;

// A function of domain "custom" taking `inputs`, giving `outputs`, declaring `attributes`, whose
// default-domain opset is `opset` (0: none declared, the model's).
FunctionProto& add_function(ModelBuilder& m, const std::string& name,
                            const std::vector<std::string>& inputs,
                            const std::vector<std::string>& outputs,
                            const std::vector<std::string>& attributes, int opset = 0) {
  FunctionProto& f = *m.model().add_functions();
  f.set_name(name);
  f.set_domain("custom");
  for (const auto& s : inputs) f.add_input(s);
  for (const auto& s : outputs) f.add_output(s);
  for (const auto& s : attributes) f.add_attribute(s);
  if (opset) {
    auto* o = f.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
  }
  return f;
}

::onnx::NodeProto& body_node(FunctionProto& f, const std::string& op,
                             const std::vector<std::string>& in,
                             const std::vector<std::string>& out) {
  auto* n = f.add_node();
  n->set_op_type(op);
  for (const auto& s : in) n->add_input(s);
  for (const auto& s : out) n->add_output(s);
  return *n;
}

// A body attribute that takes the value of the call's attribute `ref`.
void attr_ref(::onnx::NodeProto& n, const std::string& name, const std::string& ref,
              AttributeProto::AttributeType type) {
  add_attr(n, name, type).set_ref_attr_name(ref);
}

::onnx::NodeProto& call(ModelBuilder& m, const std::string& function,
                        const std::vector<std::string>& in, const std::vector<std::string>& out,
                        const std::string& name) {
  auto& n = m.node(function, in, out, name);
  n.set_domain("custom");
  return n;
}

void import_custom_domain(ModelBuilder& m) {
  auto* o = m.model().add_opset_import();
  o->set_domain("custom");
  o->set_version(1);
}

// LeakyRelu(x * sigmoid(x)) with the slope an attribute: called twice, once setting it and once
// taking the function's default (IR version 9's attribute_proto, which Debian's ONNX classes
// keep as an unknown field), and a third time with no default either (LeakyRelu's own 0.01).
TEST(OnnxFunctions, CallsAreInlinedWithTheirAttributes) {
  const auto build = [](bool with_functions) {
    ModelBuilder m(18);
    m.input("x", {2, 5});
    if (!with_functions) {
      const auto block = [&](const std::string& in, const std::string& out, float slope,
                             const std::string& tag) {
        m.node("Sigmoid", {in}, {tag + "s"});
        m.node("Mul", {in, tag + "s"}, {tag + "m"});
        attr_f(m.node("LeakyRelu", {tag + "m"}, {out}), "alpha", slope);
      };
      block("x", "a", 0.2f, "1");
      block("a", "b", 0.05f, "2");
      block("b", "y", 0.01f, "3");
      m.output("y");
      return m;
    }
    import_custom_domain(m);
    for (const bool with_default : {true, false}) {
      // Declared in `attribute` when it has no default, in attribute_proto when it has one.
      FunctionProto& f = add_function(
          m, with_default ? "Block" : "BlockNoDefault", {"in"}, {"out"},
          with_default ? std::vector<std::string>{} : std::vector<std::string>{"slope"});
      if (with_default) {
        AttributeProto slope;
        slope.set_name("slope");
        slope.set_type(AttributeProto::FLOAT);
        slope.set_f(0.05f);
        f.GetReflection()->MutableUnknownFields(&f)->AddLengthDelimited(11,
                                                                        slope.SerializeAsString());
      }
      body_node(f, "Sigmoid", {"in"}, {"s"});
      body_node(f, "Mul", {"in", "s"}, {"m"});
      attr_ref(body_node(f, "LeakyRelu", {"m"}, {"out"}), "alpha", "slope", AttributeProto::FLOAT);
    }
    attr_f(call(m, "Block", {"x"}, {"a"}, "first"), "slope", 0.2f);
    call(m, "Block", {"a"}, {"b"}, "second");
    call(m, "BlockNoDefault", {"b"}, {"y"}, "third");
    m.output("y");
    return m;
  };
  const std::vector<float> x = rnd(10, 2301, -4.0f, 4.0f);
  const std::vector<float> want = run_one(build(false), x).data;
  EXPECT_EQ(run_one(build(true), x).data, want);
  // Each call's internal values are its own: the graph names them after the call.
  const Graph g = import(build(true));
  int named = 0;
  for (const Value& v : g.values()) named += v.name.rfind("second/", 0) == 0;
  EXPECT_GT(named, 0);
}

// A function's nodes follow its own opset: ReduceMean with axes as an attribute (opset 13) in a
// model of opset 18, where the model's own ReduceMean takes them as an input. A call leaving out
// an optional input gives the body a missing one (Clip without its max). Functions call
// functions.
TEST(OnnxFunctions, BodiesKeepTheirOpsetMissingInputsAndNest) {
  ModelBuilder m(18);
  import_custom_domain(m);
  m.input("x", {2, 3, 4});
  FunctionProto& mean = add_function(m, "MeanLast", {"t"}, {"r"}, {}, 13);
  attr_ints(body_node(mean, "ReduceMean", {"t"}, {"r"}), "axes", {2});
  FunctionProto& outer = add_function(m, "ClipMean", {"t", "lo", "hi"}, {"r"}, {}, 13);
  body_node(outer, "Clip", {"t", "lo", "hi"}, {"c"});
  body_node(outer, "MeanLast", {"c"}, {"r"}).set_domain("custom");
  m.init("lo", {}, {-0.25f});
  call(m, "ClipMean", {"x", "lo"}, {"y"}, "clip_mean");
  m.output("y");
  const std::vector<float> x = rnd(24, 2302);
  const Graph g = import(m);
  const Value& in = g.value(g.inputs.at(0));
  const Tensor y = run_reference(g, {Tensor{in.shape, in.layout, x}})[0];
  ASSERT_EQ(y.shape, (Shape{2, 3, 1}));
  for (int r = 0; r < 6; ++r) {
    double sum = 0;
    for (int k = 0; k < 4; ++k) sum += std::max(x[r * 4 + k], -0.25f);
    EXPECT_NEAR(y.data[r], sum / 4, 1e-6) << r;
  }
}

// Functions of one name told apart by their overload (IR version 10; unknown fields to
// Debian's ONNX classes: FunctionProto 13, NodeProto 8).
TEST(OnnxFunctions, OverloadsAreToldApart) {
  ModelBuilder m(18);
  import_custom_domain(m);
  m.input("x", {4});
  for (const char* overload : {"neg", "abs"}) {
    FunctionProto& f = add_function(m, "F", {"a"}, {"b"}, {});
    body_node(f, std::string(overload) == "neg" ? "Neg" : "Abs", {"a"}, {"b"});
    f.GetReflection()->MutableUnknownFields(&f)->AddLengthDelimited(13, overload);
  }
  auto& n = call(m, "F", {"x"}, {"y"}, "f");
  n.GetReflection()->MutableUnknownFields(&n)->AddLengthDelimited(8, "abs");
  m.output("y");
  const std::vector<float> x = {-1.5f, 2.0f, -0.25f, 3.0f};
  EXPECT_EQ(run_one(m, x).data, (std::vector<float>{1.5f, 2.0f, 0.25f, 3.0f}));
}

TEST(OnnxFunctions, RefusalsNameTheCall) {
  const auto model = [](const std::function<void(ModelBuilder&, FunctionProto&)>& edit) {
    ModelBuilder m(18);
    import_custom_domain(m);
    m.input("x", {2});
    FunctionProto& f = add_function(m, "F", {"a"}, {"b"}, {"k"});
    body_node(f, "Relu", {"a"}, {"b"});
    call(m, "F", {"x"}, {"y"}, "the_call");
    m.output("y");
    edit(m, f);
    return m.bytes();
  };
  EXPECT_EQ(import_error(model([](ModelBuilder&, FunctionProto&) {})), "");
  EXPECT_THAT(import_error(model([](ModelBuilder& m, FunctionProto&) {
                attr_i(*m.graph().mutable_node(0), "other", 1);
              })),
              HasSubstr("node 'the_call' (F), a call of function 'custom.F' sets attribute "
                        "'other', which the function does not declare"));
  EXPECT_THAT(import_error(model([](ModelBuilder& m, FunctionProto&) {
                m.graph().mutable_node(0)->add_input("x");
              })),
              HasSubstr("has 2 inputs; the function takes 1"));
  EXPECT_THAT(import_error(model([](ModelBuilder&, FunctionProto& f) {
                body_node(f, "F", {"b"}, {"c"}).set_domain("custom");
              })),
              HasSubstr("a cycle of calls"));
  EXPECT_THAT(import_error(
                  model([](ModelBuilder& m, FunctionProto& f) { *m.model().add_functions() = f; })),
              HasSubstr("model-local function 'custom.F' is defined twice"));
  EXPECT_THAT(import_error(model([](ModelBuilder&, FunctionProto& f) {
                f.mutable_opset_import()->Add()->set_version(29);
              })),
              HasSubstr("model-local function 'custom.F' uses opset 29"));
  // Twenty levels of functions each calling the next twice: a million nodes from a few bytes.
  EXPECT_THAT(import_error(model([](ModelBuilder& m, FunctionProto& f) {
                for (int level = 0; level < 20; ++level) {
                  FunctionProto& g = add_function(m, "G" + std::to_string(level), {"a"}, {"b"}, {});
                  const std::string callee = level == 0 ? "Relu" : "G" + std::to_string(level - 1);
                  body_node(g, callee, {"a"}, {"t"}).set_domain(level == 0 ? "" : "custom");
                  body_node(g, callee, {"t"}, {"b"}).set_domain(level == 0 ? "" : "custom");
                }
                body_node(f, "G19", {"b"}, {"c"}).set_domain("custom");
              })),
              HasSubstr("its functions inlined, exceeds 1048576 nodes"));
  // A chain of 100000 functions, each calling the next: refused for its nesting, without
  // recursing down the whole chain (which would exhaust the stack).
  EXPECT_THAT(import_error(model([](ModelBuilder& m, FunctionProto& f) {
                for (int k = 0; k < 100000; ++k) {
                  FunctionProto& g = add_function(m, "C" + std::to_string(k), {"a"}, {"b"}, {});
                  const std::string callee = k == 99999 ? "Relu" : "C" + std::to_string(k + 1);
                  body_node(g, callee, {"a"}, {"b"}).set_domain(k == 99999 ? "" : "custom");
                }
                body_node(f, "C0", {"b"}, {"c"}).set_domain("custom");
              })),
              HasSubstr("function calls nest deeper than 32"));
  // A body op Kiln does not know is named with the call's prefix.
  EXPECT_THAT(import_error(model([](ModelBuilder&, FunctionProto& f) {
                f.mutable_node(0)->set_op_type("NoSuchOp");
              })),
              HasSubstr("node 'the_call/NoSuchOp_0' (NoSuchOp): op not supported"));
}

}  // namespace
}  // namespace kiln::graph
