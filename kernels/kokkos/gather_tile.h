// The core of the sparse kernels: one block of query rows of one (batch, query head)
// attends a list of keys (gathered, Bc at a time, into contiguous transposed scratch)
// with an element predicate and an optional per-key logit bias; tiled online softmax
// on the register tiles of tiles.h. Included only by kernel files (-O3 -march=native).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "kernels/kokkos/tiles.h"
#include "kernels/spec/tensors.h"

namespace attntune {
namespace tiles {

/// Per-thread scratch of a GatherTile, sized for Br x Bc tiles.
struct GatherScratch {
  int64_t brp = 0, bcp = 0, dp = 0;
  std::vector<float> q, kt, s, v, acc, m, l;
  GatherScratch(int64_t d, int64_t br, int64_t bc)
      : brp(RoundUp(br, kRowTile)), bcp(RoundUp(bc, kColTile)), dp(RoundUp(d, kColTile)),
        q(brp * d), kt(d * bcp), s(brp * bcp), v(bcp * dp), acc(brp * dp), m(brp), l(brp) {}
};

/// O[rows] of query head (b, hq) = softmax over the allowed keys of (scaled logits +
/// bias[j]) times V. `keys` in any order; keys[0, n_all) are attended by every row (no
/// predicate: whole tiles of them skip the mask); for n >= n_all, allowed(r, n) says
/// whether row r attends keys[n] (called for n increasing within each row). Rows with
/// no allowed key get zeros. With `ml_out`, row i's softmax max and sum (m, l; l = 0
/// when no key) go to ml_out[2i], ml_out[2i + 1], so that a second pass over other keys
/// can merge into the row (hax).
template <class Allowed>
void GatherTile(const Tensors& t, GatherScratch& w, int64_t bc, int64_t b, int64_t hq,
                const int64_t* rows, int64_t nr, const int64_t* keys, int64_t nk,
                int64_t n_all, const float* bias, Allowed& allowed, float* out,
                float* ml_out = nullptr) {
  const Shape& s = t.shape;
  const int64_t d = s.d, dp = w.dp, bcp = w.bcp;
  const int64_t hkv = hq / s.Group();
  const int64_t nrp = RoundUp(nr, kRowTile);
  const float kNegInf = -std::numeric_limits<float>::infinity();
  const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
  float* __restrict q = w.q.data();
  for (int64_t r = 0; r < nrp; ++r) {
    if (r < nr) {
      const float* __restrict src = t.Q(b, hq, rows[r]);
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
    for (int64_t c = 0; c < d; ++c) {
      for (int64_t j = 0; j < nc; ++j) kt[c * bcp + j] = krow[j][c];
      for (int64_t j = nc; j < ncp; ++j) kt[c * bcp + j] = 0.0f;
    }
    float* __restrict v = w.v.data();
    for (int64_t j = 0; j < nc; ++j) {
      const float* src = vbase + keys[n0 + j] * d;
      std::copy(src, src + d, v + j * dp);
      std::fill(v + j * dp + d, v + (j + 1) * dp, 0.0f);
    }
    float kbias[512];  // bias of this tile's keys, gathered once for all rows
    if (bias != nullptr) {
      for (int64_t j = 0; j < nc; ++j) kbias[j] = bias[keys[n0 + j]];
    }
    // Keys [n0, first_masked) of the tile need no predicate.
    const int64_t first_masked = std::max(n0, std::min(n0 + nc, n_all));
    float* sc = w.s.data();
    for (int64_t r = 0; r < nrp; r += kRowTile) {
      for (int64_t j = 0; j < ncp; j += kColTile) {
        TileQK(q + r * d, d, kt + j, bcp, d, sc + r * bcp + j, bcp);
      }
    }
    // Mask and bias, then the online-softmax update (as in windowed.cpp).
    for (int64_t r = 0; r < nrp; ++r) {
      float* __restrict row = sc + r * bcp;
      if (r >= nr) {
        std::fill(row, row + ncp, 0.0f);
        continue;
      }
      if (bias != nullptr) {
        for (int64_t j = 0; j < nc; ++j) row[j] += kbias[j];
      }
      for (int64_t j = first_masked - n0; j < nc; ++j) {
        if (!allowed(r, n0 + j)) row[j] = kNegInf;
      }
      std::fill(row + nc, row + ncp, kNegInf);
      float lane[kLanes];
      std::fill(lane, lane + kLanes, kNegInf);
      for (int64_t j = 0; j < ncp; j += kLanes) {
        for (int64_t u = 0; u < kLanes; ++u) lane[u] = row[j + u] > lane[u] ? row[j + u] : lane[u];
      }
      float mnew = w.m[r];
      for (int64_t u = 0; u < kLanes; ++u) mnew = std::max(mnew, lane[u]);
      if (mnew == kNegInf) {
        std::fill(row, row + ncp, 0.0f);
        continue;
      }
      const float total = ExpShiftSum(row, ncp, mnew);
      if (mnew != w.m[r]) {
        const float alpha = std::exp(w.m[r] - mnew);
        float* __restrict acc = w.acc.data() + r * dp;
        for (int64_t c = 0; c < dp; ++c) acc[c] *= alpha;
        w.l[r] *= alpha;
        w.m[r] = mnew;
      }
      w.l[r] += total;
    }
    for (int64_t r = 0; r < nrp; r += kRowTile) {
      for (int64_t c = 0; c < dp; c += kColTile) {
        TilePV(sc + r * bcp, bcp, v + c, dp, nc, w.acc.data() + r * dp + c, dp);
      }
    }
  }
  for (int64_t r = 0; r < nr; ++r) {
    if (ml_out != nullptr) {
      ml_out[2 * rows[r]] = w.m[r];
      ml_out[2 * rows[r] + 1] = w.l[r];
    }
    float* __restrict o = out + OutIndex(s, b, hq, rows[r], 0);
    const float* __restrict acc = w.acc.data() + r * dp;
    if (w.l[r] > 0.0f) {
      const float inv = 1.0f / w.l[r];
      for (int64_t c = 0; c < d; ++c) o[c] = acc[c] * inv;
    } else {
      std::fill(o, o + d, 0.0f);  // S(i) is empty
    }
  }
}

}  // namespace tiles
}  // namespace attntune
