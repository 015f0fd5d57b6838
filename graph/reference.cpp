// The reference interpreter.
#include "graph/reference.h"

#include <algorithm>
#include <cmath>

#include "graph/reference_ops.h"
#include "graph/shape_inference.h"

namespace kiln::graph {
Tensor to_layout(const Tensor& t, Layout to) {
  if (t.layout == to) return t;
  return to_layout(t.data.data(), t.shape, t.layout, to);
}

Tensor to_layout(const float* data, const Shape& shape, Layout from_layout, Layout to) {
  const size_t size = static_cast<size_t>(num_elements(shape));
  if (from_layout == to) return Tensor{shape, to, std::vector<float>(data, data + size)};
  if ((from_layout != Layout::nchw && from_layout != Layout::nhwc) ||
      (to != Layout::nchw && to != Layout::nhwc))
    throw Error(std::string("cannot convert a tensor from ") + to_string(from_layout) + " to " +
                to_string(to));
  const ImageDims d = image_dims(shape, from_layout);
  const ImageIndex from{d, from_layout}, into{d, to};
  Tensor out{image_shape(d, to), to, std::vector<float>(size)};
  for (int64_t n = 0; n < d.n; ++n)
    for (int64_t c = 0; c < d.c; ++c)
      for (int64_t h = 0; h < d.h; ++h)
        for (int64_t w = 0; w < d.w; ++w) out.data[into(n, c, h, w)] = data[from(n, c, h, w)];
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
                  to_string(inputs[k].shape) + " with " + std::to_string(inputs[k].data.size()) +
                  " values");
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
    Tensor out = is_compute_op(n.op) ? reference_compute_op(n.op, in, outv.shape, outv.layout)
                                     : reference_data_op(n.op, in, outv.shape, outv.layout);
    KILN_CHECK(out.shape == outv.shape && static_cast<int64_t>(out.data.size()) == num_elements(outv.shape),
               "reference: " + std::string(op_name(n.op)) + " produced the wrong shape");
    out.layout = outv.layout;
    values[n.outputs[0].index] = std::move(out);
    ready[n.outputs[0].index] = true;
  }
  std::vector<Tensor> outs;
  for (ValueId v : g.outputs) outs.push_back(values[v.index]);
  return outs;
}

double element_error(float got, float want) {
  if ((std::isnan(got) && std::isnan(want)) || got == want) return 0.0;  // == covers infinities
  const double d = std::fabs(static_cast<double>(got) - want);
  return std::isnan(d) ? INFINITY : d;
}

double worst_error_ratio(const std::vector<float>& a, const std::vector<float>& b, double rtol,
                         double atol) {
  KILN_CHECK(a.size() == b.size(), "comparing tensors of different sizes");
  double worst = 0.0;
  for (size_t i = 0; i < a.size(); ++i) {
    const double err = element_error(a[i], b[i]);
    if (err == 0.0) continue;
    const double ratio = err / (atol + rtol * std::fabs(static_cast<double>(b[i])));
    if (std::isnan(ratio) || std::isinf(ratio)) return INFINITY;
    worst = std::max(worst, ratio);
  }
  return worst;
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  KILN_CHECK(a.size() == b.size(), "comparing tensors of different sizes");
  double m = 0.0;
  for (size_t i = 0; i < a.size(); ++i) m = std::max(m, element_error(a[i], b[i]));
  return m;
}

}  // namespace kiln::graph
