// The kernel generator the tests give their Models: kernels compiled by codegen/ and cached in
// the build tree (KILN_TEST_CACHE_DIR), so a rerun loads them instead of compiling.
#pragma once

#include "codegen/kernel_library.h"
#include "runtime/kernels.h"

namespace kiln::testing_util {

// `dispatch`: every CPU target of the build behind the kernels' dispatch wrappers; otherwise the
// target the Model asks for (ModelOptions::cpu_target), or the best one this CPU supports.
inline KernelGenerator test_generator(bool dispatch = false) {
  codegen::CodegenOptions o;
  o.cache_dir = KILN_TEST_CACHE_DIR;
  if (dispatch) o.targets = runtime::cpu_targets();
  return codegen::kernel_generator(o);
}

}  // namespace kiln::testing_util
