// Row-group attention over keys laid out in panels (used by lsh and hax): the keys of
// one KV head, in the order a kernel wants them (lsh: (bin, position)), are copied once
// into K^T panels of 16 columns ([panel][d][16], contiguous, so that an R x 16 or R x 32
// score tile reads sequential memory) and V rows ([n][dp]). A group of R = kGroupRows
// query rows (one register tile) then attends any column range of that layout, starting
// at any column (a permute of two panels), with its own per-row masks, so a band of
// per-row windows costs its width rounded up to 16, not the union of a whole query block.
// Included only by kernel files (-O3 -march=native).
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

// The panel width is one native vector of floats. AVX-512 (32 vector registers): panels
// of 16 columns, tiles of up to 16 accumulator vectors (8 rows x 2 panels), pieces that
// start at any column (a two-panel permute, vpermt2ps) and a tail of at most kDotCols
// columns as dot products. AVX2 (16 registers): panels of 8 columns, tiles of 8
// accumulators (8 rows x 1 panel or 4 rows x 2: with 16 the accumulators alone filled the
// register file and the tile spilled on every step), pieces that start on a panel (AVX2
// has no two-source permute with run-time indices: GCC lowered it lane by lane) and no
// dot-product columns (a tail is under one 8-column panel).
#if defined(__AVX512F__)
constexpr int64_t kPanel = 16;
constexpr int kTileAcc = 16;
constexpr bool kShiftedPieces = true;
constexpr int64_t kDotCols = 8;
#else
constexpr int64_t kPanel = 8;
constexpr int kTileAcc = 8;
constexpr bool kShiftedPieces = false;
constexpr int64_t kDotCols = 0;
#endif
// Query rows of a row group: 8 (the union of 8 same-bin rows' windows is barely wider
// than 4's, and a group's fixed costs are shared by more rows). A group may hold rows of
// several bins (segments); a segment of R = 1, 2 or 4 rows or fewer runs on a tile of R
// rows and proportionally more columns, so that small bins do not pay for 8 rows.
constexpr int64_t kGroupRows = 8;

// The tile rows for a segment of m <= kGroupRows rows: the next power of two.
inline int64_t TileRows(int64_t m) { return m <= 1 ? 1 : m <= 2 ? 2 : m <= 4 ? 4 : 8; }

// K^T panels per score tile of R rows: as many as kTileAcc accumulators allow, at most
// 64 columns (a piece's width is rounded up to whole tiles, then halves of them).
template <int R>
constexpr int TilePanels() {
  return kTileAcc / R < 64 / kPanel ? kTileAcc / R : static_cast<int>(64 / kPanel);
}
// V vectors per P·V tile of R rows: as many as kTileAcc allow, at most kColTile columns
// (the padded head dimension is a multiple of kColTile).
template <int R>
constexpr int PVVecs() {
  return kTileAcc / R < kColTile / kPanel ? kTileAcc / R : static_cast<int>(kColTile / kPanel);
}

// The first column of a piece that must cover column c: c itself where pieces may start
// anywhere, else c's panel.
inline int64_t PieceStart(int64_t c) { return kShiftedPieces ? c : c / kPanel * kPanel; }

// One panel row of kPanel floats as a GCC/Clang vector (one register on AVX-512 and AVX2;
// split by the compiler on narrower ISAs). aligned(4): loads and stores may be unaligned.
typedef float PanelVec __attribute__((vector_size(kPanel * sizeof(float)), aligned(4)));

typedef int32_t PanelIdx __attribute__((vector_size(kPanel * sizeof(int32_t))));

// GCC's two-source shuffle: lane u of the result is lane idx[u] mod 32 of a:b. Clang has
// no shuffle with run-time indices; its lane loop serves the fuzz and sanitizer builds.
inline PanelVec Shuffle2(const PanelVec& a, const PanelVec& b, const PanelIdx& idx) {
#if defined(__clang__)
  PanelVec out;
  for (int u = 0; u < kPanel; ++u) {
    const int i = idx[u] & (2 * kPanel - 1);
    out[u] = i < kPanel ? a[i] : b[i - kPanel];
  }
  return out;
#else
  return __builtin_shuffle(a, b, idx);
#endif
}

// Row k of the 16 columns that start `shift` columns into panel kp (shift in [0, 16)):
// the panel's row k when shift = 0, else lanes shift.. of it and the next panel's.
// With AVX-512 a two-source permute (vpermt2ps).
template <bool kShifted>
inline PanelVec PanelRow(const float* kp, int64_t k, int64_t pstride, const PanelIdx& idx) {
  const PanelVec a = *reinterpret_cast<const PanelVec*>(kp + k * kPanel);
  if (!kShifted) return a;
  const PanelVec b = *reinterpret_cast<const PanelVec*>(kp + pstride + k * kPanel);
  return Shuffle2(a, b, idx);
}

// s[0..R)[0..kPanel*NP) = q[0..R)[0..d) · the kPanel*NP columns that start `shift`
// columns into panel kp (panels [d][kPanel]; shift in [0, kPanel), 0 unless
// kShiftedPieces: a column range need not start on a panel, so that a window costs its
// width rounded up to a panel, not its ends rounded out), NP <= TilePanels<R>(), R in
// {1, 2, 4, 8}. Written with vector types: the plain loops' 16-wide inner loop made the
// compiler vectorise across the rows instead (shuffles, 4x slower).
template <int R, int NP, bool kShifted>
inline void TileQKPanels(const float* __restrict q, int64_t ldq, const float* __restrict kp,
                         int64_t shift, int64_t d, float* __restrict s, int64_t lds) {
  PanelIdx idx;
  for (int u = 0; u < kPanel; ++u) idx[u] = static_cast<int32_t>(shift + u);
  PanelVec c[R][NP];
  for (int64_t r = 0; r < R; ++r) {
    for (int p = 0; p < NP; ++p) c[r][p] = PanelVec{};
  }
  const int64_t pstride = d * kPanel;
  int64_t k = 0;
  if constexpr (2 * R * NP <= kTileAcc) {
    // A narrow tile gives only R x NP independent FMA chains: run even and odd k in
    // separate accumulators, added at the end (where twice as many fit the registers).
    PanelVec e[R][NP];
    for (int64_t r = 0; r < R; ++r) {
      for (int p = 0; p < NP; ++p) e[r][p] = PanelVec{};
    }
    for (; k + 2 <= d; k += 2) {
      PanelVec k0[NP], k1[NP];
      for (int p = 0; p < NP; ++p) {
        k0[p] = PanelRow<kShifted>(kp + p * pstride, k, pstride, idx);
        k1[p] = PanelRow<kShifted>(kp + p * pstride, k + 1, pstride, idx);
      }
      for (int64_t r = 0; r < R; ++r) {
        for (int p = 0; p < NP; ++p) {
          c[r][p] += q[r * ldq + k] * k0[p];
          e[r][p] += q[r * ldq + k + 1] * k1[p];
        }
      }
    }
    for (int64_t r = 0; r < R; ++r) {
      for (int p = 0; p < NP; ++p) c[r][p] += e[r][p];
    }
  }
  for (; k < d; ++k) {
    PanelVec kv[NP];
    for (int p = 0; p < NP; ++p) kv[p] = PanelRow<kShifted>(kp + p * pstride, k, pstride, idx);
    for (int64_t r = 0; r < R; ++r) {
      const float a = q[r * ldq + k];
      for (int p = 0; p < NP; ++p) c[r][p] += a * kv[p];
    }
  }
  for (int64_t r = 0; r < R; ++r) {
    for (int p = 0; p < NP; ++p) *reinterpret_cast<PanelVec*>(s + r * lds + p * kPanel) = c[r][p];
  }
}

// o[0..R)[0..kPanel*NV) += p[0..R)[0..nc) · v[0..nc)[0..kPanel*NV) (V rows ldv apart), NV
// <= PVVecs<R>(): the accumulators as vector types, one register each (AVX2:
// tiles::TilePV's 8 x 32 floats were twice the register file).
template <int R, int NV>
inline void TilePVPanels(const float* __restrict p, int64_t ldp, const float* __restrict v,
                         int64_t ldv, int64_t nc, float* __restrict o, int64_t ldo) {
  auto at = [](const float* x) { return *reinterpret_cast<const PanelVec*>(x); };
  PanelVec c[R][NV];
  for (int64_t r = 0; r < R; ++r) {
    for (int u = 0; u < NV; ++u) c[r][u] = at(o + r * ldo + u * kPanel);
  }
  for (int64_t j = 0; j < nc; ++j) {
    PanelVec vj[NV];
    for (int u = 0; u < NV; ++u) vj[u] = at(v + j * ldv + u * kPanel);
    for (int64_t r = 0; r < R; ++r) {
      const float a = p[r * ldp + j];
      for (int u = 0; u < NV; ++u) c[r][u] += a * vj[u];
    }
  }
  for (int64_t r = 0; r < R; ++r) {
    for (int u = 0; u < NV; ++u) *reinterpret_cast<PanelVec*>(o + r * ldo + u * kPanel) = c[r][u];
  }
}

// Lanes of a where the mask m is set (all bits), else those of b.
inline PanelVec Select(const PanelIdx& m, const PanelVec& a, const PanelVec& b) {
  return reinterpret_cast<PanelVec>((reinterpret_cast<PanelIdx>(a) & m) |
                                    (reinterpret_cast<PanelIdx>(b) & ~m));
}

// tiles::ExpNonPositive on kPanel lanes, the same operations: its scalar loop did not
// vectorise on AVX2 (GCC kept the selects as branches: "control flow in loop").
inline PanelVec ExpNonPositiveVec(const PanelVec& x) {
  const PanelVec zero = {}, lo = zero - 87.0f;
  const PanelVec xc = Select(x >= lo, Select(x <= zero, x, zero), lo);
  const float kRound = 12582912.0f;  // 1.5 * 2^23: adding and subtracting it rounds
  const PanelVec n = (xc * 1.44269504088896341f + kRound) - kRound;
  PanelVec r = xc - n * 0.693359375f;
  r = r - n * -2.12194440e-4f;
  PanelVec p = zero + 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  p = p * r * r + r + 1.0f;
  const PanelIdx bits = (__builtin_convertvector(n, PanelIdx) + 127) << 23;  // 2^n
  const PanelVec e = p * reinterpret_cast<PanelVec>(bits);
  return Select(x != x, x, Select(x < lo, zero, e));
}

// One row's online-softmax step over row[0..n) (masked -inf, n a multiple of kPanel), as
// tiles::OnlineSoftmaxRow, with ExpNonPositiveVec.
inline bool SoftmaxRowVec(float* __restrict row, int64_t n, float& m, float& l,
                          float* __restrict acc, int64_t dp) {
  const float mnew = RowMax(row, n, m);
  if (mnew == -std::numeric_limits<float>::infinity()) {
    NoKeyYet(row, n, l);
    return false;
  }
  PanelVec sum = {};
  for (int64_t j = 0; j < n; j += kPanel) {
    PanelVec& v = *reinterpret_cast<PanelVec*>(row + j);
    v = ExpNonPositiveVec(v - mnew);
    sum += v;
  }
  float total = 0.0f;
  for (int u = 0; u < kPanel; ++u) total += sum[u];
  AdvanceRunningMax(mnew, total, m, l, acc, dp);
  return true;
}

// One level of LaneSums: a and c hold blocks of W lanes (one row's partial sums per
// block); the result holds blocks of W / 2: block 2b the sum of block b's halves of a,
// block 2b + 1 that of c.
template <int W>
inline PanelVec HalveBlocks(const PanelVec& a, const PanelVec& c) {
  PanelIdx lo, hi;
  for (int u = 0; u < kPanel; ++u) {
    const int h = W / 2, nb = u / h, from = nb % 2 == 0 ? 0 : kPanel;
    lo[u] = from + nb / 2 * W + u % h;
    hi[u] = lo[u] + h;
  }
  return Shuffle2(a, c, lo) + Shuffle2(a, c, hi);
}

// The levels of LaneSums: N vectors of blocks of W lanes down to one vector.
template <int W, int N>
inline void HalveLevels(PanelVec* v) {
  if constexpr (N > 1) {
    for (int i = 0; i < N / 2; ++i) v[i] = HalveBlocks<W>(v[i], v[i + N / 2]);
    HalveLevels<W / 2, N / 2>(v);
  }
}

// out[r] = the sum of v[r]'s 16 lanes, r < R (a power of two <= 16), by halving: R - 1
// pairs of shuffles and adds instead of R x 15 dependent scalar adds (the lane sums were
// most of a dot-product column's time). Each level pairs vector i with i + N / 2 and puts
// the pair's blocks side by side, so block r of the last vector holds row r (the levels
// append row r's bits from the highest). v is overwritten. The order of the additions
// differs from a sequential sum (fp32 rounding only).
template <int R>
inline void LaneSums(PanelVec* v, float* out) {
  static_assert(R >= 1 && R <= kPanel && (R & (R - 1)) == 0, "R: a power of two <= 16");
  if constexpr (R == 1) {
    float sum = 0.0f;
    for (int u = 0; u < kPanel; ++u) sum += v[0][u];
    out[0] = sum;
  } else {
    HalveLevels<kPanel, R>(v);
    constexpr int kWidth = kPanel / R;  // lanes per row left in v[0]
    for (int r = 0; r < R; ++r) {
      float sum = 0.0f;
      for (int u = 0; u < kWidth; ++u) sum += v[0][r * kWidth + u];
      out[r] = sum;
    }
  }
}

/// Keys of one KV head in a chosen order: column n holds key keys[n]. kt: panels of
/// K^T (zero beyond the last key); v: the V rows in the same order ([n][dp], zero-padded
/// to whole 32-column tiles), so that a window of columns reads V sequentially (read in
/// place, (bin, position) order made every row of a window a cache miss).
struct PanelKv {
  int64_t n = 0, dp = 0, d = 0;
  AlignedFloats kt, v;
  const float* kbase = nullptr;  // K row 0 of the head: column c's K row is kbase + keys[c] * d
  const int64_t* keys = nullptr;

  const float* KRow(int64_t col) const { return kbase + keys[col] * d; }

  const float* Panel(int64_t col) const { return kt.data() + (col / kPanel) * d * kPanel; }
  const float* V(int64_t col) const { return v.data() + col * dp; }  // rows dp apart

  // Copies the keys (`keys_` must outlive the panels: KRow reads it); `kbase_`/`vbase` =
  // K/V row 0 of the head (rows of d floats). The rows are read in `keys` order, i.e.
  // scattered: those of the panel after next are prefetched (without it the copy waited
  // on DRAM for every row).
  void Build(const float* kbase_, const float* vbase, int64_t d_, const int64_t* keys_,
             int64_t nkeys) {
    kbase = kbase_;
    keys = keys_;
    d = d_;
    n = nkeys;
    dp = RoundUp(d, kColTile);
    // + 2: a 2-panel tile at a shift reads up to two panels past the last key's.
    const int64_t panels = (n + kPanel - 1) / kPanel + 2;
    kt.resize(static_cast<size_t>(panels * d * kPanel));
    v.resize(static_cast<size_t>(std::max<int64_t>(n, 1) * dp));
    constexpr int64_t kAhead = 2 * kPanel;
    auto prefetch = [&](int64_t j) {
      if (j >= n) return;
      for (int64_t c = 0; c < d; c += 16) {
        PrefetchRead(kbase + keys[j] * d + c);
        PrefetchRead(vbase + keys[j] * d + c);
      }
    };
    for (int64_t j = 0; j < kAhead; ++j) prefetch(j);
    const float* rows[kPanel];
    for (int64_t p = 0; p < panels; ++p) {
      const int64_t n0 = p * kPanel, nc = std::max<int64_t>(0, std::min(kPanel, n - n0));
      for (int64_t u = 0; u < nc; ++u) {
        prefetch(n0 + u + kAhead);
        rows[u] = kbase + keys[n0 + u] * d;
      }
      TransposeRows(rows, nc, kPanel, d, kt.data() + p * d * kPanel, kPanel);
      for (int64_t u = 0; u < nc; ++u) {
        const float* src = vbase + keys[n0 + u] * d;
        float* dst = v.data() + (n0 + u) * dp;
        std::copy(src, src + d, dst);
        std::fill(dst + d, dst + dp, 0.0f);
      }
    }
  }
};

/// Online-softmax state of up to kGroupRows query rows (one register tile).
struct RowGroup {
  int64_t d = 0, dp = 0, lds = 0, nr = 0;
  AlignedFloats q, s, acc;
  float m[kGroupRows], l[kGroupRows];

  void Reserve(int64_t d_, int64_t max_cols) {
    d = d_;
    dp = RoundUp(d, kColTile);
    lds = RoundUp(std::max<int64_t>(max_cols, kColTile), kColTile);
    if (static_cast<int64_t>(s.size()) < kGroupRows * lds) s.resize(static_cast<size_t>(kGroupRows * lds));
    q.resize(static_cast<size_t>(kGroupRows * d));
    acc.resize(static_cast<size_t>(kGroupRows * dp));
  }

  // Query rows qbase + rows[r] * d, r < nr <= kGroupRows.
  void Begin(const float* qbase, const int64_t* rows, int64_t nr_) {
    nr = nr_;
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
    for (int64_t r = 0; r < kGroupRows; ++r) {
      float* __restrict dst = q.data() + r * d;
      if (r < nr) {
        const float* __restrict src = qbase + rows[r] * d;
        for (int64_t c = 0; c < d; ++c) dst[c] = src[c] * scale;
      } else {
        std::fill(dst, dst + d, 0.0f);
      }
      m[r] = -std::numeric_limits<float>::infinity();
      l[r] = 0.0f;
    }
    std::fill(acc.begin(), acc.end(), 0.0f);
  }

  // Scores of columns [c0, c0 + ncols) of `kv` into s[.][0, ncols) (scores of columns
  // up to the next multiple of 16 undefined: the callers mask them). Whole panels, and
  // a tail of at most kDotCols columns as dot products over d: a 16-column panel costs
  // ~2 x 8 x d vector operations whatever it holds, a dot product of the 8 rows with one
  // key ~2 x 8 x d / 16 plus the lane sums (a window union of ~35 keys was 48 columns).
  // The panel columns are computed for the tile rows [off, off + R) only, the
  // dot-product columns for every row.
  template <int R = kGroupRows>
  void Scores(const PanelKv& kv, int64_t c0, int64_t ncols, int64_t off = 0) {
    const int64_t panel_cols = PanelCols(ncols);
    if (panel_cols > 0) Scores<R>(kv.Panel(c0), c0 % kPanel, panel_cols, off);
    for (int64_t c = panel_cols; c < ncols; ++c) ScoreDot(kv.KRow(c0 + c), c);
  }

  // Prefetches the K rows that Scores(kv, c0, ncols) reads in place (its dot-product
  // columns): they sit at their keys' positions, scattered, and were a cache miss each
  // (perf put about half of the dot products' samples on the first load of the row).
  static void PrefetchScores(const PanelKv& kv, int64_t c0, int64_t ncols) {
    for (int64_t c = PanelCols(ncols); c < ncols; ++c) {
      const char* k = reinterpret_cast<const char*>(kv.KRow(c0 + c));
      for (int64_t off = 0; off < kv.d * static_cast<int64_t>(sizeof(float)); off += 64) {
        PrefetchRead(k + off);
      }
    }
  }

  // Of `ncols` columns, those Scores computes as whole panels (the rest: dot products).
  static int64_t PanelCols(int64_t ncols) {
    const int64_t rem = ncols % kPanel;
    return rem > kDotCols ? RoundUp(ncols, kPanel) : ncols - rem;
  }

  // s[r][col] = q[r] · k (d floats), r < kGroupRows.
  void ScoreDot(const float* __restrict k, int64_t col) {
    PanelVec acc[kGroupRows];
    for (int64_t r = 0; r < kGroupRows; ++r) acc[r] = PanelVec{};
    const int64_t d16 = d / kPanel * kPanel;
    for (int64_t e = 0; e < d16; e += kPanel) {
      const PanelVec kv = *reinterpret_cast<const PanelVec*>(k + e);
      for (int64_t r = 0; r < kGroupRows; ++r) {
        acc[r] += *reinterpret_cast<const PanelVec*>(q.data() + r * d + e) * kv;
      }
    }
    float sums[kGroupRows];
    LaneSums<kGroupRows>(acc, sums);
    for (int64_t r = 0; r < kGroupRows; ++r) {
      float sum = sums[r];
      for (int64_t e = d16; e < d; ++e) sum += q[r * d + e] * k[e];
      s[r * lds + col] = sum;
    }
  }

  // Scores of `ncp` columns (whole panels) starting `shift` columns into panel `kp`,
  // for the tile rows [off, off + R).
  template <int R>
  void Scores(const float* kp, int64_t shift, int64_t ncp, int64_t off) {
    if (shift == 0) {
      ScoresAt<R, false>(kp, 0, ncp, off);
    } else {
      ScoresAt<R, true>(kp, shift, ncp, off);
    }
  }
  template <int R, bool kShifted>
  void ScoresAt(const float* kp, int64_t shift, int64_t ncp, int64_t off) {
    ScoresRun<R, TilePanels<R>(), kShifted>(kp, shift, ncp, off, 0);
  }
  // Tiles of NP panels while they fit, then of NP / 2, ... from column c.
  template <int R, int NP, bool kShifted>
  void ScoresRun(const float* kp, int64_t shift, int64_t ncp, int64_t off, int64_t c) {
    const float* qt = q.data() + off * d;
    float* st = s.data() + off * lds;
    for (; c + NP * kPanel <= ncp; c += NP * kPanel) {
      TileQKPanels<R, NP, kShifted>(qt, d, kp + (c / kPanel) * d * kPanel, shift, d, st + c,
                                    lds);
    }
    if constexpr (NP > 1) ScoresRun<R, NP / 2, kShifted>(kp, shift, ncp, off, c);
  }

  // For the tile rows [off, off + R) after Scores<R>: the rows of [r0, r1) that are the
  // group's (r < nr) are updated, after `mask(r, row)` has set their disallowed scores
  // to -inf (columns [0, ncp)): online-softmax step, then acc += P[:, [plo, phi)) · V rows
  // [plo, phi) of `v` (rows dp apart). The tile's other rows get P = 0 (rows of another
  // segment keep their state).
  template <int R, class Mask>
  void Update(int64_t off, int64_t r0, int64_t r1, int64_t ncp, const float* v, int64_t plo,
              int64_t phi, const Mask& mask) {
    bool any = false;
    for (int64_t r = off; r < off + R; ++r) {
      float* __restrict row = s.data() + r * lds;
      if (r < r0 || r >= std::min(r1, nr)) {
        std::fill(row, row + ncp, 0.0f);
        continue;
      }
      mask(r, row);
      if (SoftmaxRowVec(row, ncp, m[r], l[r], acc.data() + r * dp, dp)) any = true;
    }
    if (!any || phi <= plo) return;
    constexpr int kNV = PVVecs<R>();
    for (int64_t c = 0; c < dp; c += kPanel * kNV) {
      TilePVPanels<R, kNV>(s.data() + off * lds + plo, lds, v + plo * dp + c, dp, phi - plo,
                           acc.data() + off * dp + c, dp);
    }
  }

  // Output rows obase + rows[r] * d.
  void Store(float* obase, const int64_t* rows) const {
    for (int64_t r = 0; r < nr; ++r) {
      float* __restrict o = obase + rows[r] * d;
      const float* __restrict a = acc.data() + r * dp;
      if (l[r] != 0.0f) {  // NaN (a non-finite input, unchecked) stays NaN
        const float inv = 1.0f / l[r];
        for (int64_t c = 0; c < d; ++c) o[c] = a[c] * inv;
      } else {
        std::fill(o, o + d, 0.0f);  // S(i) is empty
      }
    }
  }
};

}  // namespace tiles
}  // namespace attntune
