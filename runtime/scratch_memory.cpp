// Kiln's scratch allocator for the generated kernels (runtime/scratch_memory.h).
#include "scratch_memory.h"

#include <HalideRuntime.h>

#include <cstdint>
#include <cstdlib>
#include <mutex>

namespace kiln::runtime {
namespace {

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kKeepBlocks = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kKeepBlocks = false;
#else
constexpr bool kKeepBlocks = true;
#endif
#else
constexpr bool kKeepBlocks = true;
#endif

// A block is [header | memory | 64 bytes]: the header (64 bytes, for the alignment) ends with
// the memory's capacity and a tag, just before the pointer handed out. The tag tells a block of
// this allocator from one of Halide's default (allocated before use_scratch_memory), which
// keeps the system's pointer there: an aligned pointer, never the odd tag.
constexpr size_t kAlign = 64;
constexpr uint64_t kTag = 0x6b696c6e5343524bull | 1;  // "kilnSCRK", odd

uint64_t* header(void* p) { return reinterpret_cast<uint64_t*>(p) - 2; }  // capacity, tag
size_t capacity_of(void* p) { return header(p)[0]; }

void* new_block(size_t capacity) {
  void* base = std::aligned_alloc(kAlign, kAlign + capacity + kAlign);
  if (!base) return nullptr;
  void* p = static_cast<char*>(base) + kAlign;
  header(p)[0] = capacity;
  header(p)[1] = kTag;
  return p;
}

void delete_block(void* p) { std::free(static_cast<char*>(p) - kAlign); }

// The blocks this thread freed and may hand out again, oldest first.
struct Cache {
  void* blocks[kCachedBlocks];
  int count = 0;
  size_t bytes = 0;
  bool closed = false;  // the thread is exiting: blocks freed from now on go back to the system

  ~Cache() {
    release();
    closed = true;
  }

  void release() {
    for (int i = 0; i < count; ++i) delete_block(blocks[i]);
    count = 0;
    bytes = 0;
  }

  void remove(int i) {
    bytes -= capacity_of(blocks[i]);
    for (int k = i + 1; k < count; ++k) blocks[k - 1] = blocks[k];
    --count;
  }
};

thread_local Cache t_cache;

}  // namespace

void* scratch_malloc(void*, size_t bytes) {
  const size_t capacity = (bytes + kAlign - 1) / kAlign * kAlign;
  if (kKeepBlocks && !t_cache.closed) {
    int best = -1;  // the smallest block that holds the request and is at most twice its size
    for (int i = 0; i < t_cache.count; ++i) {
      const size_t c = capacity_of(t_cache.blocks[i]);
      if (c >= capacity && c / 2 <= capacity && (best < 0 || c < capacity_of(t_cache.blocks[best])))
        best = i;
    }
    if (best >= 0) {
      void* p = t_cache.blocks[best];
      t_cache.remove(best);
      return p;
    }
  }
  return new_block(capacity == 0 ? kAlign : capacity);
}

void scratch_free(void* user_context, void* p) {
  if (!p) return;
  if (header(p)[1] != kTag) {
    halide_default_free(user_context, p);
    return;
  }
  const size_t capacity = capacity_of(p);
  if (!kKeepBlocks || t_cache.closed || capacity > kMaxCachedBlock) {
    delete_block(p);
    return;
  }
  while (t_cache.count > 0 &&
         (t_cache.count == kCachedBlocks || t_cache.bytes + capacity > kMaxCachedBytes)) {
    delete_block(t_cache.blocks[0]);
    t_cache.remove(0);
  }
  t_cache.blocks[t_cache.count++] = p;
  t_cache.bytes += capacity;
}

size_t scratch_cached_bytes() { return t_cache.closed ? 0 : t_cache.bytes; }

void scratch_release_cached() {
  if (!t_cache.closed) t_cache.release();
}

void use_scratch_memory() {
  static std::once_flag installed;
  std::call_once(installed, [] {
    halide_set_custom_malloc(scratch_malloc);
    halide_set_custom_free(scratch_free);
  });
}

}  // namespace kiln::runtime
