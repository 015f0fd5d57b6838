// The reference interpreter.
#include "graph/reference.h"

#include <algorithm>
#include <cmath>

#include "graph/op_kind.h"
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

Tensor to_layout(const Tensor& t, Layout to) {
  if (t.layout == to) return t;
  if ((t.layout != Layout::nchw && t.layout != Layout::nhwc) ||
      (to != Layout::nchw && to != Layout::nhwc))
    throw Error(std::string("cannot convert a tensor from ") + to_string(t.layout) + " to " +
                to_string(to));
  const ImageDims d = image_dims(t.shape, t.layout);
  const ImageIndex from{d, t.layout}, into{d, to};
  Tensor out{image_shape(d, to), to, std::vector<float>(t.data.size())};
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t c = 0; c < d.c; ++c)
      for (int64_t h = 0; h < d.h; ++h)
        for (int64_t w = 0; w < d.w; ++w) out.data[into(n, c, h, w)] = t.data[from(n, c, h, w)];
  return out;
}

std::vector<Tensor> run_reference(const Graph& g, const std::vector<Tensor>& inputs) {
  if (inputs.size() != g.inputs.size())
    throw Error("reference: the graph has " + std::to_string(g.inputs.size()) +
                " inputs, got " + std::to_string(inputs.size()));
  std::vector<Tensor> values(g.values().size());
  std::vector<bool> ready(g.values().size(), false);
  for (uint32_t i = 0; i < g.values().size(); ++i) {
    const Value& v = g.value(ValueId{i});
    if (v.is_constant()) {
      values[i] = Tensor{v.shape, v.layout, *v.data};
      ready[i] = true;
    }
  }
  for (size_t k = 0; k < inputs.size(); ++k) {
    const Value& v = g.value(g.inputs[k]);
    if (inputs[k].shape != v.shape || num_elements(v.shape) != static_cast<int64_t>(inputs[k].data.size()))
      throw Error("reference: input '" + v.name + "' must be " + to_string(v.shape) + ", got " +
                  to_string(inputs[k].shape));
    values[g.inputs[k].index] = inputs[k];
    values[g.inputs[k].index].layout = v.layout;
    ready[g.inputs[k].index] = true;
  }
  for (const Node& n : g.nodes()) {
    std::vector<const Tensor*> in;
    for (ValueId v : n.inputs) {
      KILN_CHECK(ready[v.index], "reference: value used before it is computed");
      in.push_back(&values[v.index]);
    }
    const Value& outv = g.value(n.outputs[0]);
    Tensor out;
    if (const auto* c = std::get_if<Conv2d>(&n.op)) {
      out = conv(*c, *in[0], *in[1], *in[2], outv.shape);
    } else if (const auto* bn = std::get_if<BatchNorm>(&n.op)) {
      out = batch_norm(*bn, *in[0], {in[1], in[2], in[3], in[4]});
    } else if (const std::optional<Activation> act = as_activation(n.op)) {
      out = *in[0];
      for (float& f : out.data) f = clamp_to(*act, f);
    } else {
      out = to_layout(*in[0], std::get<LayoutTransform>(n.op).to);
    }
    values[n.outputs[0].index] = std::move(out);
    ready[n.outputs[0].index] = true;
  }
  std::vector<Tensor> outs;
  for (ValueId v : g.outputs) outs.push_back(values[v.index]);
  return outs;
}

double worst_error_ratio(const std::vector<float>& a, const std::vector<float>& b, double rtol,
                         double atol) {
  KILN_CHECK(a.size() == b.size(), "comparing tensors of different sizes");
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double err = std::fabs(static_cast<double>(a[i]) - b[i]);
    const double ratio = err / (atol + rtol * std::fabs(static_cast<double>(b[i])));
    if (std::isnan(ratio) || std::isnan(a[i])) return INFINITY;
    worst = std::max(worst, ratio);
  }
  return worst;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  KILN_CHECK(a.size() == b.size(), "comparing tensors of different sizes");
  double m = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = std::fabs(static_cast<double>(a[i]) - b[i]);
    if (std::isnan(d)) return INFINITY;
    m = std::max(m, d);
  }
  return m;
}

}  // namespace kiln::graph
