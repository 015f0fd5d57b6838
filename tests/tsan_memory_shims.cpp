// The tsan preset only: Halide's LLVM (newer than GCC 12's ThreadSanitizer) instruments the
// memcpy and memset of code built with Halide's tsan feature as calls to __tsan_memcpy and
// __tsan_memset, which GCC's libtsan lacks. Forwarded to the functions libtsan intercepts, so
// the accesses are still checked.
#include <cstddef>
#include <cstring>

extern "C" void* __tsan_memcpy(void* dst, const void* src, std::size_t n) { return std::memcpy(dst, src, n); }
extern "C" void* __tsan_memset(void* dst, int c, std::size_t n) { return std::memset(dst, c, n); }
