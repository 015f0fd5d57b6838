// Classifies one image with a model compiled at build time by kiln_add_model (ResNet-18 unless
// KILN_EXAMPLE_MODEL names another): prints the top-5 classes. The image is a raw float32 file
// [1, 3, 224, 224] (NCHW, already normalized), or, without one, a deterministic synthetic
// gradient.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#ifndef KILN_EXAMPLE_MODEL
#define KILN_EXAMPLE_MODEL resnet18
#endif
#define KILN_STRINGIZE2(x) #x
#define KILN_STRINGIZE(x) KILN_STRINGIZE2(x)
#include KILN_STRINGIZE(KILN_EXAMPLE_MODEL.h)

namespace compiled = KILN_EXAMPLE_MODEL;
const char* const kModelName = KILN_STRINGIZE(KILN_EXAMPLE_MODEL);

namespace {

size_t elements(const std::vector<std::int64_t>& shape) {
  size_t n = 1;
  for (std::int64_t d : shape) n *= static_cast<size_t>(d);
  return n;
}

std::string shape_string(const std::vector<std::int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// Diagonal colour gradients with ImageNet's per-channel normalization: the same on every machine.
std::vector<float> synthetic_image(const std::vector<std::int64_t>& shape) {
  const std::int64_t c = shape[1], h = shape[2], w = shape[3];
  const float mean[3] = {0.485f, 0.456f, 0.406f}, stdev[3] = {0.229f, 0.224f, 0.225f};
  std::vector<float> img(elements(shape));
  for (std::int64_t k = 0; k < c; ++k)
    for (std::int64_t y = 0; y < h; ++y)
      for (std::int64_t x = 0; x < w; ++x) {
        const float v = static_cast<float>((x * (k + 1) + y * (3 - k % 3)) % 256) / 255.0f;
        img[(k * h + y) * w + x] = (v - mean[k % 3]) / stdev[k % 3];
      }
  return img;
}

std::vector<float> read_image(const std::string& path, size_t count) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  if (!f) throw std::runtime_error("cannot open image '" + path + "'");
  if (static_cast<size_t>(f.tellg()) != count * sizeof(float))
    throw std::runtime_error("image '" + path + "' must hold exactly " + std::to_string(count) +
                             " float32 values (" + std::to_string(count * sizeof(float)) + " bytes)");
  std::vector<float> img(count);
  f.seekg(0);
  f.read(reinterpret_cast<char*>(img.data()), static_cast<std::streamsize>(count * sizeof(float)));
  return img;
}

void print_top5(const float* logits, size_t n) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  const size_t k = std::min<size_t>(5, n);
  std::partial_sort(order.begin(), order.begin() + k, order.end(),
                    [&](size_t a, size_t b) { return logits[a] > logits[b]; });
  const float top = logits[order[0]];
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(logits[i] - top));
  std::printf("top-%zu of %zu classes:\n", k, n);
  for (size_t r = 0; r < k; ++r)
    std::printf("  %zu. class %4zu  logit %8.4f  p=%.4f\n", r + 1, order[r], logits[order[r]],
                std::exp(static_cast<double>(logits[order[r]] - top)) / sum);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 3 || (argc > 1 && std::string(argv[1]) == "--help")) {
    std::fprintf(stderr, "usage: %s [%s.weights [image.f32]]\n", argv[0], kModelName);
    return 2;
  }
  try {
    compiled::Model model(argc > 1 ? argv[1] : std::string(kModelName) + ".weights");
    const std::vector<std::int64_t> in_shape = model.input_shape();
    const std::vector<float> image =
        argc > 2 ? read_image(argv[2], elements(in_shape)) : synthetic_image(in_shape);
    const auto t0 = std::chrono::steady_clock::now();
    model.run(image.data());
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("%s: input '%s' %s, output '%s' %s, backend %s, %.1f ms\n",
                kModelName, model.input_name().c_str(), shape_string(in_shape).c_str(),
                model.output_name().c_str(), shape_string(model.output_shape()).c_str(),
                model.backend().c_str(), ms);
    print_top5(model.output(), model.output_size());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "classify: %s\n", e.what());
    return 1;
  }
  return 0;
}
