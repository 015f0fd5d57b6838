// Implementation of the benchmark helpers.
#include "conv_peers.h"

#include <cmath>
#include <stdexcept>

#include "cli.h"
#include "dnnl.hpp"
#include "graph/builder.h"
#include "peaks.h"

namespace kiln::bench {

ConvEpilogue conv_epilogue(const graph::Activation& a) {
  if (a.is_identity()) return ConvEpilogue::none;
  if (a.is_relu()) return ConvEpilogue::relu;
  if (a.is_relu6()) return ConvEpilogue::relu6;
  throw std::invalid_argument("no benchmark epilogue for activation " + graph::to_string(a));
}

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
  std::vector<float> input, out;
  std::unique_ptr<Model> model;
};

KilnConv::KilnConv(const ConvShape& s, Schedule schedule, int cpu_target,
                   ConvEpilogueSpec epilogue)
    : impl_(std::make_unique<Impl>()) {
  if (s.depthwise && (s.ci != s.co || epilogue.residual))
    throw std::invalid_argument("depthwise: ci must equal co, and there is no residual kernel");
  Impl& m = *impl_;
  m.input = conv_input(s);
  graph::GraphBuilder b;
  const graph::ValueId x = b.input("x", {s.n, s.h, s.w, s.ci}, graph::Layout::nhwc);
  const graph::ValueId w = b.constant("w", {s.kh, s.kw, s.depthwise ? 1 : s.ci, s.co},
                                      conv_weights(s), graph::Layout::hwio);
  const graph::ValueId bias = b.constant("b", {s.co}, conv_bias(s));
  graph::Conv2d attrs{s.stride, s.stride, s.pad, s.pad, s.pad, s.pad, 1, 1};
  if (epilogue.activation == ConvEpilogue::relu) attrs.activation = {0.0f, INFINITY};
  if (epilogue.activation == ConvEpilogue::relu6) attrs.activation = {0.0f, 6.0f};
  if (s.depthwise) attrs.groups = static_cast<int>(s.co);
  std::vector<graph::ValueId> ins = {x, w, bias};
  if (epilogue.residual) {
    attrs.residual = true;
    ins.push_back(b.constant("residual", {s.n, s.out_h(), s.out_w(), s.co}, conv_residual(s),
                             graph::Layout::nhwc));
  }
  b.output(b.op("conv", attrs, ins));
  ModelOptions o;
  o.schedule = schedule;
  o.cpu_target = cpu_target;
  o.generate_kernels = cli::kernel_generator();
  m.model = std::make_unique<Model>(b.finish(), o);
  if (m.model->kernels().size() != 1 ||
      !std::holds_alternative<graph::ConvKernelSpec>(m.model->kernels()[0]))
    throw std::runtime_error("the convolution did not lower to one convolution kernel");
  m.out.assign(s.output_elements(), 0.0f);
}
KilnConv::~KilnConv() = default;
int KilnConv::run() { return impl_->model->run({impl_->input.data()}) ? 0 : 1; }
// Copied out of the arena only when asked, so run() is the kernel call alone.
const std::vector<float>& KilnConv::output() const {
  const TensorView v = impl_->model->output(0);
  impl_->out.assign(v.data, v.data + impl_->out.size());
  return impl_->out;
}

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
  if (epilogue.activation == ConvEpilogue::relu)
    ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  else if (epilogue.activation == ConvEpilogue::relu6)
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
