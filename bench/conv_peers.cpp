// Implementation of the benchmark helpers.
#include "conv_peers.h"

#include <cmath>
#include <stdexcept>

#include "HalideBuffer.h"
#include "conv_weights.h"
#include "dnnl.hpp"
#include "graph/builder.h"
#include "peaks.h"

namespace kiln::bench {
namespace {

using HalideBuffer = Halide::Runtime::Buffer<float>;

HalideBuffer wrap(float* data, const graph::Shape& shape) {
  std::vector<int> sizes(shape.rbegin(), shape.rend());
  return HalideBuffer(data, sizes);
}

}  // namespace

double measured_fma_peak_gflops(int threads) {
  std::string isa;
  return cli::measure_fma_gflops(threads, &isa);
}

double measured_bandwidth_gbs(int threads) { return cli::measure_bandwidth_gbs(threads); }

// Seeds 1, 2, 3 as bench_reference_layer has always used; 4 for the residual.
std::vector<float> conv_input(const ConvShape& s) {
  return graph::random_uniform(s.input_elements(), -1.0f, 1.0f, 1);
}
std::vector<float> conv_weights(const ConvShape& s) {
  // Output standard deviation about 3 whatever the fan-in: the outputs reach both sides of
  // ReLU's 0 and ReLU6's 6, so a comparison of outputs exercises the clamps too.
  const double fan_in = static_cast<double>(s.kh * s.kw * (s.depthwise ? 1 : s.ci));
  const float bound = static_cast<float>(9.0 / std::sqrt(fan_in));
  return graph::random_uniform(s.weight_elements(), -bound, bound, 2);
}
std::vector<float> conv_bias(const ConvShape& s) {
  return graph::random_uniform(s.co, -0.1f, 0.1f, 3);
}
std::vector<float> conv_residual(const ConvShape& s) {
  return graph::random_uniform(s.output_elements(), -1.0f, 1.0f, 4);
}

struct KilnConv::Impl {
  std::vector<float> input, weights, bias, residual, out;
  HalideBuffer in_b, w_b, b_b, res_b, out_b;
  int scalars[6];
  std::vector<void*> args;
  runtime::KernelFn fn;
};

KilnConv::KilnConv(const ConvShape& s, runtime::ConvSchedule schedule, int cpu_target,
                   ConvEpilogueSpec epilogue)
    : impl_(std::make_unique<Impl>()) {
  if (s.depthwise && (s.ci != s.co || epilogue.residual))
    throw std::invalid_argument("depthwise: ci must equal co, and there is no residual kernel");
  Impl& m = *impl_;
  m.input = conv_input(s);
  m.weights = conv_weights(s);
  m.bias = conv_bias(s);
  m.out.assign(s.output_elements(), 0.0f);
  m.in_b = wrap(m.input.data(), {s.n, s.h, s.w, s.ci});
  m.w_b = wrap(m.weights.data(), {s.kh, s.kw, s.depthwise ? 1 : s.ci, s.co});
  // Dense weights as the runtime lays them out (runtime::conv_weight_ci_stride).
  if (!s.depthwise) {
    runtime::StridedConvWeights w =
        runtime::restride_conv_weights(m.weights.data(), s.kh, s.kw, s.ci, s.co);
    if (!w.data.empty()) {
      m.weights = std::move(w.data);
      m.w_b = HalideBuffer(m.weights.data(), 4, w.dims);
    }
  }
  // `tuned`: the tuned schedule the runtime picks for this shape.
  if (schedule == runtime::ConvSchedule::tuned)
    schedule = runtime::tuned_conv_schedule(s.out_h(), s.out_w(), s.ci, s.kh, s.kw, s.pad != 0);
  m.b_b = wrap(m.bias.data(), {s.co});
  m.out_b = wrap(m.out.data(), {s.n, s.out_h(), s.out_w(), s.co});
  // stride x/y, pad x/y, dilation x/y (runtime/kernels.h).
  const int sc[6] = {s.stride, s.stride, s.pad, s.pad, 1, 1};
  std::copy(sc, sc + 6, m.scalars);
  m.args = {m.in_b.raw_buffer(), m.w_b.raw_buffer(), m.b_b.raw_buffer()};
  for (int& v : m.scalars) m.args.push_back(&v);
  if (epilogue.residual) {
    m.residual = conv_residual(s);
    m.res_b = wrap(m.residual.data(), {s.n, s.out_h(), s.out_w(), s.co});
    m.args.push_back(m.res_b.raw_buffer());
  }
  m.args.push_back(m.out_b.raw_buffer());
  m.fn = s.depthwise ? runtime::cpu_depthwise_kernel(epilogue.activation, cpu_target)
                     : runtime::cpu_conv_kernel(epilogue.activation, schedule, cpu_target,
                                                epilogue.residual);
  if (!m.fn) throw std::runtime_error("no Kiln kernel for this epilogue and target");
}
KilnConv::~KilnConv() = default;
int KilnConv::run() { return impl_->fn(impl_->args.data()); }
const std::vector<float>& KilnConv::output() const { return impl_->out; }

struct OneDnnConv::Impl {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  dnnl::convolution_forward conv;
  std::string impl_name;
  dnnl::memory src, weights, bias, dst, dst_user;
};

OneDnnConv::OneDnnConv(const ConvShape& s, bool nhwc, ConvEpilogueSpec epilogue)
    : impl_(std::make_unique<Impl>()) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  if (s.depthwise && s.ci != s.co) throw std::invalid_argument("depthwise: ci must equal co");
  Impl& m = *impl_;
  const dnnl::memory::dims src_dims = {s.n, s.ci, s.h, s.w}, b_dims = {s.co},
                           dst_dims = {s.n, s.co, s.out_h(), s.out_w()};
  // Grouped weights are [G, O/G, I/G, Kh, Kw]; Kiln's depthwise [Kh, Kw, 1, C] is that with
  // G = C and O/G = I/G = 1, C innermost.
  const dnnl::memory::dims w_dims = s.depthwise ? dnnl::memory::dims{s.co, 1, 1, s.kh, s.kw}
                                                : dnnl::memory::dims{s.co, s.ci, s.kh, s.kw};
  const tag act = nhwc ? tag::nhwc : tag::any;
  auto src_md = dnnl::memory::desc(src_dims, dt::f32, act);
  auto w_md = dnnl::memory::desc(w_dims, dt::f32, tag::any);
  auto b_md = dnnl::memory::desc(b_dims, dt::f32, tag::x);
  auto dst_md = dnnl::memory::desc(dst_dims, dt::f32, act);
  dnnl::post_ops ops;
  if (epilogue.residual) ops.append_sum(1.0f);
  if (epilogue.activation == runtime::ConvEpilogue::relu)
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  else if (epilogue.activation == runtime::ConvEpilogue::relu6)
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_clip, 0.0f, 6.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  auto desc = dnnl::convolution_forward::desc(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_md, w_md, b_md,
      dst_md, {s.stride, s.stride}, {s.pad, s.pad}, {s.pad, s.pad});
  auto pd = dnnl::convolution_forward::primitive_desc(desc, attr, m.eng);
  m.conv = dnnl::convolution_forward(pd);
  m.impl_name = pd.impl_info_str();

  // The same random data as KilnConv, reordered into whatever oneDNN chose.
  auto user_src = dnnl::memory({src_dims, dt::f32, tag::nhwc}, m.eng);
  const dnnl::memory::desc user_w_md =
      s.depthwise ? dnnl::memory::desc(w_dims, dt::f32,
                                       dnnl::memory::dims{1, s.co, s.co, s.kw * s.co, s.co})
                  : dnnl::memory::desc(w_dims, dt::f32, tag::hwio);
  auto user_w = dnnl::memory(user_w_md, m.eng);
  const auto in = conv_input(s), w = conv_weights(s), b = conv_bias(s);
  std::copy(in.begin(), in.end(), static_cast<float*>(user_src.get_data_handle()));
  std::copy(w.begin(), w.end(), static_cast<float*>(user_w.get_data_handle()));
  m.src = dnnl::memory(pd.src_desc(), m.eng);
  m.weights = dnnl::memory(pd.weights_desc(), m.eng);
  m.bias = dnnl::memory({b_dims, dt::f32, tag::x}, m.eng);
  std::copy(b.begin(), b.end(), static_cast<float*>(m.bias.get_data_handle()));
  m.dst = dnnl::memory(pd.dst_desc(), m.eng);
  m.dst_user = dnnl::memory({dst_dims, dt::f32, tag::nhwc}, m.eng);
  dnnl::reorder(user_src, m.src).execute(m.strm, user_src, m.src);
  dnnl::reorder(user_w, m.weights).execute(m.strm, user_w, m.weights);
  if (epilogue.residual) {  // the sum post-op adds what dst holds
    const auto r = conv_residual(s);
    std::copy(r.begin(), r.end(), static_cast<float*>(m.dst_user.get_data_handle()));
    dnnl::reorder(m.dst_user, m.dst).execute(m.strm, m.dst_user, m.dst);
  }
  m.strm.wait();
}
OneDnnConv::~OneDnnConv() = default;

void OneDnnConv::run() {
  Impl& m = *impl_;
  m.conv.execute(m.strm, {{DNNL_ARG_SRC, m.src},
                          {DNNL_ARG_WEIGHTS, m.weights},
                          {DNNL_ARG_BIAS, m.bias},
                          {DNNL_ARG_DST, m.dst}});
  m.strm.wait();
}

std::vector<float> OneDnnConv::output_nhwc() {
  Impl& m = *impl_;
  dnnl::reorder(m.dst, m.dst_user).execute(m.strm, m.dst, m.dst_user);
  m.strm.wait();
  const float* p = static_cast<const float*>(m.dst_user.get_data_handle());
  return std::vector<float>(p, p + m.dst_user.get_desc().get_size() / sizeof(float));
}

std::string OneDnnConv::implementation() const { return impl_->impl_name; }

}  // namespace kiln::bench
