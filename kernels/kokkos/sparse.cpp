// Launchers of the sparse kernel families: a selection phase per KV head (scores,
// prefix top-k eviction times, bins sorted by (bin, position)), then the attention: for
// ks, dma and the generic executor one task per query block that gathers the union of
// its rows' keys once (GatherTile); for lsh and hax groups of same-bin rows over keys in
// (bin, position) order (panel_tile.h).
#include "kernels/kokkos/sparse.h"

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <limits>
#include <memory>
#include <type_traits>

#include "kernels/kokkos/gather_tile.h"
#include "kernels/kokkos/host_tasks.h"
#include "kernels/selection/lsh_layout.h"
#include "kernels/kokkos/panel_tile.h"
#include "core/check.h"

namespace attntune {

namespace {

using tiles::GatherScratch;
using tiles::GatherTile;
using tiles::kPanel;
using tiles::kGroupRows;
using tiles::TileRows;
using tiles::PieceStart;
using tiles::PanelKv;
using tiles::PrefetchRead;
using tiles::PrefetchWrite;
using tiles::RoundUp;
using tiles::RowGroup;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// This thread's scratch for (heads x Br) x Bc tiles (kept between tasks of the same size).
GatherScratch& Scratch(int64_t d, int64_t heads, const SparseTiles& tl) {
  thread_local std::unique_ptr<GatherScratch> w;
  thread_local int64_t key[3] = {-1, -1, -1};
  const int64_t rows = heads * tl.br;
  if (!w || key[0] != d || key[1] != rows || key[2] != tl.bc) {
    w = std::make_unique<GatherScratch>(d, rows, tl.bc);
    key[0] = d;
    key[1] = rows;
    key[2] = tl.bc;
  }
  return *w;
}

void CheckInputs(const Tensors& t, const SparseTiles& tl) {
  const Shape& s = t.shape;
  ATTNTUNE_CHECK(tl.br >= 1 && tl.bc >= 1 && tl.bc <= 512);
  ATTNTUNE_CHECK(s.Hkv > 0 && s.Hq % s.Hkv == 0 && s.Lq <= s.Lk);
  // Positions and eviction times in int32 (PrefixTopKEvictions, the masks' lanes).
  ATTNTUNE_CHECK(s.Lk < std::numeric_limits<int32_t>::max());
  ATTNTUNE_CHECK(static_cast<int64_t>(t.q.size()) == s.QElems());
  ATTNTUNE_CHECK(static_cast<int64_t>(t.k.size()) == s.KvElems());
  ATTNTUNE_CHECK(static_cast<int64_t>(t.v.size()) == s.KvElems());
}

int64_t QueryBlocks(const Shape& s, const SparseTiles& tl) { return (s.Lq + tl.br - 1) / tl.br; }

// Prefix top-k of one KV head: key j belongs to S(i) iff j <= p(i) < evict[j] (a key
// that leaves the top-k of a prefix never returns), and snap[qb] = the top-k set at
// the first row of query block qb, ascending.
struct TopKHead {
  std::vector<int64_t> evict;
  std::vector<int64_t> snap_off, snap;
};

TopKHead SelectTopK(const Shape& s, const double* x, int64_t k, const SparseTiles& tl) {
  TopKHead h;
  const std::vector<int32_t> evict = PrefixTopKEvictions(x, s.Lk, k);
  h.evict.assign(evict.begin(), evict.end());
  // snap[qb] = {j <= p0 : evict[j] > p0}, p0 = the block's first key bound, ascending:
  // the previous block's set less the keys evicted since, then the keys that arrived
  // since and are still held (all larger), O(k + Br) per block. (Sorting a copy of the
  // heap per block took 235 ms of dma's selection at L=16384, w=1024.)
  const int64_t blocks = QueryBlocks(s, tl);
  h.snap_off.assign(1, 0);
  int64_t prev_off = 0, prev_end = 0, p_prev = -1;
  for (int64_t qb = 0; qb < blocks; ++qb) {
    const int64_t p0 = LastKey(s, qb * tl.br);
    for (int64_t n = prev_off; n < prev_end; ++n) {
      const int64_t j = h.snap[n];
      if (h.evict[j] > p0) h.snap.push_back(j);
    }
    for (int64_t j = p_prev + 1; j <= p0; ++j) {
      if (h.evict[j] > p0) h.snap.push_back(j);
    }
    prev_off = prev_end;
    prev_end = static_cast<int64_t>(h.snap.size());
    h.snap_off.push_back(prev_end);
    p_prev = std::max(p_prev, p0);
  }
  return h;
}

std::vector<TopKHead> SelectTopKAll(const Tensors& t, const std::vector<double>& scores,
                                    int64_t k, const SparseTiles& tl) {
  const Shape& s = t.shape;
  ATTNTUNE_CHECK(static_cast<int64_t>(scores.size()) == s.B * s.Hkv * s.Lk);
  std::vector<TopKHead> heads(static_cast<size_t>(s.B * s.Hkv));
  ParallelTasks("attntune::select::topk", s.B * s.Hkv, [&](int64_t h) {
    heads[h] = SelectTopK(s, scores.data() + h * s.Lk, k, tl);
  });
  return heads;
}

// The union of the top-k sets of rows [i0, i0 + nr) (i0 the first row of query block
// qb) in three runs, each ascending: the keys of the set at the first row that stay
// selected through the last (every row attends them), the others of that set (evicted
// during the rows), and the keys that enter during the rows.
struct TopKRuns {
  std::vector<int64_t> held, evicted, entering;
};

void TopKUnionRuns(const Shape& s, const TopKHead& h, int64_t qb, int64_t i0, int64_t nr,
                   TopKRuns* runs) {
  const int64_t p0 = LastKey(s, i0), plast = LastKey(s, i0 + nr - 1);
  runs->held.clear();
  runs->evicted.clear();
  runs->entering.clear();
  for (int64_t n = h.snap_off[qb]; n < h.snap_off[qb + 1]; ++n) {
    const int64_t j = h.snap[n];
    (h.evict[j] > plast ? runs->held : runs->evicted).push_back(j);
  }
  for (int64_t j = p0 + 1; j <= plast; ++j) {
    if (h.evict[j] > j) runs->entering.push_back(j);
  }
}

// The union as held | evicted | entering (GatherTile's order). Returns n_all: keys[0,
// n_all) stay selected for the whole block, so every row attends them.
int64_t TopKUnion(const Shape& s, const TopKHead& h, int64_t qb, int64_t i0, int64_t nr,
                  std::vector<int64_t>* keys) {
  thread_local TopKRuns runs;
  TopKUnionRuns(s, h, qb, i0, nr, &runs);
  keys->assign(runs.held.begin(), runs.held.end());
  keys->insert(keys->end(), runs.evicted.begin(), runs.evicted.end());
  keys->insert(keys->end(), runs.entering.begin(), runs.entering.end());
  return static_cast<int64_t>(runs.held.size());
}

std::vector<float> FloatBias(const std::vector<double>& scores) {
  return std::vector<float>(scores.begin(), scores.end());
}

// Columns of one score tile of a row group: Bc rounded up to whole panels.
int64_t PieceCols(const SparseTiles& tl) { return std::max(kPanel, RoundUp(tl.bc, kPanel)); }

// This thread's row-group state (kept between tasks).
RowGroup& Group(int64_t d, const SparseTiles& tl) {
  thread_local RowGroup g;
  g.Reserve(d, PieceCols(tl));
  return g;
}

// Queries in (bin, position) order sit far apart in memory (no hardware prefetch):
// fetch the Q rows and the output rows [n, end) (at most a row group) of KV head `head`
// while the previous group computes.
void PrefetchRows(const Tensors& t, const LshQueries& q, int64_t head, int64_t n, int64_t end,
                  float* out) {
  const Shape& s = t.shape;
  const int64_t b = head / s.Hkv, hq0 = head % s.Hkv * s.Group();
  const float* qbase = t.Q(b, hq0, 0);
  const float* obase = out + OutIndex(s, b, hq0, 0, 0);
  for (int64_t m = n; m < std::min(end, n + kGroupRows); ++m) {
    const char* src = reinterpret_cast<const char*>(qbase + q.rows[m] * s.d);
    const char* dst = reinterpret_cast<const char*>(obase + q.rows[m] * s.d);
    for (int64_t off = 0; off < s.d * static_cast<int64_t>(sizeof(float)); off += 64) {
      PrefetchRead(src + off);
      PrefetchWrite(dst + off);
    }
  }
}

// hax's ks part for the rows of one chunk: the union of their prefix top-k sets (keys,
// in panels) and each key's eviction time; row i attends key j iff j <= p(i) < evict.
// The keys come in three runs: those evicted during the chunk by eviction time, then
// those held for the whole chunk (every row attends them), then those that enter during
// the chunk by position. The keys that rows at positions [pmin, pmax] can attend (j <=
// pmax, evict > pmin) are then one range: a row group computes that range only, not the
// chunk's whole union (34.5 keys against 38.0 per group at L=16384, 32+32, 512 rows,
// counted; the range still holds keys that entered and left before the group's rows).
struct KsPart {
  PanelKv kv;
  std::vector<int64_t> keys, evict;
  int64_t n_evicted = 0, n_held = 0;
  // Column n is attended by the row at position p iff from[n] <= p < until[n]: the key's
  // position and eviction time, INT32_MIN and INT32_MAX for a held key, and a column past
  // the last key (kPanel of them: a piece ends before the next panel) never: the mask,
  // in int32 lanes, vectorises.
  std::vector<int32_t> from, until;

  // Keys [n_evicted, n_evicted + n_held) need no per-row predicate.
  bool Held(int64_t n) const { return n >= n_evicted && n < n_evicted + n_held; }

  // The range [*lo, *hi) of keys that some row at a position in [pmin, pmax] attends.
  void Range(int64_t pmin, int64_t pmax, int64_t* lo, int64_t* hi) const {
    *lo = std::upper_bound(evict.begin(), evict.begin() + n_evicted, pmin) - evict.begin();
    *hi = std::upper_bound(keys.begin() + n_evicted + n_held, keys.end(), pmax) - keys.begin();
  }
};

// The ks part of the rows [i0, i0 + nr) of KV head h (i0 the first row of query block
// qb).
void BuildKsPart(const Tensors& t, int64_t b, int64_t hkv, const TopKHead& h, int64_t qb,
                 int64_t i0, int64_t nr, KsPart* ks) {
  const Shape& s = t.shape;
  thread_local TopKRuns runs;
  TopKUnionRuns(s, h, qb, i0, nr, &runs);
  std::sort(runs.evicted.begin(), runs.evicted.end(),
            [&](int64_t a, int64_t c) { return h.evict[a] < h.evict[c]; });  // one per step
  ks->keys.assign(runs.evicted.begin(), runs.evicted.end());
  ks->keys.insert(ks->keys.end(), runs.held.begin(), runs.held.end());
  ks->keys.insert(ks->keys.end(), runs.entering.begin(), runs.entering.end());
  ks->n_evicted = static_cast<int64_t>(runs.evicted.size());
  ks->n_held = static_cast<int64_t>(runs.held.size());
  const size_t nk = ks->keys.size();
  ks->evict.resize(nk);
  for (size_t n = 0; n < nk; ++n) ks->evict[n] = h.evict[ks->keys[n]];
  constexpr int32_t kMin = std::numeric_limits<int32_t>::min();
  constexpr int32_t kMax = std::numeric_limits<int32_t>::max();
  ks->from.assign(nk + kPanel, kMax);
  ks->until.assign(nk + kPanel, kMin);
  for (size_t n = 0; n < nk; ++n) {
    const bool held = ks->Held(static_cast<int64_t>(n));
    ks->from[n] = held ? kMin : static_cast<int32_t>(ks->keys[n]);
    ks->until[n] = held ? kMax : static_cast<int32_t>(ks->evict[n]);
  }
  ks->kv.Build(t.K(b, hkv, 0), t.V(b, hkv, 0), s.d, ks->keys.data(),
               static_cast<int64_t>(ks->keys.size()));
}

// The keys of one KV head in (bin, position) order (lsh, hax), kept between calls: a
// fresh 2 x Lk x d floats per call cost ~12 ms of page faults at L = 16384, d = 128.
PanelKv& SortedKv() {
  thread_local PanelKv kv;
  return kv;
}

// A row group: rows [begin, end) (at most kGroupRows) of one (batch, KV head)'s sorted
// queries, in segments [begin, seg_end[0]), [seg_end[0], seg_end[1]), ...: each segment a
// run of one block's rows (one bin, overlapping windows). With small bins (8 hash bits:
// ~4 rows of a bin per hax chunk) a group holds several bins, so that the ks part and the
// group's fixed costs are shared by 8 rows, not by the few of one bin (a segment's lsh
// window runs on a tile of as few rows as it holds, RowGroup::Scores<R>).
struct GroupPlan {
  int64_t begin = 0, end = 0;
  int nseg = 0;
  int64_t seg_end[kGroupRows];
};

// The row groups of blocks [b0, b1) (consecutive rows): kGroupRows consecutive rows each
// (some may hold fewer), a segment ending at each block's end and at the group's. With
// `align` (lsh: no ks part to share), a block of kGroupRows rows or more starts a group,
// so that its rows fill whole tiles (lsh k=64, 8 bits, L=16384: 42.6 tile columns a row
// against 44.2 packed).
void PackGroups(const std::vector<LshBlock>& blocks, int64_t b0, int64_t b1, bool align,
                std::vector<GroupPlan>* groups) {
  groups->clear();
  GroupPlan g;
  for (int64_t x = b0; x < b1; ++x) {
    if (align && g.nseg > 0 && blocks[x].end - blocks[x].begin >= kGroupRows) {
      groups->push_back(g);
      g = GroupPlan();
    }
    for (int64_t n = blocks[x].begin; n < blocks[x].end;) {
      if (g.nseg == 0) g.begin = g.end = n;
      const int64_t e = std::min(blocks[x].end, g.begin + kGroupRows);
      g.end = e;
      g.seg_end[g.nseg++] = e;
      n = e;
      if (g.end - g.begin == kGroupRows) {
        groups->push_back(g);
        g = GroupPlan();
      }
    }
  }
  if (g.nseg > 0) groups->push_back(g);
}

// Each segment's window union [glo[x], ghi[x]) (empty: glo >= ghi), its start moved to
// where a piece may start.
void SegmentWindows(const LshQueries& q, const GroupPlan& gp, int64_t* glo, int64_t* ghi) {
  for (int x = 0; x < gp.nseg; ++x) {
    glo[x] = std::numeric_limits<int64_t>::max();
    ghi[x] = 0;
    for (int64_t n = x == 0 ? gp.begin : gp.seg_end[x - 1]; n < gp.seg_end[x]; ++n) {
      if (q.lo[n] < q.hi[n]) {
        glo[x] = std::min(glo[x], q.lo[n]);
        ghi[x] = std::max(ghi[x], q.hi[n]);
      }
    }
    glo[x] = PieceStart(std::min(glo[x], ghi[x]));
  }
}

// One row group of one (batch, KV head)'s sorted queries: each row attends its lsh
// window [lo, hi) of the sorted keys `kv`, a segment at a time, in pieces of whole panels
// covering the union of the segment's windows (a segment of m rows on a tile of
// TileRows(m) rows). With `ks` (hax), a key of the window whose top-k interval
// holds the row's position (evict[n] > p) is masked there, and the group's rows then
// attend the range of the ks part that their positions can reach, under its predicate:
// each key once. Pieces start at any column (Scores' shift) or, without kShiftedPieces,
// on the panel of their first column.
void LshGroup(const Tensors& t, const PanelKv& kv, const LshQueries& q, int64_t head,
              const GroupPlan& gp, const SparseTiles& tl, RowGroup& g, float* out,
              const KsPart* ks, const int32_t* evict) {
  const Shape& s = t.shape;
  const int64_t b = head / s.Hkv, hq0 = head % s.Hkv * s.Group();
  const int64_t n = gp.begin, nr = gp.end - gp.begin;
  const int64_t* rows = q.rows.data() + n;
  auto pos = [&](int64_t r) { return LastKey(s, rows[r] % s.Lq); };  // keys allowed: <= pos
  g.Begin(t.Q(b, hq0, 0), rows, nr);
  const int64_t w = PieceCols(tl);
  int64_t glo[kGroupRows], ghi[kGroupRows];
  SegmentWindows(q, gp, glo, ghi);
  int64_t klo = 0, khi = 0;
  if (ks != nullptr && nr > 0) {
    int64_t pmin = pos(0), pmax = pos(0);
    for (int64_t r = 1; r < nr; ++r) {
      pmin = std::min(pmin, pos(r));
      pmax = std::max(pmax, pos(r));
    }
    ks->Range(pmin, pmax, &klo, &khi);
    klo = PieceStart(klo);
  }
  // The last piece of each part may end in dot-product columns, which read K rows in
  // place: fetch them while the pieces before compute.
  for (int x = 0; x < gp.nseg; ++x) {
    if (glo[x] < ghi[x]) {
      const int64_t last = glo[x] + (ghi[x] - glo[x] - 1) / w * w;
      RowGroup::PrefetchScores(kv, last, ghi[x] - last);
    }
  }
  if (klo < khi) {
    const int64_t last = klo + (khi - klo - 1) / w * w;
    RowGroup::PrefetchScores(ks->kv, last, khi - last);
  }
  // Segment rows [r0, r1) on the tile rows [off, off + R).
  auto segment = [&](auto rows_tag, int64_t off, int64_t r0, int64_t r1, int64_t lo,
                     int64_t hi) {
    constexpr int R = decltype(rows_tag)::value;
    for (int64_t j0 = lo; j0 < hi; j0 += w) {
      const int64_t ncp = std::min(w, RoundUp(hi - j0, kPanel));
      g.Scores<R>(kv, j0, std::min(w, hi - j0), off);
      // Row r attends the columns u of its window [a, e), less (hax) those whose key its
      // ks set holds (evict > p): one pass in int32 lanes.
      auto mask = [&](int64_t r, float* __restrict row) {
        const int32_t a = static_cast<int32_t>(std::clamp<int64_t>(q.lo[n + r] - j0, 0, ncp));
        const int32_t e = static_cast<int32_t>(std::clamp<int64_t>(q.hi[n + r] - j0, 0, ncp));
        const int32_t nc = static_cast<int32_t>(ncp);
        if (evict == nullptr) {
          for (int32_t u = 0; u < nc; ++u) row[u] = u >= a && u < e ? row[u] : kNegInf;
        } else {
          const int32_t p = static_cast<int32_t>(pos(r));  // keys in the window are <= p
          const int32_t* ev = evict + j0;
          for (int32_t u = 0; u < nc; ++u) {
            row[u] = u >= a && u < e && ev[u] <= p ? row[u] : kNegInf;
          }
        }
      };
      g.Update<R>(off, r0, r1, ncp, kv.V(j0), 0, std::min(ncp, hi - j0), mask);
    }
  };
  for (int x = 0; x < gp.nseg; ++x) {
    const int64_t r0 = (x == 0 ? gp.begin : gp.seg_end[x - 1]) - n, r1 = gp.seg_end[x] - n;
    // The tile rows [off, off + R) hold [r0, r1): r1 - r0 <= R, off <= r0, r1 <= 8.
    const int64_t rt = TileRows(r1 - r0), off = std::min(r0, kGroupRows - rt);
    switch (rt) {
      case 1: segment(std::integral_constant<int, 1>(), off, r0, r1, glo[x], ghi[x]); break;
      case 2: segment(std::integral_constant<int, 2>(), off, r0, r1, glo[x], ghi[x]); break;
      case 4: segment(std::integral_constant<int, 4>(), off, r0, r1, glo[x], ghi[x]); break;
      default: segment(std::integral_constant<int, 8>(), off, r0, r1, glo[x], ghi[x]); break;
    }
  }
  for (int64_t j0 = klo; j0 < khi; j0 += w) {
    const int64_t ncp = std::min(w, RoundUp(khi - j0, kPanel)), nc = std::min(ncp, khi - j0);
    g.Scores(ks->kv, j0, nc);
    const int32_t* from = ks->from.data() + j0;
    const int32_t* until = ks->until.data() + j0;
    auto mask = [&](int64_t r, float* __restrict row) {
      const int32_t p = static_cast<int32_t>(pos(r));
      for (int64_t u = 0; u < ncp; ++u) row[u] = from[u] <= p && p < until[u] ? row[u] : kNegInf;
    };
    g.Update<kGroupRows>(0, 0, nr, ncp, ks->kv.V(j0), 0, nc, mask);
  }
  g.Store(out + OutIndex(s, b, hq0, 0, 0), rows);
}

// The row groups of blocks [b0, b1) of `head` (one chunk), one task each; each group
// prefetches the rows that follow its own (the next group's, the next chunk's first
// after the last), so that no group waits on DRAM for its Q and O rows.
void LshChunkGroups(const Tensors& t, const PanelKv& kv, const LshPlan& plan, int64_t head,
                    int64_t b0, int64_t b1, const SparseTiles& tl, float* out,
                    const KsPart* ks, const int32_t* evict, const char* phase) {
  const LshQueries& q = plan.queries[head];
  const int64_t rows = static_cast<int64_t>(q.rows.size());
  thread_local std::vector<GroupPlan> reused;  // kept between calls: no allocation each
  // The calling thread's vector, by a name the tasks capture: inside the lambda the
  // thread_local name would be each worker thread's own (empty) vector under a threaded
  // Kokkos backend.
  std::vector<GroupPlan>& groups = reused;
  PackGroups(plan.blocks, b0, b1, ks == nullptr, &groups);
  ParallelTasks(phase, static_cast<int64_t>(groups.size()), [&](int64_t x) {
    const GroupPlan& gp = groups[static_cast<size_t>(x)];
    PrefetchRows(t, q, head, gp.end, std::min(rows, gp.end + kGroupRows), out);
    LshGroup(t, kv, q, head, gp, tl, Group(t.shape.d, tl), out, ks, evict);
  });
}

// Query block qb of the query heads of KV head `head` (= b * Hkv + hkv) attends the
// union of its rows' prefix top-k sets (ks, dma), gathered once for the
// group; bias: that head's per-key logit bias or null.
void TopKBlock(const Tensors& t, const TopKHead& h, int64_t head, int64_t qb,
               const SparseTiles& tl, const float* bias, float* out) {
  const Shape& s = t.shape;
  const int64_t b = head / s.Hkv, hq0 = head % s.Hkv * s.Group();
  const int64_t i0 = qb * tl.br, nr = std::min(tl.br, s.Lq - i0);
  thread_local std::vector<int64_t> rows, keys;
  rows.resize(static_cast<size_t>(nr));
  for (int64_t r = 0; r < nr; ++r) rows[r] = i0 + r;
  const int64_t n_all = TopKUnion(s, h, qb, i0, nr, &keys);
  auto allowed = [&](int64_t r, int64_t n) {
    const int64_t j = keys[n], p = LastKey(s, i0 + r);
    return j <= p && p < h.evict[j];
  };
  GatherTile(t, Scratch(s.d, s.Group(), tl), tl.bc, b, hq0, s.Group(), rows.data(), nr,
             keys.data(), static_cast<int64_t>(keys.size()), n_all, bias, allowed, out);
}

}  // namespace

int64_t HaxChunk(const Shape& s, int64_t bins) {
  int64_t chunk = 512;
  while (chunk < 4096 && chunk * s.Group() < 16 * bins) chunk *= 2;
  return chunk;
}

void RunPhase(const char* name, const std::function<void()>& fn) {
  ParallelTasks(name, 1, [&](int64_t) { fn(); });
}

void RunTopKKokkos(const Tensors& t, const std::vector<double>& scores, int64_t k, bool bias,
                   const SparseTiles& tl, float* out) {
  CheckInputs(t, tl);
  const Shape& s = t.shape;
  const std::vector<TopKHead> heads = SelectTopKAll(t, scores, k, tl);
  const std::vector<float> fbias = bias ? FloatBias(scores) : std::vector<float>();
  const int64_t blocks = QueryBlocks(s, tl);
  // One task per (batch, KV head, query block): the group's query heads share the gather.
  ParallelTasks("attntune::attend::topk", s.B * s.Hkv * blocks, [&](int64_t task) {
    const int64_t head = task / blocks;  // b * Hkv + hkv
    TopKBlock(t, heads[head], head, task % blocks, tl,
              bias ? fbias.data() + head * s.Lk : nullptr, out);
  });
}

void RunLshKokkos(const Tensors& t, const LshBins& bins, int64_t k, const SparseTiles& tl,
                  float* out) {
  CheckInputs(t, tl);
  const Shape& s = t.shape;
  const std::vector<BinnedKeys> keys = SortKeysAll(s, bins, KokkosTasks);
  const LshPlan plan = SortQueries(s, bins, keys, k, tl.br, 0, KokkosTasks);
  PanelKv& kv = SortedKv();  // one KV head's keys in (bin, position) order, rebuilt per head
  for (int64_t head = 0; head < s.B * s.Hkv; ++head) {
    const int64_t b = head / s.Hkv, hkv = head % s.Hkv;
    RunPhase("attntune::select::sort_kv", [&] {
      kv.Build(t.K(b, hkv, 0), t.V(b, hkv, 0), s.d, keys[head].perm.data(), s.Lk);
    });
    // One chunk a head.
    LshChunkGroups(t, kv, plan, head, plan.first[head], plan.first[head + 1], tl, out,
                   nullptr, nullptr, "attntune::attend::lsh");
  }
}

void RunHaxKokkos(const Tensors& t, const LshBins& bins, int64_t k_lsh,
                  const std::vector<double>& scores, int64_t k_ks, const SparseTiles& tl,
                  float* out) {
  CheckInputs(t, tl);
  const Shape& s = t.shape;
  // One pass in (bin, position) order, a chunk of query positions at a time, the query
  // heads of a KV head together: a row group attends its lsh window (as lsh) less the
  // keys of its rows' ks sets, then the range of the chunk's ks union (gathered into
  // panels once per chunk, KsPart) that its positions reach, under the per-row predicate
  // j <= p < evict[j]: each key once, one online softmax, one store.
  const std::vector<TopKHead> heads = SelectTopKAll(t, scores, k_ks, tl);
  const std::vector<BinnedKeys> binned = SortKeysAll(s, bins, KokkosTasks);
  const LshPlan plan =
      SortQueries(s, bins, binned, k_lsh, tl.br,
                  RoundUp(tl.chunk > 0 ? tl.chunk : HaxChunk(s, bins.bins), tl.br), KokkosTasks);
  PanelKv& kv = SortedKv();
  KsPart ks;
  // In (bin, position) order, and kPanel more (a piece's mask reads to its last panel's
  // end, masked by the window).
  std::vector<int32_t> evict(static_cast<size_t>(s.Lk + kPanel), 0);
  for (int64_t head = 0; head < s.B * s.Hkv; ++head) {
    const int64_t b = head / s.Hkv, hkv = head % s.Hkv;
    const TopKHead& h = heads[head];
    const BinnedKeys& bk = binned[head];
    RunPhase("attntune::select::sort_kv", [&] {
      kv.Build(t.K(b, hkv, 0), t.V(b, hkv, 0), s.d, bk.perm.data(), s.Lk);
      for (int64_t n = 0; n < s.Lk; ++n) evict[n] = static_cast<int32_t>(h.evict[bk.perm[n]]);
    });
    for (int64_t c = 0; c < plan.chunks; ++c) {
      const int64_t i0 = c * plan.chunk, chunk_rows = std::min(plan.chunk, s.Lq - i0);
      RunPhase("attntune::select::ks_union", [&] {
        BuildKsPart(t, b, hkv, h, i0 / tl.br, i0, chunk_rows, &ks);  // chunks start on blocks
      });
      LshChunkGroups(t, kv, plan, head, plan.first[head * plan.chunks + c],
                     plan.first[head * plan.chunks + c + 1], tl, out, &ks, evict.data(),
                     "attntune::attend::hax");
    }
  }
}

void RunGenericKokkos(const Tensors& t, const Variant& variant, const Params& params,
                      const SparseTiles& tl, float* out) {
  CheckInputs(t, tl);
  const Shape& s = t.shape;
  std::unique_ptr<KeySets> sets;
  RunPhase("attntune::select::key_sets", [&] { sets = variant.key_sets(t, params); });
  const int64_t blocks = QueryBlocks(s, tl);
  std::vector<int64_t> off, keys, row_keys;
  std::vector<float> bias(static_cast<size_t>(s.Lk));
  // One head at a time, so that the row sets of only one head are held.
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t hq = 0; hq < s.Hq; ++hq) {
      const int64_t hkv = hq / s.Group();
      bool any_bias = false;
      RunPhase("attntune::select::rows", [&] {
        off.assign(1, 0);
        keys.clear();
        for (int64_t i = 0; i < s.Lq; ++i) {
          sets->Row(b, hq, i, &row_keys);
          keys.insert(keys.end(), row_keys.begin(), row_keys.end());
          off.push_back(static_cast<int64_t>(keys.size()));
        }
        for (int64_t j = 0; j < s.Lk; ++j) {
          bias[j] = static_cast<float>(sets->Bias(b, hkv, j));
          any_bias = any_bias || bias[j] != 0.0f;
        }
      });
      ParallelTasks("attntune::attend::generic", blocks, [&](int64_t qb) {
        const int64_t i0 = qb * tl.br, nr = std::min(tl.br, s.Lq - i0);
        std::vector<int64_t> rows(static_cast<size_t>(nr)), kb, block_keys;
        for (int64_t r = 0; r < nr; ++r) {
          rows[r] = i0 + r;
          for (int64_t n = off[i0 + r]; n < off[i0 + r + 1]; ++n) kb.push_back(keys[n] / tl.bc);
        }
        // The block list: key blocks of width Bc that hold a selected key.
        std::sort(kb.begin(), kb.end());
        kb.erase(std::unique(kb.begin(), kb.end()), kb.end());
        for (int64_t blk : kb) {
          for (int64_t j = blk * tl.bc; j < std::min(s.Lk, (blk + 1) * tl.bc); ++j) {
            block_keys.push_back(j);
          }
        }
        // The element predicate: a cursor per row walks its ascending set.
        std::vector<int64_t> cursor(static_cast<size_t>(nr));
        for (int64_t r = 0; r < nr; ++r) cursor[r] = off[i0 + r];
        auto allowed = [&](int64_t r, int64_t n) {
          const int64_t j = block_keys[n], end = off[i0 + r + 1];
          int64_t& c = cursor[r];
          while (c < end && keys[c] < j) ++c;
          return c < end && keys[c] == j;
        };
        GatherTile(t, Scratch(s.d, 1, tl), tl.bc, b, hq, 1, rows.data(), nr, block_keys.data(),
                   static_cast<int64_t>(block_keys.size()), 0, any_bias ? bias.data() : nullptr,
                   allowed, out);
      });
    }
  }
}

}  // namespace attntune
