// Reference semantics of the compute ops.
#include <algorithm>
#include <cmath>
#include <limits>

#include "graph/bf16.h"
#include "graph/reference_ops.h"
#include "graph/shape_inference.h"

namespace kiln::graph {
namespace {

struct FilterIndex {
  FilterDims d;
  Layout l;
  int64_t operator()(int64_t o, int64_t i, int64_t y, int64_t x) const {
    return l == Layout::oihw ? ((o * d.ci + i) * d.kh + y) * d.kw + x
                             : ((y * d.kw + x) * d.ci + i) * d.co + o;
  }
};

float clamp_to(const Activation& a, double v) {
  return static_cast<float>(clamp_nan(v, a.lo, a.hi));
}

Tensor blank(const Shape& shape, Layout layout) {
  return Tensor{shape, layout, std::vector<float>(num_elements(shape))};
}

// The input after a convolution's pre steps (Conv2d::pre): the chain they came from, on x and
// the pre steps' scale and shift inputs.
Tensor pre_steps(const Conv2d& c, const std::vector<const Tensor*>& in) {
  std::vector<const Tensor*> chain_in = {in[0]};
  chain_in.insert(chain_in.end(), in.begin() + static_cast<std::ptrdiff_t>(c.first_pre_input()),
                  in.end());
  return reference_chain(ElementwiseChain{c.pre}, chain_in);
}

Tensor pool(const Pool2d& p, const Tensor& x, const Shape& out_shape);

// Output channel o of group g = o / (Co / groups) reads input channels
// [g * ci_per_group, (g + 1) * ci_per_group); the weights hold ci_per_group input channels.
// Without the pooling (Conv2d::pool): out_shape is the convolution's.
Tensor unpooled_conv(const Conv2d& c, const std::vector<const Tensor*>& in, const Shape& out_shape) {
  const Tensor pre = c.pre.empty() ? Tensor{} : pre_steps(c, in);
  // A bf16 convolution multiplies its input and weights rounded to bfloat16 (Conv2d::bf16).
  const auto rounded = [&](const Tensor& t) {
    Tensor r = t;
    for (float& v : r.data) v = round_to_bf16(v);
    return r;
  };
  const Tensor bf16_x = c.bf16 ? rounded(c.pre.empty() ? *in[0] : pre) : Tensor{};
  const Tensor bf16_w = c.bf16 ? rounded(*in[1]) : Tensor{};
  const Tensor &x = c.bf16 ? bf16_x : c.pre.empty() ? *in[0] : pre;
  const Tensor &w = c.bf16 ? bf16_w : *in[1], &b = *in[2];
  const Tensor* residual = c.residual ? in[3] : nullptr;
  const Tensor* shortcut = c.shortcut ? in[c.shortcut_input()] : nullptr;
  const size_t first_post = c.first_post_input();  // post steps' scale and shift inputs
  const ImageIndex xi{image_dims(x.shape, x.layout), x.layout};
  const FilterIndex wi{filter_dims(w.shape, w.layout), w.layout};
  const Layout out_layout = c.nchw_input ? Layout::nhwc : x.layout;
  const ImageIndex oi{image_dims(out_shape, out_layout), out_layout};
  const int64_t co_per_group = oi.d.c / c.groups;
  Tensor out = blank(out_shape, out_layout);
  for (int64_t n = 0; n < oi.d.n; ++n)
    for (int64_t o = 0; o < oi.d.c; ++o)
      for (int64_t oy = 0; oy < oi.d.h; ++oy)
        for (int64_t ox = 0; ox < oi.d.w; ++ox) {
          const int64_t first_in = o / co_per_group * wi.d.ci;
          double acc = b.data[o];
          for (int64_t ky = 0; ky < wi.d.kh; ++ky) {
            const int64_t iy = oy * c.stride_h + ky * c.dilation_h - c.pad_top;
            if (iy < 0 || iy >= xi.d.h) continue;
            for (int64_t kx = 0; kx < wi.d.kw; ++kx) {
              const int64_t ix = ox * c.stride_w + kx * c.dilation_w - c.pad_left;
              if (ix < 0 || ix >= xi.d.w) continue;
              for (int64_t i = 0; i < wi.d.ci; ++i)
                acc += static_cast<double>(x.data[xi(n, first_in + i, iy, ix)]) *
                       w.data[wi(o, i, ky, kx)];
            }
          }
          const int64_t k = oi(n, o, oy, ox);
          if (residual) acc += residual->data[k];
          double v = static_cast<float>(clamp_to(c.activation, acc));  // the unfused op's output
          size_t affine = 0;
          for (const ChainStep& st : c.post) {
            const bool aff = per_channel_step(st.kind);
            const double scale = aff ? in[first_post + 2 * affine]->data[o] : 1.0;
            const double shift = aff ? in[first_post + 2 * affine + 1]->data[o] : 0.0;
            affine += aff;
            v = static_cast<float>(reference_chain_step(st, v, scale, shift));
          }
          // The shortcut as the unfused Add computes it: two floats, the sum rounded to float.
          out.data[k] = shortcut ? static_cast<float>(v) + shortcut->data[k] : static_cast<float>(v);
        }
  return out;
}

// The convolution, then its pooling (Conv2d::pool) or its resize (Conv2d::resize) when it has
// one: out_shape is the pooled or resized shape, and the convolution's is worked out here from
// the input, the weights and the attributes.
Tensor conv(const Conv2d& c, const std::vector<const Tensor*>& in, const Shape& out_shape) {
  if (c.expand) {  // the pointwise expansion of the input first, as the unfused graph computes it
    const size_t e = c.first_expand_input();
    const Tensor& x = *in[0];
    Conv2d pointwise;
    pointwise.activation = *c.expand;
    pointwise.post = c.expand_post;  // no affine steps: no inputs
    const Shape expanded_shape = {x.shape[0], x.shape[1], x.shape[2], in[e]->shape[3]};
    const Tensor expanded = unpooled_conv(pointwise, {in[0], in[e], in[e + 1]}, expanded_shape);
    Conv2d depthwise = c;
    depthwise.expand.reset();
    depthwise.expand_post.clear();
    std::vector<const Tensor*> rest(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(e));
    rest[0] = &expanded;
    return conv(depthwise, rest, out_shape);
  }
  if (c.input_scale) {  // the scaled input first, as the unfused graph's Mul computes it
    const Tensor& x = *in[0];  // NHWC
    const Tensor& s = *in[c.scale_input()];  // [N, 1, 1, C]
    Tensor scaled = x;
    const int64_t channels = x.shape[3], pixels = x.shape[1] * x.shape[2];
    for (size_t i = 0; i < scaled.data.size(); ++i) {
      const int64_t ch = static_cast<int64_t>(i) % channels;
      const int64_t image = static_cast<int64_t>(i) / channels / pixels;
      scaled.data[i] *= s.data[static_cast<size_t>(image * channels + ch)];
    }
    Conv2d plain = c;
    plain.input_scale = false;
    std::vector<const Tensor*> rest(in.begin(), in.begin() + static_cast<std::ptrdiff_t>(c.scale_input()));
    rest[0] = &scaled;
    return conv(plain, rest, out_shape);
  }
  if (c.pool && c.pool_first) {  // the pooling of the input first, as the unfused graph computes it
    const Tensor& x = *in[0];    // NHWC; the 1x1 convolution keeps the pooled image's size
    const Tensor pooled = pool(*c.pool, x, {out_shape[0], out_shape[1], out_shape[2], x.shape[3]});
    Conv2d plain = c;
    plain.pool.reset();
    plain.pool_first = false;
    std::vector<const Tensor*> rest = in;
    rest[0] = &pooled;
    return unpooled_conv(plain, rest, out_shape);
  }
  if (!c.pool && !c.resize) return unpooled_conv(c, in, out_shape);
  const Tensor &x = *in[0], &w = *in[1];
  const ImageDims xd = image_dims(x.shape, x.layout);
  const FilterDims f = filter_dims(w.shape, w.layout);
  const int64_t h = xd.h + c.pad_top + c.pad_bottom - (int64_t{c.dilation_h} * (f.kh - 1) + 1);
  const int64_t wd = xd.w + c.pad_left + c.pad_right - (int64_t{c.dilation_w} * (f.kw - 1) + 1);
  const ImageDims od{xd.n, f.co, h / c.stride_h + 1, wd / c.stride_w + 1};
  const Layout out_layout = c.nchw_input ? Layout::nhwc : x.layout;
  const Tensor y = unpooled_conv(c, in, image_shape(od, out_layout));
  if (c.pool) return pool(*c.pool, y, out_shape);
  // The resize as the unfused graph computes it: the layout transform first with nchw_output.
  if (!c.nchw_output) return reference_data_op(Op{*c.resize}, {&y}, out_shape, out_layout);
  const Tensor t = reference_data_op(Op{LayoutTransform{out_layout, Layout::nchw}}, {&y},
                                     image_shape(od, Layout::nchw), Layout::nchw);
  return reference_data_op(Op{*c.resize}, {&t}, out_shape, Layout::nchw);
}

// Any rank >= 2: the channel axis is 1 (3 for NHWC); every other axis is just iterated.
Tensor batch_norm(const BatchNorm& bn, const Tensor& x, const std::vector<const Tensor*>& p) {
  const size_t axis = x.layout == Layout::nhwc ? 3 : 1;
  int64_t outer = 1, inner = 1;
  for (size_t a = 0; a < axis; ++a) outer *= x.shape[a];
  for (size_t a = axis + 1; a < x.shape.size(); ++a) inner *= x.shape[a];
  const int64_t channels = x.shape[axis];
  Tensor out = x;
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < channels; ++c) {
      const double scale =
          p[0]->data[c] / std::sqrt(static_cast<double>(p[3]->data[c]) + bn.epsilon);
      for (int64_t i = 0; i < inner; ++i) {
        const int64_t k = (o * channels + c) * inner + i;
        out.data[k] = static_cast<float>((x.data[k] - p[2]->data[c]) * scale + p[1]->data[c]);
      }
    }
  return out;
}

// One window, as onnxruntime computes it. Taps start at or after -pad_begin; `padded` counts
// the taps inside the padded input (count_include_pad's divisor: a ceil_mode window reaching
// past the end padding only counts up to it), `inside` those on real input elements (the
// divisor otherwise). A window with no input element gives 0 (avg) or the lowest float (max,
// which starts there, so padding never wins).
Tensor pool(const Pool2d& p, const Tensor& x, const Shape& out_shape) {
  const ImageIndex xi{image_dims(x.shape, x.layout), x.layout};
  const ImageIndex oi{image_dims(out_shape, x.layout), x.layout};
  const bool is_max = p.kind == PoolKind::max;
  Tensor out = blank(out_shape, x.layout);
  for (int64_t n = 0; n < oi.d.n; ++n)
    for (int64_t c = 0; c < oi.d.c; ++c)
      for (int64_t oy = 0; oy < oi.d.h; ++oy)
        for (int64_t ox = 0; ox < oi.d.w; ++ox) {
          double acc = is_max ? std::numeric_limits<float>::lowest() : 0.0;
          int64_t inside = 0, padded = 0;
          for (int64_t ky = 0; ky < p.kernel_h; ++ky) {
            const int64_t iy = oy * p.stride_h + ky * p.dilation_h - p.pad_top;
            for (int64_t kx = 0; kx < p.kernel_w; ++kx) {
              const int64_t ix = ox * p.stride_w + kx * p.dilation_w - p.pad_left;
              if (iy < xi.d.h + p.pad_bottom && ix < xi.d.w + p.pad_right) ++padded;
              if (iy < 0 || iy >= xi.d.h || ix < 0 || ix >= xi.d.w) continue;
              ++inside;
              const double v = x.data[xi(n, c, iy, ix)];
              acc = is_max ? max_nan(acc, v) : acc + v;
            }
          }
          if (!is_max) acc = inside == 0 ? 0.0 : acc / (p.count_include_pad ? padded : inside);
          out.data[oi(n, c, oy, ox)] = static_cast<float>(acc);
        }
  return out;
}

Tensor global_pool(const GlobalPool& p, const Tensor& x, const Shape& out_shape) {
  const ImageIndex xi{image_dims(x.shape, x.layout), x.layout};
  if (xi.d.h * xi.d.w == 0) throw Error("reference: GlobalPool over an empty H x W");
  const ImageIndex oi{image_dims(out_shape, x.layout), x.layout};
  const bool is_max = p.kind == PoolKind::max;
  Tensor out = blank(out_shape, x.layout);
  for (int64_t n = 0; n < xi.d.n; ++n)
    for (int64_t c = 0; c < xi.d.c; ++c) {
      double acc = is_max ? -INFINITY : 0.0;
      for (int64_t h = 0; h < xi.d.h; ++h)
        for (int64_t w = 0; w < xi.d.w; ++w) {
          const double v = x.data[xi(n, c, h, w)];
          acc = is_max ? max_nan(acc, v) : acc + v;
        }
      out.data[oi(n, c, 0, 0)] = static_cast<float>(is_max ? acc : acc / (xi.d.h * xi.d.w));
    }
  return out;
}

// Element (i, j) of C (rank 0, 1 or 2) broadcast to [M, N]: size-1 axes repeat, and a lower
// rank aligns to the trailing axes.
float gemm_c(const Tensor& c, int64_t i, int64_t j) {
  const int64_t rows = c.shape.size() == 2 ? c.shape[0] : 1;
  const int64_t cols = c.shape.empty() ? 1 : c.shape.back();
  return c.data[(rows == 1 ? 0 : i) * cols + (cols == 1 ? 0 : j)];
}

Tensor gemm(const Gemm& gm, const std::vector<const Tensor*>& in, const Shape& out_shape) {
  const Tensor &a = *in[0], &b = *in[1];
  const int64_t m = out_shape[0], n = out_shape[1];
  const int64_t k = gm.trans_a ? a.shape[0] : a.shape[1];
  Tensor out = blank(out_shape, Layout::any);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int64_t q = 0; q < k; ++q) {
        const float av = gm.trans_a ? a.data[q * m + i] : a.data[i * k + q];
        const float bv = gm.trans_b ? b.data[j * k + q] : b.data[q * n + j];
        acc += static_cast<double>(av) * bv;
      }
      double y = gm.alpha * acc;
      if (in.size() == 3) y += static_cast<double>(gm.beta) * gemm_c(*in[2], i, j);
      out.data[i * n + j] = static_cast<float>(y);
    }
  return out;
}

// Offset (in whole matrices) of the batch entry of an operand with batch dims `dims` that
// output batch index `idx` reads: dims align to the trailing batch axes, size-1 dims repeat.
int64_t batch_offset(const Shape& dims, const std::vector<int64_t>& idx) {
  int64_t off = 0;
  const size_t skip = idx.size() - dims.size();
  for (size_t d = 0; d < dims.size(); ++d) off = off * dims[d] + (dims[d] == 1 ? 0 : idx[skip + d]);
  return off;
}

// numpy matmul: a 1-D A is a row [1, K], a 1-D B a column [K, 1]; the promoted axis is then
// dropped from the output, which leaves its row-major order unchanged.
Tensor matmul(const Tensor& a, const Tensor& b, const Shape& out_shape, Layout layout) {
  Shape as = a.shape, bs = b.shape;
  if (as.size() == 1) as.insert(as.begin(), 1);
  if (bs.size() == 1) bs.push_back(1);
  const int64_t m = as[as.size() - 2], k = as.back(), n = bs.back();
  const Shape a_batch(as.begin(), as.end() - 2), b_batch(bs.begin(), bs.end() - 2);
  bool ok = false;
  const Shape batch = broadcast_shapes(a_batch, b_batch, &ok);
  Tensor out = blank(out_shape, layout);
  std::vector<int64_t> idx(batch.size(), 0);
  for (int64_t bi = 0; bi < num_elements(batch); ++bi) {
    int64_t rest = bi;
    for (size_t d = batch.size(); d-- > 0;) idx[d] = rest % batch[d], rest /= batch[d];
    const float* ap = a.data.data() + batch_offset(a_batch, idx) * m * k;
    const float* bp = b.data.data() + batch_offset(b_batch, idx) * k * n;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = 0.0;
        for (int64_t q = 0; q < k; ++q) acc += static_cast<double>(ap[i * k + q]) * bp[q * n + j];
        out.data[(bi * m + i) * n + j] = static_cast<float>(acc);
      }
  }
  return out;
}

}  // namespace

bool is_compute_op(const Op& op) {
  return std::holds_alternative<Conv2d>(op) || std::holds_alternative<BatchNorm>(op) ||
         std::holds_alternative<Pool2d>(op) || std::holds_alternative<GlobalPool>(op) ||
         std::holds_alternative<Gemm>(op) || std::holds_alternative<MatMul>(op);
}

Tensor reference_compute_op(const Op& op, const std::vector<const Tensor*>& in,
                            const Shape& out_shape, Layout out_layout) {
  if (const auto* c = std::get_if<Conv2d>(&op)) return conv(*c, in, out_shape);
  if (const auto* bn = std::get_if<BatchNorm>(&op))
    return batch_norm(*bn, *in[0], {in[1], in[2], in[3], in[4]});
  if (const auto* p = std::get_if<Pool2d>(&op)) return pool(*p, *in[0], out_shape);
  if (const auto* gp = std::get_if<GlobalPool>(&op)) return global_pool(*gp, *in[0], out_shape);
  if (const auto* gm = std::get_if<Gemm>(&op)) return gemm(*gm, in, out_shape);
  KILN_CHECK(std::holds_alternative<MatMul>(op), "compute op without a reference");
  return matmul(*in[0], *in[1], out_shape, out_layout);
}

}  // namespace kiln::graph
