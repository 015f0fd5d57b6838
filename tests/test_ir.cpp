// The IR's helpers on shapes that come from files (.npy headers, .weights, ONNX): sizes that
// do not fit in 64 bits are errors, not undefined behaviour.
#include <gtest/gtest.h>

#include "graph/ir.h"

namespace {

using kiln::graph::Error;
using kiln::graph::num_elements;

TEST(NumElements, CountsElements) {
  EXPECT_EQ(num_elements({}), 1);
  EXPECT_EQ(num_elements({2, 3, 5}), 30);
  EXPECT_EQ(num_elements({7, 0, 3}), 0);
}

// Found by fuzz_npy: an .npy header with a zero among dimensions whose product overflows int64
// (fuzz/regressions/npy/npy_zero_dim_overflowing_shape.npy). The array is empty.
TEST(NumElements, AZeroDimensionMakesZeroEvenWhenTheOthersOverflow) {
  EXPECT_EQ(num_elements({int64_t{1} << 40, int64_t{1} << 40, 0}), 0);
  EXPECT_EQ(num_elements({8, 444444443, 44444443, 2047999993344, 0, 3}), 0);
}

TEST(NumElements, MoreThanInt64CountsIsAnError) {
  EXPECT_THROW(num_elements({int64_t{1} << 40, int64_t{1} << 40}), Error);
  EXPECT_THROW(num_elements({INT64_MAX, 2}), Error);
  EXPECT_EQ(num_elements({INT64_MAX}), INT64_MAX);
}

}  // namespace
