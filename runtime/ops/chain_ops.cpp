// Portable kernel for ElementwiseChain: every step of the chain applied to one element while it
// is in a register, so a chain of N elementwise ops reads and writes memory once, not N times.
#include <cmath>

#include "graph/shape_inference.h"
#include "runtime/ops/ops_internal.h"
#include "runtime/ops/parallel.h"

namespace kiln::runtime::ops {
namespace {

using graph::ChainStep;
using graph::ChainStepKind;

inline float apply(const ChainStep& s, float v, float scale, float shift) {
  switch (s.kind) {
    case ChainStepKind::clamp: return std::fmin(std::fmax(v, s.a), s.b);
    case ChainStepKind::leaky_relu: return v >= 0.0f ? v : s.a * v;
    case ChainStepKind::sigmoid: return 1.0f / (1.0f + std::exp(-v));
    case ChainStepKind::hard_sigmoid: return std::fmin(std::fmax(s.a * v + s.b, 0.0f), 1.0f);
    case ChainStepKind::hard_swish: return v * std::fmin(std::fmax(v / 6.0f + 0.5f, 0.0f), 1.0f);
    case ChainStepKind::affine: return v * scale + shift;
  }
  return v;
}

}  // namespace

std::string run_chain(const graph::ElementwiseChain& chain,
                      const std::vector<ConstTensorRef>& in, const TensorRef& out) {
  if (in.empty() || in[0].shape != out.shape) return "chain output shape differs from its input";
  size_t affine = 0;
  for (const ChainStep& s : chain.steps) affine += s.kind == ChainStepKind::affine;
  if (in.size() != 1 + 2 * affine) return "chain has the wrong number of scale/shift inputs";
  const graph::Shape& shape = in[0].shape;
  // [outer, channels, inner] view; without affine steps the channel split does not matter.
  int64_t outer = 1, channels = 1, inner = 1;
  if (affine > 0) {
    if (shape.size() < 2) return "per-channel steps need a tensor of rank >= 2";
    const size_t axis = in[0].layout == graph::Layout::nhwc ? 3 : 1;
    if (axis >= shape.size()) return "NHWC chain input must be 4-D";
    channels = shape[axis];
    for (size_t i = 0; i < axis; ++i) outer *= shape[i];
    for (size_t i = axis + 1; i < shape.size(); ++i) inner *= shape[i];
    for (size_t i = 1; i < in.size(); ++i)
      if (in[i].shape != graph::Shape{channels}) return "scale/shift length differs from the channel count";
  } else {
    inner = graph::num_elements(shape);
  }
  parallel_for(outer * channels, [&](int64_t oc) {
    std::vector<float> scale(affine), shift(affine);
    const int64_t c = oc % channels;
    {
      for (size_t k = 0; k < affine; ++k) {
        scale[k] = affine ? in[1 + 2 * k].data[c] : 1.0f;
        shift[k] = affine ? in[2 + 2 * k].data[c] : 0.0f;
      }
      const int64_t base = oc * inner;
      for (int64_t i = 0; i < inner; ++i) {
        float v = in[0].data[base + i];
        size_t k = 0;
        for (const ChainStep& s : chain.steps) {
          const bool aff = s.kind == ChainStepKind::affine;
          v = apply(s, v, aff ? scale[k] : 1.0f, aff ? shift[k] : 0.0f);
          k += aff;
        }
        out.data[base + i] = v;
      }
    }
  });
  return "";
}

}  // namespace kiln::runtime::ops
