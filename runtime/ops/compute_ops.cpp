// Portable compute kernels (see ops_internal.h). Plain C++ for baseline x86-64: loop orders
// keep the innermost loop on contiguous memory (output channels, output rows, B rows) so GCC
// auto-vectorizes it, and no kernel needs intrinsics. Convolution and pooling split their
// output rows with parallel_for (the runtime's thread pool); the others run on one thread.
// No global state; scratch buffers are per call.
#include <algorithm>
#include <cmath>
#include <exception>
#include <limits>

#include "graph/shape_inference.h"
#include "runtime/ops/ops_internal.h"
#include "runtime/ops/parallel.h"

namespace kiln::runtime::ops {
namespace {

using graph::ImageDims;
using graph::Layout;
using graph::Shape;

// ---- Validation ------------------------------------------------------------------------------

// Checks the buffers with shape inference itself, the one definition of what each op accepts,
// so no kernel can index past a buffer the graph layer would have rejected.
std::string check_shapes(const graph::Op& op, const std::vector<ConstTensorRef>& in,
                         const TensorRef& out) {
  for (const ConstTensorRef& t : in)
    for (int64_t d : t.shape)
      if (d < 0) return "input shape " + graph::to_string(t.shape) + " has a negative dimension";
  // Shape inference reads BatchNorm's channel at axis 3 for any NHWC tensor; guard the rank.
  if (std::holds_alternative<graph::BatchNorm>(op) && !in.empty() && in[0].layout == Layout::nhwc &&
      in[0].shape.size() != 4)
    return "BatchNorm: an NHWC input must be 4-D, got " + graph::to_string(in[0].shape);
  graph::Graph g;
  graph::Node n{"kernel", op, {}, {}, {}};
  for (size_t i = 0; i < in.size(); ++i)
    n.inputs.push_back(g.add_value(
        graph::Value{"input " + std::to_string(i), in[i].shape, graph::DType::f32, in[i].layout}));
  graph::TypedShape want;
  try {
    want = graph::infer_output(g, n);
  } catch (const std::exception& e) {
    return e.what();
  }
  if (want.shape != out.shape)
    return std::string(graph::op_name(op)) + ": output is " + graph::to_string(out.shape) +
           ", the inputs give " + graph::to_string(want.shape);
  // For image ops the layout tag says where the channel axis is; Gemm and MatMul are row-major.
  const bool image = want.layout == Layout::nhwc || out.layout == Layout::nhwc ||
                     std::holds_alternative<graph::Conv2d>(op) ||
                     std::holds_alternative<graph::Pool2d>(op) ||
                     std::holds_alternative<graph::GlobalPool>(op);
  if (image && want.layout != out.layout)
    return std::string(graph::op_name(op)) + ": output is " + graph::to_string(out.layout) +
           ", the input is " + graph::to_string(want.layout);
  return "";
}

// ---- Matrix cores ----------------------------------------------------------------------------

struct MatA {  // element (i, k) at p[i * row + k * col]: any strides, read one scalar at a time
  const float* p;
  int64_t row, col;
};
struct Mnk {
  int64_t m, n, k;
};

// Y[i, j] += sum_k A[i, k] * B[k, j], B and Y rows contiguous in j. i-k-j order: the j loop
// streams a B row into a Y row and vectorizes; four k at a time cut Y loads and stores 4x.
// Blocking over j and k keeps a 64 x 256 panel of B (64 KiB) in L2 while all rows of A pass.
void gemm_acc(MatA a, const float* b, int64_t ldb, float* y, int64_t ldy, Mnk s) {
  constexpr int64_t kNb = 256, kKb = 64;
  for (int64_t j0 = 0; j0 < s.n; j0 += kNb) {
    const int64_t jn = std::min(kNb, s.n - j0);
    for (int64_t k0 = 0; k0 < s.k; k0 += kKb) {
      const int64_t k1 = std::min(k0 + kKb, s.k);
      for (int64_t i = 0; i < s.m; ++i) {
        float* yr = y + i * ldy + j0;
        const float* ai = a.p + i * a.row;
        int64_t q = k0;
        for (; q + 4 <= k1; q += 4) {
          const float a0 = ai[q * a.col], a1 = ai[(q + 1) * a.col];
          const float a2 = ai[(q + 2) * a.col], a3 = ai[(q + 3) * a.col];
          const float* b0 = b + q * ldb + j0;
          const float *b1 = b0 + ldb, *b2 = b1 + ldb, *b3 = b2 + ldb;
          for (int64_t j = 0; j < jn; ++j)
            yr[j] += a0 * b0[j] + a1 * b1[j] + a2 * b2[j] + a3 * b3[j];
        }
        for (; q < k1; ++q) {
          const float av = ai[q * a.col];
          const float* br = b + q * ldb + j0;
          for (int64_t j = 0; j < jn; ++j) yr[j] += av * br[j];
        }
      }
    }
  }
}

// Eight independent partial sums: GCC vectorizes them without reassociating a float sum.
float dot(const float* a, const float* b, int64_t n) {
  float acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] += a[i + l] * b[i + l];
  float tail = 0.0f;
  for (; i < n; ++i) tail += a[i] * b[i];
  return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7])) + tail;
}

// Y[i, j] += dot(A row i, Bt row j), both contiguous in k: for a transposed B (a fully
// connected layer) and for matrix-vector products, where i-k-j has nothing to stream. Rows of
// Bt are taken in blocks of ~32 KiB so they stay in cache while every row of A passes.
void gemm_dot(const float* a, int64_t lda, const float* bt, int64_t ldbt, float* y, int64_t ldy,
              Mnk s) {
  // Column blocks of B^T small enough to stay in cache while every row of A passes; the blocks
  // are independent (a classifier's 1000 outputs split over the threads).
  const int64_t jb = std::max<int64_t>(1, 8192 / std::max<int64_t>(1, s.k));
  parallel_for((s.n + jb - 1) / jb, [&](int64_t block) {
    const int64_t j0 = block * jb;
    for (int64_t i = 0; i < s.m; ++i)
      for (int64_t j = j0; j < std::min(j0 + jb, s.n); ++j)
        y[i * ldy + j] += dot(a + i * lda, bt + j * ldbt, s.k);
  });
}

// ---- Conv2d ----------------------------------------------------------------------------------

struct Range {
  int64_t lo, hi;
};
// The output positions o in [0, out) whose input position o * stride + off lies in [0, in).
Range valid_range(int64_t off, int64_t stride, int64_t in, int64_t out) {
  const int64_t lo = off >= 0 ? 0 : (-off + stride - 1) / stride;
  const int64_t hi = std::min(out, in - 1 - off < 0 ? 0 : (in - 1 - off) / stride + 1);
  return {std::min(lo, hi), hi};
}

struct ConvArgs {
  const graph::Conv2d& c;
  const float *x, *w, *b, *res;  // res is null without a residual
  float* y;
  ImageDims in, out;
  int64_t kh, kw, cig, cog;  // kernel size; input and output channels per group
};

void clamp_all(float* y, int64_t count, const graph::Activation& act) {
  if (act.is_identity()) return;
  const float lo = act.lo, hi = act.hi;
  for (int64_t i = 0; i < count; ++i) y[i] = clamp_keep_nan(y[i], lo, hi);
}

// NCHW / OIHW, one output plane at a time (it stays in cache): each weight tap adds a scaled,
// shifted input plane, and the inner loop runs along a contiguous output row.
void conv_nchw(const ConvArgs& a) {
  const graph::Conv2d& c = a.c;
  const int64_t plane = a.out.h * a.out.w;
  for (int64_t n = 0; n < a.out.n; ++n)
    for (int64_t o = 0; o < a.out.c; ++o) {
      float* yp = a.y + (n * a.out.c + o) * plane;
      for (int64_t p = 0; p < plane; ++p)
        yp[p] = a.b[o] + (a.res ? a.res[(n * a.out.c + o) * plane + p] : 0.0f);
      const int64_t first_in = o / a.cog * a.cig;
      for (int64_t i = 0; i < a.cig; ++i) {
        const float* xp = a.x + (n * a.in.c + first_in + i) * a.in.h * a.in.w;
        for (int64_t ky = 0; ky < a.kh; ++ky) {
          const int64_t offy = ky * c.dilation_h - c.pad_top;
          const Range ry = valid_range(offy, c.stride_h, a.in.h, a.out.h);
          for (int64_t kx = 0; kx < a.kw; ++kx) {
            const float wv = a.w[((o * a.cig + i) * a.kh + ky) * a.kw + kx];
            const int64_t offx = kx * c.dilation_w - c.pad_left;
            const Range rx = valid_range(offx, c.stride_w, a.in.w, a.out.w);
            if (rx.lo >= rx.hi) continue;  // (and never form a pointer outside the input)
            for (int64_t oy = ry.lo; oy < ry.hi; ++oy) {
              const int64_t iy = oy * c.stride_h + offy;
              const float* xr = xp + iy * a.in.w + rx.lo * c.stride_w + offx;  // first valid
              float* yr = yp + oy * a.out.w + rx.lo;
              const int64_t len = rx.hi - rx.lo, s = c.stride_w;
              if (s == 1)
                for (int64_t p = 0; p < len; ++p) yr[p] += wv * xr[p];
              else
                for (int64_t p = 0; p < len; ++p) yr[p] += wv * xr[p * s];
            }
          }
        }
      }
      clamp_all(yp, plane, c.activation);
    }
}

// NHWC / HWIO, one output row at a time: for each weight tap the valid output pixels of the
// row times the tap's [Ci/g, Co/g] weight slice is a small GEMM with the channels innermost.
// Depthwise (one input and one output channel per group) is an elementwise multiply-add
// along the channels instead.
void conv_nhwc(const ConvArgs& a) {
  const graph::Conv2d& c = a.c;
  const int64_t co = a.out.c, ci = a.in.c, groups = co / a.cog;
  const bool depthwise = a.cig == 1 && a.cog == 1;
  // Output rows are independent: one task per (image, row).
  parallel_for(a.out.n * a.out.h, [&](int64_t row) {
    {
      const int64_t n = row / a.out.h, oy = row % a.out.h;
      float* yrow = a.y + (n * a.out.h + oy) * a.out.w * co;
      const float* rrow = a.res ? a.res + (n * a.out.h + oy) * a.out.w * co : nullptr;
      for (int64_t p = 0; p < a.out.w; ++p)
        for (int64_t o = 0; o < co; ++o)
          yrow[p * co + o] = a.b[o] + (rrow ? rrow[p * co + o] : 0.0f);
      for (int64_t ky = 0; ky < a.kh; ++ky) {
        const int64_t iy = oy * c.stride_h + ky * c.dilation_h - c.pad_top;
        if (iy < 0 || iy >= a.in.h) continue;
        for (int64_t kx = 0; kx < a.kw; ++kx) {
          const int64_t offx = kx * c.dilation_w - c.pad_left;
          const Range rx = valid_range(offx, c.stride_w, a.in.w, a.out.w);
          if (rx.lo >= rx.hi) continue;
          const float* x0 = a.x + ((n * a.in.h + iy) * a.in.w + rx.lo * c.stride_w + offx) * ci;
          const float* wt = a.w + (ky * a.kw + kx) * a.cig * co;
          float* y0 = yrow + rx.lo * co;
          if (depthwise) {
            for (int64_t p = 0; p < rx.hi - rx.lo; ++p) {
              const float* xp = x0 + p * c.stride_w * ci;
              float* yp = y0 + p * co;
              for (int64_t o = 0; o < co; ++o) yp[o] += xp[o] * wt[o];
            }
            continue;
          }
          for (int64_t g = 0; g < groups; ++g)
            gemm_acc({x0 + g * a.cig, c.stride_w * ci, 1}, wt + g * a.cog, co, y0 + g * a.cog, co,
                     {rx.hi - rx.lo, a.cog, a.cig});
        }
      }
      clamp_all(yrow, a.out.w * co, c.activation);
    }
  });
}

std::string run_conv(const graph::Conv2d& c, const std::vector<ConstTensorRef>& in,
                     const TensorRef& out) {
  const graph::FilterDims f = graph::filter_dims(in[1].shape, in[1].layout);
  const ConvArgs a{c,
                   in[0].data,
                   in[1].data,
                   in[2].data,
                   c.residual ? in[3].data : nullptr,
                   out.data,
                   graph::image_dims(in[0].shape, in[0].layout),
                   graph::image_dims(out.shape, out.layout),
                   f.kh,
                   f.kw,
                   f.ci,
                   f.co / c.groups};
  if (in[0].layout == Layout::nchw)
    conv_nchw(a);
  else
    conv_nhwc(a);
  return "";
}

// ---- BatchNorm -------------------------------------------------------------------------------

// y = x * s + t per channel, with s = gamma / sqrt(var + eps) and t = beta - mean * s folded
// once in double. Channels innermost (NHWC, [N, C]) vectorize along C, else along the plane.
std::string run_batch_norm(const graph::BatchNorm& bn, const std::vector<ConstTensorRef>& in,
                           const TensorRef& out) {
  const Shape& shape = in[0].shape;
  const size_t axis = in[0].layout == Layout::nhwc ? 3 : 1;
  int64_t outer = 1, inner = 1;
  for (size_t d = 0; d < axis; ++d) outer *= shape[d];
  for (size_t d = axis + 1; d < shape.size(); ++d) inner *= shape[d];
  const int64_t channels = shape[axis];
  std::vector<float> s(channels), t(channels);
  for (int64_t c = 0; c < channels; ++c) {
    const double sc = in[1].data[c] / std::sqrt(static_cast<double>(in[4].data[c]) + bn.epsilon);
    s[c] = static_cast<float>(sc);
    t[c] = static_cast<float>(in[2].data[c] - in[3].data[c] * sc);
  }
  const float* x = in[0].data;
  float* y = out.data;
  for (int64_t o = 0; o < outer; ++o) {
    if (inner == 1) {
      for (int64_t c = 0; c < channels; ++c)
        y[o * channels + c] = x[o * channels + c] * s[c] + t[c];
      continue;
    }
    for (int64_t c = 0; c < channels; ++c) {
      const int64_t base = (o * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i) y[base + i] = x[base + i] * s[c] + t[c];
    }
  }
  return "";
}

// ---- Pool2d ----------------------------------------------------------------------------------

// Per output position along one axis: how many taps land on input elements (`inside`) and the
// avg divisor. Windows are rectangles, so a window's counts are the products of its two axes'.
struct AxisCounts {
  std::vector<int64_t> inside, divisor;
};
AxisCounts axis_counts(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t dil,
                       int64_t pad0, int64_t pad1, bool include_pad) {
  AxisCounts a{std::vector<int64_t>(out), std::vector<int64_t>(out)};
  for (int64_t o = 0; o < out; ++o)
    for (int64_t t = 0; t < k; ++t) {
      const int64_t i = o * stride + t * dil - pad0;  // always >= -pad0
      a.inside[o] += i >= 0 && i < in;
      a.divisor[o] += include_pad ? i < in + pad1 : (i >= 0 && i < in);
    }
  return a;
}

struct PoolArgs {
  const graph::Pool2d& p;
  const float* x;
  float* y;
  ImageDims in, out;
  AxisCounts ch, cw;
};

// The value a window with no input element gives (see the reference): the max starts at the
// lowest float, like onnxruntime's, so padding never wins; an empty average is 0.
float pool_init(const graph::Pool2d& p) {
  return p.kind == graph::PoolKind::max ? std::numeric_limits<float>::lowest() : 0.0f;
}

// NCHW: per plane and output row, each tap updates a contiguous run of the row.
void pool_nchw(const PoolArgs& a) {
  const graph::Pool2d& p = a.p;
  const bool is_max = p.kind == graph::PoolKind::max;
  for (int64_t plane = 0; plane < a.in.n * a.in.c; ++plane) {
    const float* xp = a.x + plane * a.in.h * a.in.w;
    for (int64_t oy = 0; oy < a.out.h; ++oy) {
      float* yr = a.y + (plane * a.out.h + oy) * a.out.w;
      std::fill(yr, yr + a.out.w, pool_init(p));
      for (int64_t ky = 0; ky < p.kernel_h; ++ky) {
        const int64_t iy = oy * p.stride_h + ky * p.dilation_h - p.pad_top;
        if (iy < 0 || iy >= a.in.h) continue;
        for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
          const int64_t offx = kx * p.dilation_w - p.pad_left;
          const Range rx = valid_range(offx, p.stride_w, a.in.w, a.out.w);
          if (rx.lo >= rx.hi) continue;
          const float* xr = xp + iy * a.in.w + rx.lo * p.stride_w + offx;  // first valid
          float* yv = yr + rx.lo;
          const int64_t len = rx.hi - rx.lo, s = p.stride_w;
          if (is_max)
            for (int64_t q = 0; q < len; ++q) yv[q] = max_keep_nan(yv[q], xr[q * s]);
          else
            for (int64_t q = 0; q < len; ++q) yv[q] += xr[q * s];
        }
      }
      if (is_max) continue;
      for (int64_t ox = 0; ox < a.out.w; ++ox)
        if (a.ch.inside[oy] * a.cw.inside[ox] > 0)
          yr[ox] /= static_cast<float>(a.ch.divisor[oy] * a.cw.divisor[ox]);
    }
  }
}

// NHWC: per output pixel, each tap updates the pixel's channel vector. Compiled for AVX-512,
// AVX2 and the baseline, picked at load time (GCC function multi-versioning): the channel
// loops vectorize 16 wide where the CPU allows. 3x3/s2 max pooling of 112x112x64 (ResNet) on
// one thread: 187 us with the baseline build, 157 us with the clones.
KILN_VECTOR_CLONES void pool_nhwc_row(const PoolArgs& a, int64_t row) {
  const graph::Pool2d& p = a.p;
  const bool is_max = p.kind == graph::PoolKind::max;
  const int64_t c = a.in.c;
  const int64_t n = row / a.out.h, oy = row % a.out.h;
  for (int64_t ox = 0; ox < a.out.w; ++ox) {
    float* yp = a.y + ((n * a.out.h + oy) * a.out.w + ox) * c;
    std::fill(yp, yp + c, pool_init(p));
    for (int64_t ky = 0; ky < p.kernel_h; ++ky) {
      const int64_t iy = oy * p.stride_h + ky * p.dilation_h - p.pad_top;
      if (iy < 0 || iy >= a.in.h) continue;
      for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
        const int64_t ix = ox * p.stride_w + kx * p.dilation_w - p.pad_left;
        if (ix < 0 || ix >= a.in.w) continue;
        const float* xp = a.x + ((n * a.in.h + iy) * a.in.w + ix) * c;
        if (is_max)
          for (int64_t q = 0; q < c; ++q) yp[q] = max_keep_nan(yp[q], xp[q]);
        else
          for (int64_t q = 0; q < c; ++q) yp[q] += xp[q];
      }
    }
    if (is_max || a.ch.inside[oy] * a.cw.inside[ox] == 0) continue;
    const float d = static_cast<float>(a.ch.divisor[oy] * a.cw.divisor[ox]);
    for (int64_t q = 0; q < c; ++q) yp[q] /= d;
  }
}

void pool_nhwc(const PoolArgs& a) {
  parallel_for(a.in.n * a.out.h, [&](int64_t row) { pool_nhwc_row(a, row); });
}

std::string run_pool(const graph::Pool2d& p, const ConstTensorRef& x, const TensorRef& out) {
  const ImageDims in = graph::image_dims(x.shape, x.layout);
  const ImageDims o = graph::image_dims(out.shape, out.layout);
  const PoolArgs a{p,
                   x.data,
                   out.data,
                   in,
                   o,
                   axis_counts(in.h, o.h, p.kernel_h, p.stride_h, p.dilation_h, p.pad_top,
                               p.pad_bottom, p.count_include_pad),
                   axis_counts(in.w, o.w, p.kernel_w, p.stride_w, p.dilation_w, p.pad_left,
                               p.pad_right, p.count_include_pad)};
  if (x.layout == Layout::nchw)
    pool_nchw(a);
  else
    pool_nhwc(a);
  return "";
}

// ---- GlobalPool ------------------------------------------------------------------------------

// Max or sum of a contiguous run, in eight lanes so GCC vectorizes it (see dot).
template <bool kMax>
float reduce(const float* x, int64_t n) {
  auto step = [](float acc, float v) { return kMax ? max_keep_nan(acc, v) : acc + v; };
  float acc[8];
  std::fill(acc, acc + 8, kMax ? -INFINITY : 0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    for (int l = 0; l < 8; ++l) acc[l] = step(acc[l], x[i + l]);
  for (; i < n; ++i) acc[0] = step(acc[0], x[i]);
  for (int l = 1; l < 8; ++l) acc[0] = step(acc[0], acc[l]);
  return acc[0];
}

std::string run_global_pool(const graph::GlobalPool& p, const ConstTensorRef& x,
                            const TensorRef& out) {
  const ImageDims d = graph::image_dims(x.shape, x.layout);
  const int64_t hw = d.h * d.w;
  if (hw == 0) return "GlobalPool: the input " + graph::to_string(x.shape) + " has an empty H x W";
  const bool is_max = p.kind == graph::PoolKind::max;
  const float scale = static_cast<float>(1.0 / static_cast<double>(hw));
  if (x.layout == Layout::nchw) {
    for (int64_t plane = 0; plane < d.n * d.c; ++plane)
      out.data[plane] = is_max ? reduce<true>(x.data + plane * hw, hw)
                               : reduce<false>(x.data + plane * hw, hw) * scale;
    return "";
  }
  for (int64_t n = 0; n < d.n; ++n) {  // NHWC: accumulate whole channel vectors, pixel by pixel
    float* y = out.data + n * d.c;
    const float* xn = x.data + n * hw * d.c;
    std::fill(y, y + d.c, is_max ? -INFINITY : 0.0f);
    for (int64_t pix = 0; pix < hw; ++pix) {
      const float* xp = xn + pix * d.c;
      if (is_max)
        for (int64_t c = 0; c < d.c; ++c) y[c] = max_keep_nan(y[c], xp[c]);
      else
        for (int64_t c = 0; c < d.c; ++c) y[c] += xp[c];
    }
    if (!is_max)
      for (int64_t c = 0; c < d.c; ++c) y[c] *= scale;
  }
  return "";
}

// ---- Gemm and MatMul -------------------------------------------------------------------------

// Y = alpha * op(A) op(B) + beta * C. A transposed B goes through dot products (its rows are
// the contiguous k runs), packing A first if it is transposed too; otherwise i-k-j.
std::string run_gemm(const graph::Gemm& gm, const std::vector<ConstTensorRef>& in,
                     const TensorRef& out) {
  const int64_t m = out.shape[0], n = out.shape[1];
  const int64_t k = gm.trans_a ? in[0].shape[0] : in[0].shape[1];
  float* y = out.data;
  std::fill(y, y + m * n, 0.0f);
  const float* a = in[0].data;
  if (!gm.trans_b) {
    const MatA am = gm.trans_a ? MatA{a, 1, m} : MatA{a, k, 1};
    gemm_acc(am, in[1].data, n, y, n, {m, n, k});
  } else {
    std::vector<float> packed;
    if (gm.trans_a) {
      packed.resize(m * k);
      for (int64_t q = 0; q < k; ++q)
        for (int64_t i = 0; i < m; ++i) packed[i * k + q] = a[q * m + i];
      a = packed.data();
    }
    gemm_dot(a, k, in[1].data, k, y, n, {m, n, k});
  }
  // C (rank 0, 1 or 2) broadcasts to [M, N]: size-1 axes repeat, lower ranks align right.
  const ConstTensorRef* c = in.size() == 3 ? &in[2] : nullptr;
  const int64_t c_rows = c && c->shape.size() == 2 ? c->shape[0] : 1;
  const int64_t c_cols = c && !c->shape.empty() ? c->shape.back() : 1;
  for (int64_t i = 0; i < m; ++i) {
    float* yr = y + i * n;
    if (!c) {
      for (int64_t j = 0; j < n; ++j) yr[j] *= gm.alpha;
      continue;
    }
    const float* cr = c->data + (c_rows == 1 ? 0 : i) * c_cols;
    if (c_cols == 1)
      for (int64_t j = 0; j < n; ++j) yr[j] = gm.alpha * yr[j] + gm.beta * cr[0];
    else
      for (int64_t j = 0; j < n; ++j) yr[j] = gm.alpha * yr[j] + gm.beta * cr[j];
  }
  return "";
}

// numpy matmul: 1-D operands promoted ([K] -> [1, K] for A, [K, 1] for B), batch dims
// broadcast. Each batch entry is a plain GEMM; a single column of B (matrix-vector) uses dot.
std::string run_matmul(const std::vector<ConstTensorRef>& in, const TensorRef& out) {
  Shape as = in[0].shape, bs = in[1].shape;
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const Mnk s{as[as.size() - 2], bs.back(), as.back()};
  // Per output batch axis, how far A and B move (in whole matrices) for one step of it.
  const size_t r = std::max(as.size(), bs.size()) - 2;
  std::vector<int64_t> dims(r), a_step(r, 0), b_step(r, 0);
  int64_t a_stride = 1, b_stride = 1;
  for (size_t d = r; d-- > 0;) {
    const size_t from_end = r - d;  // 1 for the last batch axis
    const int64_t ad = from_end + 2 <= as.size() ? as[as.size() - 2 - from_end] : 1;
    const int64_t bd = from_end + 2 <= bs.size() ? bs[bs.size() - 2 - from_end] : 1;
    dims[d] = std::max(ad, bd);
    a_step[d] = ad == 1 ? 0 : a_stride;
    b_step[d] = bd == 1 ? 0 : b_stride;
    a_stride *= ad;
    b_stride *= bd;
  }
  std::fill(out.data, out.data + graph::num_elements(out.shape), 0.0f);
  std::vector<int64_t> idx(r, 0);
  int64_t a_off = 0, b_off = 0;
  for (int64_t bi = 0; bi < graph::num_elements(dims); ++bi) {
    const float* a = in[0].data + a_off * s.m * s.k;
    const float* b = in[1].data + b_off * s.k * s.n;
    float* y = out.data + bi * s.m * s.n;
    if (s.n == 1)
      gemm_dot(a, s.k, b, s.k, y, 1, s);
    else
      gemm_acc({a, s.k, 1}, b, s.n, y, s.n, s);
    for (size_t d = r; d-- > 0;) {  // odometer step over the batch index
      a_off += a_step[d], b_off += b_step[d];
      if (++idx[d] < dims[d]) break;
      a_off -= a_step[d] * dims[d], b_off -= b_step[d] * dims[d], idx[d] = 0;
    }
  }
  return "";
}

}  // namespace

bool is_compute(const graph::Op& op) {
  return std::holds_alternative<graph::Conv2d>(op) ||
         std::holds_alternative<graph::BatchNorm>(op) ||
         std::holds_alternative<graph::Pool2d>(op) ||
         std::holds_alternative<graph::GlobalPool>(op) || std::holds_alternative<graph::Gemm>(op) ||
         std::holds_alternative<graph::MatMul>(op);
}

std::string run_compute(const graph::Op& op, const std::vector<ConstTensorRef>& inputs,
                        const TensorRef& output) {
  if (!is_compute(op)) return std::string("no portable compute kernel for ") + graph::op_name(op);
  const std::string bad = check_shapes(op, inputs, output);
  if (!bad.empty()) return bad;
  if (const auto* c = std::get_if<graph::Conv2d>(&op)) return run_conv(*c, inputs, output);
  if (const auto* bn = std::get_if<graph::BatchNorm>(&op))
    return run_batch_norm(*bn, inputs, output);
  if (const auto* p = std::get_if<graph::Pool2d>(&op)) return run_pool(*p, inputs[0], output);
  if (const auto* gp = std::get_if<graph::GlobalPool>(&op))
    return run_global_pool(*gp, inputs[0], output);
  if (const auto* gm = std::get_if<graph::Gemm>(&op)) return run_gemm(*gm, inputs, output);
  return run_matmul(inputs, output);
}

}  // namespace kiln::runtime::ops
