// Launchers of the sparse kernel families: a selection phase per KV head (scores,
// prefix top-k eviction times, bins sorted by (bin, position)), then one attention
// task per query block that gathers the union of its rows' keys once (GatherTile).
#include "kernels/kokkos/sparse.h"

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <memory>

#include "kernels/kokkos/gather_tile.h"
#include "kernels/spec/check.h"

namespace attntune {

namespace {

using tiles::GatherScratch;
using tiles::GatherTile;
using HostPolicy = Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>;

template <class Fn>
void ParallelTasks(const char* name, int64_t n, const Fn& fn) {
  Kokkos::parallel_for(name, HostPolicy(0, n), [&](int64_t task) { fn(task); });
  Kokkos::fence();
}

// This thread's scratch for Br x Bc tiles (kept between tasks of the same size).
GatherScratch& Scratch(int64_t d, const SparseTiles& tl) {
  thread_local std::unique_ptr<GatherScratch> w;
  thread_local int64_t key[3] = {-1, -1, -1};
  if (!w || key[0] != d || key[1] != tl.br || key[2] != tl.bc) {
    w = std::make_unique<GatherScratch>(d, tl.br, tl.bc);
    key[0] = d;
    key[1] = tl.br;
    key[2] = tl.bc;
  }
  return *w;
}

void CheckInputs(const Tensors& t, const SparseTiles& tl) {
  const Shape& s = t.shape;
  CHECK(tl.br >= 1 && tl.bc >= 1 && tl.bc <= 512);
  CHECK(s.Hkv > 0 && s.Hq % s.Hkv == 0 && s.Lq <= s.Lk);
  CHECK(static_cast<int64_t>(t.q.size()) == s.QElems());
  CHECK(static_cast<int64_t>(t.k.size()) == s.KvElems());
  CHECK(static_cast<int64_t>(t.v.size()) == s.KvElems());
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
  h.evict.assign(static_cast<size_t>(s.Lk), s.Lk);
  h.snap_off.push_back(0);
  const int64_t blocks = QueryBlocks(s, tl);
  // Heap ordered so that its front is the key that ranks last (evicted first).
  auto ranks_before = [x](int64_t a, int64_t b) { return RanksBefore(x, a, b); };
  std::vector<int64_t> heap, sorted;
  int64_t qb = 0;
  for (int64_t j = 0; j < s.Lk; ++j) {
    heap.push_back(j);
    std::push_heap(heap.begin(), heap.end(), ranks_before);
    if (static_cast<int64_t>(heap.size()) > k) {
      std::pop_heap(heap.begin(), heap.end(), ranks_before);
      h.evict[heap.back()] = j;
      heap.pop_back();
    }
    while (qb < blocks && LastKey(s, qb * tl.br) == j) {
      sorted = heap;
      std::sort(sorted.begin(), sorted.end());
      h.snap.insert(h.snap.end(), sorted.begin(), sorted.end());
      h.snap_off.push_back(static_cast<int64_t>(h.snap.size()));
      ++qb;
    }
  }
  CHECK(qb == blocks);
  return h;
}

std::vector<TopKHead> SelectTopKAll(const Tensors& t, const std::vector<double>& scores,
                                    int64_t k, const SparseTiles& tl) {
  const Shape& s = t.shape;
  CHECK(static_cast<int64_t>(scores.size()) == s.B * s.Hkv * s.Lk);
  std::vector<TopKHead> heads(static_cast<size_t>(s.B * s.Hkv));
  ParallelTasks("attntune::select::topk", s.B * s.Hkv, [&](int64_t h) {
    heads[h] = SelectTopK(s, scores.data() + h * s.Lk, k, tl);
  });
  return heads;
}

// Union of the top-k sets of the rows of query block qb: the set at its first row plus
// the keys that enter during the block. Returns n_all: keys[0, n_all) (ascending) stay
// selected for the whole block, so every row attends them.
int64_t TopKUnion(const Shape& s, const TopKHead& h, int64_t qb, int64_t i0, int64_t nr,
                  std::vector<int64_t>* keys) {
  const int64_t p0 = LastKey(s, i0), plast = LastKey(s, i0 + nr - 1);
  keys->clear();
  std::vector<int64_t> partial;
  for (int64_t n = h.snap_off[qb]; n < h.snap_off[qb + 1]; ++n) {
    const int64_t j = h.snap[n];
    (h.evict[j] > plast ? *keys : partial).push_back(j);
  }
  const int64_t n_all = static_cast<int64_t>(keys->size());
  keys->insert(keys->end(), partial.begin(), partial.end());
  for (int64_t j = p0 + 1; j <= plast; ++j) {
    if (h.evict[j] > j) keys->push_back(j);
  }
  return n_all;
}

std::vector<float> FloatBias(const std::vector<double>& scores) {
  return std::vector<float>(scores.begin(), scores.end());
}

// Keys of one KV head sorted by (bin, position): bin c holds perm[start[c], start[c+1]).
struct BinnedKeys {
  std::vector<int64_t> start, perm;
};

BinnedKeys SortByBin(const int32_t* bin, int64_t n, int64_t bins) {
  BinnedKeys out;
  out.start.assign(static_cast<size_t>(bins + 1), 0);
  for (int64_t j = 0; j < n; ++j) ++out.start[bin[j] + 1];
  for (int64_t c = 0; c < bins; ++c) out.start[c + 1] += out.start[c];
  out.perm.resize(static_cast<size_t>(n));
  std::vector<int64_t> next(out.start.begin(), out.start.end() - 1);
  for (int64_t j = 0; j < n; ++j) out.perm[next[bin[j]]++] = j;  // stable: ascending j
  return out;
}

std::vector<BinnedKeys> SortKeysAll(const Tensors& t, const LshBins& bins) {
  const Shape& s = t.shape;
  std::vector<BinnedKeys> heads(static_cast<size_t>(s.B * s.Hkv));
  ParallelTasks("attntune::select::sort_keys", s.B * s.Hkv, [&](int64_t h) {
    heads[h] = SortByBin(bins.key_bin.data() + h * s.Lk, s.Lk, bins.bins);
  });
  return heads;
}

// The lsh window of a query at position p in bin c: perm indices [lo, hi) = the k
// most recent same-bin keys j <= p.
void LshWindow(const BinnedKeys& keys, int32_t c, int64_t p, int64_t k, int64_t* lo,
               int64_t* hi) {
  const auto first = keys.perm.begin() + keys.start[c];
  const auto last = keys.perm.begin() + keys.start[c + 1];
  *hi = std::upper_bound(first, last, p) - keys.perm.begin();
  *lo = std::max<int64_t>(keys.start[c], *hi - k);
}

// A block of query rows of one (batch, query head) that share a bin, in (bin, position)
// order: rows[begin, end) of that head's sorted rows.
struct LshBlock {
  int64_t head, begin, end;
};

struct LshQueries {
  std::vector<int64_t> rows, lo, hi;  // per head, Lq each: sorted rows and their windows
};

// Queries of each (batch, query head) sorted by (bin, position), with their lsh windows,
// cut into blocks of at most Br same-bin rows whose windows overlap.
std::vector<LshBlock> SortQueries(const Tensors& t, const LshBins& bins,
                                  const std::vector<BinnedKeys>& keys, int64_t k,
                                  const SparseTiles& tl, std::vector<LshQueries>* queries_out) {
  const Shape& s = t.shape;
  std::vector<LshQueries>& queries = *queries_out;
  queries.assign(static_cast<size_t>(s.B * s.Hq), LshQueries());
  std::vector<std::vector<LshBlock>> head_blocks(queries.size());
  ParallelTasks("attntune::select::sort_queries", s.B * s.Hq, [&](int64_t head) {
    const int64_t b = head / s.Hq, hq = head % s.Hq;
    const BinnedKeys& bk = keys[b * s.Hkv + hq / s.Group()];
    const int32_t* qbin = bins.query_bin.data() + head * s.Lq;
    LshQueries& q = queries[head];
    q.rows = SortByBin(qbin, s.Lq, bins.bins).perm;
    q.lo.resize(static_cast<size_t>(s.Lq));
    q.hi.resize(static_cast<size_t>(s.Lq));
    std::vector<LshBlock>& blocks = head_blocks[head];
    for (int64_t n = 0; n < s.Lq; ++n) {
      const int64_t i = q.rows[n];
      LshWindow(bk, qbin[i], LastKey(s, i), k, &q.lo[n], &q.hi[n]);
      // A new block at Br rows, at a new bin, or where the windows stop overlapping
      // (then the union would hold keys no row attends).
      const bool extend = !blocks.empty() && n - blocks.back().begin < tl.br &&
                          qbin[q.rows[n - 1]] == qbin[i] && q.lo[n] <= q.hi[n - 1];
      if (extend) {
        blocks.back().end = n + 1;
      } else {
        blocks.push_back({head, n, n + 1});
      }
    }
  });
  std::vector<LshBlock> blocks;
  for (const auto& hb : head_blocks) blocks.insert(blocks.end(), hb.begin(), hb.end());
  return blocks;
}

}  // namespace

void RunPhase(const char* name, const std::function<void()>& fn) {
  Kokkos::parallel_for(name, HostPolicy(0, 1), [&](int64_t) { fn(); });
  Kokkos::fence();
}

void RunTopKKokkos(const Tensors& t, const std::vector<double>& scores, int64_t k, bool bias,
                   const SparseTiles& tl, float* out) {
  CheckInputs(t, tl);
  const Shape& s = t.shape;
  const std::vector<TopKHead> heads = SelectTopKAll(t, scores, k, tl);
  const std::vector<float> fbias = bias ? FloatBias(scores) : std::vector<float>();
  const int64_t blocks = QueryBlocks(s, tl);
  ParallelTasks("attntune::attend::topk", s.B * s.Hq * blocks, [&](int64_t task) {
    const int64_t qb = task % blocks, hq = task / blocks % s.Hq, b = task / blocks / s.Hq;
    const int64_t head = b * s.Hkv + hq / s.Group();
    const TopKHead& h = heads[head];
    const int64_t i0 = qb * tl.br, nr = std::min(tl.br, s.Lq - i0);
    std::vector<int64_t> rows(static_cast<size_t>(nr)), keys;
    for (int64_t r = 0; r < nr; ++r) rows[r] = i0 + r;
    const int64_t n_all = TopKUnion(s, h, qb, i0, nr, &keys);
    auto allowed = [&](int64_t r, int64_t n) {
      const int64_t j = keys[n], p = LastKey(s, i0 + r);
      return j <= p && p < h.evict[j];
    };
    GatherTile(t, Scratch(s.d, tl), tl.bc, b, hq, rows.data(), nr, keys.data(),
               static_cast<int64_t>(keys.size()), n_all,
               bias ? fbias.data() + head * s.Lk : nullptr, allowed, out);
  });
}

void RunLshKokkos(const Tensors& t, const LshBins& bins, int64_t k, const SparseTiles& tl,
                  float* out) {
  CheckInputs(t, tl);
  const Shape& s = t.shape;
  const std::vector<BinnedKeys> keys = SortKeysAll(t, bins);
  std::vector<LshQueries> queries;
  const std::vector<LshBlock> blocks = SortQueries(t, bins, keys, k, tl, &queries);
  ParallelTasks("attntune::attend::lsh", static_cast<int64_t>(blocks.size()), [&](int64_t task) {
    const LshBlock& blk = blocks[task];
    const int64_t b = blk.head / s.Hq, hq = blk.head % s.Hq;
    const LshQueries& q = queries[blk.head];
    const BinnedKeys& bk = keys[b * s.Hkv + hq / s.Group()];
    const int64_t nr = blk.end - blk.begin;
    // Windows [lo, hi) grow with the row; [lo of the last row, hi of the first) is in
    // every row's window: those keys go first, then the rest of the union.
    const int64_t lo = q.lo[blk.begin], hi = q.hi[blk.end - 1];
    const int64_t all_lo = q.lo[blk.end - 1], all_hi = std::max(all_lo, q.hi[blk.begin]);
    std::vector<int64_t> at;  // perm indices in processing order
    for (int64_t g = all_lo; g < all_hi; ++g) at.push_back(g);
    for (int64_t g = lo; g < hi; ++g) {
      if (g < all_lo || g >= all_hi) at.push_back(g);
    }
    std::vector<int64_t> keys(at.size());
    for (size_t n = 0; n < at.size(); ++n) keys[n] = bk.perm[at[n]];
    auto allowed = [&](int64_t r, int64_t n) {
      const int64_t g = at[n];
      return g >= q.lo[blk.begin + r] && g < q.hi[blk.begin + r];
    };
    GatherTile(t, Scratch(s.d, tl), tl.bc, b, hq, q.rows.data() + blk.begin, nr, keys.data(),
               static_cast<int64_t>(keys.size()), all_hi - all_lo, nullptr, allowed, out);
  });
}

void RunHaxKokkos(const Tensors& t, const LshBins& bins, int64_t k_lsh,
                  const std::vector<double>& scores, int64_t k_ks, const SparseTiles& tl,
                  float* out) {
  CheckInputs(t, tl);
  const Shape& s = t.shape;
  // Blocks in lsh's (bin, position) order: the lsh part of a block is one slice of the
  // sorted keys; the ks part is the keys selected at some row of the block.
  const std::vector<TopKHead> heads = SelectTopKAll(t, scores, k_ks, tl);
  std::vector<std::vector<int64_t>> ever(heads.size());  // keys ever in a top-k, ascending
  ParallelTasks("attntune::select::topk_keys", static_cast<int64_t>(heads.size()),
                [&](int64_t h) {
                  for (int64_t j = 0; j < s.Lk; ++j) {
                    if (heads[h].evict[j] > j) ever[h].push_back(j);
                  }
                });
  const std::vector<BinnedKeys> binned = SortKeysAll(t, bins);
  std::vector<LshQueries> queries;
  const std::vector<LshBlock> blocks = SortQueries(t, bins, binned, k_lsh, tl, &queries);
  ParallelTasks("attntune::attend::hax", static_cast<int64_t>(blocks.size()), [&](int64_t task) {
    const LshBlock& blk = blocks[task];
    const int64_t b = blk.head / s.Hq, hq = blk.head % s.Hq;
    const int64_t head = b * s.Hkv + hq / s.Group();
    const TopKHead& h = heads[head];
    const BinnedKeys& bk = binned[head];
    const LshQueries& q = queries[blk.head];
    const int32_t* qbin = bins.query_bin.data() + blk.head * s.Lq;
    const int32_t* kbin = bins.key_bin.data() + head * s.Lk;
    const int64_t nr = blk.end - blk.begin;
    const int64_t* rows = q.rows.data() + blk.begin;
    int64_t p_first = s.Lk, p_last = -1;
    std::vector<int64_t> keys, lsh_first(static_cast<size_t>(nr));
    for (int64_t r = 0; r < nr; ++r) {
      p_first = std::min(p_first, LastKey(s, rows[r]));
      p_last = std::max(p_last, LastKey(s, rows[r]));
      const int64_t lo = q.lo[blk.begin + r], hi = q.hi[blk.begin + r];
      // Row r's lsh keys are exactly its bin's keys in [lsh_first, p]; none when empty.
      lsh_first[r] = lo < hi ? bk.perm[lo] : s.Lk;
    }
    keys.assign(bk.perm.begin() + q.lo[blk.begin], bk.perm.begin() + q.hi[blk.end - 1]);
    for (int64_t j : ever[head]) {
      if (j > p_last) break;
      if (h.evict[j] > p_first) keys.push_back(j);  // selected at some p in [p_first, p_last]
    }
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    const int32_t bin = qbin[rows[0]];
    auto allowed = [&](int64_t r, int64_t n) {
      const int64_t j = keys[n], p = LastKey(s, rows[r]);
      if (j > p) return false;
      return p < h.evict[j] || (j >= lsh_first[r] && kbin[j] == bin);
    };
    GatherTile(t, Scratch(s.d, tl), tl.bc, b, hq, rows, nr, keys.data(),
               static_cast<int64_t>(keys.size()), 0, nullptr, allowed, out);
  });
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
        GatherTile(t, Scratch(s.d, tl), tl.bc, b, hq, rows.data(), nr, block_keys.data(),
                   static_cast<int64_t>(block_keys.size()), 0, any_bias ? bias.data() : nullptr,
                   allowed, out);
      });
    }
  }
}

}  // namespace attntune
