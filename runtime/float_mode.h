// The floating-point mode generated kernels run in: denormal operands read as zero and denormal
// results flushed to zero (the DAZ and FTZ bits of x86's MXCSR). A multiply-add on a denormal
// takes a microcode assist of about a hundred cycles, and a kernel can meet them in lanes whose
// results it never stores: a deep-schedule convolution rounds its last register tile of a row
// up, and the rounded-up columns read staged input that was never computed, so whatever the
// heap held there decided the time (a RepVGG 192 -> 192 3x3 at 8x8 took 5.3 ms instead of
// 0.3 when that memory happened to hold denormals). Real activations can decay into the
// denormal range too. Values below 1.2e-38 in magnitude change by less than that; inference
// engines commonly run this way.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
#endif

namespace kiln::runtime {

// Sets DAZ and FTZ on the current thread while it lives, then restores the previous mode.
class FlushDenormals {
 public:
  FlushDenormals() {
#if defined(__x86_64__) || defined(__i386__)
    saved_ = _mm_getcsr();
    _mm_setcsr(saved_ | kDazFtz);
#endif
  }
  ~FlushDenormals() {
#if defined(__x86_64__) || defined(__i386__)
    _mm_setcsr(saved_);
#endif
  }
  FlushDenormals(const FlushDenormals&) = delete;
  FlushDenormals& operator=(const FlushDenormals&) = delete;

 private:
  static constexpr unsigned kDazFtz = 0x8040;  // MXCSR bit 6 (DAZ) and bit 15 (FTZ)
  unsigned saved_ = 0;
};

}  // namespace kiln::runtime
