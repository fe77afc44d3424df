// The device selection's logic (kernels/cuda/select_core.h), run on the host through the
// device pipeline's order (select_host.h), against the host selection that the
// references and the CPU kernels use: prefix top-k evictions and key lists (ks, dma,
// hax's ks part), dma_decode's resident sets and chosen keys, LSH bins and the bucketed
// layout. Awkward shapes, ties, k >= L, L = 1, one bin. Runs on every machine.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <set>
#include <string>

#include "kernels/cuda/plan.h"
#include "kernels/cuda/select_core.h"
#include "kernels/kokkos/sparse.h"
#include "kernels/selection/selection.h"
#include "core/params.h"
#include "core/shape.h"
#include "core/tensors.h"
#include "select_host.h"

namespace cp = attntune::cuda_plan;
namespace sh = select_host;
using attntune::Shape;
using attntune::Tensors;

namespace {

// Scores of one head in a pattern that stresses the tie rules.
std::vector<double> Scores(const std::string& pattern, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  std::vector<double> x(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j) {
    if (pattern == "gaussian") x[j] = normal(rng);
    if (pattern == "few") x[j] = static_cast<double>((j * 7 + seed) % 5);  // many ties
    if (pattern == "equal") x[j] = 1.5;
    if (pattern == "rising") x[j] = static_cast<double>(j);
    if (pattern == "falling") x[j] = -static_cast<double>(j);
    if (pattern == "zeros") x[j] = (j % 3 == 0) ? -0.0 : (j % 3 == 1 ? 0.0 : -1.0);
  }
  return x;
}

std::vector<int32_t> HostEvictions(const std::vector<double>& x, int64_t heads, int64_t n,
                                   int64_t k) {
  std::vector<int32_t> evict;
  for (int64_t head = 0; head < heads; ++head) {
    const std::vector<int32_t> e = attntune::PrefixTopKEvictions(x.data() + head * n, n, k);
    evict.insert(evict.end(), e.begin(), e.end());
  }
  return evict;
}

// The host's projection from its 16 lanes' sums written out (the oracle of LshTree and
// LshTail): lanes l and l + 8, then ((0+4)+(2+6)) + ((1+5)+(3+7)) of the pairs, then the
// tail.
template <class E>
double LshCombine(const float lanes[16], const E* x, const float* mu, const float* r,
                  int64_t d) {
  double v[8];
  for (int k = 0; k < 8; ++k) {
    v[k] = cp::AddD(static_cast<double>(lanes[k]), static_cast<double>(lanes[k + 8]));
  }
  const double a0 = cp::AddD(v[0], v[4]), a1 = cp::AddD(v[1], v[5]), a2 = cp::AddD(v[2], v[6]),
               a3 = cp::AddD(v[3], v[7]);
  return cp::LshTail(cp::AddD(cp::AddD(a0, a2), cp::AddD(a1, a3)), x, mu, r, d);
}

}  // namespace

TEST_CASE("RankKey orders scores exactly as RanksBefore, ties and signed zeros included") {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> x = {0.0, -0.0, 1.0, -1.0, 1.0, 2.5, -inf, inf, 1e-300, -1e-300,
                                 -0.0, 3.0, 2.5, 1e300, -1e300, 0.0};
  for (int64_t a = 0; a < static_cast<int64_t>(x.size()); ++a) {
    for (int64_t b = 0; b < static_cast<int64_t>(x.size()); ++b) {
      INFO("x[" << a << "]=" << x[a] << " x[" << b << "]=" << x[b]);
      CHECK(cp::RanksBeforeKey(cp::RankKey(x[a]), a, cp::RankKey(x[b]), b) ==
            attntune::RanksBefore(x.data(), a, b));
    }
  }
}

TEST_CASE("Device prefix top-k evictions equal PrefixTopKEvictions") {
  const char* patterns[] = {"gaussian", "few", "equal", "rising", "falling", "zeros"};
  // n around the warp (32), chunk (128) and state scan round (1024: kChunkWarps warps of
  // 128 entries) sizes; k below, at and past n, and large enough that the chunk widens
  // (TopKChunk(1000) = 256, TopKChunk(3000) = 768).
  for (int64_t n : {1, 2, 31, 33, 127, 128, 129, 300, 1000, 1024, 1025, 3001}) {
    for (int64_t k : {1, 2, 5, 64, 127, 128, 129, 1000, 3000}) {
      for (const char* pattern : patterns) {
        std::vector<double> x = Scores(pattern, n, 1);
        const std::vector<double> second = Scores(pattern == std::string("equal") ? "few" : pattern, n, 2);
        x.insert(x.end(), second.begin(), second.end());  // two heads
        const std::vector<int32_t> want = HostEvictions(x, 2, n, k);
        for (bool sorted : {true, false}) {  // the states from the sorted order, or the scan
          const sh::TopK t = sh::RunTopK(sh::Keys(x), 2, n, k, sorted);
          INFO("n=" << n << " k=" << k << " " << pattern << " sorted=" << sorted);
          REQUIRE(t.evict == want);
          // The block's warps last first: no warp reads another's writes of the same step.
          if (sorted) REQUIRE(sh::RunTopK(sh::Keys(x), 2, n, k, true, true).evict == want);
          for (size_t tile = 0; tile < t.tile_max.size(); ++tile) {
            const int64_t head = tile / ((n + 31) / 32), t0 = tile % ((n + 31) / 32) * 32;
            const auto first = t.evict.begin() + head * n + t0;
            const auto last = first + std::min<int64_t>(32, n - t0);
            CHECK(t.tile_max[tile] == *std::max_element(first, last));
          }
        }
      }
    }
  }
}

TEST_CASE("The scan's lists are the top-k of every prefix of chunks") {
  for (const char* pattern : {"gaussian", "few", "equal", "zeros"}) {
    for (int64_t n : {129, 1000, 3001}) {
      for (int64_t k : {1, 64, 127, 1000}) {
        if (k >= n) continue;
        const std::vector<double> x = Scores(pattern, n, 3);
        const std::vector<uint64_t> key = sh::Keys(x);
        const sh::ScanLists scan = sh::RunTopKScan(key, 1, n, k);
        const std::vector<int32_t> order = sh::StableOrder(key.data(), n);
        const int64_t chunk = cp::TopKChunk(k);
        for (int64_t c = 0; c * chunk < n; ++c) {
          const int64_t end = std::min(n, (c + 1) * chunk);  // prefix [0, end)
          std::vector<int32_t> want;
          for (int32_t j : order) {
            if (j < end && static_cast<int64_t>(want.size()) < k) want.push_back(j);
          }
          INFO(pattern << " n=" << n << " k=" << k << " c=" << c);
          REQUIRE(scan.count[c] == static_cast<int32_t>(want.size()));
          const auto first = scan.pos.begin() + c * scan.cap;
          CHECK(std::vector<int32_t>(first, first + scan.count[c]) == want);
        }
      }
    }
  }
}

TEST_CASE("The scan takes the states up to chunks of 1,024 keys and 4M entries a buffer") {
  // ks k=64 and dma w=1024 at L=16384 with 8 KV heads; at k = 1024, L = 131072 fills a
  // buffer exactly, twice that is past it.
  CHECK(cp::TopKScanFits(8, cp::TopKChunk(64), 16384 / cp::TopKChunk(64), 64));
  CHECK(cp::TopKScanFits(8, cp::TopKChunk(1024), 16384 / cp::TopKChunk(1024), 1024));
  CHECK(cp::TopKScanFits(8, cp::TopKChunk(1024), 131072 / cp::TopKChunk(1024), 1024));
  CHECK_FALSE(cp::TopKScanFits(8, cp::TopKChunk(1024), 262144 / cp::TopKChunk(1024), 1024));
  CHECK(cp::TopKChunk(4099) == 1024);
  CHECK(cp::TopKScanFits(1, cp::TopKChunk(4099), 4, 4099));
  CHECK_FALSE(cp::TopKScanFits(1, cp::TopKChunk(4100), 4, 4100));
}

TEST_CASE("The prefix top-k keeps a chunk's state in shared memory up to k = 3,496") {
  CHECK(cp::TopKStateShared(cp::TopKChunk(1000), 1000));
  CHECK(cp::TopKStateShared(cp::TopKChunk(3000), 3000));
  // k = 3,496: 896 chunk keys, 3,496 members and the kernel's 32 static bytes fill the
  // 48 KB exactly; at 3,497 and 3,498 the dynamic part alone still fits (49,132 and
  // 49,144 bytes) but not with the static part, where such a launch fails.
  CHECK(cp::TopKChunk(3496) == 896);
  CHECK(cp::TopKStateShared(cp::TopKChunk(3496), 3496));
  CHECK_FALSE(cp::TopKStateShared(cp::TopKChunk(3497), 3497));
  CHECK_FALSE(cp::TopKStateShared(cp::TopKChunk(3498), 3498));
  CHECK_FALSE(cp::TopKStateShared(cp::TopKChunk(3500), 3500));
  // select_cuda_test's k = 4000 runs the states in global memory.
  CHECK_FALSE(cp::TopKStateShared(cp::TopKChunk(4000), 4000));
}

TEST_CASE("A selection launch takes at most 65,535 KV heads, the grid's y axis") {
  CHECK(std::string(cp::SelectHeadsWhy(1)).empty());
  CHECK(std::string(cp::SelectHeadsWhy(65535)).empty());
  CHECK(std::string(cp::SelectHeadsWhy(65536)) ==
        "the selection on the device takes B * Hkv <= 65535 (a grid axis)");
}

TEST_CASE("dma's scores take their shared memory within 48 KB up to d = 5,056") {
  CHECK(cp::kDmaScoresMaxD == 5056);
  CHECK(cp::DmaScoresSharedBytes(128) == 128 * 8 + 4 * 32 * 17 * 4);
  CHECK(cp::DmaScoresSharedBytes(cp::kDmaScoresMaxD) <= cp::kNoOptInSharedBytes);
  CHECK(cp::DmaScoresSharedBytes(cp::kDmaScoresMaxD + 1) > cp::kNoOptInSharedBytes);
}

TEST_CASE("Device key lists equal BuildKeyLists, within their bound") {
  struct Case {
    int64_t lq, lk, k;
    int br;
    const char* pattern;
  };
  const Case cases[] = {{130, 130, 7, 64, "gaussian"}, {97, 97, 200, 16, "few"},
                        {1, 1, 3, 64, "gaussian"},     {37, 37, 5, 128, "equal"},
                        {300, 577, 16, 64, "few"},     {577, 577, 64, 32, "rising"},
                        {1000, 1000, 1, 64, "zeros"},  {2048, 2048, 300, 32, "gaussian"},
                        // lists of several rounds of ListBuild (64 tiles of keys a round)
                        {4500, 4600, 700, 128, "gaussian"}, {6000, 6000, 40, 16, "rising"},
                        {4097, 4097, 2500, 128, "few"},
                        // the widest held-first buffer EnqueueKeyLists takes (48 KB)
                        {5000, 5000, 700, 2042, "gaussian"}};
  for (const Case& c : cases) {
    Shape shape;
    shape.B = 2;
    shape.Hq = 4;
    shape.Hkv = 2;
    shape.Lq = c.lq;
    shape.Lk = c.lk;
    std::vector<double> x;
    for (int64_t head = 0; head < 4; ++head) {
      const std::vector<double> h = Scores(c.pattern, c.lk, head);
      x.insert(x.end(), h.begin(), h.end());
    }
    sh::TopK t = sh::RunTopK(sh::Keys(x), 4, c.lk, c.k);
    for (double v : x) t.bias.push_back(static_cast<float>(v));
    const std::vector<int32_t> evict = HostEvictions(x, 4, c.lk, c.k);
    for (cp::KeyOrder order : {cp::KeyOrder::kAscending, cp::KeyOrder::kHeldFirst}) {
      const sh::Lists lists = sh::RunKeyLists(t, c.lq, c.br, order);
      const cp::KeyLists host = cp::BuildKeyLists(shape, evict, c.br, order);
      INFO("Lq=" << c.lq << " Lk=" << c.lk << " k=" << c.k << " br=" << c.br << " "
                 << c.pattern << " held first " << (order == cp::KeyOrder::kHeldFirst));
      REQUIRE(lists.query_blocks == host.query_blocks);
      const cp::KeyLists compact = lists.Compact();
      REQUIRE(compact.offsets == host.offsets);
      REQUIRE(compact.keys == host.keys);
      {  // the block's warps last first: the same lists at the same places
        const sh::Lists reversed = sh::RunKeyLists(t, c.lq, c.br, order, true);
        REQUIRE(reversed.begin == lists.begin);
        REQUIRE(reversed.end == lists.end);
        REQUIRE(reversed.keys == lists.keys);
        REQUIRE(reversed.key_evict == lists.key_evict);
        REQUIRE(reversed.key_bias == lists.key_bias);
      }
      for (size_t x = 0; x < lists.begin.size(); ++x) {
        const int64_t head = static_cast<int64_t>(x) / lists.query_blocks;
        int64_t p0, p1;
        cp::BlockPositions(static_cast<int64_t>(x) % lists.query_blocks, c.br, c.lq, c.lk, &p0,
                           &p1);
        REQUIRE(lists.end[x] - lists.begin[x] <= cp::ListBound(p0, p1, c.k));  // its room
        REQUIRE(lists.end[x] <= lists.capacity);
        for (int32_t n = lists.begin[x]; n < lists.end[x]; ++n) {
          REQUIRE(lists.key_evict[n] == t.evict[head * c.lk + lists.keys[n]]);
          REQUIRE(lists.key_bias[n] == t.bias[head * c.lk + lists.keys[n]]);
        }
      }
    }
  }
}

TEST_CASE("Device key lists of any evictions have no unwritten place") {
  // Evictions of no prefix top-k: many keys leave within a block, past the 2 Br that
  // ListBuild's buffer holds for the keys after the held ones. Each list is then
  // BuildKeyLists' cut after the held keys and the first ListRestCap others, every place
  // up to its end written. k = n: every list fits its room.
  const int64_t n = 3000;
  std::mt19937 rng(7);
  for (int br : {16, 64}) {
    std::vector<int32_t> evict(static_cast<size_t>(n));
    for (int64_t j = 0; j < n; ++j) {
      // Most keys leave together in the middle of a block (about 4 Br of them at a time,
      // past the buffer), some never enter (j), some are held to the end (n).
      const int64_t group = 4 * br, roll = rng() % 8;
      const int64_t e = roll == 0   ? j
                        : roll == 1 ? n
                                    : std::min(n, (j / group + 1) * group + br / 2);
      evict[j] = static_cast<int32_t>(e);
    }
    sh::TopK t;
    t.heads = 1;
    t.n = n;
    t.k = n;
    t.evict = evict;
    for (int64_t tile = 0; tile < (n + 31) / 32; ++tile) {
      t.tile_max.push_back(*std::max_element(evict.begin() + tile * 32,
                                             evict.begin() + std::min(n, tile * 32 + 32)));
    }
    Shape shape;
    shape.B = shape.Hq = shape.Hkv = 1;
    shape.Lq = shape.Lk = n;
    const cp::KeyLists host = cp::BuildKeyLists(shape, evict, br, cp::KeyOrder::kHeldFirst);
    const sh::Lists lists = sh::RunKeyLists(t, n, br, cp::KeyOrder::kHeldFirst);
    REQUIRE(lists.begin.size() == static_cast<size_t>(host.query_blocks));
    int64_t cut = 0;  // lists the buffer cut
    for (size_t x = 0; x < lists.begin.size(); ++x) {
      INFO("br=" << br << " list " << x);
      int64_t p0, p1;
      cp::BlockPositions(static_cast<int64_t>(x), br, n, n, &p0, &p1);
      const std::vector<int32_t> whole(host.keys.begin() + host.offsets[x],
                                       host.keys.begin() + host.offsets[x + 1]);
      int64_t held = 0;
      for (int32_t j : whole) held += cp::HeldThrough<int64_t>(j, evict[j], p0, p1);
      const int64_t want = std::min<int64_t>(static_cast<int64_t>(whole.size()),
                                             held + cp::ListRestCap(br, true));
      cut += want < static_cast<int64_t>(whole.size());
      REQUIRE(lists.end[x] - lists.begin[x] == want);
      REQUIRE(std::vector<int32_t>(lists.keys.begin() + lists.begin[x],
                                   lists.keys.begin() + lists.end[x]) ==
              std::vector<int32_t>(whole.begin(), whole.begin() + want));
    }
    CHECK(cut > 0);  // the case reaches the cut
  }
}

TEST_CASE("ListBegin is the sum of ListBound over the lists before it") {
  for (int64_t br : {1, 16, 32, 64, 128}) {
    for (int64_t lq : {1, 2, 37, 128, 129, 577}) {
      for (int64_t extra : {0, 1, 63, 700}) {  // Lk - Lq
        const int64_t lk = lq + extra, blocks = (lq + br - 1) / br;
        for (int64_t k : {int64_t{1}, int64_t{2}, int64_t{5}, int64_t{64}, int64_t{127},
                          int64_t{128}, int64_t{129}, int64_t{1000}, int64_t{5000},
                          INT64_MAX - 1, INT64_MAX}) {  // budgets past n: no overflow
          int64_t sum = 0;
          for (int64_t head = 0; head < 3; ++head) {
            for (int64_t qb = 0; qb < blocks; ++qb) {
              INFO("br=" << br << " Lq=" << lq << " Lk=" << lk << " k=" << k << " head=" << head
                         << " qb=" << qb);
              REQUIRE(cp::ListBegin(head, qb, br, lq, lk, k) == sum);
              int64_t p0, p1;
              cp::BlockPositions(qb, br, lq, lk, &p0, &p1);
              sum += cp::ListBound(p0, p1, k);
            }
          }
          REQUIRE(cp::ListBegin(3, 0, br, lq, lk, k) == sum);
        }
      }
    }
    CHECK(cp::ListBegin(3, 0, br, 0, 100, 64) == 0);  // no query rows, no room
  }
}

// dma's scores of one warp's keys (DmaWarpScores, kFused the host's fusing) from rows v
// (count rows of d), its staging area and the lanes past count poisoned first.
template <class E>
std::vector<double> WarpDmaScores(const E* v, int count, int d, const double* delta,
                                  double a) {
  std::vector<float> stage(cp::kDmaStageFloats, std::numeric_limits<float>::quiet_NaN());
  std::vector<double> out(32, std::numeric_limits<double>::quiet_NaN());
  auto emit = [&](int lane, double b) { out[static_cast<size_t>(lane)] = b; };
  if (cp::HostFusesDmaProducts()) {
    cp::DmaWarpScores<true>(cp::HostWarp(), v, count, d, delta, a, stage.data(), emit);
  } else {
    cp::DmaWarpScores<false>(cp::HostWarp(), v, count, d, delta, a, stage.data(), emit);
  }
  return out;
}

TEST_CASE("Device ks and dma scores agree with KsScores and equal DmaScores") {
  for (const char* text : {"B=2,Hq=4,Hkv=2,L=37,d=16", "B=1,Hq=2,Hkv=1,L=1,d=64",
                           "B=1,Hq=8,Hkv=2,Lq=130,Lk=300,d=64", "B=1,Hq=3,Hkv=3,L=200,d=128",
                           "B=1,Hq=2,Hkv=2,L=70,d=33"}) {
    const Shape shape = attntune::ParseShape(text, "test");
    const Tensors t = attntune::GaussianTensors(shape, 7);
    INFO(text);
    const std::vector<double> want = attntune::KsScores(t), got = sh::KsScores(t);
    REQUIRE(got.size() == want.size());
    double scale = 0.0;
    for (double v : want) scale = std::max(scale, std::fabs(v));
    for (size_t j = 0; j < want.size(); ++j) {
      INFO("j=" << j);
      REQUIRE(std::fabs(got[j] - want[j]) <= 1e-12 * std::max(1.0, scale));
      if (j % shape.Lk < static_cast<size_t>(shape.Lk - shape.Lq)) REQUIRE(got[j] == 0.0);
    }
    std::vector<double> delta, a;
    attntune::DmaDeltaA(t, 3, &delta, &a);
    const std::vector<double> b = attntune::DmaScores(t, 3);
    for (int64_t bh = 0; bh < shape.B * shape.Hkv; ++bh) {
      const int64_t hk = bh % shape.Hkv;
      for (int64_t j = 0; j < shape.Lk; ++j) {
        REQUIRE(cp::DmaScore(t.V(bh / shape.Hkv, hk, j), delta.data() + hk * shape.d, a[hk],
                             shape.d, cp::HostFusesDmaProducts()) == b[bh * shape.Lk + j]);
      }
      // A warp per 32 keys (attntune_select_dma_scores), the last one short.
      for (int64_t j0 = 0; j0 < shape.Lk; j0 += 32) {
        const int count = static_cast<int>(std::min<int64_t>(32, shape.Lk - j0));
        const std::vector<double> got =
            WarpDmaScores(t.V(bh / shape.Hkv, hk, j0), count, static_cast<int>(shape.d),
                          delta.data() + hk * shape.d, a[hk]);
        for (int lane = 0; lane < 32; ++lane) {
          INFO("head " << bh << " key " << j0 + lane);
          if (lane < count) {
            REQUIRE(got[lane] == b[bh * shape.Lk + j0 + lane]);
          } else {
            REQUIRE(std::isnan(got[lane]));  // nothing emitted past the warp's keys
          }
        }
      }
    }
  }
}

TEST_CASE("The chunk sums' prefix by a block is the running sum to rounding, rounds apart") {
  // Rounds of 256 chunks (kKsPrefixChunks x kChunkWarps): 600 chunks take three, and
  // one call covers 32 dims, leaving the others as they were.
  std::mt19937_64 rng(5);
  std::normal_distribution<double> normal;
  for (int64_t chunks : {1, 5, 31, 33, 255, 256, 257, 600}) {
    for (int64_t d : {16, 37, 70}) {
      std::vector<double> sums(static_cast<size_t>(chunks * d));
      for (double& x : sums) x = normal(rng);
      const std::vector<double> given = sums;
      double totals[cp::kChunkWarps][32];
      const int64_t e0 = d > 32 ? 32 : 0;
      cp::KsChunkPrefix(cp::HostBlock<cp::kChunkWarps>(), sums.data(), chunks, d, e0, totals);
      INFO("chunks=" << chunks << " d=" << d);
      std::vector<double> reversed = given;  // the block's warps last first: the same bits
      for (auto& row : totals) std::fill(std::begin(row), std::end(row), std::nan(""));
      cp::KsChunkPrefix(cp::HostBlock<cp::kChunkWarps>{true}, reversed.data(), chunks, d, e0,
                        totals);
      REQUIRE(reversed == sums);
      for (int64_t e = 0; e < d; ++e) {
        double run = 0.0, mass = 0.0;
        for (int64_t c = 0; c < chunks; ++c) {
          const size_t x = static_cast<size_t>(c * d + e);
          if (e < e0 || e >= e0 + 32) {
            REQUIRE(sums[x] == given[x]);
            continue;
          }
          REQUIRE(std::fabs(sums[x] - run) <= 1e-13 * std::max(1.0, mass));
          run += given[x];
          mass += std::fabs(given[x]);
        }
      }
    }
  }
}

TEST_CASE("Device LSH bins equal ComputeLshBins bit for bit") {
  struct Case {
    const char* shape;
    int64_t bits;
    bool argmax, mu;
  };
  const Case cases[] = {{"B=2,Hq=4,Hkv=2,L=37,d=16", 3, false, false},
                        {"B=1,Hq=2,Hkv=1,L=300,d=64", 8, false, true},
                        {"B=1,Hq=6,Hkv=3,Lq=50,Lk=77,d=37", 5, true, true},  // a tail past d16
                        {"B=1,Hq=2,Hkv=2,L=200,d=128", 1, true, false},      // one bin
                        {"B=1,Hq=1,Hkv=1,L=64,d=128", 16, false, false},
                        // the wide kernel: terms in 16 registers, then none
                        {"B=1,Hq=2,Hkv=1,L=40,d=200", 6, false, true},
                        {"B=1,Hq=2,Hkv=1,Lq=20,Lk=33,d=300", 7, true, true}};
  for (const Case& c : cases) {
    const Shape shape = attntune::ParseShape(c.shape, "test");
    Tensors t = attntune::GaussianTensors(shape, 19);
    if (c.mu) {
      t.mu.resize(static_cast<size_t>(shape.Hkv * shape.d));
      for (size_t e = 0; e < t.mu.size(); ++e) t.mu[e] = 0.25f * static_cast<float>(e % 7) - 0.5f;
    }
    const attntune::LshBins want = attntune::ComputeLshBins(t, c.bits, c.argmax, 9);
    std::vector<int32_t> key_bin, query_bin;
    sh::Bins(t, cp::LshProjectionRows(t, c.bits, 9), c.bits, c.argmax, cp::HostFusesLshProducts(),
             &key_bin, &query_bin);
    INFO(c.shape << " bits=" << c.bits);
    CHECK(key_bin == want.key_bin);
    CHECK(query_bin == want.query_bin);
  }
  // A key whose sign depends on the order in which the host adds its lanes: lanes 0 and 2
  // cancel (1e20 - 1e20) before lane 1 (1) is added, as ((0+4)+(2+6)) + ((1+5)+(3+7)).
  {
    Tensors t;
    t.shape.d = 16;
    t.q.assign(16, 0.f);
    t.k.assign(16, 0.f);
    t.v.assign(16, 0.f);
    t.k[0] = 1e10f;
    t.k[1] = 1.0f;
    t.k[2] = 1e10f;
    t.proj.assign(16, 0.f);  // R [1][16][1]
    t.proj[0] = 1e10f;
    t.proj[1] = 1.0f;
    t.proj[2] = -1e10f;
    const attntune::LshBins want = attntune::ComputeLshBins(t, 1, false, 0);
    std::vector<int32_t> key_bin, query_bin;
    sh::Bins(t, cp::LshProjectionRows(t, 1, 0), 1, false, cp::HostFusesLshProducts(), &key_bin,
             &query_bin);
    REQUIRE(want.key_bin[0] == 1);
    CHECK(key_bin == want.key_bin);
  }
  // The key whose bin depends on the rounding of one product (HostFusesLshProducts'):
  // the device bins it as the host only with the host's choice.
  Tensors t;
  t.shape.d = 32;
  t.q.assign(32, 0.f);
  t.k.assign(32, 0.f);
  t.v.assign(32, 0.f);
  t.k[0] = -1.0f;
  t.k[16] = 1.0f + 0x1p-23f;
  t.proj.assign(64, 0.f);
  t.proj[0] = 1.0f;
  t.proj[32] = 1.0f - 0x1p-23f;
  const attntune::LshBins want = attntune::ComputeLshBins(t, 2, true, 0);
  const std::vector<float> rt = cp::LshProjectionRows(t, 2, 0);
  std::vector<int32_t> same, other, query_bin;
  sh::Bins(t, rt, 2, true, cp::HostFusesLshProducts(), &same, &query_bin);
  sh::Bins(t, rt, 2, true, !cp::HostFusesLshProducts(), &other, &query_bin);
  CHECK(same == want.key_bin);
  CHECK(other != want.key_bin);
}

TEST_CASE("ToFloat widens every fp16 and bf16 value exactly") {
  for (uint32_t b = 0; b < 65536; ++b) {
    const uint16_t bits = static_cast<uint16_t>(b);
    _Float16 h;
    std::memcpy(&h, &bits, 2);
    const float want = static_cast<float>(h), got = cp::ToFloat(cp::F16Bits{bits});
    INFO("fp16 bits " << b);
    if (std::isnan(want)) {
      REQUIRE(std::isnan(got));
    } else {
      uint32_t w, g;
      std::memcpy(&w, &want, 4);
      std::memcpy(&g, &got, 4);
      REQUIRE(g == w);  // -0, subnormals and infinities included
    }
    const float wide = cp::ToFloat(cp::Bf16Bits{bits});
    uint32_t g;
    std::memcpy(&g, &wide, 4);
    REQUIRE(g == b << 16);
  }
}

// A caller's 2-byte tensors read in place: the ks and dma scores, the LSH terms and dma_decode's
// q·k of fp16/bf16 bits equal those of their fp32 values, bit for bit.
template <class E>
void CheckReadInPlace(uint16_t (*round)(float)) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (int64_t d : {16, 37, 128, 200}) {
    const int64_t rows = 70, shift = 3;
    std::vector<E> q16(static_cast<size_t>(rows * d)), k16(static_cast<size_t>((rows + shift) * d));
    std::vector<float> q32(q16.size()), k32(k16.size());
    for (size_t x = 0; x < q16.size(); ++x) {
      q16[x] = E{round(normal(rng))};
      q32[x] = cp::ToFloat(q16[x]);
    }
    for (size_t x = 0; x < k16.size(); ++x) {
      k16[x] = E{round(normal(rng))};
      k32[x] = cp::ToFloat(k16[x]);
    }
    std::vector<double> prefix(static_cast<size_t>(d));
    for (double& e : prefix) e = normal(rng);
    std::vector<double> want(static_cast<size_t>(rows), 0.0), got(want.size(), 0.0);
    cp::KsChunkScores(cp::HostWarp(), q32.data(), 0, k32.data(), prefix.data(), 1, 0, rows,
                      shift, d, want.data());
    cp::KsChunkScores(cp::HostWarp(), q16.data(), 0, k16.data(), prefix.data(), 1, 0, rows,
                      shift, d, got.data());
    INFO("d=" << d);
    CHECK(got == want);
    std::vector<float> mu(static_cast<size_t>(d)), r(static_cast<size_t>(d));
    for (float& e : mu) e = 0.1f * normal(rng);
    for (float& e : r) e = normal(rng);
    for (int lane = 0; lane < 16; ++lane) {
      // Apart before: a reader that writes nothing leaves them unequal.
      float u32[cp::kLshMaxPerLane], u16[cp::kLshMaxPerLane];
      std::fill(u32, u32 + cp::kLshMaxPerLane, 0.f);
      std::fill(u16, u16 + cp::kLshMaxPerLane, std::numeric_limits<float>::quiet_NaN());
      cp::LshTerms(k32.data(), mu.data(), d, lane, u32);
      cp::LshTerms(k16.data(), mu.data(), d, lane, u16);
      for (int m = 0; m < cp::kLshMaxPerLane; ++m) CHECK(u16[m] == u32[m]);
      CHECK(cp::LshLane(q16.data(), mu.data(), r.data(), d, lane, true) ==
            cp::LshLane(q32.data(), mu.data(), r.data(), d, lane, true));
    }
    CHECK(cp::LshTail(0.25, q16.data(), nullptr, r.data(), d) ==
          cp::LshTail(0.25, q32.data(), nullptr, r.data(), d));
    std::vector<double> delta(static_cast<size_t>(d));
    for (double& e : delta) e = normal(rng);
    for (int64_t j0 = 0; j0 < rows + shift; j0 += 32) {
      const int count = static_cast<int>(std::min<int64_t>(32, rows + shift - j0));
      const std::vector<double> w16 = WarpDmaScores(k16.data() + j0 * d, count,
                                                     static_cast<int>(d), delta.data(), 0.7);
      const std::vector<double> w32 = WarpDmaScores(k32.data() + j0 * d, count,
                                                     static_cast<int>(d), delta.data(), 0.7);
      for (int lane = 0; lane < count; ++lane) CHECK(w16[lane] == w32[lane]);
    }
    for (int64_t i = 0; i < rows; i += 7) {
      for (int64_t j = 0; j < rows + shift; j += 5) {
        CHECK(cp::DecodeDot(q16.data() + i * d, k16.data() + j * d, d) ==
              cp::DecodeDot(q32.data() + i * d, k32.data() + j * d, d));
      }
    }
  }
}

uint16_t RoundF16(float x) {
  const _Float16 h = static_cast<_Float16>(x);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

uint16_t RoundBf16(float x) {  // the nearest bf16 (finite x): its top 16 bits
  const float r = attntune::RoundToDtype(x, attntune::Dtype::kBf16);
  uint32_t u;
  std::memcpy(&u, &r, 4);
  return static_cast<uint16_t>(u >> 16);
}

TEST_CASE("A caller's fp16 and bf16 values read in place give the scores of their fp32 values") {
  CheckReadInPlace<cp::F16Bits>(RoundF16);
  CheckReadInPlace<cp::Bf16Bits>(RoundBf16);
}

TEST_CASE("Four projections at once and the tree by halving are the host's sums") {
  std::mt19937 rng(5);
  std::normal_distribution<float> normal(0.f, 1.f);
  for (int d : {16, 37, 128, 136, 200, 256}) {  // terms in registers: d / 16 <= 16
    std::vector<float> x(static_cast<size_t>(d)), mu(x.size()), r(static_cast<size_t>(4 * d));
    for (float& e : x) e = normal(rng);
    for (float& e : mu) e = 0.1f * normal(rng);
    for (float& e : r) e = normal(rng);
    for (bool fused : {false, true}) {
      for (int n = 1; n <= 4; ++n) {
        float lanes[4][16];
        for (int lane = 0; lane < 16; ++lane) {
          float u[cp::kLshMaxPerLane], acc[4];
          if (d / 16 <= 8) {
            cp::LshTerms<8>(x.data(), mu.data(), d, lane, u);
            cp::LshLaneTermsN<8, 4>(u, r.data(), d, lane, n, fused, acc);
          } else {
            cp::LshTerms(x.data(), mu.data(), d, lane, u);
            cp::LshLaneTermsN<cp::kLshMaxPerLane, 4>(u, r.data(), d, lane, n, fused, acc);
          }
          for (int c = 0; c < n; ++c) {
            lanes[c][lane] = acc[c];
            const float want = cp::LshLane(x.data(), mu.data(), r.data() + c * d, d, lane, fused);
            INFO("d=" << d << " n=" << n << " c=" << c << " lane=" << lane);
            CHECK(acc[c] == want);
          }
        }
        for (int c = 0; c < n; ++c) {
          const float* rc = r.data() + c * d;
          CHECK(cp::LshTail(cp::LshTree(lanes[c]), x.data(), mu.data(), rc, d) ==
                LshCombine(lanes[c], x.data(), mu.data(), rc, d));
        }
      }
    }
  }
  // The tree's pairs: lanes 0 and 2 cancel before lane 1 joins, as in LshCombine.
  float lanes[16] = {};
  lanes[0] = 1e20f;
  lanes[1] = 1.f;
  lanes[2] = -1e20f;
  CHECK(cp::LshTree(lanes) == 1.0);
}

TEST_CASE("The host's projections are its lanes' sums in the device's order, 1 to 16 of them") {
  // Terms of magnitudes 2^-30 .. 2^30, so that the lanes' sums differ by orders of
  // magnitude and another order of additions (or projections trading places in the
  // host's vectors) gives other doubles.
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0.f, 1.f);
  std::uniform_int_distribution<int> exponent(-30, 30);
  const bool fused = cp::HostFusesLshProducts();
  for (int d : {16, 37, 128, 136, 200}) {
    for (int h = 1; h <= 16; ++h) {
      std::vector<float> u(static_cast<size_t>(d)), r(static_cast<size_t>(h * d));
      for (float& e : u) e = std::ldexp(normal(rng), exponent(rng));
      for (float& e : r) e = std::ldexp(normal(rng), exponent(rng));
      double got[16];
      attntune::LshProjections(u.data(), r.data(), d, h, got);
      for (int c = 0; c < h; ++c) {
        float lanes[16];
        for (int lane = 0; lane < 16; ++lane) {
          lanes[lane] = cp::LshLane(u.data(), nullptr, r.data() + c * d, d, lane, fused);
        }
        INFO("d=" << d << " h=" << h << " c=" << c);
        CHECK(got[c] == LshCombine(lanes, u.data(), static_cast<const float*>(nullptr),
                                   r.data() + c * d, d));
      }
    }
  }
}

// The blocks' bound at a budget past every position (lsh's k and hax's k_lsh go to
// INT64_MAX): no window break, and no k + 1 to overflow (a constant expression would not
// compile with it): 1000 / 32 + 1 blocks plus one run a bin.
static_assert(cp::BucketBlocksBound(1000, 500, 16, INT64_MAX, 32) == 48);
static_assert(cp::BucketBlocksBound(1000, 500, 16, INT64_MAX, 32) ==
              cp::BucketBlocksBound(1000, 500, 16, 500, 32));
static_assert(cp::BucketBlocksBound(1000, 500, 16, 99, 32) == 48 + 5);

TEST_CASE("Device bucketed layout equals BuildBucketLists for lsh and hax") {
  struct Case {
    const char* variant;
    const char* shape;
    int64_t bits, k, k_ks;
    bool argmax;
    int br;
    int64_t chunk;
    bool tied, zero_proj;
  };
  const Case cases[] = {
      {"lsh", "B=2,Hq=6,Hkv=3,L=37,d=16", 2, 4, 0, false, 16, 0},
      {"lsh", "B=1,Hq=2,Hkv=1,L=1,d=16", 3, 4, 0, false, 64, 0},
      {"lsh", "B=1,Hq=4,Hkv=2,Lq=300,Lk=577,d=16", 4, 9, 0, false, 64, 0},
      {"lsh", "B=1,Hq=8,Hkv=2,L=577,d=16", 3, 32, 0, true, 128, 0},
      {"lsh", "B=1,Hq=3,Hkv=1,L=200,d=16", 1, 17, 0, true, 64, 0},           // one bin
      {"lsh", "B=2,Hq=2,Hkv=2,L=37,d=16", 2, 1000, 0, false, 16, 0, false, true},  // k > L, one bin
      {"lsh", "B=1,Hq=2,Hkv=1,L=1000,d=16", 2, 1, 0, false, 32, 0},         // windows apart
      {"hax", "B=2,Hq=6,Hkv=3,L=37,d=16", 2, 3, 5, false, 16, 512, true},
      {"hax", "B=1,Hq=1,Hkv=1,L=1,d=16", 2, 3, 3, false, 64, 512},
      {"hax", "B=1,Hq=4,Hkv=2,Lq=300,Lk=577,d=16", 3, 8, 8, false, 64, 100, true},
      {"hax", "B=1,Hq=4,Hkv=1,L=577,d=16", 4, 16, 16, true, 128, 512},
      {"hax", "B=1,Hq=2,Hkv=1,L=577,d=16", 2, 5, 7, false, 16, 0, true},
      {"hax", "B=1,Hq=2,Hkv=1,L=37,d=16", 1, 100, 1000, true, 16, 7, true},  // budgets > L
      {"hax", "B=1,Hq=2,Hkv=2,L=130,d=16", 2, 6, 40, false, 32, 64, false, true},
  };
  for (const Case& c : cases) {
    const Shape shape = attntune::ParseShape(c.shape, "test");
    Tensors t = attntune::GaussianTensors(shape, 17);
    if (c.tied) {
      t.scores.resize(static_cast<size_t>(shape.B * shape.Hkv * shape.Lk));
      for (size_t n = 0; n < t.scores.size(); ++n) t.scores[n] = static_cast<float>((n * 7) % 3);
    }
    if (c.zero_proj) t.proj.assign(static_cast<size_t>(shape.Hkv * shape.d * c.bits), 0.0f);
    const bool hax = std::string(c.variant) == "hax";
    const attntune::LshBins bins = attntune::ComputeLshBins(t, c.bits, c.argmax, 5);
    sh::TopK topk;
    std::vector<int32_t> evict;
    if (hax) {
      const std::vector<double> x = attntune::KsScores(t);
      topk = sh::RunTopK(sh::Keys(x), shape.B * shape.Hkv, shape.Lk, c.k_ks);
      evict = HostEvictions(x, shape.B * shape.Hkv, shape.Lk, c.k_ks);
      REQUIRE(topk.evict == evict);
    }
    const sh::Bucket got = sh::RunBucket(shape, bins.bins, bins.key_bin, bins.query_bin, c.k,
                                         hax ? &topk : nullptr, c.br, c.chunk);
    const cp::BucketLists want =
        cp::BuildBucketLists(shape, bins, c.k, evict, c.br, hax ? c.chunk : 0);
    INFO(c.variant << " " << c.shape << " k=" << c.k << " k_ks=" << c.k_ks << " br=" << c.br
                   << " chunk=" << c.chunk);
    sh::CheckLayout(got, want, shape, hax, evict);
  }
}

TEST_CASE("Device dma_decode selection equals SelectDecodeKokkos") {
  struct Case {
    const char* shape;
    int64_t w_kv, w_q, r;
    // "gaussian", "tied" (Delta = 0: every b equal), "few" (b takes few values), "same_k"
    // (every key of a head alike: the candidates' q·k tie, the smaller j is chosen)
    const char* values;
  };
  const Case cases[] = {
      {"B=2,Hq=4,Hkv=2,L=37,d=16", 5, 3, 4, "gaussian"},
      {"B=1,Hq=2,Hkv=1,L=1,d=16", 4, 2, 2, "gaussian"},
      {"B=1,Hq=8,Hkv=1,L=200,d=16", 16, 4, 8, "gaussian"},
      {"B=1,Hq=6,Hkv=3,L=130,d=16", 1000, 5, 3, "gaussian"},  // w_kv > L
      {"B=1,Hq=3,Hkv=3,L=100,d=16", 7, 0, 0, "gaussian"},
      {"B=1,Hq=4,Hkv=2,L=77,d=16", 6, 40, 30, "tied"},
      {"B=1,Hq=2,Hkv=1,L=300,d=16", 12, 4, 40, "few"},
      {"B=1,Hq=2,Hkv=2,L=500,d=16", 130, 8, 64, "few"},  // resident sets past a chunk
      {"B=1,Hq=2,Hkv=1,L=120,d=16", 10, 3, 20, "same_k"},
  };
  for (const Case& c : cases) {
    const Shape shape = attntune::ParseShape(c.shape, "test");
    Tensors t = attntune::GaussianTensors(shape, 23);
    if (std::string(c.values) == "tied") t.delta.assign(static_cast<size_t>(shape.Hkv * shape.d), 0.0f);
    if (std::string(c.values) == "few") {  // b = A softplus(round(v_0)): few values, many ties
      for (float& v : t.v) v = std::round(v);
      t.delta.assign(static_cast<size_t>(shape.Hkv * shape.d), 0.0f);
      for (int64_t h = 0; h < shape.Hkv; ++h) t.delta[h * shape.d] = 1.0f;
    }
    if (std::string(c.values) == "same_k") {
      for (int64_t j = 0; j < shape.B * shape.Hkv * shape.Lk; ++j) {
        std::copy(t.k.begin() + (j / shape.Lk) * shape.Lk * shape.d,
                  t.k.begin() + ((j / shape.Lk) * shape.Lk + 1) * shape.d, t.k.begin() + j * shape.d);
      }
    }
    const std::vector<double> x = attntune::DmaScores(t, 4);
    const attntune::DecodeSelection want = attntune::SelectDecodeKokkos(t, x, c.w_kv, c.w_q, c.r);
    const sh::TopK topk = sh::RunTopK(sh::Keys(x), shape.B * shape.Hkv, shape.Lk, c.w_kv);
    const sh::Decode got = sh::RunDecode(t, topk, c.w_q, c.r);
    INFO(c.shape << " w_kv=" << c.w_kv << " w_q=" << c.w_q << " r=" << c.r << " " << c.values);
    REQUIRE(got.evict == want.evict);
    const cp::KeyLists lists = cp::BuildKeyLists(shape, want.evict, cp::kDecodeListSteps);
    const cp::KeyLists resident = got.resident.Compact();
    CHECK(resident.offsets == lists.offsets);
    CHECK(resident.keys == lists.keys);
    // One step's update from the cache (StepReplace): the key step t replaces, as the
    // whole run's evictions say.
    for (int64_t head = 0; head < shape.B * shape.Hkv; ++head) {
      for (int64_t t = 1; t < shape.Lk; ++t) {
        const int64_t list = head * got.resident.query_blocks + (t - 1) / cp::kDecodeListSteps;
        const int32_t first = got.resident.begin[list], last = got.resident.end[list];
        const int64_t replaced = cp::StepReplace(
            cp::HostWarp(), got.resident.keys.data() + first, got.resident.key_evict.data() + first,
            last - first, t, c.w_kv, topk.key.data() + head * shape.Lk);
        const int64_t h = head * shape.Lk;
        const int64_t expected = want.evict[h + t] == t ? -1 : got.dropped[h + t] >= 0 ? got.dropped[h + t] : -2;
        INFO("head " << head << " step " << t);
        REQUIRE(replaced == expected);
      }
    }
    REQUIRE(got.chosen_offsets == want.offsets);
    for (size_t row = 0; row + 1 < want.offsets.size(); ++row) {
      INFO("row " << row);
      REQUIRE(sh::SortedRow(got.chosen, got.chosen_offsets, row) ==
              sh::SortedRow(want.chosen, want.offsets, row));
    }
  }
}

TEST_CASE(
    "dma_decode's chosen keys with non-finite q and k: each slot once, a NaN q·k last, on both "
    "paths") {
  // What a row chooses, from its candidates' q·k alone: larger first, ties by smaller j,
  // a NaN after every number (NaNs by smaller j). A comparator of its own, not the
  // device's keys.
  auto by_spec = [](const float* q, const float* kh, int64_t d, const std::vector<int32_t>& cand,
                    int64_t w_q, bool* has_nan) {
    std::vector<std::pair<double, int32_t>> scored;
    for (int32_t j : cand) {
      double dot = 0.0;
      for (int64_t c = 0; c < d; ++c) dot += static_cast<double>(q[c]) * kh[j * d + c];
      scored.push_back({dot, j});
      *has_nan = *has_nan || std::isnan(dot);
    }
    std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) {
      const bool na = std::isnan(a.first), nb = std::isnan(b.first);
      if (na != nb) return nb;
      if (!na && a.first != b.first) return a.first > b.first;
      return a.second < b.second;
    });
    std::vector<int32_t> chosen;
    for (size_t x = 0; x < scored.size() && static_cast<int64_t>(x) < w_q; ++x) {
      chosen.push_back(scored[x].second);
    }
    std::sort(chosen.begin(), chosen.end());
    return chosen;
  };
  const Shape shape = attntune::ParseShape("B=1,Hq=4,Hkv=2,L=90,d=16", "test");
  const int64_t w_kv = 6, w_q = 5, r = 12, n = shape.Lk, group = shape.Group();
  Tensors t = attntune::GaussianTensors(shape, 23);
  sh::PutNonFiniteQK(&t);
  const std::vector<double> x = attntune::DmaScores(t, 4);  // of v: finite
  const sh::TopK topk = sh::RunTopK(sh::Keys(x), shape.Hkv, n, w_kv);
  const sh::Decode got = sh::RunDecode(t, topk, w_q, r);  // chosen poisoned with -1 first
  // The CPU's decode selection (the Kokkos kernel's) by the same rule.
  const attntune::DecodeSelection cpu = attntune::SelectDecodeKokkos(t, x, w_kv, w_q, r);
  REQUIRE(cpu.offsets == got.chosen_offsets);
  int64_t nan_rows = 0, nan_left_out = 0;
  for (int64_t hk = 0; hk < shape.Hkv; ++hk) {
    for (int64_t step = 0; step < n; ++step) {
      const std::vector<int32_t> cand =
          sh::Candidates(step, r, got.evict.data() + hk * n, got.dropped.data() + hk * n);
      for (int64_t g = 0; g < group; ++g) {
        const int64_t hq = hk * group + g, row = hq * n + step;
        bool has_nan = false;
        const std::vector<int32_t> want =
            by_spec(t.Q(0, hq, step), t.K(0, hk, 0), shape.d, cand, w_q, &has_nan);
        INFO("query head " << hq << " step " << step);
        REQUIRE(sh::SortedRow(got.chosen, got.chosen_offsets, static_cast<size_t>(row)) == want);
        REQUIRE(sh::SortedRow(cpu.chosen, cpu.offsets, static_cast<size_t>(row)) == want);
        if (has_nan && want.size() >= 2) ++nan_rows;
        if (has_nan && static_cast<int64_t>(cand.size()) > w_q) ++nan_left_out;
      }
    }
  }
  // Rows that a NaN q·k reaches, where ranks compared as doubles left slots unwritten or
  // chose a NaN before a number.
  CHECK(nan_rows >= 20);
  CHECK(nan_left_out >= 5);
}

TEST_CASE("Selection kernels name the phases bench reports") {
  CHECK(cp::SelectionPhaseOf("attntune_select_topk_chunks") == "attntune::select::topk_chunks");
  CHECK(cp::SelectionPhaseOf(
            "_ZN3cub17CUB_300001_SM_9006detail4scan16DeviceScanKernelINS2_10policy_hubIiiijN4cuda3std3__44plusIvEEE10Policy") ==
        "attntune::select::cub");
  CHECK(cp::SelectionPhaseOf("attntune_blocksparse_f16_d128_br64_bc64_w4_s2") == "");
}
