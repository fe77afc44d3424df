// Register-tiled building blocks shared by the Kokkos attention kernels (windowed,
// sparse, decode): a vectorisable exp, S = Q·K^T and O += P·V on 4 x 32 tiles.
// Included only by files built with ATTNTUNE_KERNEL_FLAGS (-O3 -march=native).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <new>
#include <vector>

#include "core/prefetch.h"
#if defined(__AVX512F__) || defined(__AVX2__)
#include <immintrin.h>
#endif

namespace attntune {
namespace tiles {

constexpr int64_t kRowTile = 4;   // query rows per register tile
#if defined(__AVX512F__)
// Rows of the windowed kernel's tiles: 8 x 32 floats = 16 of the 32 zmm registers as
// accumulators, 16 FMAs per 2 vector loads and 8 broadcasts.
constexpr int64_t kWideRowTile = 8;
#else
constexpr int64_t kWideRowTile = 4;  // 4 x 32 = 16 ymm accumulators already fill AVX2's 16
#endif
constexpr int64_t kColTile = 32;  // keys (S) or head-dim columns (O) per register tile
constexpr int64_t kLanes = 16;    // partial max/sum lanes: one AVX-512 vector of floats
constexpr int64_t kAlign = 64;    // bytes: a cache line, an AVX-512 vector

inline int64_t RoundUp(int64_t x, int64_t m) { return (x + m - 1) / m * m; }

// std::allocator with kAlign-byte alignment: a plain std::vector<float> of more than
// glibc's mmap threshold starts 16 bytes into a page, so that every 64-byte vector load
// of its rows spans two cache lines.
template <class T>
struct CacheAligned {
  using value_type = T;
  CacheAligned() = default;
  template <class U>
  CacheAligned(const CacheAligned<U>&) {}
  T* allocate(size_t n) {
    return static_cast<T*>(::operator new(n * sizeof(T), std::align_val_t(kAlign)));
  }
  void deallocate(T* p, size_t) { ::operator delete(p, std::align_val_t(kAlign)); }
  template <class U>
  bool operator==(const CacheAligned<U>&) const { return true; }
  template <class U>
  bool operator!=(const CacheAligned<U>&) const { return false; }
};
using AlignedFloats = std::vector<float, CacheAligned<float>>;

// Software prefetches (core/prefetch.h: inline assembly, which GCC does not remove).
using ::attntune::PrefetchRead;
using ::attntune::PrefetchWrite;

// q·k in fp32 with 16 partial sums, so that the loop vectorises without reassociation
// flags (one AVX-512 vector of floats); the lanes are added at the end. dma_decode's
// scores and the windowed kernel's decode-sized calls.
inline float Dot(const float* __restrict q, const float* __restrict k, int64_t d) {
  float lane[kLanes] = {};
  int64_t c = 0;
  for (; c + kLanes <= d; c += kLanes) {
    for (int64_t u = 0; u < kLanes; ++u) lane[u] += q[c + u] * k[c + u];
  }
  float dot = 0.0f;
  for (; c < d; ++c) dot += q[c] * k[c];
  for (int64_t u = 0; u < kLanes; ++u) dot += lane[u];
  return dot;
}

// exp(x) for x <= 0 without a libm call, so that loops over it vectorise: Cephes' expf
// (range reduction by ln 2 in two parts, degree-6 polynomial; about 1 ulp). x < -87
// (including -inf from the mask) gives 0: e^-87 is below FLT_MIN's neighbourhood and
// negligible next to the row maximum's e^0 = 1. NaN gives NaN. The argument is clamped
// to [-87, 0] before the integer conversion, which NaN or inf would make undefined.
inline float ExpNonPositive(float x) {
  const float xc = x >= -87.0f ? (x <= 0.0f ? x : 0.0f) : -87.0f;
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
  return x != x ? x : x < -87.0f ? 0.0f : p * scale;
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

// kt[c * ldt + j] = krow[j][c] for keys j < nc and columns c < d; 0 for nc <= j < ncp
// (ncp a multiple of 16): gathered K rows into K^T scratch. With AVX-512, 16 x 16
// blocks go through registers (unpack, then 128-bit lane shuffles), with AVX2 8 x 8
// blocks; a scalar transpose of scattered rows was a fifth of the gather kernels' time.
inline void TransposeRows(const float* const* krow, int64_t nc, int64_t ncp, int64_t d,
                          float* __restrict kt, int64_t ldt) {
  int64_t c0 = 0;
#if defined(__AVX512F__)
  for (; c0 + 16 <= d; c0 += 16) {
    for (int64_t j0 = 0; j0 < ncp; j0 += 16) {
      __m512 r[16], t[16];
      for (int i = 0; i < 16; ++i) {
        r[i] = j0 + i < nc ? _mm512_loadu_ps(krow[j0 + i] + c0) : _mm512_setzero_ps();
      }
      for (int i = 0; i < 16; i += 2) {  // per 128-bit lane: a0 b0 a1 b1, a2 b2 a3 b3
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
      }
      for (int k = 0; k < 4; ++k) {  // rows 4k..4k+3: r[4k + m] lane L = column m + 4L
        r[4 * k + 0] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], 0x44);
        r[4 * k + 1] = _mm512_shuffle_ps(t[4 * k], t[4 * k + 2], 0xEE);
        r[4 * k + 2] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0x44);
        r[4 * k + 3] = _mm512_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0xEE);
      }
      for (int m = 0; m < 4; ++m) {  // column m + 4L: lane L of r[m], r[4 + m], r[8 + m], r[12 + m]
        const __m512 w0 = _mm512_shuffle_f32x4(r[m], r[4 + m], 0x44);
        const __m512 w1 = _mm512_shuffle_f32x4(r[m], r[4 + m], 0xEE);
        const __m512 w2 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0x44);
        const __m512 w3 = _mm512_shuffle_f32x4(r[8 + m], r[12 + m], 0xEE);
        float* dst = kt + (c0 + m) * ldt + j0;
        _mm512_storeu_ps(dst, _mm512_shuffle_f32x4(w0, w2, 0x88));
        _mm512_storeu_ps(dst + 4 * ldt, _mm512_shuffle_f32x4(w0, w2, 0xDD));
        _mm512_storeu_ps(dst + 8 * ldt, _mm512_shuffle_f32x4(w1, w3, 0x88));
        _mm512_storeu_ps(dst + 12 * ldt, _mm512_shuffle_f32x4(w1, w3, 0xDD));
      }
    }
  }
#elif defined(__AVX2__)
  // 8 x 8 blocks (ncp a multiple of 8): unpack, shuffle within 128-bit lanes, then swap
  // the lanes. The scalar loop below was most of lsh's sorted-key copy on AVX2.
  for (; c0 + 8 <= d && ncp % 8 == 0; c0 += 8) {
    for (int64_t j0 = 0; j0 < ncp; j0 += 8) {
      __m256 r[8], t[8];
      for (int i = 0; i < 8; ++i) {
        r[i] = j0 + i < nc ? _mm256_loadu_ps(krow[j0 + i] + c0) : _mm256_setzero_ps();
      }
      for (int i = 0; i < 8; i += 2) {  // per 128-bit lane: a0 b0 a1 b1, a2 b2 a3 b3
        t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
      }
      for (int k = 0; k < 2; ++k) {  // rows 4k..4k+3: r[4k + m] lane L = column m + 4L
        r[4 * k + 0] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], 0x44);
        r[4 * k + 1] = _mm256_shuffle_ps(t[4 * k], t[4 * k + 2], 0xEE);
        r[4 * k + 2] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0x44);
        r[4 * k + 3] = _mm256_shuffle_ps(t[4 * k + 1], t[4 * k + 3], 0xEE);
      }
      for (int m = 0; m < 4; ++m) {
        float* dst = kt + (c0 + m) * ldt + j0;
        _mm256_storeu_ps(dst, _mm256_permute2f128_ps(r[m], r[4 + m], 0x20));
        _mm256_storeu_ps(dst + 4 * ldt, _mm256_permute2f128_ps(r[m], r[4 + m], 0x31));
      }
    }
  }
#endif
  for (int64_t c = c0; c < d; ++c) {
    for (int64_t j = 0; j < nc; ++j) kt[c * ldt + j] = krow[j][c];
    for (int64_t j = nc; j < ncp; ++j) kt[c * ldt + j] = 0.0f;
  }
}

// max(m, row[0..n)): an OpenMP simd max reduction, which GCC vectorises without
// -ffast-math (the file is built with -fopenmp-simd; a plain loop stays scalar).
inline float RowMax(const float* __restrict row, int64_t n, float m) {
#pragma omp simd reduction(max : m)
  for (int64_t j = 0; j < n; ++j) m = row[j] > m ? row[j] : m;
  return m;
}

// The online softmax's running state after a tile whose max is mnew (> -inf) and whose
// probabilities relative to it sum to total: acc[0..dp) and l rescaled when m grows.
inline void AdvanceRunningMax(float mnew, float total, float& m, float& l,
                              float* __restrict acc, int64_t dp) {
  if (mnew != m) {
    const float alpha = std::exp(m - mnew);  // 0 on the first keys (m = -inf)
    for (int64_t c = 0; c < dp; ++c) acc[c] *= alpha;
    l *= alpha;
    m = mnew;
  }
  l += total;
}

// A tile after which a row's running max is still -inf: its scores are all masked (-inf)
// or NaN (RowMax passes NaN over), the latter from a non-finite input that the caller
// did not have checked. P = 0; NaN makes l NaN, so that the row's output is NaN, what
// fp32 arithmetic gives, and never a row of zeros that looks valid.
inline void NoKeyYet(float* __restrict row, int64_t n, float& l) {
  bool nan = false;
  for (int64_t j = 0; j < n; ++j) nan |= row[j] != row[j];
  if (nan) l = std::numeric_limits<float>::quiet_NaN();
  std::fill(row, row + n, 0.0f);
}

// One row's online-softmax step over a tile of scores row[0..n) (masked keys -inf, n a
// multiple of kLanes): the scores become probabilities relative to the new running max
// m, and acc[0..dp) and l are rescaled when m grows. A row that has seen no key yet (m
// stays -inf) gets P = 0 and false is returned (NoKeyYet). The step of the windowed,
// gather and panel tiles.
inline bool OnlineSoftmaxRow(float* __restrict row, int64_t n, float& m, float& l,
                             float* __restrict acc, int64_t dp) {
  const float mnew = RowMax(row, n, m);
  if (mnew == -std::numeric_limits<float>::infinity()) {
    NoKeyYet(row, n, l);
    return false;
  }
  const float total = ExpShiftSum(row, n, mnew);
  AdvanceRunningMax(mnew, total, m, l, acc, dp);
  return true;
}

// s[0..R)[0..32) = q[0..R)[0..d) · kt[0..d)[0..32). R = kRowTile by default; the
// windowed kernel uses kWideRowTile rows (16 accumulator vectors with AVX-512).
template <int64_t R = kRowTile>
inline void TileQK(const float* __restrict q, int64_t ldq, const float* __restrict kt,
                   int64_t ldk, int64_t d, float* __restrict s, int64_t lds) {
  float c[R][kColTile] = {};
  for (int64_t k = 0; k < d; ++k) {
    const float* __restrict krow = kt + k * ldk;
    for (int64_t r = 0; r < R; ++r) {
      const float a = q[r * ldq + k];
      for (int64_t t = 0; t < kColTile; ++t) c[r][t] += a * krow[t];
    }
  }
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t t = 0; t < kColTile; ++t) s[r * lds + t] = c[r][t];
  }
}

// o[0..R)[0..32) += p[0..R)[0..nc) · vrow(0..nc)[0..32), vrow(j) a pointer to key j's
// 32 V columns.
template <int64_t R, class VRow>
inline void TilePVAny(const float* __restrict p, int64_t ldp, const VRow& vrow, int64_t nc,
                      float* __restrict o, int64_t ldo) {
  float c[R][kColTile];
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t t = 0; t < kColTile; ++t) c[r][t] = o[r * ldo + t];
  }
  for (int64_t j = 0; j < nc; ++j) {
    const float* __restrict v = vrow(j);
    for (int64_t r = 0; r < R; ++r) {
      const float a = p[r * ldp + j];
      for (int64_t t = 0; t < kColTile; ++t) c[r][t] += a * v[t];
    }
  }
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t t = 0; t < kColTile; ++t) o[r * ldo + t] = c[r][t];
  }
}

// o[0..R)[0..32) += p[0..R)[0..nc) · v[0..nc)[0..32) (V rows ldv apart).
template <int64_t R = kRowTile>
inline void TilePV(const float* __restrict p, int64_t ldp, const float* __restrict v,
                   int64_t ldv, int64_t nc, float* __restrict o, int64_t ldo) {
  TilePVAny<R>(p, ldp, [=](int64_t j) { return v + j * ldv; }, nc, o, ldo);
}

// The same over V rows read in place (gathered keys): columns [col, col + 32) of
// vrows[0..nc).
template <int64_t R = kRowTile>
inline void TilePVRows(const float* __restrict p, int64_t ldp, const float* const* vrows,
                       int64_t col, int64_t nc, float* __restrict o, int64_t ldo) {
  TilePVAny<R>(p, ldp, [=](int64_t j) { return vrows[j] + col; }, nc, o, ldo);
}

}  // namespace tiles
}  // namespace attntune
