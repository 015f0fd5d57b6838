// Portable data kernels against the reference interpreter.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "graph/builder.h"
#include "graph/reference.h"
#include "graph/shape_inference.h"
#include "runtime/ops/ops.h"

namespace kiln {
namespace {

using graph::Layout;
using graph::Op;
using graph::Shape;
using graph::Tensor;

// One graph input: its shape, layout (logical for its rank unless given) and either explicit
// data or uniform random data in [lo, hi).
struct In {
  Shape shape;
  float lo = -1.0f, hi = 1.0f;
  std::optional<Layout> layout;
  std::vector<float> data;
};

// rtol == atol == 0 demands bit-for-bit equality.
struct Tol {
  double rtol = 0.0, atol = 0.0;
};
constexpr Tol kExact{};
// Float math rounded differently from the double reference: a few ulps of the result, plus
// an absolute floor for results that cancel to near zero (HardSigmoid/HardSwish near their
// breakpoints, means of mixed-sign data).
constexpr Tol kRounding{1e-5, 1e-6};

// A one-node graph of `op` over `ins`, with its inputs bound.
struct Case {
  graph::Graph g;
  std::vector<Tensor> inputs;
};

Case make_case(const Op& op, const std::vector<In>& ins, uint64_t seed) {
  graph::GraphBuilder b;
  std::vector<graph::ValueId> ids;
  Case c;
  for (size_t i = 0; i < ins.size(); ++i) {
    const In& in = ins[i];
    const Layout l = in.layout.value_or(graph::logical_layout(in.shape.size()));
    ids.push_back(b.input("x" + std::to_string(i), in.shape, l));
    const size_t n = static_cast<size_t>(graph::num_elements(in.shape));
    c.inputs.push_back(
        {in.shape, l,
         in.data.empty() ? graph::random_uniform(n, in.lo, in.hi, seed + 31 * i) : in.data});
  }
  b.output(b.op("node", op, ids));
  c.g = b.finish();
  return c;
}

std::string first_mismatch(const std::vector<float>& got, const std::vector<float>& want) {
  for (size_t i = 0; i < want.size(); ++i)
    if (!(got[i] == want[i]))
      return "element " + std::to_string(i) + ": got " + std::to_string(got[i]) + ", want " +
             std::to_string(want[i]);
  return "";
}

// The kernel, writing into a NaN-poisoned output, against the reference interpreter.
void check(const Op& op, const std::vector<In>& ins, Tol tol, uint64_t seed = 1) {
  const Case c = make_case(op, ins, seed);
  SCOPED_TRACE(graph::dump(c.g));
  const Tensor want = graph::run_reference(c.g, c.inputs).at(0);
  const graph::Value& out = c.g.value(c.g.outputs[0]);
  std::vector<float> got(want.data.size(), std::numeric_limits<float>::quiet_NaN());
  std::vector<runtime::ops::ConstTensorRef> refs;
  for (const Tensor& t : c.inputs) refs.push_back({t.data.data(), t.shape, t.layout});
  ASSERT_TRUE(runtime::ops::supported(op));
  ASSERT_EQ(runtime::ops::run_op(op, refs, {got.data(), out.shape, out.layout}), "");
  if (tol.rtol == 0.0 && tol.atol == 0.0)
    EXPECT_EQ(first_mismatch(got, want.data), "");
  else
    EXPECT_LE(graph::worst_error_ratio(got, want.data, tol.rtol, tol.atol), 1.0);
}

// The reference's output for hand-checked cases.
std::vector<float> reference(const Op& op, const std::vector<In>& ins) {
  const Case c = make_case(op, ins, 1);
  return graph::run_reference(c.g, c.inputs).at(0).data;
}

const std::vector<Shape> kUnaryShapes = {{7}, {3, 5}, {2, 3, 7}, {2, 3, 4, 5}, {1, 3, 1, 5, 2}};

// ---- the reference itself, on cases small enough to check by hand ----

TEST(DataReference, HandChecked) {
  EXPECT_EQ(reference(graph::Transpose{{1, 0}}, {{{2, 3}, 0, 0, {}, {1, 2, 3, 4, 5, 6}}}),
            (std::vector<float>{1, 4, 2, 5, 3, 6}));
  const std::vector<float> sm =
      reference(graph::Softmax{0, false}, {{{2}, 0, 0, {}, {0.0f, std::log(2.0f)}}});
  EXPECT_NEAR(sm[0], 1.0 / 3, 1e-7);
  EXPECT_NEAR(sm[1], 2.0 / 3, 1e-7);
  EXPECT_EQ(reference(graph::Binary{graph::BinaryOp::sub},
                      {{{2, 3}, 0, 0, {}, {10, 20, 30, 40, 50, 60}}, {{3}, 0, 0, {}, {1, 2, 3}}}),
            (std::vector<float>{9, 18, 27, 39, 48, 57}));
  EXPECT_EQ(reference(graph::Slice{{4}, {-1}, {-2}}, {{{5}, 0, 0, {}, {0, 1, 2, 3, 4}}}),
            (std::vector<float>{4, 2, 0}));
  EXPECT_EQ(reference(graph::Pad{{-1, 2}, 9.0f}, {{{3}, 0, 0, {}, {1, 2, 3}}}),
            (std::vector<float>{2, 3, 9, 9}));
  EXPECT_EQ(reference(graph::ReduceMean{{1}, false}, {{{2, 2}, 0, 0, {}, {1, 2, 3, 4}}}),
            (std::vector<float>{1.5f, 3.5f}));
  EXPECT_EQ(
      reference(graph::Concat{1}, {{{2, 1}, 0, 0, {}, {1, 2}}, {{2, 2}, 0, 0, {}, {3, 4, 5, 6}}}),
      (std::vector<float>{1, 3, 4, 2, 5, 6}));
  EXPECT_EQ(reference(graph::HardSwish{}, {{{5}, 0, 0, {}, {-4, -3, 0, 3, 6}}}),
            (std::vector<float>{0, 0, 0, 3, 6}));
  EXPECT_EQ(reference(graph::HardSigmoid{0.5f, 0.5f}, {{{4}, 0, 0, {}, {-2, -1, 0, 2}}}),
            (std::vector<float>{0, 0, 0.5f, 1}));
  EXPECT_EQ(reference(graph::LeakyRelu{0.25f}, {{{3}, 0, 0, {}, {-4, 0, 2}}}),
            (std::vector<float>{-1, 0, 2}));
  EXPECT_EQ(reference(graph::Sigmoid{}, {{{1}, 0, 0, {}, {0}}}), (std::vector<float>{0.5f}));
  // NCHW [1, 2, 1, 2] -> NHWC [1, 1, 2, 2]: channels become the fastest axis.
  EXPECT_EQ(reference(graph::LayoutTransform{Layout::nchw, Layout::nhwc},
                      {{{1, 2, 1, 2}, 0, 0, {}, {1, 2, 3, 4}}}),
            (std::vector<float>{1, 3, 2, 4}));
}

TEST(DataReference, SliceOutOfBoundsThrows) {
  // Shape inference accepts a start past the end when stepping backwards; reading is refused.
  EXPECT_THROW(reference(graph::Slice{{5}, {1}, {-1}}, {{{5}}}), graph::Error);
}

// ---- elementwise ----

// The reductions, the Softmax kinds, Max/Min and Tile, each on values whose result is known.
TEST(DataReference, ReductionsSoftmaxKindsAndTileHandChecked) {
  using graph::ReduceKind;
  const In x{{2, 3}, 0, 0, {}, {1, -2, 3, 4, 5, -6}};
  auto reduce = [&](ReduceKind k, std::vector<int> axes, bool keep = false) {
    return reference(graph::Reduce{std::move(axes), keep, k}, {x});
  };
  EXPECT_EQ(reduce(ReduceKind::sum, {1}), (std::vector<float>{2, 3}));
  EXPECT_EQ(reduce(ReduceKind::sum, {0}, true), (std::vector<float>{5, 3, -3}));
  EXPECT_EQ(reduce(ReduceKind::max, {1}), (std::vector<float>{3, 5}));
  EXPECT_EQ(reduce(ReduceKind::min, {}), (std::vector<float>{-6}));
  EXPECT_EQ(reduce(ReduceKind::prod, {0}), (std::vector<float>{4, -10, -18}));
  EXPECT_EQ(reduce(ReduceKind::l1, {1}), (std::vector<float>{6, 15}));
  EXPECT_EQ(reduce(ReduceKind::sum_square, {1}), (std::vector<float>{14, 77}));
  EXPECT_FLOAT_EQ(reduce(ReduceKind::l2, {1})[0], std::sqrt(14.0f));
  EXPECT_FLOAT_EQ(reduce(ReduceKind::log_sum, {0})[0], std::log(5.0f));
  // log(e^1000 + e^1000) = 1000 + log 2: finite although e^1000 is not.
  EXPECT_FLOAT_EQ(reference(graph::Reduce{{}, false, ReduceKind::log_sum_exp},
                            {{{2}, 0, 0, {}, {1000, 1000}}})[0],
                  static_cast<float>(1000 + std::log(2.0)));
  const float nan = std::numeric_limits<float>::quiet_NaN();
  EXPECT_TRUE(std::isnan(reference(graph::Reduce{{}, false, ReduceKind::max}, {{{3}, 0, 0, {}, {1, nan, 2}}})[0]));
  // LogSoftmax of (0, log 2): log(1/3), log(2/3). Hardmax: 1 at the first of equal maxima.
  const std::vector<float> ls = reference(graph::Softmax{0, false, graph::SoftmaxKind::log_softmax},
                                          {{{2}, 0, 0, {}, {0.0f, std::log(2.0f)}}});
  EXPECT_NEAR(ls[0], std::log(1.0 / 3), 1e-6);
  EXPECT_NEAR(ls[1], std::log(2.0 / 3), 1e-6);
  EXPECT_EQ(reference(graph::Softmax{1, false, graph::SoftmaxKind::hardmax},
                      {{{2, 3}, 0, 0, {}, {1, 7, 7, -1, -2, 0}}}),
            (std::vector<float>{0, 1, 0, 0, 0, 1}));
  EXPECT_EQ(reference(graph::Binary{graph::BinaryOp::max},
                      {{{2, 2}, 0, 0, {}, {1, 5, -3, 2}}, {{2}, 0, 0, {}, {2, 0}}}),
            (std::vector<float>{2, 5, 2, 2}));
  EXPECT_EQ(reference(graph::Binary{graph::BinaryOp::min}, {{{2}, 0, 0, {}, {1, 5}}, {{1}, 0, 0, {}, {3}}}),
            (std::vector<float>{1, 3}));
  EXPECT_EQ(reference(graph::Tile{{2, 2}}, {{{1, 2}, 0, 0, {}, {1, 2}}}),
            (std::vector<float>{1, 2, 1, 2, 1, 2, 1, 2}));
  EXPECT_EQ(reference(graph::Tile{{1, 2}}, {{{2, 2}, 0, 0, {}, {1, 2, 3, 4}}}),
            (std::vector<float>{1, 2, 1, 2, 3, 4, 3, 4}));
}

// Relu, Clip and LeakyRelu are a compare and at most one float multiply: exact.
TEST(DataOps, ClampsAndLeakyRelu) {
  for (const Shape& s : kUnaryShapes) {
    check(graph::Relu{}, {{s, -2, 2}}, kExact);
    check(graph::Clip{-0.5f, 0.7f}, {{s, -2, 2}}, kExact);
    check(graph::LeakyRelu{0.1f}, {{s, -2, 2}}, kExact);
  }
}

// expf is within an ulp or two of exp; the breakpoints of the hard ops sit inside [-8, 8).
TEST(DataOps, SmoothAndHardActivations) {
  for (const Shape& s : kUnaryShapes) {
    check(graph::Sigmoid{}, {{s, -12, 12}}, kRounding);
    check(graph::HardSigmoid{}, {{s, -8, 8}}, kRounding);
    check(graph::HardSigmoid{1.0f / 6, 0.5f}, {{s, -8, 8}}, kRounding);
    check(graph::HardSwish{}, {{s, -8, 8}}, kRounding);
  }
  // Exactly on the breakpoints.
  const In edges{{8}, 0, 0, {}, {-3, 3, -2.5f, 2.5f, 0, -0.0f, 6, -6}};
  check(graph::HardSwish{}, {edges}, kRounding);
  check(graph::HardSigmoid{}, {edges}, kRounding);
  check(graph::Relu{}, {edges}, kExact);
}

TEST(DataOps, Reshape) {
  check(graph::Reshape{{6, 20}}, {{{2, 3, 4, 5}}}, kExact);
  check(graph::Reshape{{120}}, {{{2, 3, 4, 5}}}, kExact);
  check(graph::Reshape{{2, 1, 3, 5, 4}}, {{{6, 20}}}, kExact);
}

TEST(DataOps, Transpose) {
  const std::vector<std::pair<Shape, std::vector<int>>> cases = {
      {{7}, {0}},
      {{3, 5}, {1, 0}},
      {{70, 45}, {1, 0}},  // more than one tile each way, with remainders
      {{2, 3, 4}, {0, 2, 1}},
      {{2, 3, 4}, {1, 0, 2}},
      {{2, 3, 4}, {1, 2, 0}},
      {{2, 3, 4}, {2, 0, 1}},
      {{2, 3, 4}, {2, 1, 0}},
      {{2, 3, 4}, {0, 1, 2}},
      {{2, 3, 4, 5}, {0, 2, 3, 1}},
      {{2, 3, 4, 5}, {0, 3, 1, 2}},
      {{2, 3, 4, 5}, {3, 2, 1, 0}},
      {{2, 3, 4, 5}, {1, 0, 2, 3}},
      {{2, 3, 4, 5}, {0, 1, 3, 2}},
      {{1, 3, 1, 5}, {3, 2, 0, 1}},  // size-1 axes
      {{1, 40, 37, 33}, {0, 2, 3, 1}},
      {{2, 3, 1, 4, 5}, {4, 2, 0, 3, 1}},
      {{2, 3, 1, 4, 5}, {0, 1, 2, 4, 3}},
      {{2, 3, 1, 4, 5}, {1, 0, 2, 3, 4}},
      {{3, 5, 2, 7, 4}, {2, 4, 1, 3, 0}},
  };
  for (const auto& [shape, perm] : cases) check(graph::Transpose{perm}, {{shape}}, kExact);
}

TEST(DataOps, ConcatOnEveryAxis) {
  for (const Shape& base : std::vector<Shape>{{2, 3, 4, 5}, {4}, {3, 2, 5}, {2, 1, 3, 2, 2}}) {
    for (int axis = 0; axis < static_cast<int>(base.size()); ++axis) {
      std::vector<In> ins;
      for (int64_t extent : {1, 3, 2}) {
        Shape s = base;
        s[axis] = extent;
        ins.push_back({s});
      }
      check(graph::Concat{axis}, ins, kExact);
    }
  }
}

TEST(DataOps, Slice) {
  using S = graph::Slice;
  const std::vector<std::pair<Shape, S>> cases = {
      {{9}, S{{1}, {8}, {3}}},
      {{9}, S{{8}, {-1}, {-1}}},  // a full reversal: end -1 is "before index 0"
      {{5, 6, 7}, S{{1, 0, 2}, {4, 6, 7}, {1, 1, 1}}},
      {{5, 6, 7}, S{{4, 5, 6}, {-1, -1, -1}, {-1, -2, -3}}},
      {{5, 6, 7}, S{{0, 5, 1}, {5, 1, 6}, {2, -1, 2}}},
      {{2, 3, 4, 5}, S{{1, 0, 3, 0}, {2, 3, 0, 5}, {1, 1, -1, 1}}},
      {{2, 3, 4, 5}, S{{0, 0, 0, 4}, {2, 3, 4, -1}, {1, 1, 1, -2}}},
      {{3, 4, 2, 5, 6}, S{{2, 1, 0, 0, 5}, {0, 4, 2, 5, 0}, {-1, 2, 1, 1, -2}}},
  };
  for (const auto& [shape, sl] : cases) check(sl, {{shape}}, kExact);
}

TEST(DataOps, Pad) {
  using P = graph::Pad;
  const std::vector<std::pair<Shape, P>> cases = {
      {{5}, P{{2, 3}, 0.5f}},
      {{5}, P{{-2, 1}, -1.5f}},
      {{2, 3, 4, 5}, P{{0, 1, 2, 0, 1, 0, 1, 3}, 0.25f}},
      {{2, 3, 4, 5}, P{{0, -1, 0, -2, 0, 0, -1, 1}, 0.75f}},
      {{2, 3, 4, 5}, P{{0, 0, 0, 0, 0, 0, 0, 0}, 0.0f}},
      {{3, 4, 5}, P{{1, -1, 2, -1, 3, -2}, 2.0f}},
      {{3, 4, 5}, P{{0, -4, 0, 0, 2, 0}, 3.0f}},  // axis 1 cropped away, then padded back
      {{2, 3, 2, 3, 2}, P{{1, 0, -1, 1, 0, 0, 2, 0, -1, 1}, -3.0f}},
  };
  for (const auto& [shape, p] : cases) check(p, {{shape}}, kExact);
}

TEST(DataOps, LayoutTransformBothWays) {
  for (const Shape& nchw :
       std::vector<Shape>{{2, 3, 4, 5}, {1, 40, 33, 37}, {1, 1, 1, 1}, {3, 1, 5, 1}}) {
    check(graph::LayoutTransform{Layout::nchw, Layout::nhwc}, {{nchw}}, kExact);
    const Shape nhwc = {nchw[0], nchw[2], nchw[3], nchw[1]};
    check(graph::LayoutTransform{Layout::nhwc, Layout::nchw}, {{nhwc, -1, 1, Layout::nhwc}},
          kExact);
  }
}

// ---- reductions ----

// Inputs span 10: exp's argument x - max is at most 10 in size, and its float rounding
// (~10 * 2^-24) plus expf's own ulp keep each result within ~1e-6 relative. Inputs in
// [80, 90) overflow expf unless the maximum is subtracted first.
TEST(DataOps, SoftmaxEveryAxisBothModes) {
  for (const Shape& s : std::vector<Shape>{{7}, {3, 5}, {2, 3, 4, 5}, {2, 3, 1, 4, 3}}) {
    for (int axis = 0; axis < static_cast<int>(s.size()); ++axis) {
      for (bool coerce : {false, true}) {
        check(graph::Softmax{axis, coerce}, {{s, -5, 5}}, kRounding);
        check(graph::Softmax{axis, coerce}, {{s, 80, 90}}, kRounding);
      }
    }
  }
}

// Both sides sum in double (in different orders) and round once: at most an ulp apart.
TEST(DataOps, ReduceMean) {
  const std::vector<std::vector<int>> axes4 = {{},     {0},    {1},       {3},          {1, 2},
                                               {0, 2}, {2, 3}, {1, 2, 3}, {0, 1, 2, 3}, {0, 3}};
  for (const std::vector<int>& axes : axes4)
    for (bool keep : {true, false})
      check(graph::ReduceMean{axes, keep}, {{{2, 3, 4, 5}}}, kRounding);
  for (bool keep : {true, false}) {
    check(graph::ReduceMean{{}, keep}, {{{9}}}, kRounding);
    check(graph::ReduceMean{{0}, keep}, {{{3, 7}}}, kRounding);
    check(graph::ReduceMean{{1, 3}, keep}, {{{2, 3, 1, 4, 5}}}, kRounding);
    check(graph::ReduceMean{{2, 3}, keep}, {{{1, 16, 13, 11}}}, kRounding);
  }
}

// ---- what run_op refuses ----

std::string run_with(const Op& op, const std::vector<Shape>& ins, const Shape& out) {
  std::vector<std::vector<float>> storage;
  std::vector<runtime::ops::ConstTensorRef> refs;
  for (const Shape& s : ins) storage.emplace_back(graph::num_elements(s), 1.0f);
  for (size_t i = 0; i < ins.size(); ++i)
    refs.push_back({storage[i].data(), ins[i], graph::logical_layout(ins[i].size())});
  std::vector<float> o(graph::num_elements(out));
  return runtime::ops::run_op(op, refs, {o.data(), out, graph::logical_layout(out.size())});
}

TEST(DataOps, RefusesInconsistentCalls) {
  EXPECT_NE(run_with(graph::Relu{}, {{3, 4}}, {3, 5}), "");
  EXPECT_NE(run_with(graph::Relu{}, {{3, 4}, {3, 4}}, {3, 4}), "");
  EXPECT_NE(run_with(graph::Reshape{{5}}, {{2, 3}}, {5}), "");
  EXPECT_NE(run_with(graph::Transpose{{0, 0}}, {{2, 3}}, {2, 2}), "");
  EXPECT_NE(run_with(graph::Concat{1}, {{2, 3}, {3, 3}}, {2, 6}), "");
  EXPECT_NE(run_with(graph::Slice{{5}, {1}, {-1}}, {{5}}, {4}), "");  // starts past the end
  EXPECT_NE(run_with(graph::Slice{{0}, {9}, {1}}, {{5}}, {9}), "");   // ends past the end
  EXPECT_NE(run_with(graph::Pad{{1, 1}, 0}, {{2, 3}}, {4, 3}), "");   // pads for one axis only
  EXPECT_NE(run_with(graph::Softmax{2, false}, {{2, 3}}, {2, 3}), "");
  EXPECT_NE(run_with(graph::ReduceMean{{0}, true}, {{2, 3}}, {3}), "");
  EXPECT_NE(run_with(graph::LayoutTransform{}, {{2, 3}}, {2, 3}), "");
}

TEST(DataOps, SupportsEveryDataOp) {
  for (const Op& op : std::vector<Op>{
           graph::Relu{}, graph::Clip{}, graph::LeakyRelu{}, graph::Sigmoid{}, graph::HardSigmoid{},
           graph::HardSwish{}, graph::Reshape{}, graph::Transpose{},
           graph::Concat{}, graph::Slice{}, graph::Pad{}, graph::Softmax{}, graph::ReduceMean{},
           graph::LayoutTransform{Layout::nchw, Layout::nhwc},
           graph::LayoutTransform{Layout::nhwc, Layout::nchw}})
    EXPECT_TRUE(runtime::ops::supported(op)) << graph::op_name(op);
  // Generated for each model's shapes (codegen/), never a portable kernel.
  EXPECT_FALSE(runtime::ops::supported(graph::Binary{}));
  EXPECT_FALSE(runtime::ops::supported(graph::ElementwiseChain{}));
}

}  // namespace
}  // namespace kiln
