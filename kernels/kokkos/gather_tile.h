// The core of the sparse kernels: one block of query rows of the query heads of one KV
// head attends a list of keys (gathered, Bc at a time, into contiguous transposed
// scratch, once for all the heads) with an element predicate and an optional per-key
// logit bias; tiled online softmax on the register tiles of tiles.h. Included only by
// kernel files (-O3 -march=native).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/kokkos/tiles.h"
#include "core/tensors.h"

namespace attntune {
namespace tiles {

/// Per-thread scratch of a GatherTile, sized for `rows` stacked query rows (heads x Br)
/// and Bc keys.
struct GatherScratch {
  int64_t brp = 0, bcp = 0, dp = 0;
  AlignedFloats q, kt, s, v, acc;  // cache-line aligned: vector loads of a row read one line
  std::vector<float> m, l;
  std::vector<const float*> vrow;
  std::vector<uint8_t> ok;  // the predicate of one tile, [Br][Bc], shared by the heads
  GatherScratch(int64_t d, int64_t rows, int64_t bc)
      : brp(RoundUp(rows, kWideRowTile)), bcp(RoundUp(bc, kColTile)), dp(RoundUp(d, kColTile)),
        q(brp * d), kt(d * bcp), s(brp * bcp), v(d % kColTile == 0 ? 0 : bcp * dp),
        acc(brp * dp), m(brp), l(brp), vrow(bcp), ok(rows * bcp) {}
};

/// O[rows] of the query heads hq0 .. hq0 + heads - 1 of batch b (heads of one KV head)
/// = softmax over the allowed keys of (scaled logits + bias[j]) times V. The heads'
/// rows are stacked (row g * nr + r is rows[r] of head hq0 + g), so that each tile of
/// keys is gathered and transposed once for all of them. `keys` in any order;
/// keys[0, n_all) are attended by every row (no predicate: whole tiles of them skip the
/// mask); for n >= n_all, allowed(r, n) says whether rows[r] attends keys[n] (the same
/// for every head; called once per (r, n), n increasing within each r). Rows with no
/// allowed key get zeros.
template <class Allowed>
void GatherTile(const Tensors& t, GatherScratch& w, int64_t bc, int64_t b, int64_t hq0,
                int64_t heads, const int64_t* rows, int64_t nr, const int64_t* keys, int64_t nk,
                int64_t n_all, const float* bias, Allowed& allowed, float* out) {
  const Shape& s = t.shape;
  const int64_t d = s.d, dp = w.dp, bcp = w.bcp;
  const int64_t hkv = hq0 / s.Group();
  const int64_t rt = heads * nr;  // stacked rows
  const int64_t nrp = RoundUp(rt, kWideRowTile);
  const float kNegInf = -std::numeric_limits<float>::infinity();
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  float* __restrict q = w.q.data();
  for (int64_t r = 0; r < nrp; ++r) {
    if (r < rt) {
      const float* __restrict src = t.Q(b, hq0 + r / nr, rows[r % nr]);
      for (int64_t c = 0; c < d; ++c) q[r * d + c] = src[c] * scale;
    } else {
      std::fill(q + r * d, q + (r + 1) * d, 0.0f);
    }
  }
  std::fill(w.acc.begin(), w.acc.begin() + nrp * dp, 0.0f);
  std::fill(w.m.begin(), w.m.begin() + nrp, kNegInf);
  std::fill(w.l.begin(), w.l.begin() + nrp, 0.0f);
  const float* kbase = t.K(b, hkv, 0);
  const float* vbase = t.V(b, hkv, 0);
  const float* krow[512];  // Bc <= 512 (the implementations' bound)
  for (int64_t n0 = 0; n0 < nk; n0 += bc) {
    const int64_t nc = std::min(bc, nk - n0), ncp = RoundUp(nc, kColTile);
    for (int64_t j = 0; j < nc; ++j) krow[j] = kbase + keys[n0 + j] * d;
    float* __restrict kt = w.kt.data();
    TransposeRows(krow, nc, ncp, d, kt, bcp);
    // V rows in place when d is a whole number of 32-column tiles, else a padded copy.
    const float** vrow = w.vrow.data();
    for (int64_t j = 0; j < nc; ++j) {
      const float* src = vbase + keys[n0 + j] * d;
      if (w.v.empty()) {
        vrow[j] = src;
      } else {
        float* dst = w.v.data() + j * dp;
        std::copy(src, src + d, dst);
        std::fill(dst + d, dst + dp, 0.0f);
        vrow[j] = dst;
      }
    }
    float kbias[512];  // bias of this tile's keys, gathered once for all rows
    if (bias != nullptr) {
      for (int64_t j = 0; j < nc; ++j) kbias[j] = bias[keys[n0 + j]];
    }
    // Keys [n0, first_masked) of the tile need no predicate; the rest's, once per row.
    const int64_t first_masked = std::max(n0, std::min(n0 + nc, n_all));
    for (int64_t r = 0; r < nr; ++r) {
      for (int64_t j = first_masked - n0; j < nc; ++j) w.ok[r * bcp + j] = allowed(r, n0 + j);
    }
    float* sc = w.s.data();
    for (int64_t r = 0; r < nrp; r += kWideRowTile) {
      for (int64_t j = 0; j < ncp; j += kColTile) {
        TileQK<kWideRowTile>(q + r * d, d, kt + j, bcp, d, sc + r * bcp + j, bcp);
      }
    }
    // Mask and bias, then the online-softmax update (as in windowed.cpp).
    for (int64_t r = 0; r < nrp; ++r) {
      float* __restrict row = sc + r * bcp;
      if (r >= rt) {
        std::fill(row, row + ncp, 0.0f);
        continue;
      }
      if (bias != nullptr) {
        for (int64_t j = 0; j < nc; ++j) row[j] += kbias[j];
      }
      const uint8_t* ok = w.ok.data() + (r % nr) * bcp;
      for (int64_t j = first_masked - n0; j < nc; ++j) row[j] = ok[j] ? row[j] : kNegInf;
      std::fill(row + nc, row + ncp, kNegInf);
      OnlineSoftmaxRow(row, ncp, w.m[r], w.l[r], w.acc.data() + r * dp, dp);
    }
    for (int64_t r = 0; r < nrp; r += kWideRowTile) {
      for (int64_t c = 0; c < dp; c += kColTile) {
        TilePVRows<kWideRowTile>(sc + r * bcp, bcp, vrow, c, nc, w.acc.data() + r * dp + c, dp);
      }
    }
  }
  for (int64_t r = 0; r < rt; ++r) {
    const int64_t g = r / nr, i = rows[r % nr];
    float* __restrict o = out + OutIndex(s, b, hq0 + g, i, 0);
    const float* __restrict acc = w.acc.data() + r * dp;
    if (w.l[r] != 0.0f) {  // NaN (a non-finite input, unchecked) stays NaN
      const float inv = 1.0f / w.l[r];
      for (int64_t c = 0; c < d; ++c) o[c] = acc[c] * inv;
    } else {
      std::fill(o, o + d, 0.0f);  // S(i) is empty
    }
  }
}

}  // namespace tiles
}  // namespace attntune
