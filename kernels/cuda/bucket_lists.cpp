// BuildBucketLists (plan.h): the bucketed family's row and key lists from the CPU's
// bucketed layout (kernels/selection/lsh_layout.h, its loops serial here) and, for hax, the prefix top-k key lists of plan.cpp.
// Plain C++, built and tested everywhere.
#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cuda/plan.h"
#include "kernels/cuda/select_core.h"
#include "kernels/selection/lsh_layout.h"
#include "kernels/selection/selection.h"
#include "core/check.h"

namespace attntune {
namespace cuda_plan {

namespace {

int32_t Int32(int64_t x) {
  ATTNTUNE_CHECK(x >= 0 && x < INT32_MAX);
  return static_cast<int32_t>(x);
}

}  // namespace

bool HostFusesLshProducts() {
  static const bool fused = [] {
    Tensors t;
    t.shape.d = 32;  // one key and one query of one head; lane 0 sums e = 0 and e = 16
    t.q.assign(32, 0.0f);
    t.k.assign(32, 0.0f);
    t.v.assign(32, 0.0f);
    t.k[0] = -1.0f;
    t.k[16] = 1.0f + 0x1p-23f;
    t.proj.assign(32 * 2, 0.0f);  // R [Hkv=1][d=32][h=2]; projection 1 is 0
    t.proj[0 * 2 + 0] = 1.0f;
    t.proj[16 * 2 + 0] = 1.0f - 0x1p-23f;
    // Projection 0: fused, -1 + (1 + 2^-23)(1 - 2^-23) = -2^-46 < 0, so the argmax is 1;
    // unfused, the product rounds to 1, both projections are 0 and the argmax is 0.
    return ComputeLshBins(t, 2, true, 0).key_bin[0] == 1;
  }();
  return fused;
}

bool HostFusesDmaProducts() {
  static const bool fused = [] {
    Tensors t;
    t.shape.d = 4;  // one value row v; Delta and A drawn by DmaDeltaA as DmaScores draws them
    t.q.assign(4, 0.0f);
    t.k.assign(4, 0.0f);
    std::mt19937 rng(1);
    std::uniform_real_distribution<float> uniform(-2.0f, 2.0f);
    // Delta must be drawn in fp64: with fp32 values (a caller's delta) every product of
    // two floats is exact in fp64, and fused and unfused dots never differ.
    for (uint64_t seed = 0; seed < 100000; ++seed) {
      t.v.resize(4);
      for (float& x : t.v) x = uniform(rng);
      std::vector<double> delta, a;
      DmaDeltaA(t, seed, &delta, &a);
      const double with = DmaScore(t.v.data(), delta.data(), a[0], 4, true);
      const double without = DmaScore(t.v.data(), delta.data(), a[0], 4, false);
      if (with == without) continue;
      const double host = DmaScores(t, seed)[0];
      ATTNTUNE_CHECK_MSG(host == with || host == without,
                         "DmaScores is neither the fused nor the unfused dot");
      return host == with;
    }
    ATTNTUNE_CHECK_MSG(false, "no value row tells fused from unfused dot products");
    return false;
  }();
  return fused;
}

std::vector<float> LshProjectionRows(const Tensors& t, int64_t bits, uint64_t seed) {
  const Shape& s = t.shape;
  const std::vector<double> r = LshProjection(t, bits, seed);  // [Hkv][d][bits]
  std::vector<float> rt(r.size());
  for (int64_t h = 0; h < s.Hkv; ++h) {
    for (int64_t e = 0; e < s.d; ++e) {
      for (int64_t c = 0; c < bits; ++c) {
        rt[(h * bits + c) * s.d + e] = static_cast<float>(r[(h * s.d + e) * bits + c]);
      }
    }
  }
  return rt;
}

BucketLists BuildBucketLists(const Shape& s, const LshBins& bins, int64_t k_lsh,
                             const std::vector<int32_t>& evict, int br, int64_t chunk) {
  ATTNTUNE_CHECK(br > 0 && s.Lq <= s.Lk && s.causal && s.Hkv > 0 && s.Hq % s.Hkv == 0);
  const bool ks = !evict.empty();
  ATTNTUNE_CHECK(!ks || static_cast<int64_t>(evict.size()) == s.B * s.Hkv * s.Lk);
  const std::vector<BinnedKeys> sorted = SortKeysAll(s, bins);
  const LshPlan plan = SortQueries(s, bins, sorted, k_lsh, br, ks ? chunk : 0);
  // hax: the union of the ks sets of each chunk's rows (positions contiguous), as the
  // top-k family's query blocks of `chunk` rows; a block keeps the keys its rows reach.
  const KeyLists chunk_keys = ks ? BuildKeyLists(s, evict, static_cast<int>(plan.chunk)) : KeyLists();
  ATTNTUNE_CHECK(!ks || chunk_keys.query_blocks == plan.chunks);
  BucketLists out;
  out.spos.resize(static_cast<size_t>(s.B * s.Hkv * s.Lk));
  out.row_offsets.push_back(0);
  out.key_offsets.push_back(0);
  std::vector<int32_t> keys;
  std::vector<int64_t> positions;  // of the block's rows, ascending
  for (int64_t head = 0; head < s.B * s.Hkv; ++head) {
    const std::vector<int64_t>& perm = sorted[head].perm;
    int32_t* spos = out.spos.data() + head * s.Lk;
    for (int64_t n = 0; n < s.Lk; ++n) spos[perm[n]] = Int32(n);
    const LshQueries& q = plan.queries[head];
    const int32_t* e = ks ? evict.data() + head * s.Lk : nullptr;
    for (int64_t c = 0; c < plan.chunks; ++c) {
      for (int64_t x = plan.first[head * plan.chunks + c]; x < plan.first[head * plan.chunks + c + 1];
           ++x) {
        const LshBlock& blk = plan.blocks[x];
        ATTNTUNE_CHECK(blk.head == head && blk.end - blk.begin <= br);
        keys.clear();
        positions.clear();
        for (int64_t n = blk.begin; n < blk.end; ++n) {
          out.rows.push_back(Int32(q.rows[n]));
          out.lo.push_back(Int32(q.lo[n]));
          out.hi.push_back(Int32(q.hi[n]));
          for (int64_t u = q.lo[n]; u < q.hi[n]; ++u) keys.push_back(Int32(perm[u]));
          positions.push_back(LastKey(s, q.rows[n] % s.Lq));
        }
        if (ks) {  // the chunk's ks keys that some row of the block attends
          std::sort(positions.begin(), positions.end());
          const int64_t list = head * chunk_keys.query_blocks + c;
          for (int32_t n = chunk_keys.offsets[list]; n < chunk_keys.offsets[list + 1]; ++n) {
            const int32_t j = chunk_keys.keys[n];
            const auto p = std::lower_bound(positions.begin(), positions.end(), j);
            if (p != positions.end() && InTopK(*p, j, e)) keys.push_back(j);
          }
        }
        std::sort(keys.begin(), keys.end());
        keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
        out.keys.insert(out.keys.end(), keys.begin(), keys.end());
        out.head.push_back(Int32(head));
        out.row_offsets.push_back(Int32(static_cast<int64_t>(out.rows.size())));
        out.key_offsets.push_back(Int32(static_cast<int64_t>(out.keys.size())));
      }
    }
  }
  return out;
}

}  // namespace cuda_plan
}  // namespace attntune
