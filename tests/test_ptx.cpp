// The CUDA objects embed PTX for sm_86 as text; this extracts it and assembles it with ptxas
// for sm_90 (the H200), the same step the driver's JIT performs at first launch.
#include <gtest/gtest.h>

#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include "ptx_util.h"

namespace {

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, sep);)
    if (!item.empty()) out.push_back(item);
  return out;
}

class PtxTest : public testing::TestWithParam<std::string> {};

TEST_P(PtxTest, AssemblesForSm90) {
  if (!kiln::ptx_util::have_ptxas())
    GTEST_SKIP() << "ptxas not found (install the CUDA toolkit to run this check)";
  const std::string object = GetParam();
  ASSERT_TRUE(std::filesystem::exists(object)) << object;
  const std::vector<std::string> modules = kiln::ptx_util::extract_ptx(object);
  ASSERT_FALSE(modules.empty()) << "no PTX found in " << object;

  std::filesystem::create_directories(KILN_PTX_WORK_DIR);
  const std::string stem = std::filesystem::path(object).stem().string();
  for (size_t i = 0; i < modules.size(); ++i) {
    const std::string base = std::string(KILN_PTX_WORK_DIR) + "/" + stem + "_" + std::to_string(i);
    EXPECT_EQ(kiln::ptx_util::assemble_sm90(modules[i], base), "");
  }
}

INSTANTIATE_TEST_SUITE_P(CudaObjects, PtxTest, testing::ValuesIn(split(KILN_CUDA_OBJECTS, '|')),
                         [](const testing::TestParamInfo<std::string>& info) {
                           return std::filesystem::path(info.param).stem().string();
                         });

}  // namespace
