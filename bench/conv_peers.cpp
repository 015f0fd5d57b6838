// Implementation of the benchmark helpers.
#include "conv_peers.h"


#include <cmath>

#include "HalideBuffer.h"
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

struct KilnConv::Impl {
  std::vector<float> input, weights, bias, out;
  HalideBuffer in_b, w_b, b_b, out_b;
  int scalars[6];
  std::vector<void*> args;
  runtime::KernelFn fn;
};

KilnConv::KilnConv(const ConvShape& s, runtime::ConvSchedule schedule, int cpu_target)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.input = graph::random_uniform(s.n * s.h * s.w * s.ci, -1.0f, 1.0f, 1);
  m.weights = graph::random_uniform(s.kh * s.kw * s.ci * s.co, -0.1f, 0.1f, 2);
  m.bias = graph::random_uniform(s.co, -0.1f, 0.1f, 3);
  m.out.assign(s.n * s.out_h() * s.out_w() * s.co, 0.0f);
  m.in_b = wrap(m.input.data(), {s.n, s.h, s.w, s.ci});
  m.w_b = wrap(m.weights.data(), {s.kh, s.kw, s.ci, s.co});
  m.b_b = wrap(m.bias.data(), {s.co});
  m.out_b = wrap(m.out.data(), {s.n, s.out_h(), s.out_w(), s.co});
  const int sc[6] = {s.stride, s.stride, s.pad, s.pad, 1, 1};
  std::copy(sc, sc + 6, m.scalars);
  m.args = {m.in_b.raw_buffer(), m.w_b.raw_buffer(), m.b_b.raw_buffer()};
  for (int& v : m.scalars) m.args.push_back(&v);
  m.args.push_back(m.out_b.raw_buffer());
  m.fn = runtime::cpu_conv_kernel(runtime::ConvEpilogue::relu, schedule, cpu_target);
}
KilnConv::~KilnConv() = default;
int KilnConv::run() { return impl_->fn(impl_->args.data()); }
const std::vector<float>& KilnConv::output() const { return impl_->out; }

struct OneDnnConv::Impl {
  dnnl::engine eng{dnnl::engine::kind::cpu, 0};
  dnnl::stream strm{eng};
  dnnl::convolution_forward conv;
  dnnl::memory src, weights, bias, dst, dst_user;
};

OneDnnConv::OneDnnConv(const ConvShape& s, bool nhwc) : impl_(std::make_unique<Impl>()) {
  using tag = dnnl::memory::format_tag;
  using dt = dnnl::memory::data_type;
  Impl& m = *impl_;
  const dnnl::memory::dims src_dims = {s.n, s.ci, s.h, s.w}, w_dims = {s.co, s.ci, s.kh, s.kw},
                           b_dims = {s.co}, dst_dims = {s.n, s.co, s.out_h(), s.out_w()};
  const tag act = nhwc ? tag::nhwc : tag::any;
  auto src_md = dnnl::memory::desc(src_dims, dt::f32, act);
  auto w_md = dnnl::memory::desc(w_dims, dt::f32, tag::any);
  auto b_md = dnnl::memory::desc(b_dims, dt::f32, tag::x);
  auto dst_md = dnnl::memory::desc(dst_dims, dt::f32, act);
  dnnl::post_ops ops;
  ops.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f);
  dnnl::primitive_attr attr;
  attr.set_post_ops(ops);
  auto desc = dnnl::convolution_forward::desc(
      dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src_md, w_md, b_md,
      dst_md, {s.stride, s.stride}, {s.pad, s.pad}, {s.pad, s.pad});
  auto pd = dnnl::convolution_forward::primitive_desc(desc, attr, m.eng);
  m.conv = dnnl::convolution_forward(pd);

  // The same random data as KilnConv, reordered into whatever oneDNN chose.
  auto user_src = dnnl::memory({src_dims, dt::f32, tag::nhwc}, m.eng);
  auto user_w = dnnl::memory({w_dims, dt::f32, tag::hwio}, m.eng);
  auto in = graph::random_uniform(s.n * s.h * s.w * s.ci, -1.0f, 1.0f, 1);
  auto w = graph::random_uniform(s.kh * s.kw * s.ci * s.co, -0.1f, 0.1f, 2);
  auto b = graph::random_uniform(s.co, -0.1f, 0.1f, 3);
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

}  // namespace kiln::bench
