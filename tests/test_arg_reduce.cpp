// ArgMax / ArgMin, TopK and Resize's cubic and tf_crop_and_resize through the ONNX importer, and
// ArgMax's and TopK's generated kernels on inputs with repeated maxima and NaN (numpy's rules,
// computed here independently of the reference interpreter); a classifier ending in ArgMax run end
// to end. GatherElements, ScatterElements, Gather, GatherND and OneHot with integer indices
// (constants, and TopK's or ArgMax's at run time) against results computed here. The random-input
// kernel cases of these ops are in generated_op_cases.h.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>

#include "codegen/kernel_library.h"
#include "graph/passes/pipeline.h"
#include "kiln/runtime.h"
#include "onnx_test_models.h"
#include "runtime/kernels.h"
#include "test_generator.h"

namespace kiln {
namespace {

using namespace onnx_test;  // ModelBuilder, import, import_error, attr_*, rnd, Dims
using graph::Layout;
using graph::ReduceKind;
using graph::Shape;
using graph::Tensor;
using testing::HasSubstr;

// The index numpy's argmax / argmin (or, `last`, the flipped array's, mapped back) gives for
// row v: the first (last) NaN when there is one, else the first (last) extreme.
int numpy_arg(const std::vector<float>& v, bool is_max, bool last) {
  const int n = static_cast<int>(v.size());
  for (int k = 0; k < n; ++k) {
    const int i = last ? n - 1 - k : k;
    if (std::isnan(v[i])) return i;
  }
  int best = last ? n - 1 : 0;
  for (int k = 0; k < n; ++k) {
    const int i = last ? n - 1 - k : k;
    if (is_max ? v[i] > v[best] : v[i] < v[best]) best = i;
  }
  return best;
}

// Runs `g` with generated kernels on every CPU target this machine runs.
void for_each_cpu_target(const graph::Graph& g, const std::vector<Tensor>& ins,
                         const std::function<void(const Model&)>& check) {
  for (int t = 0; t < static_cast<int>(runtime::cpu_targets().size()); ++t) {
    if (!testing_util::runs_target(t)) continue;
    SCOPED_TRACE(runtime::cpu_targets()[t]);
    ModelOptions o;
    o.cpu_target = t;
    o.generate_kernels =
        codegen::kernel_generator({{runtime::cpu_targets()[t]}, KILN_TEST_CACHE_DIR, nullptr});
    Model m(graph::run_passes(g), o);
    ASSERT_TRUE(m.run(ins));
    check(m);
  }
}

std::vector<float> output_data(const Model& m, size_t i) {
  const TensorView v = m.output(i);
  return std::vector<float>(v.data, v.data + graph::num_elements(v.shape));
}

// A [5, 12, 3] tensor of values from {-2, ..., 2}, so that its rows along the middle axis, (n,
// w), repeat their maximum and minimum; row (1, 2) holds NaNs at 4 and 9, row (3, 0) at 0.
size_t at(int n, int i, int w) { return static_cast<size_t>((n * 12 + i) * 3 + w); }
std::vector<float> tied_rows_with_nans(uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<float> x(5 * 12 * 3);
  for (float& v : x) v = static_cast<float>(static_cast<int>(rng() % 5) - 2);
  x[at(1, 4, 2)] = NAN;
  x[at(1, 9, 2)] = NAN;
  x[at(3, 0, 0)] = NAN;
  return x;
}

TEST(ArgReduce, TiesAndNanFollowNumpyOnEveryCpuTarget) {
  const Shape shape{5, 12, 3};  // reduced over axis 1: rows are (n, w)
  const std::vector<float> x = tied_rows_with_nans(7);
  graph::GraphBuilder b;
  const graph::ValueId in = b.input("x", shape, Layout::any);
  const ReduceKind kinds[] = {ReduceKind::argmax, ReduceKind::argmin, ReduceKind::argmax_last,
                              ReduceKind::argmin_last};
  for (ReduceKind k : kinds)
    b.output(b.op(graph::to_string(k), graph::Reduce{{1}, false, k}, {in}));
  const graph::Graph g = b.finish();
  // The expected indices, and proof that the data has ties that first and last tell apart.
  std::vector<std::vector<float>> want(4);
  int ties = 0;
  for (int n = 0; n < 5; ++n)
    for (int w = 0; w < 3; ++w) {
      std::vector<float> row;
      for (int i = 0; i < 12; ++i) row.push_back(x[at(n, i, w)]);
      for (int k = 0; k < 4; ++k)
        want[k].push_back(static_cast<float>(numpy_arg(row, k % 2 == 0, k >= 2)));
      ties += want[0].back() != want[2].back();
    }
  ASSERT_GT(ties, 5);
  EXPECT_EQ(want[0][1 * 3 + 2], 4.0f);  // the first NaN
  EXPECT_EQ(want[2][1 * 3 + 2], 9.0f);  // the last NaN
  const Tensor t{shape, Layout::any, x};
  const std::vector<Tensor> ref = graph::run_reference(g, {t});
  for (int k = 0; k < 4; ++k)
    EXPECT_EQ(ref[k].data, want[k]) << graph::to_string(kinds[k]) << " (reference)";
  for_each_cpu_target(g, {t}, [&](const Model& m) {
    for (int k = 0; k < 4; ++k) {
      EXPECT_EQ(m.output(k).shape, (Shape{5, 3}));
      EXPECT_EQ(output_data(m, k), want[k]) << graph::to_string(kinds[k]);
    }
  });
}

TEST(ArgReduce, ImportsEveryAttributeAndRefusesHugeAxes) {
  for (int opset : {11, 12, 13, 21}) {
    ModelBuilder m(opset);
    m.input("x", {2, 3, 4});
    auto& n = m.node("ArgMin", {"x"}, {"y"}, "argmin");
    attr_i(n, "axis", -1);
    attr_i(n, "keepdims", 0);
    if (opset >= 12) attr_i(n, "select_last_index", 1);
    m.output("y");
    const graph::Graph g = import(m);
    const auto& r = std::get<graph::Reduce>(g.node(graph::NodeId{0}).op);
    EXPECT_EQ(r.axes, std::vector<int>{2});
    EXPECT_FALSE(r.keepdims);
    EXPECT_EQ(r.kind, opset >= 12 ? ReduceKind::argmin_last : ReduceKind::argmin);
    EXPECT_EQ(g.value(g.outputs[0]).shape, (Shape{2, 3}));
  }
  ModelBuilder huge(13);
  huge.input("x", {1, int64_t{1} << 24});
  attr_i(huge.node("ArgMax", {"x"}, {"y"}, "am"), "axis", 1);
  huge.output("y");
  EXPECT_THAT(
      import_error(huge.bytes()),
      HasSubstr(
          "node 'am' (ArgMax): axis 1 has 16777216 elements; Kiln returns indices as float32"));
}

// The first k elements of `row` in TopK's order, as (value, index): a NaN first (in index
// order), then the largest (smallest) values, equal values in index order. Selection, not the
// reference interpreter's sort.
std::vector<std::pair<float, int>> top_k(const std::vector<float>& row, int k, bool largest) {
  std::vector<bool> taken(row.size(), false);
  std::vector<std::pair<float, int>> out;
  for (int j = 0; j < k; ++j) {
    int best = -1;
    for (int i = 0; i < static_cast<int>(row.size()); ++i) {
      if (taken[static_cast<size_t>(i)]) continue;
      if (best < 0) {
        best = i;
        continue;
      }
      const float v = row[static_cast<size_t>(i)], b = row[static_cast<size_t>(best)];
      if (std::isnan(b)) continue;
      if (std::isnan(v) || (largest ? v > b : v < b)) best = i;
    }
    taken[static_cast<size_t>(best)] = true;
    out.push_back({row[static_cast<size_t>(best)], best});
  }
  return out;
}

// Equal, or both NaN.
bool same_values(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i)
    if (!(a[i] == b[i] || (std::isnan(a[i]) && std::isnan(b[i])))) return false;
  return true;
}

// TopK's values and indices, largest and smallest, along the middle axis of rows with repeated
// values and NaNs: the reference and the generated kernels on every CPU target against top_k.
TEST(TopK, TiesAndNanOnEveryCpuTarget) {
  const Shape shape{5, 12, 3};
  const std::vector<float> x = tied_rows_with_nans(11);
  constexpr int k = 5;
  graph::GraphBuilder b;
  const graph::ValueId in = b.input("x", shape, Layout::any);
  for (const bool largest : {true, false})
    for (const bool indices : {false, true})
      b.output(
          b.op(std::string(largest ? "largest" : "smallest") + (indices ? "_indices" : "_values"),
               graph::TopK{1, k, largest, indices}, {in}));
  const graph::Graph g = b.finish();
  std::vector<std::vector<float>> want(4, std::vector<float>(5 * k * 3));
  for (int n = 0; n < 5; ++n)
    for (int w = 0; w < 3; ++w) {
      std::vector<float> row;
      for (int i = 0; i < 12; ++i) row.push_back(x[at(n, i, w)]);
      for (int o = 0; o < 2; ++o) {
        const std::vector<std::pair<float, int>> top = top_k(row, k, o == 0);
        for (int j = 0; j < k; ++j) {
          const size_t e = static_cast<size_t>((n * k + j) * 3 + w);
          want[static_cast<size_t>(2 * o)][e] = top[static_cast<size_t>(j)].first;
          want[static_cast<size_t>(2 * o + 1)][e] =
              static_cast<float>(top[static_cast<size_t>(j)].second);
        }
      }
    }
  EXPECT_EQ(want[1][static_cast<size_t>((1 * k + 0) * 3 + 2)], 4.0f);  // the first NaN first
  EXPECT_EQ(want[1][static_cast<size_t>((1 * k + 1) * 3 + 2)], 9.0f);
  const Tensor t{shape, Layout::any, x};
  const std::vector<Tensor> ref = graph::run_reference(g, {t});
  for (size_t o = 0; o < 4; ++o)
    EXPECT_TRUE(same_values(ref[o].data, want[o])) << o << " (reference)";
  for_each_cpu_target(g, {t}, [&](const Model& m) {
    for (size_t o = 0; o < 4; ++o) {
      EXPECT_EQ(m.output(o).shape, (Shape{5, k, 3}));
      EXPECT_TRUE(same_values(output_data(m, o), want[o])) << o;
    }
  });
}

// TopK's k as an attribute (opset 1) and as the input K (10 on), largest and a negative axis
// (11 on): a node per output read, the indices declared INT64; the refusals.
TEST(TopK, ImportsEveryFormAndRefusesWhatItCannotCompute) {
  for (int opset : {1, 10, 11, 13}) {
    SCOPED_TRACE(opset);
    ModelBuilder m(opset);
    m.input("x", {2, 7, 4});
    std::vector<std::string> ins = {"x"};
    if (opset >= 10) m.init_i64("K", {1}, {3}), ins.push_back("K");
    auto& n = m.node("TopK", ins, {"values", "indices"}, "topk");
    attr_i(n, "axis", opset >= 11 ? -2 : 1);
    if (opset < 10) attr_i(n, "k", 3);
    if (opset >= 11) attr_i(n, "largest", 0);
    m.output("values");
    m.output("indices");
    m.graph().mutable_output(1)->mutable_type()->mutable_tensor_type()->set_elem_type(TP::INT64);
    const graph::Graph g = import(m);
    ASSERT_EQ(g.num_nodes(), 2u);
    for (size_t o = 0; o < 2; ++o) {
      const auto& tk = std::get<graph::TopK>(g.node(graph::NodeId{static_cast<uint32_t>(o)}).op);
      EXPECT_EQ(tk.axis, 1);
      EXPECT_EQ(tk.k, 3);
      EXPECT_EQ(tk.largest, opset < 11);
      EXPECT_EQ(tk.indices, o == 1);
      EXPECT_EQ(g.value(g.outputs[o]).shape, (Shape{2, 3, 4}));
    }
  }
  ModelBuilder values_only(13);
  values_only.input("x", {4, 9});
  values_only.init_i64("K", {1}, {2});
  values_only.node("TopK", {"x", "K"}, {"v", "unused"});
  values_only.output("v");
  EXPECT_EQ(import(values_only).num_nodes(), 1u);

  const auto refused = [](int64_t k, int64_t width) {
    ModelBuilder m(13);
    m.input("x", {2, width});
    m.init_i64("K", {1}, {k});
    m.node("TopK", {"x", "K"}, {"v", "i"}, "tk");
    m.output("v");
    return import_error(m.bytes());
  };
  EXPECT_THAT(refused(0, 9), HasSubstr("k = 0 is not in [1, 9]"));
  EXPECT_THAT(refused(10, 9), HasSubstr("k = 10 is not in [1, 9]"));
  EXPECT_THAT(refused(5, (int64_t{1} << 16) + 1),
              HasSubstr("Kiln's TopK takes rows of at most 65536"));
  ModelBuilder two(13);
  two.input("x", {2, 9});
  two.init_i64("K", {2}, {1, 2});
  two.node("TopK", {"x", "K"}, {"v", "i"}, "tk");
  two.output("v");
  EXPECT_THAT(import_error(two.bytes()), HasSubstr("K must hold one value, got 2"));
}

// conv -> global pool -> flatten -> Gemm -> ArgMax, the class index declared INT64 as
// exporters write it: Kiln's float32 index against the reference, and against the argmax of
// the logits.
TEST(ArgReduce, ClassifierEndingInArgMax) {
  auto classifier = [](bool relu_int64) {
    ModelBuilder m(13);
    m.input("x", {3, 3, 10, 10});
    m.init("w", {8, 3, 3, 3}, rnd(8 * 27, 11, -0.5f, 0.5f));
    m.init("b", {8}, rnd(8, 12));
    attr_ints(m.node("Conv", {"x", "w", "b"}, {"c"}, "conv"), "pads", {1, 1, 1, 1});
    m.node("Relu", {"c"}, {"r"}, "relu");
    m.node("GlobalAveragePool", {"r"}, {"p"}, "pool");
    m.node("Flatten", {"p"}, {"f"}, "flatten");
    m.init("fc_w", {6, 8}, rnd(48, 13, -2.0f, 2.0f));
    m.init("fc_b", {6}, rnd(6, 14));
    attr_i(m.node("Gemm", {"f", "fc_w", "fc_b"}, {"logits"}, "fc"), "transB", 1);
    auto& am = m.node("ArgMax", {"logits"}, {"class"}, "argmax");
    attr_i(am, "axis", 1);
    attr_i(am, "keepdims", 0);
    for (const char* name : {"class", "logits"}) {
      auto* o = m.graph().add_output();
      o->set_name(name);
      o->mutable_type()->mutable_tensor_type()->set_elem_type(
          name == std::string("class") ? TP::INT64 : TP::FLOAT);
    }
    if (relu_int64) {
      auto* o = m.graph().add_output();
      o->set_name("r");
      o->mutable_type()->mutable_tensor_type()->set_elem_type(TP::INT64);
    }
    return m;
  };
  EXPECT_THAT(import_error(classifier(true).bytes()),
              HasSubstr("graph output 'r' is declared INT64, but Kiln computes it as FLOAT (only "
                        "ArgMax/ArgMin outputs, TopK's indices and data movement of them may be "
                        "INT64)"));
  const graph::Graph g = import(classifier(false));
  const Tensor x{{3, 3, 10, 10}, Layout::nchw, rnd(300 * 3, 15)};
  const std::vector<Tensor> ref = graph::run_reference(g, {x});
  ASSERT_EQ(ref[0].shape, (Shape{3}));
  std::vector<float> from_logits;
  for (int n = 0; n < 3; ++n)
    from_logits.push_back(static_cast<float>(
        numpy_arg(std::vector<float>(ref[1].data.begin() + n * 6, ref[1].data.begin() + n * 6 + 6),
                  true, false)));
  EXPECT_EQ(ref[0].data, from_logits);
  for_each_cpu_target(g, {x}, [&](const Model& m) { EXPECT_EQ(output_data(m, 0), ref[0].data); });
}

// Resize's cubic attributes and tf_crop_and_resize's roi and extrapolation_value reach the IR;
// the roi must be a full one; antialias stays refused in one line.
TEST(ResizeImport, CubicAndCropAttributes) {
  ModelBuilder m(13);
  m.input("x", {1, 2, 4, 5});
  m.init("roi", {8}, {0, 0, 0.1f, 0.2f, 1, 1, 0.8f, 1.1f});
  m.init("scales", {0}, {});
  m.init_i64("sizes", {4}, {1, 2, 3, 7});
  auto& n = m.node("Resize", {"x", "roi", "scales", "sizes"}, {"y"}, "rs");
  attr_s(n, "mode", "cubic");
  attr_s(n, "coordinate_transformation_mode", "tf_crop_and_resize");
  attr_f(n, "cubic_coeff_a", -0.5f);
  attr_i(n, "exclude_outside", 1);
  attr_f(n, "extrapolation_value", 3.5f);
  m.output("y");
  const graph::Graph g = import(m);
  const auto& r = std::get<graph::Resize>(g.node(graph::NodeId{0}).op);
  EXPECT_EQ(r.mode, graph::ResizeMode::cubic);
  EXPECT_EQ(r.coordinates, graph::ResizeCoordinates::tf_crop_and_resize);
  EXPECT_EQ(r.cubic_a, -0.5f);
  EXPECT_TRUE(r.exclude_outside);
  EXPECT_EQ(r.extrapolation, 3.5f);
  EXPECT_EQ(r.roi, (std::vector<float>{0, 0, 0.1f, 0.2f, 1, 1, 0.8f, 1.1f}));
  // Columns past 1.0 of the crop read outside the input: the extrapolation value.
  const std::vector<float> xv = rnd(40, 16);
  const Tensor y = graph::run_reference(g, {Tensor{{1, 2, 4, 5}, Layout::nchw, xv}})[0];
  ASSERT_EQ(y.shape, (Shape{1, 2, 3, 7}));
  EXPECT_EQ(y.data[6], 3.5f);
  EXPECT_NE(y.data[0], 3.5f);

  m.graph().mutable_initializer(0)->clear_float_data();
  m.graph().mutable_initializer(0)->clear_dims();
  m.graph().mutable_initializer(0)->add_dims(0);
  EXPECT_THAT(import_error(m.bytes()), HasSubstr("input 'roi' has 0 entries"));
  ModelBuilder aa(18);
  aa.input("x", {1, 1, 4, 4});
  aa.init("roi", {0}, {});
  aa.init("scales", {4}, {1, 1, 0.5f, 0.5f});
  attr_i(aa.node("Resize", {"x", "roi", "scales"}, {"y"}, "rs"), "antialias", 1);
  aa.output("y");
  EXPECT_THAT(import_error(aa.bytes()),
              HasSubstr("node 'rs' (Resize): attribute 'antialias'=1 is not supported"));
}

// GatherElements with constant INT64 indices (negative ones among them, the indices longer than
// the data along the axis and shorter off it), and with TopK's indices at run time (as torch's
// y.gather(1, x.topk(3).indices) exports): the values picked here by hand, on every CPU target.
TEST(GatherElements, ConstantAndRuntimeIndicesOnEveryCpuTarget) {
  ModelBuilder m(13);
  m.input("data", {3, 5, 4});
  std::vector<int64_t> idx(3 * 6 * 2);
  std::mt19937 rng(21);
  for (int64_t& v : idx) v = static_cast<int64_t>(rng() % 10) - 5;  // [-5, 4]
  m.init_i64("idx", {3, 6, 2}, idx);
  attr_i(m.node("GatherElements", {"data", "idx"}, {"picked"}, "ge"), "axis", 1);
  m.output("picked");
  m.input("x", {3, 10});
  m.input("y", {3, 10});
  m.init_i64("K", {1}, {3});
  m.node("TopK", {"x", "K"}, {"top", "top_idx"}, "topk");
  attr_i(m.node("GatherElements", {"y", "top_idx"}, {"y_at_top"}, "ge_top"), "axis", -1);
  m.output("y_at_top");
  const graph::Graph g = import(m);
  const Tensor data{{3, 5, 4}, Layout::any, rnd(60, 22)};
  const Tensor x{{3, 10}, Layout::any, rnd(30, 23)}, y{{3, 10}, Layout::any, rnd(30, 24)};
  std::vector<float> picked;
  for (int n = 0; n < 3; ++n)
    for (int i = 0; i < 6; ++i)
      for (int w = 0; w < 2; ++w) {
        int64_t k = idx[static_cast<size_t>((n * 6 + i) * 2 + w)];
        if (k < 0) k += 5;
        picked.push_back(data.data[static_cast<size_t>((n * 5 + k) * 4 + w)]);
      }
  std::vector<float> y_at_top;
  for (int n = 0; n < 3; ++n) {
    std::vector<int> order(10);
    for (int i = 0; i < 10; ++i) order[static_cast<size_t>(i)] = i;
    std::sort(order.begin(), order.end(), [&](int a, int b) {
      return x.data[static_cast<size_t>(n * 10 + a)] > x.data[static_cast<size_t>(n * 10 + b)];
    });
    for (int j = 0; j < 3; ++j)
      y_at_top.push_back(y.data[static_cast<size_t>(n * 10 + order[static_cast<size_t>(j)])]);
  }
  const std::vector<Tensor> ref = graph::run_reference(g, {data, x, y});
  EXPECT_EQ(ref[0].data, picked);
  EXPECT_EQ(ref[1].data, y_at_top);
  for_each_cpu_target(g, {data, x, y}, [&](const Model& model) {
    EXPECT_EQ(model.output(0).shape, (Shape{3, 6, 2}));
    EXPECT_EQ(output_data(model, 0), picked);
    EXPECT_EQ(output_data(model, 1), y_at_top);
  });
}

// ScatterElements (opset 18) with each reduction and Scatter (opset 9): constant indices with
// repeats, so that later updates meet earlier ones; the results computed here by hand.
TEST(ScatterElements, EveryReductionOnEveryCpuTarget) {
  const std::vector<int64_t> idx = {1, 0, 3, 1, -2, 3};  // [2, 3] along axis 0 of [4, 3]
  const Tensor data{{4, 3}, Layout::any, rnd(12, 31, -2.0f, 2.0f)};
  const Tensor upd{{2, 3}, Layout::any, rnd(6, 32, -2.0f, 2.0f)};
  for (const char* reduction : {"none", "add", "mul", "max", "min", "scatter"}) {
    SCOPED_TRACE(reduction);
    const bool old = reduction == std::string("scatter");
    ModelBuilder m(old ? 9 : 18);
    m.input("data", {4, 3});
    m.input("upd", {2, 3});
    m.init_i64("idx", {2, 3}, idx);
    auto& n = m.node(old ? "Scatter" : "ScatterElements", {"data", "idx", "upd"}, {"out"}, "sc");
    attr_i(n, "axis", 0);
    if (!old) attr_s(n, "reduction", reduction);
    m.output("out");
    const graph::Graph g = import(m);
    std::vector<float> want = data.data;
    for (int r = 0; r < 2; ++r)
      for (int c = 0; c < 3; ++c) {
        int64_t k = idx[static_cast<size_t>(r * 3 + c)];
        if (k < 0) k += 4;
        float& o = want[static_cast<size_t>(k * 3 + c)];
        const float u = upd.data[static_cast<size_t>(r * 3 + c)];
        const std::string how = reduction;
        o = how == "add"   ? o + u
            : how == "mul" ? o * u
            : how == "max" ? std::max(o, u)
            : how == "min" ? std::min(o, u)
                           : u;
      }
    EXPECT_EQ(graph::run_reference(g, {data, upd})[0].data, want);
    for_each_cpu_target(g, {data, upd},
                        [&](const Model& model) { EXPECT_EQ(output_data(model, 0), want); });
  }
}

// Gather with indices computed at run time: rows of a table picked by ArgMax's class indices
// (table[x.argmax(1)] as torch exports it) and a scalar index from a keepdims=0 ArgMax of one
// row; the values picked here by hand, on every CPU target.
TEST(Gather, RuntimeIndicesFromArgMaxOnEveryCpuTarget) {
  ModelBuilder m(13);
  m.input("x", {4, 6});
  m.input("table", {6, 5});
  auto& am = m.node("ArgMax", {"x"}, {"cls"}, "argmax");
  attr_i(am, "axis", 1);
  attr_i(am, "keepdims", 0);
  m.node("Gather", {"table", "cls"}, {"rows"}, "pick_rows");  // [4, 5]
  m.input("v", {1, 5});
  auto& am1 = m.node("ArgMax", {"v"}, {"best"}, "argmax_v");  // [1]
  attr_i(am1, "axis", 1);
  attr_i(am1, "keepdims", 0);
  m.init_i64("zero", {}, {0});
  m.node("Gather", {"best", "zero"}, {"best0"}, "scalar");  // a runtime scalar index
  attr_i(m.node("Gather", {"table", "best0"}, {"column"}, "pick_column"), "axis", 1);  // [6]
  m.output("rows");
  m.output("column");
  const graph::Graph g = import(m);
  const Tensor x{{4, 6}, Layout::any, rnd(24, 41)}, table{{6, 5}, Layout::any, rnd(30, 42)};
  const Tensor v{{1, 5}, Layout::any, rnd(5, 43)};
  std::vector<float> rows, column;
  for (int n = 0; n < 4; ++n) {
    const auto* row = x.data.data() + n * 6;
    const auto best = static_cast<int>(std::max_element(row, row + 6) - row);
    for (int k = 0; k < 5; ++k) rows.push_back(table.data[static_cast<size_t>(best * 5 + k)]);
  }
  const auto best =
      static_cast<int>(std::max_element(v.data.begin(), v.data.end()) - v.data.begin());
  for (int r = 0; r < 6; ++r) column.push_back(table.data[static_cast<size_t>(r * 5 + best)]);
  const std::vector<Tensor> ref = graph::run_reference(g, {x, table, v});
  EXPECT_EQ(ref[0].data, rows);
  EXPECT_EQ(ref[1].data, column);
  for_each_cpu_target(g, {x, table, v}, [&](const Model& model) {
    EXPECT_EQ(model.output(0).shape, (Shape{4, 5}));
    EXPECT_EQ(model.output(1).shape, (Shape{6}));
    EXPECT_EQ(output_data(model, 0), rows);
    EXPECT_EQ(output_data(model, 1), column);
  });
}

// Data movement of indices gives indices, which a graph output may be declared INT64 for: the
// class of each of the top boxes (ArgMax's classes gathered by TopK's indices) and TopK's indices
// unsqueezed and expanded, as an NMS-free detection head writes them; values gathered by those
// indices are not.
TEST(GatherElements, MovedIndicesMayBeDeclaredInt64) {
  const auto head = [](const std::string& int64_output) {
    ModelBuilder m(13);
    m.input("scores", {1, 12, 3});
    auto& best = m.node("ReduceMax", {"scores"}, {"best"}, "best");
    attr_ints(best, "axes", {2});
    attr_i(best, "keepdims", 0);
    auto& am = m.node("ArgMax", {"scores"}, {"cls"}, "cls");
    attr_i(am, "axis", 2);
    attr_i(am, "keepdims", 0);
    m.init_i64("K", {1}, {4});
    attr_i(m.node("TopK", {"best", "K"}, {"top", "idx"}, "topk"), "axis", 1);  // [1, 4]
    attr_i(m.node("GatherElements", {"cls", "idx"}, {"top_cls"}, "ge"), "axis", 1);
    m.init_i64("ax", {1}, {2});
    m.node("Unsqueeze", {"idx", "ax"}, {"idx3"}, "unsqueeze");
    m.init_i64("shape", {3}, {1, 4, 3});
    m.node("Expand", {"idx3", "shape"}, {"idx_wide"}, "expand");
    attr_i(m.node("GatherElements", {"scores", "idx_wide"}, {"top_scores"}, "ge_scores"), "axis",
           1);
    for (const char* name : {"top_cls", "idx_wide", "top_scores"}) {
      auto* o = m.graph().add_output();
      o->set_name(name);
      o->mutable_type()->mutable_tensor_type()->set_elem_type(name == int64_output ? TP::INT64
                                                                                   : TP::FLOAT);
    }
    return m;
  };
  EXPECT_EQ(import_error(head("top_cls").bytes()), "");
  EXPECT_EQ(import_error(head("idx_wide").bytes()), "");
  EXPECT_THAT(import_error(head("top_scores").bytes()),
              HasSubstr("graph output 'top_scores' is declared INT64, but Kiln computes it as "
                        "FLOAT"));
  const graph::Graph g = import(head(""));
  const Tensor scores{{1, 12, 3}, Layout::any, rnd(36, 51)};
  std::vector<int> order(12);
  for (int i = 0; i < 12; ++i) order[static_cast<size_t>(i)] = i;
  const auto row_max = [&](int i) {
    return *std::max_element(scores.data.begin() + i * 3, scores.data.begin() + i * 3 + 3);
  };
  std::sort(order.begin(), order.end(), [&](int a, int b) { return row_max(a) > row_max(b); });
  std::vector<float> top_cls, idx_wide, top_scores;
  for (int j = 0; j < 4; ++j) {
    const int i = order[static_cast<size_t>(j)];
    const auto* row = scores.data.data() + i * 3;
    top_cls.push_back(static_cast<float>(std::max_element(row, row + 3) - row));
    for (int c = 0; c < 3; ++c)
      idx_wide.push_back(static_cast<float>(i)), top_scores.push_back(row[c]);
  }
  for_each_cpu_target(g, {scores}, [&](const Model& model) {
    EXPECT_EQ(output_data(model, 0), top_cls);
    EXPECT_EQ(output_data(model, 1), idx_wide);
    EXPECT_EQ(output_data(model, 2), top_scores);
  });
}

// OneHot with constant INT64 indices (negative ones counted back from depth, one outside
// [-depth, depth) matching nothing) and values given at run time, and with ArgMax's classes at
// run time; the expected tensors written here by hand.
TEST(OneHot, ConstantAndRuntimeIndicesOnEveryCpuTarget) {
  ModelBuilder m(13);
  m.input("values", {2});
  m.init_i64("idx", {5}, {-1, 0, 3, 7, -5});
  m.init("depth", {}, {5.0f});
  attr_i(m.node("OneHot", {"idx", "depth", "values"}, {"table"}, "onehot"), "axis", 0);  // [5, 5]
  m.input("x", {3, 6});
  auto& am = m.node("ArgMax", {"x"}, {"cls"}, "argmax");
  attr_i(am, "axis", 1);
  attr_i(am, "keepdims", 0);
  m.init_i64("six", {1}, {6});
  m.init("zero_one", {2}, {0.0f, 1.0f});
  m.node("OneHot", {"cls", "six", "zero_one"}, {"cls_onehot"}, "onehot_cls");  // [3, 6]
  m.output("table");
  m.output("cls_onehot");
  const graph::Graph g = import(m);
  const Tensor values{{2}, Layout::any, {-2.0f, 3.5f}};
  const Tensor x{{3, 6}, Layout::any, rnd(18, 61)};
  // table[j][i]: index i of {-1, 0, 3, 7, -5} is j (axis 0 puts the depth first).
  const std::vector<int> hot = {4, 0, 3, -1, 0};
  std::vector<float> table(25, -2.0f);
  for (int i = 0; i < 5; ++i)
    if (hot[static_cast<size_t>(i)] >= 0)
      table[static_cast<size_t>(hot[static_cast<size_t>(i)] * 5 + i)] = 3.5f;
  std::vector<float> cls_onehot(18, 0.0f);
  for (int n = 0; n < 3; ++n) {
    const auto* row = x.data.data() + n * 6;
    cls_onehot[static_cast<size_t>(n * 6 + (std::max_element(row, row + 6) - row))] = 1.0f;
  }
  const std::vector<Tensor> ref = graph::run_reference(g, {values, x});
  EXPECT_EQ(ref[0].data, table);
  EXPECT_EQ(ref[1].data, cls_onehot);
  for_each_cpu_target(g, {values, x}, [&](const Model& model) {
    EXPECT_EQ(model.output(0).shape, (Shape{5, 5}));
    EXPECT_EQ(output_data(model, 0), table);
    EXPECT_EQ(output_data(model, 1), cls_onehot);
  });
  const auto refused = [](float depth, const Dims& values) {
    ModelBuilder m(13);
    m.input("i", {4});
    m.init("depth", {}, {depth});
    m.init("values", values, std::vector<float>(static_cast<size_t>(values[0]), 1.0f));
    m.node("OneHot", {"i", "depth", "values"}, {"y"}, "oh");
    m.output("y");
    return import_error(m.bytes());
  };
  EXPECT_THAT(refused(0.5f, {2}), HasSubstr("node 'oh' (OneHot): depth 0 is not in [1, 2^24]"));
  EXPECT_THAT(refused(4.0f, {3}), HasSubstr("values must hold two elements [off, on], got [3]"));
}

// GatherND with constant indices (negative entries, batch_dims 0 and 1, tuples that read the
// whole data in order, which is the data reshaped): the slabs picked here by hand, on every CPU
// target; the refusals.
TEST(GatherND, ConstantIndicesOnEveryCpuTarget) {
  const auto model = [](const Dims& data, const Dims& idx_dims, const std::vector<int64_t>& idx,
                        int64_t batch_dims) {
    ModelBuilder m(13);
    m.input("data", data);
    m.init_i64("idx", idx_dims, idx);
    attr_i(m.node("GatherND", {"data", "idx"}, {"out"}, "gnd"), "batch_dims", batch_dims);
    m.output("out");
    return m;
  };
  const Tensor data{{2, 3, 4}, Layout::any, rnd(24, 71)};
  const auto row = [&](int a, int b) {  // data[a, b, :]
    return std::vector<float>(data.data.begin() + (a * 3 + b) * 4,
                              data.data.begin() + (a * 3 + b) * 4 + 4);
  };
  struct Case {
    Dims idx_dims;
    std::vector<int64_t> idx;
    int64_t batch_dims;
    Shape out;
    std::vector<std::pair<int, int>> rows;  // the output's rows, in order
  };
  const Case cases[] = {{{3, 2}, {0, -1, 1, 0, -1, 2}, 0, {3, 4}, {{0, 2}, {1, 0}, {1, 2}}},
                        {{2, 2, 1}, {2, 0, -3, 1}, 1, {2, 2, 4}, {{0, 2}, {0, 0}, {1, 0}, {1, 1}}},
                        {{6, 2},
                         {0, 0, 0, 1, 0, 2, 1, 0, 1, 1, 1, 2},
                         0,
                         {6, 4},
                         {{0, 0}, {0, 1}, {0, 2}, {1, 0}, {1, 1}, {1, 2}}}};
  for (const Case& k : cases) {
    const graph::Graph g = import(model({2, 3, 4}, k.idx_dims, k.idx, k.batch_dims));
    std::vector<float> want;
    for (const auto& [a, b] : k.rows) {
      const std::vector<float> r = row(a, b);
      want.insert(want.end(), r.begin(), r.end());
    }
    EXPECT_EQ(graph::run_reference(g, {data})[0].data, want);
    for_each_cpu_target(g, {data}, [&](const Model& m) {
      EXPECT_EQ(m.output(0).shape, k.out);
      EXPECT_EQ(output_data(m, 0), want);
    });
  }
  EXPECT_THAT(import_error(model({2, 3, 4}, {1, 2}, {0, 3}, 0).bytes()),
              HasSubstr("node 'gnd' (GatherND): index 3 is outside axis 1 of the data [2, 3, 4]"));
  EXPECT_THAT(import_error(model({2, 3, 4}, {3, 1}, {0, 1, 2}, 1).bytes()),
              HasSubstr("batch axis 0 differs: data [2, 3, 4], indices [3, 1]"));
  EXPECT_THAT(import_error(model({2, 3, 4}, {1, 4}, {0, 0, 0, 0}, 0).bytes()),
              HasSubstr("index tuples of 4 entries do not fit the data [2, 3, 4]"));
}

// What the importer refuses, each in one line naming the node.
TEST(GatherElements, RefusesWhatItCannotCompute) {
  const auto gather = [](const Dims& data, const Dims& idx_dims, std::vector<int64_t> idx,
                         int64_t axis) {
    ModelBuilder m(13);
    m.input("data", data);
    m.init_i64("idx", idx_dims, idx);
    attr_i(m.node("GatherElements", {"data", "idx"}, {"out"}, "ge"), "axis", axis);
    m.output("out");
    return import_error(m.bytes());
  };
  EXPECT_THAT(gather({2, 5}, {2, 2}, {0, 1, 5, 0}, 1),
              HasSubstr("node 'ge' (GatherElements): index 5 is outside the axis (of 5 elements)"));
  EXPECT_THAT(gather({2, 5}, {2, 2}, {0, -6, 1, 0}, 1), HasSubstr("index -6 is outside the axis"));
  EXPECT_THAT(gather({2, 5}, {4}, {0, 1, 2, 3}, 1), HasSubstr("differ in rank"));
  EXPECT_THAT(gather({2, 5}, {3, 1}, {0, 1, 2}, 1),
              HasSubstr("are longer than the data [2, 5] on axis 0"));
  EXPECT_THAT(gather({2, 5}, {2, 1}, {0, 1}, 2),
              HasSubstr("attribute 'axis' 2 is out of range for rank 2"));
  ModelBuilder float_idx(13);
  float_idx.input("data", {2, 5});
  float_idx.init("idx", {2, 1}, {0.0f, 1.0f});
  float_idx.node("GatherElements", {"data", "idx"}, {"out"}, "ge");
  float_idx.output("out");
  EXPECT_THAT(import_error(float_idx.bytes()), HasSubstr("indices must be integers, got FLOAT"));
  const auto scatter = [](const Dims& upd, const std::string& reduction) {
    ModelBuilder m(18);
    m.input("data", {4, 3});
    m.input("upd", upd);
    m.init_i64("idx", {2, 3}, {0, 1, 2, 3, 0, 1});
    attr_s(m.node("ScatterElements", {"data", "idx", "upd"}, {"out"}, "sc"), "reduction",
           reduction);
    m.output("out");
    return import_error(m.bytes());
  };
  EXPECT_THAT(scatter({2, 3}, "sum"),
              HasSubstr("reduction 'sum' is not one of none, add, mul, max, min"));
  EXPECT_THAT(scatter({3, 3}, "add"), HasSubstr("do not have the indices' shape [2, 3]"));
}

}  // namespace
}  // namespace kiln
