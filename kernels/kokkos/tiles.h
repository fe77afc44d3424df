// Register-tiled building blocks shared by the Kokkos attention kernels (windowed,
// sparse, decode): a vectorisable exp, S = Q·K^T and O += P·V on 4 x 32 tiles.
// Included only by files built with ATTNTUNE_KERNEL_FLAGS (-O3 -march=native).
#pragma once

#include <cstdint>
#include <cstring>

namespace attntune {
namespace tiles {

constexpr int64_t kRowTile = 4;   // query rows per register tile
constexpr int64_t kColTile = 32;  // keys (S) or head-dim columns (O) per register tile
constexpr int64_t kLanes = 16;    // partial max/sum lanes: one AVX-512 vector of floats
constexpr int64_t kAlign = 64;    // bytes: a cache line, an AVX-512 vector

inline int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// exp(x) for x <= 0 without a libm call, so that loops over it vectorise: Cephes' expf
// (range reduction by ln 2 in two parts, degree-6 polynomial; about 1 ulp). x < -87
// (including -inf from the mask) gives 0: e^-87 is below FLT_MIN's neighbourhood and
// negligible next to the row maximum's e^0 = 1.
inline float ExpNonPositive(float x) {
  const float xc = x < -87.0f ? -87.0f : x;
  // 1.5 * 2^23: adding and subtracting it rounds to the nearest integer.
  const float kRound = 12582912.0f;
  const float n = (xc * 1.44269504088896341f + kRound) - kRound;
  float r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;  // 2^n, n in [-126, 0]
  float scale;
  std::memcpy(&scale, &bits, sizeof(scale));
  return x < -87.0f ? 0.0f : p * scale;
}

// row[0..n) <- exp(row - m) for scores at most m (n a multiple of kLanes); returns their
// sum, accumulated in kLanes partial sums so that the loop vectorises. The online-softmax
// step of the gather and panel tiles.
inline float ExpShiftSum(float* __restrict row, int64_t n, float m) {
  float sum[kLanes] = {};
  for (int64_t j = 0; j < n; j += kLanes) {
    for (int64_t u = 0; u < kLanes; ++u) {
      row[j + u] = ExpNonPositive(row[j + u] - m);
      sum[u] += row[j + u];
    }
  }
  float total = 0.0f;
  for (int64_t u = 0; u < kLanes; ++u) total += sum[u];
  return total;
}

// s[0..4)[0..32) = q[0..4)[0..d) · kt[0..d)[0..32).
inline void TileQK(const float* __restrict q, int64_t ldq, const float* __restrict kt,
                   int64_t ldk, int64_t d, float* __restrict s, int64_t lds) {
  float c[kRowTile][kColTile] = {};
  for (int64_t k = 0; k < d; ++k) {
    const float* __restrict krow = kt + k * ldk;
    for (int64_t r = 0; r < kRowTile; ++r) {
      const float a = q[r * ldq + k];
      for (int64_t t = 0; t < kColTile; ++t) c[r][t] += a * krow[t];
    }
  }
  for (int64_t r = 0; r < kRowTile; ++r) {
    for (int64_t t = 0; t < kColTile; ++t) s[r * lds + t] = c[r][t];
  }
}

// o[0..4)[0..32) += p[0..4)[0..nc) · v[0..nc)[0..32).
inline void TilePV(const float* __restrict p, int64_t ldp, const float* __restrict v,
                   int64_t ldv, int64_t nc, float* __restrict o, int64_t ldo) {
  float c[kRowTile][kColTile];
  for (int64_t r = 0; r < kRowTile; ++r) {
    for (int64_t t = 0; t < kColTile; ++t) c[r][t] = o[r * ldo + t];
  }
  for (int64_t j = 0; j < nc; ++j) {
    const float* __restrict vrow = v + j * ldv;
    for (int64_t r = 0; r < kRowTile; ++r) {
      const float a = p[r * ldp + j];
      for (int64_t t = 0; t < kColTile; ++t) c[r][t] += a * vrow[t];
    }
  }
  for (int64_t r = 0; r < kRowTile; ++r) {
    for (int64_t t = 0; t < kColTile; ++t) o[r * ldo + t] = c[r][t];
  }
}

}  // namespace tiles
}  // namespace attntune
