// The device selection's pipeline (kernels/cuda/select.cu) run on the host: the same
// select_core.h functions in the same order, each kernel's grid a loop and each warp a
// HostWarp, CUB's stable radix sorts a std::stable_sort and its scans a loop. The CPU
// tests compare what it selects with the host selection (kernels/selection,
// BuildKeyLists, BuildBucketLists, SelectDecodeKokkos); the [gpu] tests compare the
// device's arrays with it.
#pragma once

#include <algorithm>
#include <set>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include <catch2/catch.hpp>

#include "kernels/cuda/plan.h"
#include "kernels/cuda/select_core.h"
#include "core/shape.h"
#include "core/tensors.h"

namespace select_host {

namespace cp = attntune::cuda_plan;

/// Stable sort of positions [0, n) by keys[0, n): what CUB's radix sort gives.
template <class Key>
std::vector<int32_t> StableOrder(const Key* keys, int64_t n) {
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [keys](int32_t a, int32_t b) { return keys[a] < keys[b]; });
  return order;
}

inline std::vector<int32_t> ExclusiveSum(const std::vector<int32_t>& in) {
  std::vector<int32_t> out(in.size() + 1, 0);
  for (size_t x = 0; x < in.size(); ++x) out[x + 1] = out[x] + in[x];
  return out;
}

struct TopK {
  int64_t heads = 0, n = 0, k = 0;
  std::vector<uint64_t> key, sorted_key;
  std::vector<float> bias;  // b_j * log2(e), when there is one
  std::vector<int32_t> order, evict, tile_max;
};

inline std::vector<uint64_t> Keys(const std::vector<double>& x) {
  std::vector<uint64_t> key(x.size());
  for (size_t j = 0; j < x.size(); ++j) key[j] = cp::RankKey(x[j]);
  return key;
}

/// The scan of EnqueueTopK without `sorted`: each chunk's top list (attntune_select_
/// chunk_top), then the merge steps (attntune_select_top_merge); entry [head][c] of the
/// result is the top-min(k, n) of chunks 0..c, `count` its size.
struct ScanLists {
  int64_t cap = 0;
  std::vector<uint64_t> key;
  std::vector<int32_t> pos, count;
};
inline ScanLists RunTopKScan(const std::vector<uint64_t>& key, int64_t heads, int64_t n,
                             int64_t k) {
  const int64_t chunk = cp::TopKChunk(k), chunks = (n + chunk - 1) / chunk;
  ScanLists in;
  in.cap = std::min(k, n);
  const size_t entries = static_cast<size_t>(heads * chunks * in.cap);
  in.key.assign(entries, ~uint64_t{0});  // poisoned: every read slot is written first
  in.pos.assign(entries, -1);
  in.count.assign(static_cast<size_t>(heads * chunks), -1);
  for (int64_t head = 0; head < heads; ++head) {
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t a = c * chunk, b = std::min(n, a + chunk), list = head * chunks + c;
      const uint64_t* chunk_key = key.data() + head * n + a;
      for (int64_t x = 0; x < b - a; ++x) {
        const int64_t rank = cp::ChunkTopRank(chunk_key, a, b, x);
        if (rank < in.cap) {
          in.key[list * in.cap + rank] = chunk_key[x];
          in.pos[list * in.cap + rank] = static_cast<int32_t>(a + x);
        }
      }
      in.count[list] = static_cast<int32_t>(std::min(in.cap, b - a));
    }
  }
  for (int64_t offset = 1; offset < chunks; offset *= 2) {
    ScanLists out = in;
    for (int64_t list = 0; list < heads * chunks; ++list) {
      const int64_t base = list * in.cap, nb = in.count[list];
      if (list % chunks < offset) continue;  // copied
      const int64_t abase = (list - offset) * in.cap, na = in.count[list - offset];
      const int64_t total = std::min(in.cap, na + nb);
      out.count[list] = static_cast<int32_t>(total);
      for (int64_t o = 0; o < total; ++o) {
        int64_t i;
        const int64_t from = cp::MergeSlot(in.key.data() + abase, in.pos.data() + abase, na,
                                           in.key.data() + base, in.pos.data() + base, nb, o, &i)
                                 ? abase + i
                                 : base + i;
        out.key[base + o] = in.key[from];
        out.pos[base + o] = in.pos[from];
      }
    }
    in = std::move(out);
  }
  return in;
}

/// EnqueueTopK: sort (with `sorted`) or the scan of the chunks' top lists, chunks, tile
/// maxima. `reverse_warps`: the block-level steps' warps run last first (HostBlock).
inline TopK RunTopK(std::vector<uint64_t> key, int64_t heads, int64_t n, int64_t k,
                    bool sorted = true, bool reverse_warps = false) {
  TopK t;
  t.heads = heads;
  t.n = n;
  t.k = k;
  t.key = std::move(key);
  // Poisoned where the chunks write every eviction (k < n), as the device's workspace.
  t.evict.assign(static_cast<size_t>(heads * n), static_cast<int32_t>(k < n ? -7 : n));
  for (int64_t head = 0; head < heads && sorted; ++head) {
    const uint64_t* key_h = t.key.data() + head * n;
    const std::vector<int32_t> order = StableOrder(key_h, n);
    t.order.insert(t.order.end(), order.begin(), order.end());
    for (int32_t j : order) t.sorted_key.push_back(key_h[j]);
  }
  const int64_t chunk = cp::TopKChunk(k), chunks = (n + chunk - 1) / chunk;
  const ScanLists scan = !sorted && k < n ? RunTopKScan(t.key, heads, n, k) : ScanLists();
  std::vector<int32_t> state(static_cast<size_t>(std::min(k, n)) + 1);
  std::vector<uint64_t> state_key(state.size()), chunk_key;
  for (int64_t head = 0; head < heads && k < n; ++head) {
    const uint64_t* key_h = t.key.data() + head * n;
    int32_t* evict = t.evict.data() + head * n;
    for (int64_t c = 0; c < chunks; ++c) {
      const int64_t a = c * chunk, b = std::min(n, a + chunk);
      chunk_key.assign(key_h + a, key_h + b);
      int64_t ns;
      if (sorted) {
        int32_t counts[cp::kChunkWarps];
        std::fill(counts, counts + cp::kChunkWarps, -7);  // poisoned, as shared memory
        const cp::HostBlock<cp::kChunkWarps> block{reverse_warps};
        ns = cp::ChunkState(block, t.order.data() + head * n, n, a, k, state.data(), counts);
        for (int64_t x = 0; x < ns; ++x) state_key[x] = key_h[state[x]];
      } else {  // the scan's entry c - 1
        const int64_t before = head * chunks + c - 1;
        ns = c == 0 ? 0 : scan.count[before];
        for (int64_t x = 0; x < ns; ++x) {
          state[x] = scan.pos[before * scan.cap + x];
          state_key[x] = scan.key[before * scan.cap + x];
        }
      }
      for (int64_t x = 0; x < ns + (b - a); ++x) {
        int64_t j;
        const int64_t e = cp::ChunkPassWrite(chunk_key.data(), a, b, state.data(),
                                             state_key.data(), ns, x, k, n, c == chunks - 1, &j);
        if (e >= 0) evict[j] = static_cast<int32_t>(e);
      }
    }
  }
  const int64_t tiles = (n + 31) / 32;
  for (int64_t head = 0; head < heads; ++head) {
    for (int64_t tile = 0; tile < tiles; ++tile) {
      t.tile_max.push_back(cp::TileMax(cp::HostWarp(), t.evict.data() + head * n, n, tile));
    }
  }
  return t;
}

struct Lists {
  int64_t query_blocks = 0, capacity = 0;
  std::vector<int32_t> begin, end;  // list x: keys[begin[x], end[x])
  std::vector<int32_t> keys, key_evict;  // capacity entries; -1 where no list wrote
  std::vector<float> key_bias;

  /// The lists one after the other (KeyLists' CSR form).
  cp::KeyLists Compact() const {
    cp::KeyLists out;
    out.query_blocks = query_blocks;
    out.offsets.push_back(0);
    for (size_t x = 0; x < begin.size(); ++x) {
      out.keys.insert(out.keys.end(), keys.begin() + begin[x], keys.begin() + end[x]);
      out.offsets.push_back(static_cast<int32_t>(out.keys.size()));
    }
    return out;
  }
};

/// EnqueueKeyLists: a block of kListWarps warps per list (ListBuild), the list at its
/// ListBegin, the keys after the held ones through a poisoned shared buffer. `reverse_warps`: the block's warps run last first (HostBlock).
inline Lists RunKeyLists(const TopK& t, int64_t lq, int br,
                         cp::KeyOrder order = cp::KeyOrder::kAscending,
                         bool reverse_warps = false) {
  Lists out;
  out.query_blocks = (lq + br - 1) / br;
  const bool held_first = order == cp::KeyOrder::kHeldFirst;
  const int64_t tiles = (t.n + 31) / 32;
  out.capacity = cp::ListBegin(t.heads, 0, br, lq, t.n, t.k);
  out.keys.assign(static_cast<size_t>(out.capacity), -1);
  out.key_evict.assign(out.keys.size(), -1);
  if (!t.bias.empty()) out.key_bias.assign(out.keys.size(), 0.f);
  for (int64_t head = 0; head < t.heads; ++head) {
    const int32_t* evict = t.evict.data() + head * t.n;
    const float* bias = t.bias.empty() ? nullptr : t.bias.data() + head * t.n;
    for (int64_t qb = 0; qb < out.query_blocks; ++qb) {
      int64_t p0, p1;
      cp::BlockPositions(qb, br, lq, t.n, &p0, &p1);
      const int64_t first = cp::ListBegin(head, qb, br, lq, t.n, t.k);
      const int64_t room = cp::ListBound(p0, p1, t.k);
      int32_t counts[2][2 * cp::kListWarps];
      std::fill(&counts[0][0], &counts[0][0] + 4 * cp::kListWarps, -7);  // poisoned, as shared memory
      const int64_t rest_cap = cp::ListRestCap(br, held_first);
      std::vector<int32_t> rest_j(static_cast<size_t>(rest_cap), -9), rest_e = rest_j;
      std::vector<float> rest_b(static_cast<size_t>(rest_cap), -9.f);
      const cp::HostBlock<cp::kListWarps> block{reverse_warps};
      const int64_t n = cp::ListBuild(
          block, evict, t.tile_max.data() + head * tiles, bias, t.n,
          p0, p1, held_first, counts,
          cp::ListRest{rest_j.data(), rest_e.data(), rest_b.data(), rest_cap}, [&](int64_t x, int64_t j, int32_t e, float b) {
            REQUIRE(x < room);
            const size_t at = static_cast<size_t>(first + x);
            REQUIRE(out.keys[at] == -1);  // each place written once
            out.keys[at] = static_cast<int32_t>(j);
            out.key_evict[at] = e;
            if (bias != nullptr) out.key_bias[at] = b;
          });
      out.begin.push_back(static_cast<int32_t>(first));
      out.end.push_back(static_cast<int32_t>(first + n));
    }
  }
  return out;
}

/// EnqueueKsScores: chunk sums, their exclusive prefix, the chunks' scores by a warp per
/// query head, summed over the group in order.
inline std::vector<double> KsScores(const attntune::Tensors& t) {
  const attntune::Shape& s = t.shape;
  const int64_t chunk = 64, chunks = (s.Lq + chunk - 1) / chunk, group = s.Group();
  std::vector<double> sums(static_cast<size_t>(s.B * s.Hq * chunks * s.d), 0.0);
  for (int64_t bh = 0; bh < s.B * s.Hq; ++bh) {
    for (int64_t e = 0; e < s.d; ++e) {
      for (int64_t c = 0; c < chunks; ++c) {
        double sum = 0.0;
        for (int64_t i = c * chunk; i < std::min(s.Lq, c * chunk + chunk); ++i) {
          sum += static_cast<double>(t.q[(bh * s.Lq + i) * s.d + e]);
        }
        sums[(bh * chunks + c) * s.d + e] = sum;
      }
    }
    double totals[cp::kChunkWarps][32];  // the prefix's block per 32 dims
    for (int64_t e0 = 0; e0 < s.d; e0 += 32) {
      cp::KsChunkPrefix(cp::HostBlock<cp::kChunkWarps>(), sums.data() + bh * chunks * s.d,
                        chunks, s.d, e0, totals);
    }
  }
  std::vector<double> x(static_cast<size_t>(s.B * s.Hkv * s.Lk), 0.0);
  std::vector<double> prefix(static_cast<size_t>(group * s.d)), xs(group * chunk);
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t hk = 0; hk < s.Hkv; ++hk) {
      for (int64_t c = 0; c < chunks; ++c) {
        for (int64_t v = 0; v < group * s.d; ++v) {
          const int64_t hq = hk * group + v / s.d;
          prefix[v] = sums[((b * s.Hq + hq) * chunks + c) * s.d + v % s.d];
        }
        std::fill(xs.begin(), xs.end(), 0.0);
        const int64_t i0 = c * chunk, i1 = std::min(s.Lq, i0 + chunk);
        for (int64_t g = 0; g < group; ++g) {  // one warp per query head of the group
          // As the kernel: four dims a lane up to d = 128 (KsPerLane).
          const float* qh = t.Q(b, hk * group + g, 0);
          if (cp::KsPerLane(s.d) == 4) {
            cp::KsChunkScores<4>(cp::HostWarp(), qh, s.Lq * s.d, t.K(b, hk, 0),
                                 prefix.data() + g * s.d, 1, i0, i1, s.Lk - s.Lq, s.d,
                                 xs.data() + g * chunk);
          } else {
            cp::KsChunkScores(cp::HostWarp(), qh, s.Lq * s.d, t.K(b, hk, 0),
                              prefix.data() + g * s.d, 1, i0, i1, s.Lk - s.Lq, s.d,
                              xs.data() + g * chunk);
          }
        }
        for (int64_t i = i0; i < i1; ++i) {
          double sum = xs[i - i0];
          for (int64_t g = 1; g < group; ++g) sum += xs[g * chunk + i - i0];
          x[(b * s.Hkv + hk) * s.Lk + i + s.Lk - s.Lq] = sum;
        }
      }
    }
  }
  return x;
}

/// dma_decode's candidates of `step` (DecodeCandidates on a HostWarp) in slot order, from
/// one head's decode evictions and drops; every slot below the count written once.
inline std::vector<int32_t> Candidates(int64_t step, int64_t r, const int32_t* evict,
                                       const int32_t* dropped) {
  std::vector<int32_t> c;
  int64_t twice = 0;
  const int64_t m = cp::DecodeCandidates(cp::HostWarp(), step, r, evict, dropped,
                                         [&](int64_t slot, int64_t j) {
                                           if (static_cast<int64_t>(c.size()) <= slot) {
                                             c.resize(static_cast<size_t>(slot + 1), -1);
                                           }
                                           if (c[slot] != -1) ++twice;
                                           c[slot] = static_cast<int32_t>(j);
                                         });
  REQUIRE(static_cast<int64_t>(c.size()) <= m);  // no slot past the count
  c.resize(static_cast<size_t>(m), -1);           // the slots after the last written
  REQUIRE(twice == 0);
  REQUIRE(std::count(c.begin(), c.end(), -1) == 0);
  return c;
}

/// Row `row` of a chosen-key list (entries offsets[row] to offsets[row + 1]), ascending:
/// the rows' order of keys is the kernels' own.
inline std::vector<int32_t> SortedRow(const std::vector<int32_t>& chosen,
                                      const std::vector<int32_t>& offsets, size_t row) {
  std::vector<int32_t> out(chosen.begin() + offsets[row], chosen.begin() + offsets[row + 1]);
  std::sort(out.begin(), out.end());
  return out;
}

/// The decode pipeline of EnqueueDecodeSelection from the top-k run with k = w_kv.
struct Decode {
  std::vector<int32_t> evict, dropped;
  Lists resident;
  std::vector<int32_t> chosen_offsets, chosen;
};

inline Decode RunDecode(const attntune::Tensors& tensors, const TopK& t, int64_t w_q, int64_t r) {
  const attntune::Shape& s = tensors.shape;
  const int64_t heads = t.heads, n = t.n, group = s.Group();
  Decode out;
  out.evict.resize(static_cast<size_t>(heads * n));
  out.dropped.assign(static_cast<size_t>(heads * n), -1);
  for (int64_t head = 0; head < heads; ++head) {
    const int64_t h = head * n;
    std::vector<int32_t> slot(static_cast<size_t>(n)), dropped(static_cast<size_t>(n), -1);
    for (int64_t x = 0; x < n; ++x) slot[t.order[h + x]] = static_cast<int32_t>(x);
    for (int64_t j = 0; j < n; ++j) {
      const int32_t e = t.evict[h + j];
      if (j < e && e < n) dropped[e] = static_cast<int32_t>(j);
    }
    std::vector<uint64_t> event_key(static_cast<size_t>(n));
    for (int64_t q = 0; q < n; ++q) event_key[q] = cp::EventKey(t.key.data() + h, dropped[q]);
    const std::vector<int32_t> event_order = StableOrder(event_key.data(), n);
    std::vector<uint64_t> event_key_sorted;
    for (int32_t q : event_order) event_key_sorted.push_back(event_key[q]);
    for (int64_t j = 0; j < n; ++j) {
      out.evict[h + j] = static_cast<int32_t>(cp::DecodeEviction(
          t.key.data() + h, t.evict.data() + h, j, t.sorted_key.data() + h, slot[j],
          event_key_sorted.data(), event_order.data(), n, n));
    }
    for (int64_t j = 0; j < n; ++j) {
      const int32_t e = out.evict[h + j];
      if (j < e && e < n) out.dropped[h + e] = static_cast<int32_t>(j);
    }
  }
  TopK resident = t;
  resident.evict = out.evict;
  resident.bias.clear();
  resident.tile_max.clear();
  for (int64_t head = 0; head < heads; ++head) {
    for (int64_t tile = 0; tile < (n + 31) / 32; ++tile) {
      resident.tile_max.push_back(
          cp::TileMax(cp::HostWarp(), out.evict.data() + head * n, n, tile));
    }
  }
  out.resident = RunKeyLists(resident, n, cp::kDecodeListSteps);
  // Chosen keys: counts, offsets, the ranked candidates of each (b, hq, step).
  std::vector<int32_t> counts(static_cast<size_t>(s.B * s.Hq * n), 0);
  std::vector<std::vector<int32_t>> cand(static_cast<size_t>(heads * n));
  for (int64_t head = 0; head < heads; ++head) {
    for (int64_t step = 0; step < n; ++step) {
      const std::vector<int32_t>& c = cand[head * n + step] =
          Candidates(step, r, out.evict.data() + head * n, out.dropped.data() + head * n);
      const int64_t m = static_cast<int64_t>(c.size());
      const int64_t b = head / s.Hkv, hk = head % s.Hkv;
      for (int64_t g = 0; g < group; ++g) {
        counts[(b * s.Hq + hk * group + g) * n + step] = static_cast<int32_t>(std::min(m, w_q));
      }
    }
  }
  out.chosen_offsets = ExclusiveSum(counts);
  out.chosen.assign(static_cast<size_t>(out.chosen_offsets.back()), -1);
  for (int64_t head = 0; head < heads; ++head) {
    const int64_t b = head / s.Hkv, hk = head % s.Hkv;
    for (int64_t step = 0; step < n; ++step) {
      const std::vector<int32_t>& c = cand[head * n + step];
      for (int64_t g = 0; g < group; ++g) {
        const int64_t hq = hk * group + g, row = (b * s.Hq + hq) * n + step;
        std::vector<uint64_t> keys;
        for (int32_t j : c) {
          keys.push_back(cp::ChosenKey(cp::DecodeDot(tensors.Q(b, hq, step), tensors.K(b, hk, j), s.d)));
        }
        for (size_t x = 0; x < c.size(); ++x) {
          const int64_t rank = cp::ChosenRank(keys.data(), c.data(), static_cast<int64_t>(c.size()),
                                              static_cast<int64_t>(x));
          if (rank < w_q) out.chosen[out.chosen_offsets[row] + rank] = c[x];
        }
      }
    }
  }
  return out;
}

/// A caller's unchecked non-finite q and k in batch 0 of a decode problem with Hq >= 4,
/// Hkv >= 2, L >= 90: query rows holding NaN and -NaN (every q·k of the row NaN), one
/// holding inf (each q·k infinite) and one inf and -inf (inf - inf where k's first two
/// elements share a sign), keys holding NaN, -NaN and -inf.
inline void PutNonFiniteQK(attntune::Tensors* t) {
  const attntune::Shape& s = t->shape;
  auto q = [&](int64_t hq, int64_t i, int64_t e, float v) {
    t->q[static_cast<size_t>((hq * s.Lq + i) * s.d + e)] = v;
  };
  auto k = [&](int64_t hk, int64_t j, int64_t e, float v) {
    t->k[static_cast<size_t>((hk * s.Lk + j) * s.d + e)] = v;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  for (int64_t i : {5, 40, 89}) q(1, i, 3, nan);
  q(3, 60, 2, -nan);
  q(2, 30, 0, inf);
  q(2, 31, 0, inf);
  q(2, 31, 1, -inf);
  k(1, 20, 2, nan);
  k(0, 50, 5, -nan);
  k(1, 70, 0, -inf);
}

/// attntune_select_lsh_bins: the 16 lanes of each row, four projections at a time, then
/// the tree of their sums, the tail and the bin.
inline void Bins(const attntune::Tensors& t, const std::vector<float>& rt, int64_t h,
                 bool argmax, bool fused, std::vector<int32_t>* key_bin,
                 std::vector<int32_t>* query_bin) {
  const attntune::Shape& s = t.shape;
  const int d = static_cast<int>(s.d);
  auto bin_of = [&](const float* x, int64_t hk) {
    const float* mu = t.mu.empty() ? nullptr : t.mu.data() + hk * s.d;
    const float* r = rt.data() + hk * h * s.d;
    int32_t bin = 0;
    double best = 0.0;
    // The kernel keeps each lane's terms in registers while d / 16 * 16 <= 256 (8 of
    // them while d / 16 * 16 <= 128).
    const bool terms = s.d / 16 <= cp::kLshMaxPerLane, eight = s.d / 16 <= 8;
    float u[16][cp::kLshMaxPerLane];
    for (int lane = 0; lane < 16 && terms; ++lane) {
      if (eight) {
        cp::LshTerms<8>(x, mu, s.d, lane, u[lane]);
      } else {
        cp::LshTerms(x, mu, s.d, lane, u[lane]);
      }
    }
    for (int64_t c0 = 0; c0 < h; c0 += 4) {
      const int n = static_cast<int>(std::min<int64_t>(4, h - c0));
      float acc[16][4];
      for (int lane = 0; lane < 16; ++lane) {
        if (eight) {
          cp::LshLaneTermsN<8, 4>(u[lane], r + c0 * s.d, d, lane, n, fused, acc[lane]);
        } else if (terms) {
          cp::LshLaneTermsN<cp::kLshMaxPerLane, 4>(u[lane], r + c0 * s.d, d, lane, n, fused,
                                                   acc[lane]);
        } else {
          for (int c = 0; c < n; ++c) {
            acc[lane][c] = cp::LshLane(x, mu, r + (c0 + c) * s.d, s.d, lane, fused);
          }
        }
      }
      for (int c = 0; c < n; ++c) {
        float lanes[16];
        for (int lane = 0; lane < 16; ++lane) lanes[lane] = acc[lane][c];
        const float* rc = r + (c0 + c) * s.d;
        cp::LshBinStep(c0 + c, cp::LshTail(cp::LshTree(lanes), x, mu, rc, s.d), argmax, &bin,
                       &best);
      }
    }
    return bin;
  };
  key_bin->clear();
  query_bin->clear();
  for (int64_t row = 0; row < s.B * s.Hkv * s.Lk; ++row) {
    key_bin->push_back(bin_of(t.k.data() + row * s.d, (row / s.Lk) % s.Hkv));
  }
  for (int64_t row = 0; row < s.B * s.Hq * s.Lq; ++row) {
    query_bin->push_back(bin_of(t.q.data() + row * s.d, (row / s.Lq) % s.Hq / s.Group()));
  }
}

struct Bucket {
  int64_t blocks = 0, blocks_bound = 0, key_capacity = 0;
  std::vector<int32_t> head, row_offsets, rows, lo, hi, key_offsets, keys, spos, key_spos,
      key_evict;
};

inline int BitsFor(int64_t values) {
  int bits = 1;
  while ((int64_t{1} << bits) < values) ++bits;
  return bits;
}

/// EnqueueBucketLayout. `topk`: hax's ks part (budget k_ks) or nullptr.
inline Bucket RunBucket(const attntune::Shape& s, int64_t bins, const std::vector<int32_t>& key_bin,
                        const std::vector<int32_t>& query_bin, int64_t k, const TopK* topk, int br,
                        int64_t chunk_param) {
  const bool hax = topk != nullptr;
  const int64_t heads = s.B * s.Hkv, group = s.Group(), lk = s.Lk, lq = s.Lq;
  const int64_t chunk = hax && chunk_param > 0 ? std::min(chunk_param, lq) : lq;
  const int64_t chunks = std::max<int64_t>(1, (lq + chunk - 1) / chunk);
  const int64_t total = heads * group * lq;
  Bucket out;
  Lists chunk_lists;
  if (hax) chunk_lists = RunKeyLists(*topk, lq, static_cast<int>(chunk));
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t positions = std::min(lq, (c + 1) * chunk) - c * chunk;
    const int64_t blocks = cp::BucketBlocksBound(positions * group, positions, bins, k, br);
    out.blocks_bound += blocks;
    out.key_capacity += cp::BucketKeysBound(blocks, positions, k, lk);
    if (hax) {
      int64_t p0, p1;
      cp::BlockPositions(c, chunk, lq, lk, &p0, &p1);
      out.key_capacity += blocks * std::min(cp::ListBound(p0, p1, topk->k), lk);
    }
  }
  out.blocks_bound *= heads;
  out.key_capacity *= heads;
  const int bin_bits = BitsFor(bins);
  // Keys by (head, bin), stably: perm and bins in (bin, position) order per head.
  std::vector<uint64_t> ckey(static_cast<size_t>(heads * lk));
  for (int64_t x = 0; x < heads * lk; ++x) {
    ckey[x] = (static_cast<uint64_t>(x / lk) << bin_bits) | static_cast<uint64_t>(key_bin[x]);
  }
  std::vector<int32_t> perm = StableOrder(ckey.data(), heads * lk), kbin_sorted;
  for (int32_t& x : perm) {
    kbin_sorted.push_back(static_cast<int32_t>(ckey[x] & ((uint64_t{1} << bin_bits) - 1)));
    x %= static_cast<int32_t>(lk);  // the iota values: positions within the head
  }
  std::vector<int32_t> starts;
  for (int64_t head = 0; head < heads; ++head) {
    for (int64_t c = 0; c <= bins; ++c) {
      starts.push_back(static_cast<int32_t>(cp::LowerBound<int32_t>(
          kbin_sorted.data() + head * lk, 0, lk, static_cast<int32_t>(c))));
    }
  }
  out.spos.assign(static_cast<size_t>(heads * lk), -1);
  for (int64_t x = 0; x < heads * lk; ++x) out.spos[(x / lk) * lk + perm[x]] = static_cast<int32_t>(x % lk);
  // Rows by (head, chunk, bin), stably from (position, head) order.
  std::vector<uint64_t> rkey(static_cast<size_t>(total));
  std::vector<int32_t> rval(static_cast<size_t>(total));
  for (int64_t x = 0; x < total; ++x) {
    const int64_t head = x / (group * lq), local = x % (group * lq);
    const int64_t i = local / group, g = local % group;
    const int64_t b = head / s.Hkv, hq = head % s.Hkv * group + g;
    rkey[x] = (static_cast<uint64_t>(head * chunks + i / chunk) << bin_bits) |
              static_cast<uint64_t>(query_bin[(b * s.Hq + hq) * lq + i]);
    rval[x] = static_cast<int32_t>(g * lq + i);
  }
  const std::vector<int32_t> row_order = StableOrder(rkey.data(), total);
  std::vector<int32_t> qbin(static_cast<size_t>(total));
  out.rows.resize(static_cast<size_t>(total));
  for (int64_t n = 0; n < total; ++n) {
    out.rows[n] = rval[row_order[n]];
    qbin[n] = static_cast<int32_t>(rkey[row_order[n]] & ((uint64_t{1} << bin_bits) - 1));
  }
  out.lo.resize(static_cast<size_t>(total));
  out.hi.resize(static_cast<size_t>(total));
  for (int64_t n = 0; n < total; ++n) {
    const int64_t head = n / (group * lq);
    const int32_t* st = starts.data() + head * (bins + 1);
    cp::LshWindowOf(perm.data() + head * lk, st[qbin[n]], st[qbin[n] + 1],
                    lk - lq + out.rows[n] % lq, k, &out.lo[n], &out.hi[n]);
  }
  std::vector<int32_t> run_start(static_cast<size_t>(total)), flag(static_cast<size_t>(total));
  int32_t run = 0;
  for (int64_t n = 0; n < total; ++n) {
    const int64_t head = n / (group * lq), local = n % (group * lq);
    const int64_t first = head * group * lq + local / (chunk * group) * chunk * group;
    const bool brk = n == first || cp::RunBreak(n, first, qbin[n], qbin[n - 1], out.lo[n], out.hi[n - 1]);
    run = std::max(run, brk ? static_cast<int32_t>(n) : 0);  // the inclusive max-scan
    run_start[n] = run;
    flag[n] = cp::BlockStart(n, run_start[n], br) ? 1 : 0;
  }
  const std::vector<int32_t> block_id = ExclusiveSum(flag);
  out.blocks = block_id.back();
  out.row_offsets.assign(static_cast<size_t>(out.blocks + 1), -1);
  out.head.assign(static_cast<size_t>(out.blocks), -1);
  for (int64_t n = 0; n < total; ++n) {
    if (flag[n] != 0) {
      out.row_offsets[block_id[n]] = static_cast<int32_t>(n);
      out.head[block_id[n]] = static_cast<int32_t>(n / (group * lq));
    }
  }
  out.row_offsets[out.blocks] = static_cast<int32_t>(total);
  // Keys of each block: the lsh range, then hax's extras.
  auto walk = [&](int64_t x, const auto& emit_lsh, const auto& emit_extra) {
    const int64_t rb = out.row_offsets[x], re = out.row_offsets[x + 1], head = out.head[x];
    const int32_t lo_first = out.lo[rb], hi_last = out.hi[re - 1];
    for (int64_t u = 0; u < hi_last - lo_first; ++u) emit_lsh(u, head, lo_first + u);
    int64_t extras = 0;
    if (hax) {
      std::vector<int64_t> pos;
      for (int64_t r = rb; r < re; ++r) pos.push_back(lk - lq + out.rows[r] % lq);
      const int64_t list = head * chunks + (out.rows[rb] % lq) / chunk;
      const int32_t* keys = chunk_lists.keys.data() + chunk_lists.begin[list];
      const int64_t list_n = chunk_lists.end[list] - chunk_lists.begin[list];
      extras = cp::HaxExtrasWalk(cp::HostWarp(), keys, list_n, pos.data(), re - rb,
                                 topk->evict.data() + head * lk, key_bin.data() + head * lk,
                                 out.spos.data() + head * lk, qbin[rb], lo_first, hi_last,
                                 [&](int64_t slot, int64_t j) { emit_extra(hi_last - lo_first + slot, head, j); });
    }
    return (hi_last - lo_first) + extras;
  };
  std::vector<int32_t> counts;
  for (int64_t x = 0; x < out.blocks; ++x) {
    counts.push_back(static_cast<int32_t>(walk(x, [](int64_t, int64_t, int64_t) {}, [](int64_t, int64_t, int64_t) {})));
  }
  out.key_offsets = ExclusiveSum(counts);
  out.keys.assign(static_cast<size_t>(out.key_offsets.back()), -1);
  out.key_spos.assign(out.keys.size(), -1);
  out.key_evict.assign(out.keys.size(), -1);
  for (int64_t x = 0; x < out.blocks; ++x) {
    const int64_t base = out.key_offsets[x];
    walk(
        x,
        [&](int64_t u, int64_t head, int64_t place) {
          out.keys[base + u] = perm[head * lk + place];
          out.key_spos[base + u] = static_cast<int32_t>(place);
          if (hax) out.key_evict[base + u] = topk->evict[head * lk + out.keys[base + u]];
        },
        [&](int64_t u, int64_t head, int64_t j) {
          out.keys[base + u] = static_cast<int32_t>(j);
          out.key_spos[base + u] = out.spos[head * lk + j];
          out.key_evict[base + u] = topk->evict[head * lk + j];
        });
  }
  return out;
}

// Checks the device's bucketed layout against BuildBucketLists': the same blocks, rows
// and windows, spos, and per block the same keys (the device lists the lsh range, then
// hax's extras: the same set in another order), within the allocation bounds.
inline void CheckLayout(const Bucket& got, const cp::BucketLists& want, const attntune::Shape& shape, bool hax,
                 const std::vector<int32_t>& evict) {
  REQUIRE(got.blocks == want.Blocks());
  CHECK(got.blocks <= got.blocks_bound);
  CHECK(got.key_offsets.back() <= got.key_capacity);
  CHECK(got.head == want.head);
  CHECK(got.row_offsets == want.row_offsets);
  CHECK(got.rows == want.rows);
  CHECK(got.lo == want.lo);
  CHECK(got.hi == want.hi);
  CHECK(got.spos == want.spos);
  for (int64_t x = 0; x < got.blocks; ++x) {
    std::vector<int32_t> a(got.keys.begin() + got.key_offsets[x], got.keys.begin() + got.key_offsets[x + 1]);
    const std::vector<int32_t> b(want.keys.begin() + want.key_offsets[x],
                                 want.keys.begin() + want.key_offsets[x + 1]);
    std::sort(a.begin(), a.end());
    INFO("block " << x);
    REQUIRE(std::adjacent_find(a.begin(), a.end()) == a.end());  // each key once
    REQUIRE(a == b);
    const int64_t head = got.head[x];
    for (int64_t n = got.key_offsets[x]; n < got.key_offsets[x + 1]; ++n) {
      REQUIRE(got.key_spos[n] == got.spos[head * shape.Lk + got.keys[n]]);
      if (hax) REQUIRE(got.key_evict[n] == evict[head * shape.Lk + got.keys[n]]);
    }
  }
}

}  // namespace select_host
