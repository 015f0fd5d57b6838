// Portable data kernels against the reference interpreter.
#include <gtest/gtest.h>

#include "runtime/ops/ops.h"
