// Small in-memory ONNX models for the importer tests: a builder over onnx::ModelProto and
// helpers to compare an imported graph's numerics with an independently built one.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "graph/builder.h"
#include "graph/onnx/onnx_import.h"
#include "graph/reference.h"
#include "onnx/onnx_pb.h"

namespace kiln::onnx_test {

using Dims = std::vector<int64_t>;
using TP = ::onnx::TensorProto;

class ModelBuilder {
 public:
  explicit ModelBuilder(int opset = 13) {
    m_.set_ir_version(8);
    auto* o = m_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    m_.mutable_graph()->set_name("test");
  }
  ::onnx::ModelProto& model() { return m_; }
  ::onnx::GraphProto& graph() { return *m_.mutable_graph(); }
  std::string bytes() const { return m_.SerializeAsString(); }

  ::onnx::ValueInfoProto& input(const std::string& name, const Dims& dims, int dtype = TP::FLOAT) {
    auto* v = graph().add_input();
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(dtype);
    for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
    return *v;
  }
  void output(const std::string& name) { graph().add_output()->set_name(name); }

  TP& init(const std::string& name, const Dims& dims, const std::vector<float>& data) {
    TP& t = *graph().add_initializer();
    fill(t, name, dims, TP::FLOAT);
    for (float f : data) t.add_float_data(f);
    return t;
  }
  TP& init_i64(const std::string& name, const Dims& dims, const std::vector<int64_t>& data) {
    TP& t = *graph().add_initializer();
    fill(t, name, dims, TP::INT64);
    for (int64_t v : data) t.add_int64_data(v);
    return t;
  }
  ::onnx::NodeProto& node(const std::string& op, const std::vector<std::string>& in,
                          const std::vector<std::string>& out, const std::string& name = "") {
    auto* n = graph().add_node();
    n->set_op_type(op);
    n->set_name(name);
    for (const auto& s : in) n->add_input(s);
    for (const auto& s : out) n->add_output(s);
    return *n;
  }

  static void fill(TP& t, const std::string& name, const Dims& dims, int dtype) {
    t.set_name(name);
    t.set_data_type(dtype);
    for (int64_t d : dims) t.add_dims(d);
  }

 private:
  ::onnx::ModelProto m_;
};

inline ::onnx::AttributeProto& add_attr(::onnx::NodeProto& n, const std::string& name,
                                        ::onnx::AttributeProto::AttributeType type) {
  auto* a = n.add_attribute();
  a->set_name(name);
  a->set_type(type);
  return *a;
}
inline void attr_i(::onnx::NodeProto& n, const std::string& name, int64_t v) {
  add_attr(n, name, ::onnx::AttributeProto::INT).set_i(v);
}
inline void attr_f(::onnx::NodeProto& n, const std::string& name, float v) {
  add_attr(n, name, ::onnx::AttributeProto::FLOAT).set_f(v);
}
inline void attr_s(::onnx::NodeProto& n, const std::string& name, const std::string& v) {
  add_attr(n, name, ::onnx::AttributeProto::STRING).set_s(v);
}
inline void attr_ints(::onnx::NodeProto& n, const std::string& name, const Dims& v) {
  auto& a = add_attr(n, name, ::onnx::AttributeProto::INTS);
  for (int64_t x : v) a.add_ints(x);
}

// Marks dimension `axis` of graph input `name` symbolic ("N"), as exporters mark a dynamic batch.
inline void make_symbolic(ModelBuilder& m, const std::string& name, int axis = 0) {
  for (auto& in : *m.graph().mutable_input())
    if (in.name() == name)
      in.mutable_type()->mutable_tensor_type()->mutable_shape()->mutable_dim(axis)->set_dim_param("N");
}

// y = x.view(x.size(0), -1) as torch.onnx exports it: Shape(`shape_of`) -> Gather 0 -> Unsqueeze
// -> Concat with -1 -> Reshape of `x`, a target shape that follows the batch.
inline void add_batch_flatten(ModelBuilder& m, const std::string& x, const std::string& shape_of,
                              const std::string& y) {
  m.node("Shape", {shape_of}, {"shape"}, "shape");
  m.init_i64("zero", {}, {0});
  m.node("Gather", {"shape", "zero"}, {"batch"}, "gather");
  m.init_i64("axes", {1}, {0});
  m.node("Unsqueeze", {"batch", "axes"}, {"batch1"}, "unsqueeze");
  m.init_i64("rest", {1}, {-1});
  attr_i(m.node("Concat", {"batch1", "rest"}, {"target"}, "concat"), "axis", 0);
  m.node("Reshape", {x, "target"}, {y}, "reshape");
}

inline graph::Graph import(const ModelBuilder& b, const graph::onnx::ImportOptions& o = {}) {
  return graph::onnx::import_model_from_bytes(b.bytes(), o);
}

// The import error's message ("" when the import succeeds).
inline std::string import_error(const std::string& bytes,
                                const graph::onnx::ImportOptions& o = {}) {
  try {
    graph::onnx::import_model_from_bytes(bytes, o);
  } catch (const graph::Error& e) {
    return e.what();
  }
  return "";
}

// The first output of `b`, imported and run by the reference interpreter on x as its one input.
inline graph::Tensor run_one(const ModelBuilder& b, const std::vector<float>& x) {
  const graph::Graph g = import(b);
  const graph::Value& in = g.value(g.inputs.at(0));
  return graph::run_reference(g, {graph::Tensor{in.shape, in.layout, x}})[0];
}

inline std::vector<float> rnd(int64_t n, uint64_t seed, float lo = -1.0f, float hi = 1.0f) {
  return graph::random_uniform(static_cast<size_t>(n), lo, hi, seed);
}

// Reference outputs, or false with the reason while the reference interpreter (written in
// parallel) still lacks one of the graph's ops; any other error propagates.
inline bool try_reference(const graph::Graph& g, const std::vector<graph::Tensor>& in,
                          std::vector<graph::Tensor>* out, std::string* why) {
  try {
    *out = graph::run_reference(g, in);
    return true;
  } catch (const graph::Error& e) {
    if (std::string(e.what()).find("no implementation") == std::string::npos) throw;
    *why = std::string("reference interpreter incomplete: ") + e.what();
    return false;
  }
}

#define KILN_REFERENCE_OR_SKIP(var, g, in)                                           \
  std::vector<graph::Tensor> var;                                                    \
  do {                                                                               \
    std::string why_;                                                                \
    if (!::kiln::onnx_test::try_reference(g, in, &var, &why_)) GTEST_SKIP() << why_; \
  } while (0)

inline void expect_close(const graph::Tensor& got, const graph::Tensor& want, double rtol = 1e-5,
                         double atol = 1e-6) {
  ASSERT_EQ(got.shape, want.shape);
  EXPECT_LE(graph::worst_error_ratio(got.data, want.data, rtol, atol), 1.0);
}

// Node i's op, as the type the test expects it to be (std::get throws otherwise).
template <typename T>
const T& op_at(const graph::Graph& g, uint32_t i) {
  return std::get<T>(g.node(graph::NodeId{i}).op);
}

// Random values in [-1, 1] for graph input k, in its shape and layout.
inline graph::Tensor input_tensor(const graph::Graph& g, size_t k, uint64_t seed) {
  const graph::Value& v = g.value(g.inputs.at(k));
  return {v.shape, v.layout, rnd(graph::num_elements(v.shape), seed)};
}

}  // namespace kiln::onnx_test
