// oneDNN's time for a kernel of `kiln tune` (tools/tuner.h, onednn_time): compiled into the kiln
// tool when the build has oneDNN (KILN_BUILD_BENCH), so the tuning table shows the library a
// hand-tuned CPU convolution is usually compared with next to the default and tuned schedules.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <variant>

#include "conv_peers.h"
#include "tools/tuner.h"

namespace kiln::cli {

namespace {

// The convolution as bench::ConvShape and epilogue, or why oneDNN's convolution + bias + sum +
// ReLU/clip post-ops (OneDnnConv) cannot compute it.
std::string as_onednn_conv(const graph::ConvKernelSpec& c, bench::ConvShape* s,
                           bench::ConvEpilogueSpec* e) {
  if (c.groups > 1 && !c.depthwise) return "grouped (oneDNN's peer here takes dense and depthwise)";
  if (!c.post.empty() || !c.pre.empty() || c.pool || c.expand || c.nchw_input || c.bf16)
    return "fused steps beyond bias, residual and ReLU/ReLU6";
  if (c.residual && c.depthwise) return "a depthwise convolution with a residual";
  if (c.stride_h != c.stride_w || c.dilation_h != 1 || c.dilation_w != 1 ||
      c.pad_top != c.pad_left || c.pad_top != c.pad_bottom || c.pad_top != c.pad_right)
    return "unequal strides, dilation or asymmetric padding";
  if (!c.activation.is_identity() && !c.activation.is_relu() && !c.activation.is_relu6())
    return "activation " + graph::to_string(c.activation);
  const graph::Shape in = graph::conv_input_nhwc(c);  // [N, H, W, C]
  const graph::Shape& w = c.weights.shape;            // [Kh, Kw, ., Co]
  *s = {in[0], in[3], in[1], in[2], w[3], w[0], w[1], c.stride_h, c.pad_top, c.depthwise};
  *e = {bench::conv_epilogue(c.activation), c.residual.has_value()};
  return "";
}

}  // namespace

std::optional<Timing> onednn_time(const graph::KernelSpec& k, int threads, int rounds, bool evict,
                                  std::string* why) {
  const auto* c = std::get_if<graph::ConvKernelSpec>(&k);
  if (!c) {
    *why = "not a convolution";
    return std::nullopt;
  }
  bench::ConvShape s{};
  bench::ConvEpilogueSpec e;
  *why = as_onednn_conv(*c, &s, &e);
  if (!why->empty()) return std::nullopt;
  omp_set_num_threads(threads);  // before the primitive is made: oneDNN fixes its split then
  bench::OneDnnConv conv(s, /*nhwc_activations=*/true, e);
  std::vector<float> flush(evict ? (64u << 20) / sizeof(float) : 0, 1.0f);
  for (int i = 0; i < 3; ++i) conv.run();
  Timing t;
  for (int i = 0; i < std::max(rounds, 1); ++i) {
    for (size_t j = 0; j < flush.size(); j += 16) flush[j] += 1.0f;
    const auto start = std::chrono::steady_clock::now();
    conv.run();
    t.samples_us.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  }
  std::vector<double> sorted = t.samples_us;
  std::sort(sorted.begin(), sorted.end());
  const auto at = [&](double q) { return sorted[static_cast<size_t>(q * double(sorted.size() - 1))]; };
  t.median_us = at(0.5);
  t.spread = (at(0.9) - at(0.1)) / t.median_us;
  return t;
}

}  // namespace kiln::cli
