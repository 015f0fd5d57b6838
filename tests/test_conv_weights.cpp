// The weight layouts the CPU convolution kernels read (runtime/conv_weights.h): blocked by 16
// output channels with a line of padding after each block, and grouped convolutions' channels
// interleaved by group; and which convolutions take each form. The kernels reading them are
// tested against the reference in test_conv_kernels.cpp.
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

#include "conv_weights.h"
#include "graph/kernel_spec.h"

namespace {

using namespace kiln;

// The blocked weight layout (runtime::block_conv_weights) against HWIO indexing, and which
// convolutions read it. The kernel tests (test_conv_kernels.cpp) run blocked kernels on every dense
// case with output channels in whole blocks.
TEST(ConvKernelWeights, BlockedLayout) {
  const int64_t block = runtime::kConvWeightBlock;
  for (const int64_t co : {32, 136}) {  // whole blocks; a last block half zeros
    const int64_t kh = 3, kw = 2, ci = 5;
    std::vector<float> hwio(static_cast<size_t>(kh * kw * ci * co));
    for (size_t i = 0; i < hwio.size(); ++i) hwio[i] = static_cast<float>(i) * 0.5f + 1.0f;
    const auto blocked = runtime::block_conv_weights(hwio.data(), kh, kw, ci, co);
    const int64_t blocks = runtime::conv_weight_blocks(co);
    ASSERT_EQ(blocks, (co + block - 1) / block);
    // Each block a line longer than its weights (zeros): never a multiple of 4 KiB apart.
    const int64_t stride = (kh * kw * ci + 1) * block;
    ASSERT_EQ(runtime::conv_weight_block_stride(kh, kw, ci), stride);
    ASSERT_EQ(blocked.size(), static_cast<size_t>(blocks * stride));
    for (int64_t y = 0; y < kh; ++y)
      for (int64_t x = 0; x < kw; ++x)
        for (int64_t i = 0; i < ci; ++i)
          for (int64_t o = 0; o < blocks * block; ++o)
            ASSERT_EQ(blocked[static_cast<size_t>(o / block * stride +
                                                  ((y * kw + x) * ci + i) * block + o % block)],
                      o < co ? hwio[static_cast<size_t>(((y * kw + x) * ci + i) * co + o)] : 0.0f)
                << "co " << co << " o " << o;
    for (int64_t b = 0; b < blocks; ++b)
      for (int64_t p = 0; p < block; ++p)
        ASSERT_EQ(blocked[static_cast<size_t>(b * stride + kh * kw * ci * block + p)], 0.0f);
    // The Halide dimensions the kernels are bound with: (co % 16, ci, kx, ky, co / 16).
    const auto dims = runtime::blocked_conv_weight_dims(kh, kw, ci, co);
    const int32_t extents[5] = {static_cast<int32_t>(block), static_cast<int32_t>(ci),
                                static_cast<int32_t>(kw), static_cast<int32_t>(kh),
                                static_cast<int32_t>(blocks)};
    const int32_t strides[5] = {1, static_cast<int32_t>(block), static_cast<int32_t>(block * ci),
                                static_cast<int32_t>(block * ci * kw),
                                static_cast<int32_t>(stride)};
    for (int d = 0; d < 5; ++d) {
      EXPECT_EQ(dims[static_cast<size_t>(d)].min, 0);
      EXPECT_EQ(dims[static_cast<size_t>(d)].extent, extents[d]) << d;
      EXPECT_EQ(dims[static_cast<size_t>(d)].stride, strides[d]) << d;
    }
  }
  graph::ConvKernelSpec c;
  c.output.shape = {1, 7, 7, 48};
  c.groups = 1;
  EXPECT_TRUE(runtime::blocks_conv_weights(c));
  c.output.shape[3] = 40;  // not whole blocks: 48 with the padding
  EXPECT_TRUE(runtime::blocks_conv_weights(c));
  c.output.shape[3] = 1000;  // a classifier: 1008 with the padding
  EXPECT_TRUE(runtime::blocks_conv_weights(c));
  c.constant_weights = false;  // weights bound at run time as they come
  EXPECT_FALSE(runtime::blocks_conv_weights(c));
  c.constant_weights = true;
  c.groups = 2;
  EXPECT_FALSE(runtime::blocks_conv_weights(c));
}

// Grouped convolutions' weights with their channels interleaved by group
// (runtime::conv_weight_interleave): position p of block b holds channel p / interleave of the
// block's group p % interleave; and which convolutions take that form.
TEST(ConvKernelWeights, InterleavedLayout) {
  const int64_t block = runtime::kConvWeightBlock;
  for (const int per_group : {2, 4, 8}) {
    const int interleave = static_cast<int>(block) / per_group;
    const int64_t kh = 3, kw = 3, ci = 2 * per_group, co = 32;
    std::vector<float> hwio(static_cast<size_t>(kh * kw * ci * co));
    for (size_t i = 0; i < hwio.size(); ++i) hwio[i] = static_cast<float>(i) * 0.25f - 7.0f;
    const auto blocked = runtime::block_conv_weights(hwio.data(), kh, kw, ci, co, interleave);
    const int64_t stride = runtime::conv_weight_block_stride(kh, kw, ci);
    ASSERT_EQ(blocked.size(), static_cast<size_t>(co / block * stride));
    for (int64_t tap = 0; tap < kh * kw; ++tap)
      for (int64_t i = 0; i < ci; ++i)
        for (int64_t b = 0; b < co / block; ++b)
          for (int64_t p = 0; p < block; ++p) {
            const int64_t channel = b * block + p % interleave * per_group + p / interleave;
            ASSERT_EQ(blocked[static_cast<size_t>(b * stride + (tap * ci + i) * block + p)],
                      hwio[static_cast<size_t>((tap * ci + i) * co + channel)])
                << per_group << " per group, position " << p << " of block " << b;
          }
  }
  graph::ConvKernelSpec c;
  c.output.shape = {1, 7, 7, 128};
  c.weights.shape = {3, 3, 8, 128};
  c.groups = 16;  // 8 channels a group: two groups a block
  EXPECT_EQ(runtime::conv_weight_interleave(c), 2);
  EXPECT_TRUE(runtime::blocks_conv_weights(c));
  c.groups = 32, c.weights.shape[2] = 4;  // ResNeXt's 4
  EXPECT_EQ(runtime::conv_weight_interleave(c), 4);
  c.groups = 64, c.weights.shape[2] = 1;  // 2 outputs of one input: the input cannot interleave
  EXPECT_EQ(runtime::conv_weight_interleave(c), 1);
  c.groups = 8, c.weights.shape[2] = 16;  // whole vectors: the dense schedules
  EXPECT_EQ(runtime::conv_weight_interleave(c), 1);
  EXPECT_FALSE(runtime::blocks_conv_weights(c));
  c.groups = 16, c.weights.shape[2] = 8;
  c.output.shape[3] = 120, c.weights.shape[3] = 120, c.groups = 15;  // not whole blocks
  EXPECT_EQ(runtime::conv_weight_interleave(c), 1);
  c.output.shape[3] = 128, c.weights.shape[3] = 128, c.groups = 16;
  c.constant_weights = false;
  EXPECT_EQ(runtime::conv_weight_interleave(c), 1);
  c.constant_weights = true;
  c.depthwise = true;
  EXPECT_EQ(runtime::conv_weight_interleave(c), 1);
}

}  // namespace
