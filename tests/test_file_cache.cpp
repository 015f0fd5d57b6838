// The cache of compiled files (codegen/file_cache.h) and the kernels' archives kept in it
// (write_kernel_archives with a cache directory): what is stored comes back byte for byte, and
// nothing is used whose key differs or whose files were damaged.
#include <gtest/gtest.h>

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <random>

#include "codegen/file_cache.h"
#include "codegen/kernel_library.h"
#include "generated_cases.h"
#include "kiln/runtime.h"
#include "runtime/kernels.h"

namespace kiln {
namespace {

namespace fs = std::filesystem;
using namespace testing_util;

class FileCacheTest : public testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/kiln_file_cache_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    fs::create_directories(dir_ / "in");
    fs::create_directories(dir_ / "out");
  }
  void TearDown() override { fs::remove_all(dir_); }

  // Random bytes (never empty): a file the cache cannot mistake for another.
  std::string write_random(const fs::path& p, size_t size) {
    std::string bytes(size, '\0');
    for (char& c : bytes) c = static_cast<char>(rng_());
    std::ofstream(p, std::ios::binary) << bytes;
    return bytes;
  }

  fs::path dir_;
  std::mt19937 rng_{std::random_device{}()};
};

TEST_F(FileCacheTest, GivesBackWhatWasStoredUnderItsKeyOnly) {
  const codegen::FileCache cache((dir_ / "cache").string(), "objects");
  ASSERT_TRUE(cache.enabled());
  const std::string a = write_random(dir_ / "in" / "a.o", 1000 + rng_() % 1000);
  const std::string b = write_random(dir_ / "in" / "b.d", 10 + rng_() % 100);
  const std::vector<std::string> names = {"a.o", "b.d"};
  EXPECT_FALSE(cache.fetch("key one", dir_ / "out", names));
  cache.store("key one", dir_ / "in", names);
  write_random(dir_ / "out" / "a.o", 7);  // poisoned: the fetch must replace it
  ASSERT_TRUE(cache.fetch("key one", dir_ / "out", names));
  EXPECT_EQ(codegen::read_text(dir_ / "out" / "a.o"), a);
  EXPECT_EQ(codegen::read_text(dir_ / "out" / "b.d"), b);
  EXPECT_FALSE(cache.fetch("key two", dir_ / "out", names));
  EXPECT_FALSE(cache.fetch("key one", dir_ / "out", {"a.o", "b.d", "c.o"}));  // not stored
  // Another kind of file is another cache.
  EXPECT_FALSE(codegen::FileCache((dir_ / "cache").string(), "archives")
                   .fetch("key one", dir_ / "out", names));
}

TEST_F(FileCacheTest, DamagedEntriesAreNotUsed) {
  const codegen::FileCache cache((dir_ / "cache").string(), "objects");
  const std::string a = write_random(dir_ / "in" / "a.o", 4096);
  cache.store("k", dir_ / "in", {"a.o"});
  ASSERT_TRUE(cache.fetch("k", dir_ / "out", {"a.o"}));
  // The entry's copy, changed in one byte (same size) and then cut short.
  fs::path stored;
  for (const auto& e : fs::recursive_directory_iterator(dir_ / "cache"))
    if (e.path().filename() == "a.o") stored = e.path();
  ASSERT_FALSE(stored.empty());
  std::string bytes = a;
  bytes[rng_() % bytes.size()] ^= 0x5a;
  std::ofstream(stored, std::ios::binary | std::ios::trunc) << bytes;
  EXPECT_FALSE(cache.fetch("k", dir_ / "out", {"a.o"}));
  std::ofstream(stored, std::ios::binary | std::ios::trunc) << a.substr(0, 100);
  EXPECT_FALSE(cache.fetch("k", dir_ / "out", {"a.o"}));
  // Stored again, it is whole again.
  cache.store("k", dir_ / "in", {"a.o"});
  ASSERT_TRUE(cache.fetch("k", dir_ / "out", {"a.o"}));
  EXPECT_EQ(codegen::read_text(dir_ / "out" / "a.o"), a);
}

TEST_F(FileCacheTest, WithoutADirectoryNothingIsKept) {
  const codegen::FileCache cache("", "objects");
  EXPECT_FALSE(cache.enabled());
  write_random(dir_ / "in" / "a.o", 64);
  cache.store("k", dir_ / "in", {"a.o"});
  EXPECT_FALSE(cache.fetch("k", dir_ / "out", {"a.o"}));
  // A cache directory that cannot be created (a file is in the way) is skipped too.
  write_random(dir_ / "blocker", 16);
  const codegen::FileCache blocked((dir_ / "blocker").string(), "objects");
  blocked.store("k", dir_ / "in", {"a.o"});
  EXPECT_FALSE(blocked.fetch("k", dir_ / "out", {"a.o"}));
}

// Kernels compiled twice with one cache: the second time each comes from it, byte for byte; a
// different entry point name (another model's prefix) or target list is compiled anew.
TEST_F(FileCacheTest, KernelArchivesComeFromTheCacheTheSecondTime) {
  ModelOptions lower;
  lower.lower_only = true;
  const std::vector<graph::KernelSpec> specs = {
      Model(chain_graph({"t", {1, 3, 5, 8}, graph::Layout::nhwc, kBnRelu}, 5), lower).kernels()[0],
      Model(chain_graph({"u", {1, 4, 4, 24}, graph::Layout::nhwc, kBnRelu}, 6), lower)
          .kernels()[0]};
  const std::string target = runtime::cpu_targets().back();  // the baseline: quickest to compile
  const std::string cache = (dir_ / "cache").string();
  std::vector<bool> cached;
  const codegen::Progress progress = [&](size_t, size_t, const std::string&, bool c) {
    cached.push_back(c);
  };
  const auto first = codegen::write_kernel_archives(specs, {target}, "m", dir_ / "in", progress,
                                                    nullptr, false, cache);
  EXPECT_EQ(cached, (std::vector<bool>{false, false}));
  cached.clear();
  const auto second = codegen::write_kernel_archives(specs, {target}, "m", dir_ / "out", progress,
                                                     nullptr, false, cache);
  EXPECT_EQ(cached, (std::vector<bool>{true, true}));
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(second.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(second[i].parent_path(), dir_ / "out");
    EXPECT_EQ(codegen::read_text(second[i]), codegen::read_text(first[i]));
    EXPECT_FALSE(codegen::read_text(second[i]).empty());
  }
  cached.clear();
  codegen::write_kernel_archives(specs, {target}, "other", dir_ / "out", progress, nullptr, false,
                                 cache);
  EXPECT_EQ(cached, (std::vector<bool>{false, false}));
  if (runtime::cpu_targets().size() > 1) {
    cached.clear();
    codegen::write_kernel_archives({specs[0]}, {runtime::cpu_targets().front(), target}, "m",
                                   dir_ / "out", progress, nullptr, false, cache);
    EXPECT_EQ(cached, (std::vector<bool>{false}));
  }
}

}  // namespace
}  // namespace kiln
