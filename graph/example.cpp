// The built-in default model.
#include "graph/example.h"

#include <cmath>

#include "graph/builder.h"

namespace kiln::graph {

Graph reference_example(const ExampleShape& s, uint64_t seed) {
  GraphBuilder b;
  const ValueId a = b.input("A", {s.n, s.c, s.h, s.w}, Layout::nchw);
  const float bound = 1.0f / std::sqrt(static_cast<float>(s.c * s.kernel * s.kernel));
  const int64_t wsize = s.co * s.c * s.kernel * s.kernel;
  const ValueId w = b.constant("w", {s.co, s.c, s.kernel, s.kernel},
                               random_uniform(wsize, -bound, bound, seed), Layout::oihw);
  const ValueId bias = b.constant("b", {s.co}, random_uniform(s.co, -0.1f, 0.1f, seed + 1));
  Conv2d conv;
  conv.stride_h = conv.stride_w = s.stride;
  conv.pad_top = conv.pad_left = conv.pad_bottom = conv.pad_right = s.pad;
  const ValueId conv_out = b.conv2d("conv_out", a, w, bias, conv);

  const ValueId gamma = b.constant("gamma", {s.co}, random_uniform(s.co, 0.5f, 1.5f, seed + 2));
  const ValueId beta = b.constant("beta", {s.co}, random_uniform(s.co, -0.5f, 0.5f, seed + 3));
  const ValueId mean = b.constant("mean", {s.co}, random_uniform(s.co, -0.3f, 0.3f, seed + 4));
  std::vector<float> var = random_uniform(s.co, -2.0f, 0.6f, seed + 5);
  for (float& v : var) v = std::pow(10.0f, v);  // 0.01 .. 4, log-uniform
  const ValueId variance = b.constant("var", {s.co}, std::move(var));
  const ValueId bn_out = b.batch_norm("bn_out", conv_out, gamma, beta, mean, variance, 1e-5f);
  b.output(b.relu("out", bn_out));
  return b.finish();
}

}  // namespace kiln::graph
