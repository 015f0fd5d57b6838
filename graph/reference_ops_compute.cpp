// Reference semantics of the compute ops.
#include <algorithm>
#include <cmath>

#include "graph/reference_ops.h"
#include "graph/shape_inference.h"

namespace kiln::graph {
namespace {

// Index of (n, c, h, w) in an NCHW or NHWC tensor.
struct ImageIndex {
  ImageDims d;
  Layout l;
  int64_t operator()(int64_t n, int64_t c, int64_t h, int64_t w) const {
    return l == Layout::nchw ? ((n * d.c + c) * d.h + h) * d.w + w
                             : ((n * d.h + h) * d.w + w) * d.c + c;
  }
};

struct FilterIndex {
  FilterDims d;
  Layout l;
  int64_t operator()(int64_t o, int64_t i, int64_t y, int64_t x) const {
    return l == Layout::oihw ? ((o * d.ci + i) * d.kh + y) * d.kw + x
                             : ((y * d.kw + x) * d.ci + i) * d.co + o;
  }
};

float clamp_to(const Activation& a, double v) {
  return static_cast<float>(std::min<double>(std::max<double>(v, a.lo), a.hi));
}

Tensor conv(const Conv2d& c, const Tensor& x, const Tensor& w, const Tensor& b,
            const Shape& out_shape) {
  const ImageIndex xi{image_dims(x.shape, x.layout), x.layout};
  const FilterIndex wi{filter_dims(w.shape, w.layout), w.layout};
  const ImageIndex oi{image_dims(out_shape, x.layout), x.layout};
  Tensor out{out_shape, x.layout, std::vector<float>(num_elements(out_shape))};
  for (int64_t n = 0; n < oi.d.n; ++n)
    for (int64_t o = 0; o < oi.d.c; ++o)
      for (int64_t oy = 0; oy < oi.d.h; ++oy)
        for (int64_t ox = 0; ox < oi.d.w; ++ox) {
          double acc = b.data[o];
          for (int64_t ky = 0; ky < wi.d.kh; ++ky) {
            const int64_t iy = oy * c.stride_h + ky * c.dilation_h - c.pad_top;
            if (iy < 0 || iy >= xi.d.h) continue;
            for (int64_t kx = 0; kx < wi.d.kw; ++kx) {
              const int64_t ix = ox * c.stride_w + kx * c.dilation_w - c.pad_left;
              if (ix < 0 || ix >= xi.d.w) continue;
              for (int64_t i = 0; i < wi.d.ci; ++i)
                acc += static_cast<double>(x.data[xi(n, i, iy, ix)]) * w.data[wi(o, i, ky, kx)];
            }
          }
          out.data[oi(n, o, oy, ox)] = clamp_to(c.activation, acc);
        }
  return out;
}

Tensor batch_norm(const BatchNorm& bn, const Tensor& x, const std::vector<const Tensor*>& p) {
  Tensor out = x;
  const ImageIndex xi{image_dims(x.shape, x.layout), x.layout};
  for (int64_t n = 0; n < xi.d.n; ++n)
    for (int64_t c = 0; c < xi.d.c; ++c) {
      const double scale = p[0]->data[c] / std::sqrt(static_cast<double>(p[3]->data[c]) + bn.epsilon);
      for (int64_t h = 0; h < xi.d.h; ++h)
        for (int64_t w = 0; w < xi.d.w; ++w) {
          const int64_t k = xi(n, c, h, w);
          out.data[k] = static_cast<float>((x.data[k] - p[2]->data[c]) * scale + p[1]->data[c]);
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
                            const Shape& out_shape, Layout /*out_layout*/) {
  if (const auto* c = std::get_if<Conv2d>(&op)) return conv(*c, *in[0], *in[1], *in[2], out_shape);
  if (const auto* bn = std::get_if<BatchNorm>(&op))
    return batch_norm(*bn, *in[0], {in[1], in[2], in[3], in[4]});
  throw Error(std::string("reference: no implementation of ") + op_name(op) + " yet");
}

}  // namespace kiln::graph
