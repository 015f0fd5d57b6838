// Winograd F(2x2, 3x3) and F(4x4, 3x3), and F(2x2, 3x3) at stride 2: the transform matrices
// and the weight transform.
#include "conv_weights.h"
#include "kernels.h"

namespace kiln::runtime {

bool winograd_supported(int tile, int stride) {
  return stride == 1 ? tile == 2 || tile == 4 : stride == 2 && tile == 2;
}

const WinogradMatrices& winograd_matrices(int tile, int stride) {
  // F(2, 3): points 0, 1, -1 and infinity.
  static const WinogradMatrices f2{2,
                                   1,
                                   4,
                                   {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
                                   {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}},
                                   {{1, 1, 1, 0}, {0, 1, -1, -1}}};
  // F(4, 3): points 0, 1, -1, 2, -2 and infinity; the same matrices as Lavin and Gray's.
  static const WinogradMatrices f4{
      4,
      1,
      6,
      {{4, 0, -5, 0, 1, 0},
       {0, -4, -4, 1, 1, 0},
       {0, 4, -4, -1, 1, 0},
       {0, -2, -1, 2, 1, 0},
       {0, 2, -1, -2, 1, 0},
       {0, 4, 0, -5, 0, 1}},
      {{1.0 / 4, 0, 0},
       {-1.0 / 6, -1.0 / 6, -1.0 / 6},
       {-1.0 / 6, 1.0 / 6, -1.0 / 6},
       {1.0 / 24, 1.0 / 12, 1.0 / 6},
       {1.0 / 24, -1.0 / 12, 1.0 / 6},
       {0, 0, 1}},
      {{1, 1, 1, 1, 1, 0}, {0, 1, -1, 2, -2, 0}, {0, 1, 1, 4, 4, 0}, {0, 1, -1, 8, -8, 1}}};
  // F(2, 3) at stride 2: y0 = w0 x0 + w1 x1 + w2 x2 and y1 = w0 x2 + w1 x3 + w2 x4. Positions
  // 1 and 3 are the middle tap's products w1 x1 and w1 x3; positions 0, 2 and 4 are F(2, 2) of
  // the outer taps over x0, x2, x4: (x0 - x2) w0, x2 (w0 + w2), (x4 - x2) w2.
  static const WinogradMatrices s2f2{
      2,
      2,
      5,
      {{1, 0, -1, 0, 0}, {0, 1, 0, 0, 0}, {0, 0, 1, 0, 0}, {0, 0, 0, 1, 0}, {0, 0, -1, 0, 1}},
      {{1, 0, 0}, {0, 1, 0}, {1, 0, 1}, {0, 1, 0}, {0, 0, 1}},
      {{1, 1, 1, 0, 0}, {0, 0, 1, 1, 1}}};
  KILN_CHECK(winograd_supported(tile, stride),
             "Winograd takes tile 2 or 4 at stride 1 and tile 2 at stride 2");
  return stride == 2 ? s2f2 : tile == 2 ? f2 : f4;
}

AlignedVector<float> winograd_conv_weights(const float* hwio, int64_t ci, int64_t co, int tile,
                                           int stride) {
  const WinogradMatrices& m = winograd_matrices(tile, stride);
  const int alpha = m.alpha;
  AlignedVector<float> out(static_cast<size_t>(alpha * alpha * ci * co));
  const auto w = [&](int ky, int kx, int64_t i, int64_t o) {
    return double(hwio[((ky * 3 + kx) * ci + i) * co + o]);
  };
  for (int64_t i = 0; i < ci; ++i)
    for (int64_t o = 0; o < co; ++o) {
      double gg[3][9];  // G applied along x: gg[ky][a], a < alpha
      for (int ky = 0; ky < 3; ++ky)
        for (int a = 0; a < alpha; ++a)
          gg[ky][a] = m.g[a][0] * w(ky, 0, i, o) + m.g[a][1] * w(ky, 1, i, o) +
                      m.g[a][2] * w(ky, 2, i, o);
      for (int b = 0; b < alpha; ++b)
        for (int a = 0; a < alpha; ++a)
          out[static_cast<size_t>(((b * alpha + a) * ci + i) * co + o)] = static_cast<float>(
              m.g[b][0] * gg[0][a] + m.g[b][1] * gg[1][a] + m.g[b][2] * gg[2][a]);
    }
  return out;
}

}  // namespace kiln::runtime
