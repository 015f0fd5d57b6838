// The generated kernels' scratch memory (Halide's halide_malloc / halide_free): a buffer a
// kernel's task allocates (a band of a fused pooling's convolution rows, a Winograd task's
// transformed tiles, a staged input) is freed when the task ends, and the next task, or the
// next call of the kernel, allocates the same size again. glibc's malloc and free cost about
// 1.6% of inception_tiny's samples on 2 threads (a few hundred pairs a run). Each thread keeps
// the last blocks it freed and hands them out again.
//
// Bounds: blocks of at most kMaxCachedBlock bytes, at most kMaxCachedBytes per thread, in at
// most kCachedBlocks blocks; a block is reused for a request of at least half its size. A
// thread's blocks are freed when it exits. Under AddressSanitizer nothing is kept, so that a
// kernel's use of freed scratch is still caught.
#pragma once

#include <cstddef>

namespace kiln::runtime {

inline constexpr size_t kMaxCachedBlock = size_t{1} << 20;
inline constexpr size_t kMaxCachedBytes = size_t{2} << 20;
inline constexpr int kCachedBlocks = 8;

// Makes the allocator below the Halide runtime's halide_malloc / halide_free (once per process;
// thread-safe).
void use_scratch_memory();

// The allocator itself: memory aligned to 64 bytes, a multiple of 64 bytes long, readable 8
// bytes before and after (Halide's contract for halide_malloc). scratch_free(nullptr) is a no-op.
void* scratch_malloc(void* user_context, size_t bytes);
void scratch_free(void* user_context, void* p);

// The bytes the calling thread holds in blocks it may hand out again.
size_t scratch_cached_bytes();
// Frees the blocks the calling thread holds.
void scratch_release_cached();

}  // namespace kiln::runtime
