// Winograd F(2x2, 3x3) and F(4x4, 3x3): the transform matrices and the weight transform.
#include "conv_weights.h"
#include "kernels.h"

namespace kiln::runtime {

const WinogradMatrices& winograd_matrices(int tile) {
  // F(2, 3): points 0, 1, -1 and infinity.
  static const WinogradMatrices f2{2,
                                   4,
                                   {{1, 0, -1, 0}, {0, 1, 1, 0}, {0, -1, 1, 0}, {0, 1, 0, -1}},
                                   {{1, 0, 0}, {0.5, 0.5, 0.5}, {0.5, -0.5, 0.5}, {0, 0, 1}},
                                   {{1, 1, 1, 0}, {0, 1, -1, -1}}};
  // F(4, 3): points 0, 1, -1, 2, -2 and infinity; the same matrices as Lavin and Gray's.
  static const WinogradMatrices f4{
      4,
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
  KILN_CHECK(tile == 2 || tile == 4, "Winograd tile must be 2 or 4");
  return tile == 2 ? f2 : f4;
}

AlignedVector<float> winograd_conv_weights(const float* hwio, int64_t ci, int64_t co, int tile) {
  const WinogradMatrices& m = winograd_matrices(tile);
  const int alpha = m.alpha;
  AlignedVector<float> out(static_cast<size_t>(alpha * alpha * ci * co));
  const auto w = [&](int ky, int kx, int64_t i, int64_t o) {
    return double(hwio[((ky * 3 + kx) * ci + i) * co + o]);
  };
  for (int64_t i = 0; i < ci; ++i)
    for (int64_t o = 0; o < co; ++o) {
      double gg[3][6];  // G applied along x: gg[ky][a]
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
