// Kiln's scratch allocator (runtime/scratch_memory.h), called as the Halide runtime calls it:
// Halide's alignment contract, blocks handed out again only to requests they fit and not much
// smaller, the bounds on what a thread keeps, blocks of Halide's default allocator passed on
// to its free, and threads that exit with blocks kept. Built into the concurrency tests so the
// tsan preset checks it too.
#include <HalideRuntime.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

#include "scratch_memory.h"

namespace {

using kiln::runtime::kCachedBlocks;
using kiln::runtime::kMaxCachedBlock;
using kiln::runtime::kMaxCachedBytes;
using kiln::runtime::scratch_cached_bytes;
using kiln::runtime::scratch_free;
using kiln::runtime::scratch_malloc;

// Whether blocks are kept at all: not under AddressSanitizer (the header says why).
bool keeps_blocks() {
  void* p = scratch_malloc(nullptr, 100);
  const size_t before = scratch_cached_bytes();
  scratch_free(nullptr, p);
  const bool kept = scratch_cached_bytes() > before;
  scratch_free(nullptr, scratch_malloc(nullptr, 100));  // takes it back out and in
  return kept;
}

void drain_cache() {
  kiln::runtime::scratch_release_cached();
  ASSERT_EQ(scratch_cached_bytes(), 0u);
}

TEST(ScratchMemory, AlignedWritableAndPaddedAsHalideRequires) {
  for (size_t size :
       {size_t{0}, size_t{1}, size_t{63}, size_t{64}, size_t{1000}, size_t{3} << 20}) {
    auto* p = static_cast<unsigned char*>(scratch_malloc(nullptr, size));
    ASSERT_NE(p, nullptr) << size;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % 64, 0u) << size;
    std::memset(p, 0xa5, size);  // every byte writable (ASan checks the bounds)
    volatile unsigned char before = p[-8], after = p[((size + 63) / 64) * 64 + 7];
    (void)before, (void)after;
    scratch_free(nullptr, p);
  }
  scratch_free(nullptr, nullptr);
}

TEST(ScratchMemory, AFreedBlockServesTheNextRequestItFits) {
  if (!keeps_blocks()) GTEST_SKIP() << "blocks are not kept under AddressSanitizer";
  drain_cache();
  void* a = scratch_malloc(nullptr, 10000);
  scratch_free(nullptr, a);
  EXPECT_EQ(scratch_cached_bytes(), 10048u);  // rounded up to 64 bytes
  EXPECT_NE(scratch_malloc(nullptr, 20000), a) << "a block too small was handed out";
  void* b = scratch_malloc(nullptr, 4000);  // 10048 is over twice 4032: not this one
  EXPECT_NE(b, a);
  void* c = scratch_malloc(nullptr, 9000);
  EXPECT_EQ(c, a);
  EXPECT_EQ(scratch_cached_bytes(), 0u);
  scratch_free(nullptr, b);
  scratch_free(nullptr, c);
  drain_cache();
}

TEST(ScratchMemory, AThreadKeepsBoundedBlocks) {
  if (!keeps_blocks()) GTEST_SKIP() << "blocks are not kept under AddressSanitizer";
  drain_cache();
  scratch_free(nullptr, scratch_malloc(nullptr, kMaxCachedBlock + 64));
  EXPECT_EQ(scratch_cached_bytes(), 0u) << "a block over kMaxCachedBlock was kept";
  std::vector<void*> blocks;
  for (int i = 0; i < 3 * kCachedBlocks; ++i)
    blocks.push_back(scratch_malloc(nullptr, 64 * (i + 1)));
  for (void* p : blocks) scratch_free(nullptr, p);
  size_t newest = 0;  // the last kCachedBlocks freed are the ones kept
  for (int i = 2 * kCachedBlocks; i < 3 * kCachedBlocks; ++i) newest += 64 * (i + 1);
  EXPECT_EQ(scratch_cached_bytes(), newest);
  drain_cache();
  blocks.clear();
  for (int i = 0; i < kCachedBlocks; ++i)
    blocks.push_back(scratch_malloc(nullptr, kMaxCachedBlock));
  for (void* p : blocks) scratch_free(nullptr, p);
  EXPECT_EQ(scratch_cached_bytes(), kMaxCachedBytes);
  drain_cache();
}

// Memory Halide's default allocator handed out (before the runtime was switched over) goes
// back to it.
TEST(ScratchMemory, DefaultBlocksGoToTheDefaultFree) {
  const size_t before = scratch_cached_bytes();
  for (size_t size : {size_t{16}, size_t{5000}}) {
    void* p = halide_default_malloc(nullptr, size);
    ASSERT_NE(p, nullptr);
    std::memset(p, 0x5a, size);
    scratch_free(nullptr, p);  // LeakSanitizer and ASan report a mismatch
  }
  EXPECT_EQ(scratch_cached_bytes(), before);
}

// Threads that allocate, free and exit, many at once: each keeps its own blocks, and frees them
// when it ends (LeakSanitizer reports any it leaves).
TEST(ScratchMemory, ThreadsKeepTheirOwnBlocksAndFreeThemOnExit) {
  std::vector<std::thread> threads;
  for (int t = 0; t < 8; ++t)
    threads.emplace_back([t] {
      for (int round = 0; round < 200; ++round) {
        auto* p =
            static_cast<int*>(scratch_malloc(nullptr, sizeof(int) * (100 + t * 37 + round % 5)));
        for (int i = 0; i < 100; ++i) p[i] = t * 1000 + i;
        for (int i = 0; i < 100; ++i) ASSERT_EQ(p[i], t * 1000 + i);
        scratch_free(nullptr, p);
      }
    });
  for (std::thread& t : threads) t.join();
}

}  // namespace
