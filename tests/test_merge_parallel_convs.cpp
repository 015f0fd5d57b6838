// merge_parallel_convs: branches of one tensor summed (RepVGG, ACNet) become one convolution,
// computing what the branches computed, and only when that is exact.
#include <gtest/gtest.h>

#include <ostream>
#include <string>
#include <vector>

#include "graph/builder.h"
#include "graph/passes/passes.h"
#include "graph/reference.h"
#include "graph/shape_inference.h"
#include "graph/verify.h"
#include "graph_test_util.h"

namespace kiln::graph {
namespace {

using testing_util::count_ops;
using testing_util::expect_same_outputs_atol_per_unit;
using testing_util::random_inputs;

struct Window {
  int64_t kh, kw;
  int pad_top, pad_left, pad_bottom, pad_right;
  int dilation = 1;
};

class Block {
 public:
  Block(Layout layout, int64_t n, int64_t c, int64_t h, int64_t w) : layout_(layout), c_(c) {
    x_ = b_.input("x", image_shape(ImageDims{n, c, h, w}, layout), layout);
  }
  ValueId x() const { return x_; }

  ValueId conv(ValueId in, int64_t ci, int64_t co, const Window& win, int stride = 1, int groups = 1) {
    Conv2d a;
    a.stride_h = a.stride_w = stride;
    a.pad_top = win.pad_top, a.pad_left = win.pad_left;
    a.pad_bottom = win.pad_bottom, a.pad_right = win.pad_right;
    a.dilation_h = a.dilation_w = win.dilation;
    a.groups = groups;
    const std::string name = "conv" + std::to_string(++count_);
    const Layout wl = filter_layout_for(layout_);
    const Shape ws = filter_shape(FilterDims{co, ci / groups, win.kh, win.kw}, wl);
    const ValueId wv = b_.constant(name + "_w", ws, random_uniform(num_elements(ws), -0.5f, 0.5f, seed()), wl);
    const ValueId bias = b_.constant(name + "_b", {co}, random_uniform(co, -0.5f, 0.5f, seed()));
    return b_.conv2d(name, in, wv, bias, a);
  }
  ValueId bn(ValueId in, int64_t c) {
    const std::string name = "bn" + std::to_string(++count_);
    std::vector<float> var = random_uniform(c, 0.1f, 2.0f, seed());
    return b_.batch_norm(name, in, b_.constant(name + "_g", {c}, random_uniform(c, -1.5f, 1.5f, seed())),
                         b_.constant(name + "_b", {c}, random_uniform(c, -1.0f, 1.0f, seed())),
                         b_.constant(name + "_m", {c}, random_uniform(c, -1.0f, 1.0f, seed())),
                         b_.constant(name + "_v", {c}, std::move(var)));
  }
  ValueId add(ValueId a, ValueId b) { return b_.op("add" + std::to_string(++count_), Binary{BinaryOp::add}, {a, b}); }
  ValueId relu(ValueId a) { return b_.relu("relu" + std::to_string(++count_), a); }
  Graph finish(ValueId out) {
    b_.output(out);
    return b_.finish();
  }
  int64_t channels() const { return c_; }

 private:
  uint64_t seed() { return 1000 + 17 * ++seeds_; }
  GraphBuilder b_;
  Layout layout_;
  int64_t c_;
  ValueId x_;
  int count_ = 0;
  uint64_t seeds_ = 0;
};

const Window k3{3, 3, 1, 1, 1, 1};
const Window k1{1, 1, 0, 0, 0, 0};

// What the pipeline runs: the BatchNorms fold first, then the branches merge.
Graph merged(const Graph& before) { return merge_parallel_convs(fold_batch_norm(before)); }

// `after` has `convs` convolutions and `adds` Adds left, and computes what `before` does.
void expect_merged(const Graph& before, int convs, int adds) {
  const Graph after = merged(before);
  ASSERT_TRUE(verify_problems(after).empty()) << dump(after);
  EXPECT_EQ(count_ops<Conv2d>(after), convs) << dump(after);
  EXPECT_EQ(count_ops<Binary>(after), adds) << dump(after);
  EXPECT_EQ(count_ops<BatchNorm>(after), 0) << dump(after);
  for (uint64_t seed : {1u, 2u})
    expect_same_outputs_atol_per_unit(before, after, random_inputs(before, seed), 1e-5, 1e-6);
}

struct RepVggCase {
  const char* name;
  Layout layout;
  int64_t c, co, h, w;
  int stride, groups;
};
void PrintTo(const RepVggCase& c, std::ostream* os) { *os << c.name; }

class MergeParallelConvs : public ::testing::TestWithParam<RepVggCase> {};

// RepVGG's training-form block: 3x3 + BN, 1x1 + BN and (where shapes allow) a BN of the input,
// summed, ReLU. One convolution and the ReLU remain.
TEST_P(MergeParallelConvs, RepVggBlockIsOneConvolution) {
  const RepVggCase& k = GetParam();
  Block b(k.layout, 2, k.c, k.h, k.w);
  const ValueId dense = b.bn(b.conv(b.x(), k.c, k.co, k3, k.stride, k.groups), k.co);
  const ValueId point = b.bn(b.conv(b.x(), k.c, k.co, k1, k.stride, k.groups), k.co);
  ValueId y = b.add(dense, point);
  const bool identity = k.c == k.co && k.stride == 1;
  if (identity) y = b.add(y, b.bn(b.x(), k.c));
  const Graph before = b.finish(b.relu(y));
  expect_merged(before, 1, 0);
  EXPECT_EQ(count_ops<Binary>(before), identity ? 2 : 1) << "the pass must not mutate its input";
  const Graph after = merged(before);
  for (const Node& n : after.nodes())
    if (std::holds_alternative<Conv2d>(n.op)) {
      std::vector<std::string> want = {"conv2d", "batchnorm (folded)", "conv2d", "batchnorm (folded)",
                                       "add (convolutions merged)"};
      if (identity) want.push_back("batchnorm of the input (merged)");
      EXPECT_EQ(n.computes, want);
    }
}

const RepVggCase kRepVgg[] = {
    {"identity_nchw", Layout::nchw, 8, 8, 9, 7, 1, 1},
    {"stride2_nchw", Layout::nchw, 6, 10, 9, 8, 2, 1},
    {"identity_grouped_nchw", Layout::nchw, 8, 8, 6, 6, 1, 4},
    {"identity_nhwc", Layout::nhwc, 12, 12, 5, 7, 1, 1},
    {"stride2_grouped_nhwc", Layout::nhwc, 8, 12, 7, 7, 2, 2},
};
INSTANTIATE_TEST_SUITE_P(Blocks, MergeParallelConvs, ::testing::ValuesIn(kRepVgg),
                         [](const auto& info) { return std::string(info.param.name); });

// ACNet: a 3x3, a 1x3 and a 3x1 of the same input, summed in either operand order.
TEST(MergeParallelConvsPass, AsymmetricKernelsGoIntoTheSquareOne) {
  for (bool conv_first : {true, false}) {
    SCOPED_TRACE(conv_first ? "sum first" : "sum second");
    Block b(Layout::nchw, 1, 6, 8, 9);
    const ValueId sq = b.conv(b.x(), 6, 5, k3, 2);
    const ValueId hor = b.conv(b.x(), 6, 5, Window{1, 3, 0, 1, 0, 1}, 2);
    const ValueId ver = b.conv(b.x(), 6, 5, Window{3, 1, 1, 0, 1, 0}, 2);
    const ValueId s = conv_first ? b.add(sq, hor) : b.add(hor, sq);
    expect_merged(b.finish(conv_first ? b.add(s, ver) : b.add(ver, s)), 1, 0);
  }
}

// Dilated windows: a 1x1 goes to the centre of a dilated 3x3, and so does the input itself.
TEST(MergeParallelConvsPass, DilatedWindowTakesThePointwiseAndTheInput) {
  Block b(Layout::nchw, 1, 4, 10, 10);
  const ValueId d = b.conv(b.x(), 4, 4, Window{3, 3, 2, 2, 2, 2, 2});
  expect_merged(b.finish(b.add(b.add(d, b.conv(b.x(), 4, 4, k1)), b.x())), 1, 0);
}

// A window padded only below: the output's own pixel is its first tap.
TEST(MergeParallelConvsPass, InputGoesToTheTapReadingTheOutputPixel) {
  Block b(Layout::nhwc, 1, 8, 6, 5);
  const ValueId c = b.conv(b.x(), 8, 8, Window{3, 3, 0, 0, 2, 2});
  expect_merged(b.finish(b.add(b.bn(b.x(), 8), c)), 1, 0);
}

// Sums that are not one convolution keep their Add and their meaning.
void expect_unmerged(const Graph& before) {
  const Graph after = merged(before);
  ASSERT_TRUE(verify_problems(after).empty()) << dump(after);
  EXPECT_EQ(count_ops<Conv2d>(after), count_ops<Conv2d>(before)) << dump(after);
  EXPECT_EQ(count_ops<Binary>(after), count_ops<Binary>(before)) << dump(after);
  expect_same_outputs_atol_per_unit(before, after, random_inputs(before, 5), 1e-5, 1e-6);
}

TEST(MergeParallelConvsPass, RefusesWhatIsNotOneConvolution) {
  {
    SCOPED_TRACE("a branch is also a graph output");
    Block b(Layout::nchw, 1, 4, 6, 6);
    const ValueId c = b.conv(b.x(), 4, 4, k3);
    Graph g = b.finish(b.add(c, b.conv(b.x(), 4, 4, k1)));
    g.outputs.push_back(c);
    expect_unmerged(g);
  }
  {
    SCOPED_TRACE("the branches read different tensors");
    Block b(Layout::nchw, 1, 4, 6, 6);
    expect_unmerged(b.finish(b.add(b.conv(b.x(), 4, 4, k3), b.conv(b.relu(b.x()), 4, 4, k1))));
  }
  {
    SCOPED_TRACE("different dilations");
    Block b(Layout::nchw, 1, 4, 9, 9);
    expect_unmerged(b.finish(b.add(b.conv(b.x(), 4, 4, k3), b.conv(b.x(), 4, 4, Window{3, 3, 2, 2, 2, 2, 2}))));
  }
  {
    SCOPED_TRACE("neither window holds the other");
    Block b(Layout::nchw, 1, 4, 7, 7);
    expect_unmerged(b.finish(
        b.add(b.conv(b.x(), 4, 4, Window{1, 3, 0, 1, 0, 1}), b.conv(b.x(), 4, 4, Window{3, 1, 1, 0, 1, 0}))));
  }
  {
    SCOPED_TRACE("the pointwise tap falls outside the window");
    // Both H + 1 rows: the 2x2 reads rows i and i + 1, the 1x1 row i - 1.
    Block b(Layout::nchw, 1, 4, 7, 7);
    expect_unmerged(b.finish(
        b.add(b.conv(b.x(), 4, 4, Window{2, 2, 0, 0, 2, 2}), b.conv(b.x(), 4, 4, Window{1, 1, 1, 1, 0, 0}))));
  }
  {
    SCOPED_TRACE("an activation between the convolution and the sum");
    Block b(Layout::nchw, 1, 4, 6, 6);
    expect_unmerged(b.finish(b.add(b.relu(b.conv(b.x(), 4, 4, k3)), b.x())));
  }
  {
    SCOPED_TRACE("the output's own pixel falls between the dilated taps");
    // Rows i - 1, i + 1, i + 3: the input is no tap of this window.
    Block b(Layout::nchw, 1, 4, 8, 8);
    expect_unmerged(b.finish(b.add(b.conv(b.x(), 4, 4, Window{3, 3, 1, 1, 3, 3, 2}), b.x())));
  }
}

}  // namespace
}  // namespace kiln::graph
