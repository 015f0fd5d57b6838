// Conv weights in the layouts the CPU kernels read best, for the callers that bind Halide
// buffers themselves: the runtime's Model and the kernel tests.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <new>
#include <vector>

#include "HalideRuntime.h"
#include "graph/kernel_spec.h"

namespace kiln::runtime {

// Storage that starts on a 64-byte boundary. The kernels load a block of 16 float32 weights
// (one AVX-512 vector) per output-channel block and reduction step; from std::vector's
// storage, which large allocations place 16 bytes past a page boundary, every such load
// straddled two cache lines. A C++ copy of the kernels' 1x1 loop on ResNet-50's 14x14
// 1024 -> 256 layer (one thread, warm) ran at 108 GFLOP/s with 4-vector by 6-pixel tiles and
// the weights 16 bytes off a line, 179 with them aligned; with 2x14 tiles at 136 and 157.
template <class T>
struct CacheLineAllocator {
  using value_type = T;
  static constexpr std::size_t kAlignment = 64;
  CacheLineAllocator() = default;
  template <class U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}
  T* allocate(std::size_t n) {
    const std::size_t bytes = (n * sizeof(T) + kAlignment - 1) / kAlignment * kAlignment;
    void* p = std::aligned_alloc(kAlignment, bytes == 0 ? kAlignment : bytes);
    if (!p) throw std::bad_alloc();
    return static_cast<T*>(p);
  }
  void deallocate(T* p, std::size_t) { std::free(p); }
  template <class U>
  bool operator==(const CacheLineAllocator<U>&) const { return true; }
  template <class U>
  bool operator!=(const CacheLineAllocator<U>&) const { return false; }
};
template <class T>
using AlignedVector = std::vector<T, CacheLineAllocator<T>>;

// Dense convolutions on CPUs read their constant weights blocked by output channels:
// [ceil(Co / 16)][Kh][Kw][Ci][16], Halide dimensions (co % 16, ci, kx, ky, co / 16), innermost
// first, the blocks conv_weight_block_stride apart (a line of padding after each), the last
// block zero-padded when Co is not a multiple of 16 (the kernels never read the padding). A
// kernel's register tile covers one or two such blocks of output channels and walks the reduction
// input channel by input channel, so each block's weights are one sequential stream (64 bytes per
// input channel) instead of a 64-byte piece of every Co-wide HWIO row: weights that come from DRAM
// (a network's late layers, megabytes each) then stream with the hardware prefetchers, and no
// power-of-two row stride maps the loads to the same L1 sets.
constexpr int kConvWeightBlock = 16;

// Whether a convolution's CPU kernel reads its weights blocked (above): constant weights, and
// either dense (one group, not depthwise), any number of output channels (the last block
// zero-padded: the kernel's tiles may then cover whole vectors past the channel count, as a
// 24-channel layer's 2x14 tiles do, schedules::ConvShape::whole_channel_blocks), or grouped
// with channels interleaved by group (conv_weight_interleave). Not for Winograd kernels, which
// read transformed weights (the caller knows that from the kernel). Codegen and the runtime
// both decide with this.
bool blocks_conv_weights(const graph::ConvKernelSpec& c);

// Grouped convolutions whose groups tile a block of 16 output channels (2, 4 or 8 channels
// each; ResNeXt's 4, RegNet's 8), with whole blocks, run with their channels interleaved by
// group (generators/ops/conv.h, interleaved_position): in each block, position
// k * interleave + j holds channel k of the block's group j, and the blocked weights hold the
// block's channels in that order. Returns interleave, the groups per block; 1 for any other
// convolution. Codegen and the runtime both decide with this.
int conv_weight_interleave(const graph::ConvKernelSpec& c);

// The number of blocks of output channels: ceil(out_channels / 16).
int64_t conv_weight_blocks(int64_t out_channels);

// Floats from one block of output channels to the next in the blocked layout: the block's
// Kh * Kw * Ci rows of 16, and one row (a 64-byte line) of zeros after them. Without it a
// block of Ci a multiple of 64 (Kh = Kw = 1) is a multiple of 4 KiB long, so the 2 to 4 blocks a
// register tile reads at once, one line each per reduction step, map to the same L1 set at
// every step: with the deep schedule's chunk of 144 steps (36 KiB of weights reused by every
// tile of a task) that asked 9 lines of each of 64 sets of weights alone, of 12 ways. In
// MobileNetV2 (2 threads, alternating runs, kernel medians) its 7x7 1x1 layers 1.5-4% faster
// (320 -> 1280 0.1445-0.1452 -> 0.1402-0.1428 ms, 960 -> 320 0.109-0.110 -> 0.105-0.108);
// ResNet-50 and the layers alone with warm caches (bench_conv) within noise.
int64_t conv_weight_block_stride(int64_t kh, int64_t kw, int64_t ci);
// The Halide dimensions of block_conv_weights' copy, (co % 16, ci, kx, ky, co / 16): what a
// blocked kernel's weight argument is bound with.
std::array<halide_dimension_t, 5> blocked_conv_weight_dims(int64_t kh, int64_t kw, int64_t ci,
                                                           int64_t co);

// HWIO weights [Kh, Kw, Ci, Co] -> the blocked layout above, each block's channels
// interleaved by groups of Co / `interleave` / blocks channels when interleave > 1
// (conv_weight_interleave).
AlignedVector<float> block_conv_weights(const float* hwio, int64_t kh, int64_t kw, int64_t ci,
                                        int64_t co, int interleave = 1);

// bf16 convolutions (ConvKernelSpec::bf16) read their weights rounded to bfloat16 (to nearest
// even) as pairs of reduction steps by output channel, blocked by 16 output channels:
// [Co' / 16][K' / 2][16][2], Halide dimensions (k % 2, co % 16, k / 2, co / 16)
// (pack_bf16_conv_weights), where k = ci + Ci' * (kx + Kw * ky) runs over the whole reduction
// (K = Kh * Kw * Ci' steps; Ci' = bf16_conv_channels(Ci), Ci rounded up to even, the channel
// past an odd count zero), K' is K rounded up to a multiple of 32 and Co' is Co rounded up to a
// multiple of 16 (bf16_conv_reduction, bf16_conv_columns; zeros past K and Co). 16 output
// channels of one pair are 64 contiguous bytes, the operand of one vdpbf16ps (16 float32 sums of
// two products each) against a broadcast input pair, and a block's pairs follow each other, so
// a kernel that walks the reduction for one block of channels reads one sequential stream (with
// the pairs by all channels, the next pair of a block was 4 * Co' bytes away: ResNet-50's
// 1024-channel layers crossed a page per step, and the whole model in bf16 ran 21.0-21.1 ms
// blocked against 22.6-24.1 so on Zen 4). The AMX kernels read Bf16Layout::rows instead,
// [K' / 2][Co'][2], dimensions (k % 2, co, k / 2): 16 pairs of rows of 16 channels are one AMX
// tile of 32 steps x 16 channels (tdpbf16ps), rows 4 * Co' bytes apart; Halide's AMX pattern
// takes no blocked index. A pair never spans two taps: an odd Ci (an RGB stem's 3) reduces over
// Ci + 1 channels, the kernel reading the last as zero.
int64_t bf16_conv_channels(int64_t ci);
int64_t bf16_conv_reduction(int64_t kh, int64_t kw, int64_t ci);
int64_t bf16_conv_columns(int64_t co);
enum class Bf16Layout { blocked, rows };
AlignedVector<uint16_t> pack_bf16_conv_weights(const float* hwio, int64_t kh, int64_t kw,
                                               int64_t ci, int64_t co,
                                               Bf16Layout layout = Bf16Layout::blocked);

// Grouped convolutions whose groups neither fill nor tile a vector of 16 output channels nor
// fill vectors of 8 (12 or 20 channels; RegNet's 24 or 56 fill 8-channel vectors, which AVX-512
// kernels then use: codegen::conv_schedule_target) run as convolutions of blocks of `merge`
// consecutive groups, the smallest
// number (up to 8) whose output channels are whole vectors: weights widened to the block's
// input channels, zero where an output channel's group does not read the input. Each vector of
// output channels then reads one block's inputs as broadcasts instead of gathering them, for
// merge x the multiply-adds. Groups of 1, 2, 4 or 8 channels (ResNeXt's 4) tile a vector and
// take the grouped schedule instead (conv_schedule_cpu_grouped.cpp; interleaved when
// conv_weight_interleave says so). Returns merge; 1 when the groups are whole vectors already,
// tile one, or no block exists. Codegen and the runtime both decide with this.
int grouped_conv_merge(int groups, int64_t out_channels);

// HWIO weights [Kh, Kw, Ci / groups, Co] -> [Kh, Kw, merge * Ci / groups, Co] (see above).
AlignedVector<float> widen_grouped_conv_weights(const float* hwio, int64_t kh, int64_t kw,
                                                int64_t ci_per_group, int64_t co, int groups,
                                                int merge);

}  // namespace kiln::runtime

namespace kiln::runtime {

// Winograd F(m x m, 3 x 3) (Lavin and Gray, 2016): a tile of m x m outputs of a 3x3, stride-1
// convolution is A^T [(G g G^T) . (B^T d B)] A, d the tile's (m + 2) x (m + 2) input pixels
// and g the 3x3 filter, with (m + 2)^2 multiplies per input channel instead of 9 m^2. Tiles
// m = 2 and m = 4 (interpolation points 0, +-1 and 0, +-1, +-2, infinity).
//
// Stride 2 has the same form with other matrices (m = 2 only): of the 2m + 1 input pixels of a
// tile side, the odd ones meet the middle tap alone (m products) and the even ones the outer
// two taps, a 2-tap filter over m + 1 samples: F(m, 2) in m + 1 products. So alpha = 2m + 1
// = 5 positions per side, 25 multiplies per input channel for 4 outputs instead of 36, every
// matrix entry 0 or +-1 (no rounding beyond the direct convolution's reordered sums).
//
// Shared by the generated kernels (the input and output transforms) and the runtime (the
// weight transform).
struct WinogradMatrices {
  int tile = 0;                        // m: output pixels per tile side
  int stride = 1;                      // input pixels per output pixel
  int alpha = 0;                       // positions per tile side: m + 2 (stride 1), 2m + 1 (2)
  std::vector<std::vector<double>> bt;  // B^T, alpha x alpha (alpha input pixels per side)
  std::vector<std::vector<double>> g;   // G, alpha x 3
  std::vector<std::vector<double>> at;  // A^T, m x alpha
};
// tile 2 or 4 at stride 1, tile 2 at stride 2 (winograd_supported).
const WinogradMatrices& winograd_matrices(int tile, int stride = 1);
bool winograd_supported(int tile, int stride);
inline int winograd_alpha(int tile, int stride = 1) {
  return winograd_matrices(tile, stride).alpha;
}

// 3x3 HWIO weights [3, 3, Ci, Co] -> transformed weights U = G g G^T, shape
// [alpha, alpha, Ci, Co] (U[b][a][ci][co]: a along x, b along y), computed in double once when
// a model binds its weights, so no call repeats it.
AlignedVector<float> winograd_conv_weights(const float* hwio, int64_t ci, int64_t co, int tile,
                                           int stride = 1);

}  // namespace kiln::runtime
