// Selection on the device (DESIGN.md s1: ks, dma, hax's ks part, lsh's bins and layout,
// dma_decode): the algorithmic core, in plain C++. Every function here is the code a
// selection kernel (select.cu) runs; the CPU tests (tests/gpu/cuda_select_test.cpp) run
// the same functions, a warp's steps through HostWarp, and compare the results with the
// host selection (kernels/selection, BuildKeyLists, BuildBucketLists, SelectDecodeKokkos).
// No CUDA header: __host__ __device__ comes from plan.h's ATTNTUNE_HD.
//
// Warp-level steps take a `Warp` with two members: Ballot(f) (bit l set iff f(l) holds
// for lane l; every lane evaluates f) and Each(f) (every lane runs f(l)). select.cu's
// DeviceWarp maps them onto __ballot_sync and the calling lane; HostWarp runs the 32
// lanes in order, which gives the same result because the lanes of one step write
// disjoint places. Block-level steps (ChunkState) take a `Block` of warps the same way
// (HostBlock, select.cu's DeviceBlock).
#pragma once

#include <cmath>
#include <cstdint>
#include <cstring>

#include "kernels/cuda/plan.h"

// The warp-level templates are inlined into their kernels (a call would spill).
#if defined(__CUDACC__)
#define ATTNTUNE_HD_INLINE __host__ __device__ __forceinline__
#else
#define ATTNTUNE_HD_INLINE inline
#endif

// Unrolled on the device, so that a lane's small arrays stay in registers (a loop with a
// runtime index would put them on the stack); nothing on the host.
#if defined(__CUDA_ARCH__)
#define ATTNTUNE_UNROLL _Pragma("unroll")
#else
#define ATTNTUNE_UNROLL
#endif

namespace attntune {
namespace cuda_plan {

// ---- bits and warps ----

ATTNTUNE_HD inline int PopCount32(uint32_t x) {
#if defined(__CUDA_ARCH__)
  return __popc(x);
#else
  return __builtin_popcount(x);
#endif
}

/// Index of the lowest set bit of x (x != 0).
ATTNTUNE_HD inline int LowestBit(uint32_t x) {
#if defined(__CUDA_ARCH__)
  return __ffs(static_cast<int>(x)) - 1;
#else
  return __builtin_ctz(x);
#endif
}

/// The bits of the lanes below `lane` (0 for lane 0).
ATTNTUNE_HD inline uint32_t LanesBelow(int lane) {
  return lane == 0 ? 0u : (0xffffffffu >> (32 - lane));
}

/// The 32 lanes of a warp run in order on the host. Sum adds the lanes' values in lane
/// order (DeviceWarp: a butterfly, so the two agree to rounding). Lane-private arrays
/// have kSlots rows, lane l's at Slot(l) (the device: one row, its own).
struct HostWarp {
  static constexpr int kSlots = 32;
  int Slot(int lane) const { return lane; }
  /// The lanes' worst (key, j) (StepReplace: the largest key, then the smallest j >= 0;
  /// j < 0: the lane holds none); its j, or -1.
  int64_t WorstOf(const uint64_t* key, const int64_t* j) const {
    int64_t best = -1;
    uint64_t best_key = 0;
    for (int lane = 0; lane < 32; ++lane) {
      if (j[lane] < 0) continue;
      if (best < 0 || key[lane] > best_key || (key[lane] == best_key && j[lane] < best)) {
        best = j[lane];
        best_key = key[lane];
      }
    }
    return best;
  }
  template <class F>
  double Sum(const F& f) const {
    double sum = 0.0;
    for (int lane = 0; lane < 32; ++lane) sum += f(lane);
    return sum;
  }
  template <class F>
  int32_t Max(const F& f) const {
    int32_t m = f(0);
    for (int lane = 1; lane < 32; ++lane) m = f(lane) > m ? f(lane) : m;
    return m;
  }
  template <class F>
  uint32_t Ballot(const F& f) const {
    uint32_t mask = 0;
    for (int lane = 0; lane < 32; ++lane) {
      if (f(lane)) mask |= 1u << lane;
    }
    return mask;
  }
  template <class F>
  void Each(const F& f) const {
    for (int lane = 0; lane < 32; ++lane) f(lane);
  }
  /// The warp's barrier (the device's __syncwarp): the lanes run each step whole here.
  void Sync() const {}
};

/// Appends the lanes of `mask` in lane order: lane l of the mask goes to slot
/// base + (its rank among the mask's lanes); `emit(slot, lane)`.
template <class Warp, class Emit>
ATTNTUNE_HD_INLINE void EmitLanes(const Warp& w, uint32_t mask, int64_t base, const Emit& emit) {
  w.Each([&](int lane) {
    if ((mask >> lane) & 1u) emit(base + PopCount32(mask & LanesBelow(lane)), lane);
  });
}

// ---- arithmetic as the host computes it ----

/// a * b + c in fp32, fused (one rounding) or not (two), as the host's build computes the
/// LSH projection (HostFusesLshProducts() says which).
ATTNTUNE_HD inline float MulAddF(float a, float b, float c, bool fused) {
#if defined(__CUDA_ARCH__)
  return fused ? __fmaf_rn(a, b, c) : __fadd_rn(__fmul_rn(a, b), c);
#else
  if (fused) return std::fmaf(a, b, c);
  volatile float product = a * b;  // volatile: the compiler must not fuse it
  return product + c;
#endif
}

/// The same in fp64 (HostFusesDmaProducts() says which the host's DmaScores does).
ATTNTUNE_HD inline double MulAddD(double a, double b, double c, bool fused) {
#if defined(__CUDA_ARCH__)
  return fused ? __fma_rn(a, b, c) : __dadd_rn(__dmul_rn(a, b), c);
#else
  if (fused) return std::fma(a, b, c);
  volatile double product = a * b;
  return product + c;
#endif
}

ATTNTUNE_HD inline double AddD(double a, double b) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(a, b);
#else
  return a + b;
#endif
}

/// a * b + c in fp64 where a * b is exact (two fp32 values): fused or not, the same.
ATTNTUNE_HD inline double ExactProductAdd(float a, float b, double c) {
#if defined(__CUDA_ARCH__)
  return __dadd_rn(__dmul_rn(static_cast<double>(a), static_cast<double>(b)), c);
#else
  return static_cast<double>(a) * static_cast<double>(b) + c;
#endif
}

// ---- ranking by a per-key score (ks, dma, hax's ks part, dma_decode) ----

/// A key that sorts ascending in the top-k order of RanksBefore (selection.h): a larger
/// score gives a smaller key, equal scores (+0 and -0 too) the same key, so that a stable
/// sort of positions by RankKey puts ties in position order (smaller j first).
ATTNTUNE_HD inline uint64_t RankKey(double x) {
  if (x == 0.0) x = 0.0;  // -0 -> +0: RanksBefore treats them as equal
  uint64_t u;
  memcpy(&u, &x, sizeof u);
  u = (u >> 63) != 0 ? ~u : (u | 0x8000000000000000ull);  // ascending in x
  return ~u;
}

/// Whether key i ranks before key j under RanksBefore, from their RankKeys.
ATTNTUNE_HD inline bool RanksBeforeKey(uint64_t key_i, int64_t i, uint64_t key_j, int64_t j) {
  return key_i < key_j || (key_i == key_j && i < j);
}

/// First index in [lo, hi) of the ascending `a` with a[index] >= v (hi when none).
template <class T>
ATTNTUNE_HD int64_t LowerBound(const T* a, int64_t lo, int64_t hi, T v) {
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (a[mid] < v) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  return lo;
}

/// First index in [lo, hi) of the ascending `a` with a[index] > v (hi when none).
template <class T>
ATTNTUNE_HD int64_t UpperBound(const T* a, int64_t lo, int64_t hi, T v) {
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (v < a[mid]) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  return lo;
}

// ---- scores ----

/// a * softplus(z), softplus written to stay finite for large |z| (the device's exp and
/// log1p may differ from the host's in the last bit).
ATTNTUNE_HD inline double DmaSoftplus(double z, double a) {
  const double softplus = z > 0.0 ? z + log1p(exp(-z)) : log1p(exp(z));
  return a * softplus;
}

/// dma's score b_j = a * softplus(v_j · delta) (DmaScores): the dot in index order,
/// fused or not as the host's build computes it.
ATTNTUNE_HD inline double DmaScore(const float* v, const double* delta, double a, int64_t d,
                                   bool fused) {
  double z = 0.0;
  for (int64_t c = 0; c < d; ++c) z = MulAddD(static_cast<double>(v[c]), delta[c], z, fused);
  return DmaSoftplus(z, a);
}

/// The most KV heads (B * Hkv) one selection launch takes: the kernels that run a block
/// per (chunk, head) put the heads on the grid's y axis (at most 65,535 blocks).
constexpr int64_t kSelectMaxHeads = 65535;
/// Why a selection over `heads` KV heads cannot launch ("" when it can).
inline const char* SelectHeadsWhy(int64_t heads) {
  return heads > kSelectMaxHeads
             ? "the selection on the device takes B * Hkv <= 65535 (a grid axis)"
             : "";
}

/// The shared memory a block may take without an opt-in, on every arch: static and
/// dynamic together (a launch past it fails).
constexpr int64_t kNoOptInSharedBytes = 48 * 1024;

/// Dims of the value rows that DmaWarpScores stages at a time: a 32-byte sector of fp16
/// or bf16 per row.
constexpr int kDmaDims = 16;
/// Floats of one warp's staging area in DmaWarpScores: 32 rows of kDmaDims, each padded
/// by one so that lane l reading row l hits its own bank.
constexpr int kDmaStageFloats = 32 * (kDmaDims + 1);
/// Warps per block of attntune_select_dma_scores, 32 keys each.
constexpr int kDmaWarps = 4;
/// attntune_select_dma_scores' shared memory for head dim d (all dynamic): the head's Δ
/// in fp64, then each warp's staging area.
ATTNTUNE_HD inline int64_t DmaScoresSharedBytes(int64_t d) {
  return d * 8 + int64_t{kDmaWarps} * kDmaStageFloats * 4;
}
/// The widest head dim whose dma scores fit kNoOptInSharedBytes.
constexpr int64_t kDmaScoresMaxD =
    (kNoOptInSharedBytes - int64_t{kDmaWarps} * kDmaStageFloats * 4) / 8;

/// dma's scores of `count` (1 to 32) consecutive keys by one warp, a key a lane:
/// emit(lane, b) with lane l's b = DmaScore of row l (the dot in index order, kFused the
/// host's fusing, DmaSoftplus). v: the keys' value rows, d elements each, read as fp32
/// (ToFloat); delta: the head's Δ. The warp stages its rows kDmaDims dims at a time in
/// `stage` (kDmaStageFloats, its own): in load step u lane l reads dim l % 16 of row
/// 2u + l / 16, so each step reads two rows' segments whole; the next segment is loaded
/// into registers before the products of the current one, so every lane of every warp
/// runs a key's chain of products while the loads are in flight.
template <bool kFused, class Warp, class E, class Emit>
ATTNTUNE_HD_INLINE void DmaWarpScores(const Warp& w, const E* v, int count, int d,
                                      const double* delta, double a, float* stage,
                                      const Emit& emit) {
  constexpr int kLd = kDmaDims + 1;
  float next[Warp::kSlots][kDmaDims];  // each lane's elements of the next segment
  double z[Warp::kSlots];              // each lane's dot so far
  auto load = [&](int c0) {
    w.Each([&](int lane) {
      ATTNTUNE_UNROLL
      for (int u = 0; u < kDmaDims; ++u) {
        const int row = 2 * u + lane / 16, c = c0 + lane % 16;
        next[w.Slot(lane)][u] =
            row < count && c < d ? ToFloat(v[static_cast<int64_t>(row) * d + c]) : 0.f;
      }
    });
  };
  w.Each([&](int lane) { z[w.Slot(lane)] = 0.0; });
  load(0);
  for (int c0 = 0; c0 < d; c0 += kDmaDims) {
    w.Each([&](int lane) {
      ATTNTUNE_UNROLL
      for (int u = 0; u < kDmaDims; ++u) {
        stage[(2 * u + lane / 16) * kLd + lane % 16] = next[w.Slot(lane)][u];
      }
    });
    w.Sync();  // the segment staged
    if (c0 + kDmaDims < d) load(c0 + kDmaDims);
    const int n = d - c0 < kDmaDims ? d - c0 : kDmaDims;
    w.Each([&](int lane) {
      const float* row = stage + lane * kLd;
      double x = z[w.Slot(lane)];
      ATTNTUNE_UNROLL
      for (int c = 0; c < kDmaDims; ++c) {
        if (c < n) x = MulAddD(static_cast<double>(row[c]), delta[c0 + c], x, kFused);
      }
      z[w.Slot(lane)] = x;
    });
    w.Sync();  // read before the next segment overwrites it
  }
  w.Each([&](int lane) {
    if (lane < count) emit(lane, DmaSoftplus(z[w.Slot(lane)], a));
  });
}

/// ks's default scores (KsScores) of one chunk [i0, i1) of query rows of one KV head, by
/// one warp: for each query head g of the group in order, the running sum S of its
/// query rows from `prefix` (the sum of the rows before i0, [group][d]), then each row i
/// adds k_{i + shift} · S / |S| to xs[i - i0] (when |S| > 0). Lane l holds dims l, l + 32,
/// ... (d <= 32 * kPer: the kernel takes kPer = 4 up to d = 128, KsPerLane; every term
/// past d is zero, so a larger kPer gives the same sums); q rows of head g at
/// q + g * q_head_stride. A lane's elements of q row i + 1 and k row i + 1 + shift are
/// loaded before row i's reductions, so that they are in flight while those run (loaded
/// at their use, every row would wait for its own); the arithmetic and its order are
/// those of loading at the use. (Two rows ahead take the sm_90 kernel from 64 registers
/// to 76.)
constexpr int kKsMaxPerLane = 8;
/// The dims a lane holds for head dim d: 4 up to d = 128, else kKsMaxPerLane.
ATTNTUNE_HD inline int KsPerLane(int64_t d) { return d <= 128 ? 4 : kKsMaxPerLane; }
template <int kPer = kKsMaxPerLane, class Warp, class E>
ATTNTUNE_HD_INLINE void KsChunkScores(const Warp& w, const E* q, int64_t q_head_stride,
                                      const E* k, const double* prefix, int64_t group,
                                      int64_t i0, int64_t i1, int64_t shift, int64_t d,
                                      double* xs) {
  for (int64_t g = 0; g < group; ++g) {
    const E* qg = q + g * q_head_stride;
    double s[Warp::kSlots][kPer];  // each lane's running sums
    w.Each([&](int lane) {
      for (int m = 0; m < kPer; ++m) {
        const int64_t e = lane + 32 * m;
        s[w.Slot(lane)][m] = e < d ? prefix[g * d + e] : 0.0;
      }
    });
    // The lane's elements of the next row (zeros past d).
    float qn[Warp::kSlots][kPer], kn[Warp::kSlots][kPer];
    auto load = [&](int64_t i) {
      w.Each([&](int lane) {
        ATTNTUNE_UNROLL
        for (int m = 0; m < kPer; ++m) {
          const int64_t e = lane + 32 * m;
          qn[w.Slot(lane)][m] = e < d ? ToFloat(qg[i * d + e]) : 0.f;
          kn[w.Slot(lane)][m] = e < d ? ToFloat(k[(i + shift) * d + e]) : 0.f;
        }
      });
    };
    if (i0 < i1) load(i0);
    for (int64_t i = i0; i < i1; ++i) {
      float qi[Warp::kSlots][kPer], ki[Warp::kSlots][kPer];
      w.Each([&](int lane) {
        ATTNTUNE_UNROLL
        for (int m = 0; m < kPer; ++m) {
          qi[w.Slot(lane)][m] = qn[w.Slot(lane)][m];
          ki[w.Slot(lane)][m] = kn[w.Slot(lane)][m];
        }
      });
      if (i + 1 < i1) load(i + 1);
      w.Each([&](int lane) {
        for (int m = 0; m < kPer; ++m) {
          const int64_t e = lane + 32 * m;
          if (e < d) s[w.Slot(lane)][m] += static_cast<double>(qi[w.Slot(lane)][m]);
        }
      });
      const double norm = w.Sum([&](int lane) {
        double x = 0.0;
        for (int m = 0; m < kPer; ++m) x = fma(s[w.Slot(lane)][m], s[w.Slot(lane)][m], x);
        return x;
      });
      const double dot = w.Sum([&](int lane) {
        double x = 0.0;
        for (int m = 0; m < kPer; ++m) {
          const int64_t e = lane + 32 * m;
          if (e < d) x = fma(static_cast<double>(ki[w.Slot(lane)][m]), s[w.Slot(lane)][m], x);
        }
        return x;
      });
      // One lane adds (every lane holds the same sums): on the device a read and a write
      // of the same shared word by every lane of the warp race (racecheck).
      w.Each([&](int lane) {
        if (lane == 0 && norm > 0.0) xs[i - i0] += dot / sqrt(norm);
      });
    }
  }
}

// ---- prefix top-k evictions, chunk by chunk (PrefixTopKEvictions in parallel) ----
//
// Per KV head: key[j] = RankKey(x_j) for j < n, and `order`, the positions sorted by
// (key, position) (a stable radix sort). The positions are cut into chunks [a, b); each
// chunk is computed on its own from the top-k set of the prefix [0, a) (the state):
// a key ranking after the state's members ranks after all of them, so a key j of the
// state or of the chunk leaves the top-k at the first position p in the chunk at which
// the keys ranking before j (in the state, then in the chunk up to p) number k. A key
// of the chunk that is ranked out at its own position never enters (evict[j] = j); a
// key still held at the chunk's end is in the next chunk's state. So each eviction is
// found by exactly one chunk: the one holding its position.

/// Positions per chunk for budget k: 128, or more for large k, so that chunks x state
/// entries stay within a few times n.
ATTNTUNE_HD inline int64_t TopKChunk(int64_t k) {
  const int64_t wide = (k / 4 + 31) / 32 * 32;
  // 4096 x 8-byte keys (32 KB) is the most one block holds in shared memory.
  return wide < 128 ? 128 : wide > 4096 ? 4096 : wide;
}

constexpr int kScanAhead = 4;
/// The warps of attntune_select_topk_chunks' block (256 threads), which ChunkState spreads
/// its scan over.
constexpr int kChunkWarps = 8;

/// attntune_select_topk_chunks' static shared memory (ChunkState's counts, a word a warp),
/// which its dynamic part shares kNoOptInSharedBytes with (cuda_resources_test checks it
/// against ptxas' figure on every arch).
constexpr int64_t kTopKChunksStaticBytes = kChunkWarps * 4;
/// Whether attntune_select_topk_chunks holds a chunk's state (int32 positions) and its
/// members' RankKeys in shared memory beside the chunk's keys: within kNoOptInSharedBytes
/// with its static part, so with no opt-in on any arch (k up to 3,496); else in global
/// memory.
ATTNTUNE_HD inline bool TopKStateShared(int64_t chunk, int64_t state_cap) {
  return kTopKChunksStaticBytes + chunk * 8 + state_cap * 12 <= kNoOptInSharedBytes;
}

/// The warps of one block, running the same block-level step. Block-level steps take a
/// `Block` with: kWarps; Warp, the type of its warps; kWarpSlots and WarpSlot(i), where
/// warp-private arrays keep warp i's row (as a Warp's kSlots and Slot); Warps(f), in which
/// each warp i runs f(i, warp); Sync(), a barrier. select.cu's DeviceBlock runs the
/// calling thread's warp and maps Sync onto __syncthreads; HostBlock runs its warps one
/// after the other to the end of f, so every write of one Warps call is done before the
/// next call starts and Sync has nothing to wait for. `reverse` runs them last warp
/// first: a step whose warps read what other warps write in the same Warps call (a race
/// on the device) gives another result then, which the CPU tests compare.
template <int N>
struct HostBlock {
  static constexpr int kWarps = N;
  static constexpr int kWarpSlots = N;
  using Warp = HostWarp;
  bool reverse = false;
  int WarpSlot(int i) const { return i; }
  template <class F>
  void Warps(const F& f) const {
    for (int x = 0; x < kWarps; ++x) f(reverse ? kWarps - 1 - x : x, HostWarp());
  }
  void Sync() const {}
};

/// ks: the exclusive prefix over the chunks of the chunk sums of 32 dims [e0, e0 + 32) of
/// one query head (sums[c * d + e], c < chunks), in place, by a block: rounds of
/// 32 kWarps chunks, warp i the round's chunks [32 i, 32 i + 32), each lane a dim with its
/// 32 sums loaded at once (every warp's loads in flight together). A warp takes its
/// chunks' exclusive running sum from 0 and their total (totals[i][lane], shared by the
/// block); chunk c's prefix is then (carry + the totals of the warps before, in warp
/// order) + its running sum, and the carry adds the round's totals in warp order (each
/// warp keeps the same carry). A fixed order, so the same bits on every run; not the
/// host's one running sum, so the ks scores agree with KsScores to rounding.
constexpr int kKsPrefixChunks = 32;  // a warp's chunks of a round
template <class Block>
ATTNTUNE_HD_INLINE void KsChunkPrefix(const Block& blk, double* sums, int64_t chunks,
                                      int64_t d, int64_t e0, double (*totals)[32]) {
  using Warp = typename Block::Warp;
  double carry[Block::kWarpSlots][Warp::kSlots];
  blk.Warps([&](int i, const Warp& w) {
    w.Each([&](int lane) { carry[blk.WarpSlot(i)][w.Slot(lane)] = 0.0; });
  });
  for (int64_t c0 = 0; c0 < chunks; c0 += kKsPrefixChunks * Block::kWarps) {
    double run[Block::kWarpSlots][Warp::kSlots][kKsPrefixChunks];
    blk.Warps([&](int i, const Warp& w) {
      w.Each([&](int lane) {
        const int64_t e = e0 + lane, c1 = c0 + kKsPrefixChunks * i;
        double* r = run[blk.WarpSlot(i)][w.Slot(lane)];
        ATTNTUNE_UNROLL
        for (int u = 0; u < kKsPrefixChunks; ++u) {
          r[u] = e < d && c1 + u < chunks ? sums[(c1 + u) * d + e] : 0.0;
        }
        double total = 0.0;
        ATTNTUNE_UNROLL
        for (int u = 0; u < kKsPrefixChunks; ++u) {
          const double x = r[u];
          r[u] = total;
          total += x;
        }
        totals[i][lane] = total;
      });
    });
    blk.Sync();  // every warp's totals
    blk.Warps([&](int i, const Warp& w) {
      w.Each([&](int lane) {
        const int64_t e = e0 + lane, c1 = c0 + kKsPrefixChunks * i;
        double& c = carry[blk.WarpSlot(i)][w.Slot(lane)];
        double base = c;
        for (int x = 0; x < i; ++x) base += totals[x][lane];
        const double* r = run[blk.WarpSlot(i)][w.Slot(lane)];
        ATTNTUNE_UNROLL
        for (int u = 0; u < kKsPrefixChunks; ++u) {
          if (e < d && c1 + u < chunks) sums[(c1 + u) * d + e] = base + r[u];
        }
        for (int x = 0; x < Block::kWarps; ++x) c += totals[x][lane];
      });
    });
    blk.Sync();  // the totals are the next round's
  }
}

/// The state of chunk [a, ...): the top-min(k, a) keys of the prefix [0, a) in rank
/// order (best first), read off `order` by the whole block: each round, warp i takes
/// entries [32 kScanAhead i, 32 kScanAhead (i + 1)) of the round's next
/// 32 kScanAhead kWarps, kScanAhead groups of 32 loaded before any ballot (several loads in
/// flight per lane); the warps' counts of prefix keys go through `counts` (kWarps
/// entries, shared by the block), and each warp writes its keys after those of the
/// warps before it, so the state is in rank order. Entries past `need` are not written.
/// Returns the state's size (every thread of the block the same).
template <class Block>
ATTNTUNE_HD_INLINE int64_t ChunkState(const Block& blk, const int32_t* order, int64_t n, int64_t a,
                                      int64_t k, int32_t* state, int32_t* counts) {
  using Warp = typename Block::Warp;
  constexpr int64_t kGroup = 32 * kScanAhead;  // one warp's entries of a round
  const int64_t need = k < a ? k : a;
  int64_t got = 0;
  for (int64_t r0 = 0; r0 < n && got < need; r0 += kGroup * Block::kWarps) {
    int32_t o[Block::kWarpSlots][Warp::kSlots][kScanAhead];
    uint32_t hits[Block::kWarpSlots][kScanAhead];
    blk.Warps([&](int i, const Warp& w) {
      const int64_t base = r0 + kGroup * i;
      int32_t(*ow)[kScanAhead] = o[blk.WarpSlot(i)];
      uint32_t* hw = hits[blk.WarpSlot(i)];
      w.Each([&](int lane) {
        ATTNTUNE_UNROLL
        for (int u = 0; u < kScanAhead; ++u) {
          const int64_t r = base + 32 * u + lane;
          ow[w.Slot(lane)][u] = r < n ? order[r] : -1;
        }
      });
      int count = 0;
      ATTNTUNE_UNROLL
      for (int u = 0; u < kScanAhead; ++u) {
        hw[u] = w.Ballot([&](int lane) {
          const int64_t r = base + 32 * u + lane;
          return r < n && ow[w.Slot(lane)][u] < a;
        });
        count += PopCount32(hw[u]);
      }
      w.Each([&](int lane) {
        if (lane == 0) counts[i] = count;
      });
    });
    blk.Sync();
    int64_t total = 0;
    for (int i = 0; i < Block::kWarps; ++i) total += counts[i];
    blk.Warps([&](int i, const Warp& w) {
      int64_t slot = got;
      for (int x = 0; x < i; ++x) slot += counts[x];
      int32_t(*ow)[kScanAhead] = o[blk.WarpSlot(i)];
      const uint32_t* hw = hits[blk.WarpSlot(i)];
      ATTNTUNE_UNROLL
      for (int u = 0; u < kScanAhead; ++u) {
        EmitLanes(w, hw[u], slot, [&](int64_t s, int lane) {
          if (s < need) state[s] = ow[w.Slot(lane)][u];
        });
        slot += PopCount32(hw[u]);
      }
    });
    blk.Sync();  // the next round rewrites counts
    got += total;
  }
  return got < need ? got : need;
}

// ---- the chunks' states by a scan of top-k lists (no sort) ----
//
// The state of chunk c, the top-k of the prefix [0, a_c), is the top-k of the union of
// the chunks before it. Each chunk's own top-min(k, size) in rank order (its keys ranked
// by counting, ChunkTopRank), then an inclusive scan over the chunks (Hillis-Steele: at
// distance 1, 2, 4, ... each entry takes the top-k of its list and the list that many
// chunks before it, MergeSlot giving each output slot by its own binary search); the
// state of chunk c is the scan's entry c - 1, in rank order as ChunkState's.

/// How many keys of the chunk [a, b) (RankKeys chunk_key[0, b - a)) rank before its key
/// at position a + x: the key's place in the chunk's rank order.
ATTNTUNE_HD inline int64_t ChunkTopRank(const uint64_t* chunk_key, int64_t a, int64_t b,
                                        int64_t x) {
  const uint64_t key_x = chunk_key[x];
  int64_t rank = 0;
  for (int64_t y = 0; y < b - a; ++y) {
    rank += RanksBeforeKey(chunk_key[y], a + y, key_x, a + x) ? 1 : 0;
  }
  return rank;
}

/// Slot o (< na + nb) of the merge of two lists in rank order of disjoint positions (A:
/// keys ka, positions pa, na entries; B likewise): true with *index its entry of A, or
/// false with *index its entry of B. The binary search finds how many of A's entries the
/// merge's first o slots hold.
ATTNTUNE_HD inline bool MergeSlot(const uint64_t* ka, const int32_t* pa, int64_t na,
                                  const uint64_t* kb, const int32_t* pb, int64_t nb, int64_t o,
                                  int64_t* index) {
  int64_t lo = o > nb ? o - nb : 0, hi = o < na ? o : na;
  while (lo < hi) {
    const int64_t mid = (lo + hi) / 2;
    if (RanksBeforeKey(ka[mid], pa[mid], kb[o - 1 - mid], pb[o - 1 - mid])) {
      lo = mid + 1;
    } else {
      hi = mid;
    }
  }
  const int64_t jb = o - lo;
  if (lo < na && (jb >= nb || RanksBeforeKey(ka[lo], pa[lo], kb[jb], pb[jb]))) {
    *index = lo;
    return true;
  }
  *index = jb;
  return false;
}

/// Whether the scan takes the chunks' states: chunks of at most 1,024 keys (ChunkTopRank
/// compares every pair of a chunk's keys: k up to 4,099) and its two buffers of
/// heads x chunks x state_cap entries (12 bytes each) within 4M entries a buffer (96 MB
/// for both); else the states come from a sort.
ATTNTUNE_HD inline bool TopKScanFits(int64_t heads, int64_t chunk, int64_t chunks,
                                     int64_t state_cap) {
  return chunk <= 1024 && heads * chunks * state_cap <= (int64_t{1} << 22);
}

/// How many keys of the state (rank order, all at positions before j) rank before a
/// key j of the chunk whose RankKey is key_j: those with a key <= key_j. state_key[x] =
/// the RankKey of the state's member x (ascending, as the state is in rank order).
ATTNTUNE_HD inline int64_t StateRankingBefore(const uint64_t* state_key, int64_t n_state,
                                              uint64_t key_j) {
  return UpperBound(state_key, int64_t{0}, n_state, key_j);  // first key > key_j
}

/// The eviction of key j (RankKey key_j) found in chunk [a, b), or -1 when it is not
/// there; chunk_key[p - a] = the key of position p. `before`: the keys ranking before j
/// that precede the scan (a state member: its index in the state, scan from a; a chunk
/// key: the state's and the chunk's up to j, scan from j + 1). Keys at p > j rank before
/// j iff their score is strictly larger (ties: the smaller position wins).
ATTNTUNE_HD inline int64_t EvictedInChunk(const uint64_t* chunk_key, int64_t a, int64_t b,
                                          uint64_t key_j, int64_t j, int64_t before,
                                          int64_t from, int64_t k) {
  if (before >= k) return j;  // ranked out at its own position: never enters
  // Each position of the scan adds at most one: with fewer left than k - before, the
  // count cannot reach k in this chunk (at a large k, most of the state's members).
  if (b - from < k - before) return -1;
  int64_t count = before;
  for (int64_t p = from; p < b; ++p) {
    if (chunk_key[p - a] < key_j && ++count >= k) return p;
  }
  return -1;
}

/// `before` of a chunk key j (a <= j < b) for EvictedInChunk: the state members (their
/// RankKeys in state_key) and the chunk keys at [a, j) ranking before it.
ATTNTUNE_HD inline int64_t ChunkKeyBefore(const uint64_t* state_key, int64_t n_state,
                                          const uint64_t* chunk_key, int64_t a, int64_t j) {
  const uint64_t key_j = chunk_key[j - a];
  int64_t before = StateRankingBefore(state_key, n_state, key_j);
  for (int64_t i = a; i < j; ++i) before += chunk_key[i - a] <= key_j;
  return before;
}

/// Entry x of a chunk's pass in attntune_select_topk_chunks (the state's ns members, then
/// the chunk's keys [a, b) in order): its position in *j, and what the pass writes to
/// evict[*j] (-1: nothing). Each key's eviction is written by the chunk that holds its
/// position; the last chunk (`last`) writes n for the keys it holds to the end, so that
/// nothing fills evict first.
ATTNTUNE_HD inline int64_t ChunkPassWrite(const uint64_t* chunk_key, int64_t a, int64_t b,
                                          const int32_t* members, const uint64_t* member_keys,
                                          int64_t ns, int64_t x, int64_t k, int64_t n,
                                          bool last, int64_t* j) {
  int64_t e;
  if (x < ns) {
    *j = members[x];
    e = EvictedInChunk(chunk_key, a, b, member_keys[x], *j, x, a, k);
  } else {
    *j = a + (x - ns);
    const int64_t before = ChunkKeyBefore(member_keys, ns, chunk_key, a, *j);
    e = EvictedInChunk(chunk_key, a, b, chunk_key[*j - a], *j, before, *j + 1, k);
  }
  return e >= 0 ? e : last ? n : -1;
}

// ---- gathered key lists (BuildKeyLists in parallel) ----

/// Whether key j (eviction position e) is in the union of the sets of the rows at
/// positions [p0, p1] (j <= p1 is the caller's bound): it enters and is still held at p0.
ATTNTUNE_HD inline bool Listed(int64_t j, int64_t e, int64_t p0) { return e > j && e > p0; }

/// The largest eviction position of tile t's keys [32 t, 32 t + 32) of one head's
/// evict[0, n) (-1 for none), by one warp: lane l reads key 32 t + l.
template <class Warp>
ATTNTUNE_HD_INLINE int32_t TileMax(const Warp& w, const int32_t* evict, int64_t n, int64_t t) {
  return w.Max([&](int lane) {
    const int64_t j = t * 32 + lane;
    return j < n ? evict[j] : -1;
  });
}

/// The positions [p0, p1] of query block qb of br rows (causal, Lq <= Lk).
ATTNTUNE_HD inline void BlockPositions(int64_t qb, int64_t br, int64_t lq, int64_t lk,
                                       int64_t* p0, int64_t* p1) {
  const int64_t i0 = qb * br;
  const int64_t i1 = (i0 + br < lq ? i0 + br : lq) - 1;
  *p0 = lk - lq + i0;
  *p1 = lk - lq + i1;
}

/// An upper bound of the list of query block [p0, p1] under budget k: at most k keys
/// held at p0, plus the keys entering after it.
ATTNTUNE_HD inline int64_t ListBound(int64_t p0, int64_t p1, int64_t k) {
  const int64_t held = k < p0 + 1 ? k : p0 + 1;
  return held + (p1 - p0);
}

/// Where the list of query block qb (of br rows; Lq = lq, Lk = n) of head `head` starts
/// when every list has the room ListBound gives it, the lists of a head in query-block
/// order and the heads one after the other: the sum of ListBound over the lists before
/// it, in closed form (the blocks before the last are full; the first c of them hold
/// fewer than k positions at p0: off + 1 + q br < k, off = n - lq). A budget past n is
/// taken as n (ListBound is the same for both), so that k up to INT64_MAX cannot overflow.
ATTNTUNE_HD inline int64_t ListBegin(int64_t head, int64_t qb, int64_t br, int64_t lq, int64_t n,
                                     int64_t k) {
  k = k < n ? k : n;
  const auto before = [&](int64_t q) {  // the bounds of blocks 0 .. q - 1 (all full)
    const int64_t off = n - lq, short_of_k = k - off - 1;
    int64_t c = short_of_k > 0 ? (short_of_k + br - 1) / br : 0;
    c = c < q ? c : q;
    return c * (off + 1) + br * (c * (c - 1) / 2) + (q - c) * k + q * (br - 1);
  };
  const int64_t blocks = (lq + br - 1) / br;
  if (blocks == 0) return 0;  // no query rows: no lists
  int64_t p0, p1;
  BlockPositions(blocks - 1, br, lq, n, &p0, &p1);
  return head * (before(blocks - 1) + ListBound(p0, p1, k)) + before(qb);
}

/// The key list of query block [p0, p1] over one head's evict[0, n), built by one block
/// of kListWarps warps in one pass over the tiles of keys [0, min(p1, n - 1)], in rounds
/// of kListRoundTiles tiles a warp (warp i the round's tiles [r0 + G i, r0 + G (i + 1))):
/// each lane loads its key's eviction and bias in each of its warp's live tiles (tile_max[t]
/// = the largest eviction of tile t's keys, so that a tile whose keys all leave by p0 is
/// not read), all G at once; the warps' counts meet in `counts` (double-buffered by the
/// round's parity, [2][2 kListWarps], shared by the block: one barrier a round), and each
/// warp places its keys after those of the rounds and warps before it. With held_first
/// (KeyOrder::kHeldFirst) the keys held through the block (HeldThrough) go straight to
/// emit(x, j, evict[j], bias[j]) at their place x, the others (at most 2 (p1 - p0): those
/// entering after p0 and one leaving per position in (p0, p1]) to `rest` (rest.cap
/// entries, shared by the block), emitted after the last round behind the held ones;
/// without, every listed key is emitted at once, in ascending j. The list is
/// BuildKeyLists'. Returns its length (every thread the same). Keys past rest.cap (none
/// for the evictions of a prefix top-k and cap >= 2 (p1 - p0)) are left out, so that the
/// list has no unwritten place whatever the evictions.
struct ListRest {
  int32_t* j;
  int32_t* e;
  float* b;
  int64_t cap;
};
constexpr int kListWarps = 8;
constexpr int kListRoundTiles = 8;
/// attntune_select_lists' static shared memory: ListBuild's counts, [2][2 kListWarps]
/// int32 (cuda_resources_test checks it against ptxas' figure).
constexpr int64_t kListStaticBytes = 2 * 2 * kListWarps * 4;
/// rest.cap for a list of query blocks of br rows: 2 br with held_first (the bound above),
/// else none.
ATTNTUNE_HD inline int64_t ListRestCap(int64_t br, bool held_first) {
  return held_first ? 2 * br : 0;
}
template <class Block, class Emit>
ATTNTUNE_HD_INLINE int64_t ListBuild(const Block& blk, const int32_t* evict,
                                     const int32_t* tile_max, const float* bias, int64_t n,
                                     int64_t p0, int64_t p1, bool held_first,
                                     int32_t (*counts)[2 * kListWarps], const ListRest& rest,
                                     const Emit& emit) {
  using Warp = typename Block::Warp;
  constexpr int G = kListRoundTiles;
  static_assert(Block::kWarps == kListWarps, "the block's warps");
  const int64_t last = p1 < n - 1 ? p1 : n - 1;
  const int64_t tiles = last < 0 ? 0 : last / 32 + 1;
  int64_t now = 0, later = 0;  // keys placed so far: emitted at once, and held for later
  int parity = 0;
  for (int64_t r0 = 0; r0 < tiles; r0 += int64_t{G} * kListWarps, parity ^= 1) {
    int32_t e[Block::kWarpSlots][Warp::kSlots][G];
    float b[Block::kWarpSlots][Warp::kSlots][G];
    uint32_t at_once[Block::kWarpSlots][G], deferred[Block::kWarpSlots][G];
    blk.Warps([&](int i, const Warp& w) {
      const int64_t t0 = r0 + int64_t{G} * i;
      const uint32_t live = w.Ballot([&](int lane) {
        return lane < G && t0 + lane < tiles && tile_max[t0 + lane] > p0;
      });
      int32_t(*ew)[G] = e[blk.WarpSlot(i)];
      float(*bw)[G] = b[blk.WarpSlot(i)];
      w.Each([&](int lane) {
        ATTNTUNE_UNROLL
        for (int u = 0; u < G; ++u) {
          const int64_t j = (t0 + u) * 32 + lane;
          const bool in = ((live >> u) & 1u) != 0 && j <= last;
          ew[w.Slot(lane)][u] = in ? evict[j] : -1;
          bw[w.Slot(lane)][u] = in && bias != nullptr ? bias[j] : 0.f;
        }
      });
      int count_now = 0, count_later = 0;
      ATTNTUNE_UNROLL
      for (int u = 0; u < G; ++u) {
        const uint32_t keep = w.Ballot([&](int lane) {
          const int64_t j = (t0 + u) * 32 + lane;
          return j <= last && Listed(j, ew[w.Slot(lane)][u], p0);
        });
        const uint32_t held = !held_first ? keep : w.Ballot([&](int lane) {
          const int64_t j = (t0 + u) * 32 + lane;
          return j <= last && HeldThrough<int64_t>(j, ew[w.Slot(lane)][u], p0, p1);
        });  // a subset of keep: a key held through the block is listed
        at_once[blk.WarpSlot(i)][u] = held;
        deferred[blk.WarpSlot(i)][u] = keep & ~held;
        count_now += PopCount32(held);
        count_later += PopCount32(keep & ~held);
      }
      w.Each([&](int lane) {
        if (lane != 0) return;
        counts[parity][i] = count_now;
        counts[parity][kListWarps + i] = count_later;
      });
    });
    blk.Sync();  // the round's counts (the other parity's are still being read)
    blk.Warps([&](int i, const Warp& w) {
      int64_t base_now = now, base_later = later;
      for (int x = 0; x < i; ++x) {
        base_now += counts[parity][x];
        base_later += counts[parity][kListWarps + x];
      }
      const int64_t t0 = r0 + int64_t{G} * i;
      const int32_t(*ew)[G] = e[blk.WarpSlot(i)];
      const float(*bw)[G] = b[blk.WarpSlot(i)];
      ATTNTUNE_UNROLL
      for (int u = 0; u < G; ++u) {
        const uint32_t held = at_once[blk.WarpSlot(i)][u], rest_mask = deferred[blk.WarpSlot(i)][u];
        EmitLanes(w, held, base_now, [&](int64_t x, int lane) {
          emit(x, (t0 + u) * 32 + lane, ew[w.Slot(lane)][u], bw[w.Slot(lane)][u]);
        });
        EmitLanes(w, rest_mask, base_later, [&](int64_t x, int lane) {
          if (x >= rest.cap) return;
          rest.j[x] = static_cast<int32_t>((t0 + u) * 32 + lane);
          rest.e[x] = ew[w.Slot(lane)][u];
          rest.b[x] = bw[w.Slot(lane)][u];
        });
        base_now += PopCount32(held);
        base_later += PopCount32(rest_mask);
      }
    });
    for (int x = 0; x < kListWarps; ++x) {
      now += counts[parity][x];
      later += counts[parity][kListWarps + x];
    }
  }
  if (later == 0) return now;
  blk.Sync();  // every warp's rest entries
  const int64_t kept = later < rest.cap ? later : rest.cap;
  blk.Warps([&](int i, const Warp& w) {
    w.Each([&](int lane) {
      for (int64_t x = int64_t{32} * i + lane; x < kept; x += 32 * kListWarps) {
        emit(now + x, rest.j[x], rest.e[x], rest.b[x]);
      }
    });
  });
  return now + kept;  // every place of the list written: no gap past rest.cap
}

// ---- dma_decode's resident sets from the prefix top-k ----
//
// The incremental rule (insert while not full, else replace the smallest b when the new
// b is larger; ties: the smaller j leaves first) keeps the same multiset of values as the
// prefix top-k of b (ks's order): at every step both insert or not alike (the test only
// reads the smallest value) and drop a key of the same value. They differ only in which
// of several keys of that value leaves: the rule drops the oldest. A key of value v is
// inserted only while the smallest held value is below v, and dropped only once it is v,
// so every insertion of value v comes before every drop of value v: the r-th drop of
// value v (r = 0, 1, ...) removes the r-th inserted key of value v. The top-k run gives
// the steps and values of the drops (event steps: evict_s[j] = q, j < q < n) and which
// keys are inserted (evict_s[j] > j); the decode evictions follow by matching ranks
// within each value.

/// dma_decode's eviction step of key j, from the top-k run with k = w_kv: `key` by
/// position; `sorted_key`, the keys in (key, position) order, and `slot` = the index of j
/// there; the drops as (event_key, event_step) sorted by (key, step), `events` of them.
/// A key is inserted iff fewer than w_kv keys before it score at least as much, which
/// holds for a prefix of the keys of each value in position order: the inserted key j
/// is the r-th inserted of its value with r = its place among the keys of that value.
ATTNTUNE_HD inline int64_t DecodeEviction(const uint64_t* key, const int32_t* evict_s, int64_t j,
                                          const uint64_t* sorted_key, int64_t slot,
                                          const uint64_t* event_key, const int32_t* event_step,
                                          int64_t events, int64_t n) {
  if (evict_s[j] <= j) return j;  // never inserted
  const uint64_t v = key[j];
  const int64_t r = slot - LowerBound(sorted_key, 0, slot, v);  // its place among value v's
  const int64_t e = LowerBound(event_key, 0, events, v) + r;
  return e < events && event_key[e] == v ? event_step[e] : n;
}

/// The RankKey of the drop at step q of the top-k run, or ~0 (sorts last) when none: the
/// key evicted at q (evict_s of it == q) is `dropped` (-1: none).
ATTNTUNE_HD inline uint64_t EventKey(const uint64_t* key, int64_t dropped) {
  return dropped < 0 ? ~0ull : key[dropped];
}

/// One decode step's update of the resident set, as a server appends key t to its cache:
/// the keys resident at step t - 1 are list[x] for the x < n with list_evict[x] > t - 1
/// (a KeyLists list of the run holding t - 1, evictions beside); returns the key key t
/// replaces, -1 when key t is not inserted, -2 when it is inserted into a set not yet
/// full (fewer than w_kv keys). The smallest b leaves first, ties the smaller j (the
/// worst: the largest RankKey, then the smallest position). One warp.
template <class Warp>
ATTNTUNE_HD_INLINE int64_t StepReplace(const Warp& w, const int32_t* list,
                                       const int32_t* list_evict, int64_t n, int64_t t,
                                       int64_t w_kv, const uint64_t* key) {
  // Each lane's worst and count over its entries, then the lanes' in lane order.
  uint64_t worst_key[Warp::kSlots];
  int64_t worst_j[Warp::kSlots], held[Warp::kSlots];
  w.Each([&](int lane) {
    const int slot = w.Slot(lane);
    worst_key[slot] = 0;
    worst_j[slot] = -1;
    held[slot] = 0;
    for (int64_t x = lane; x < n; x += 32) {
      const int64_t j = list[x];
      if (!(j <= t - 1 && t - 1 < list_evict[x])) continue;
      ++held[slot];
      if (worst_j[slot] < 0 || key[j] > worst_key[slot] ||
          (key[j] == worst_key[slot] && j < worst_j[slot])) {
        worst_key[slot] = key[j];
        worst_j[slot] = j;
      }
    }
  });
  const int64_t count = static_cast<int64_t>(w.Sum([&](int lane) {
    return static_cast<double>(held[w.Slot(lane)]);
  }));
  const int64_t worst = w.WorstOf(worst_key, worst_j);
  if (count < w_kv) return -2;
  return key[t] < key[worst] ? worst : -1;  // inserted iff its b is strictly larger
}

// ---- dma_decode's query-chosen keys ----

/// Whether key j is resident at step t: j <= t < evict[j].
ATTNTUNE_HD inline bool Resident(int64_t t, int64_t j, const int32_t* evict) {
  return j <= t && t < evict[j];
}

/// The candidates of step t (DESIGN.md s1): the r most recent keys not resident, then
/// the keys evicted in the last r steps that are older than those (dropped[q] = the key
/// evicted at step q, -1: none). One warp; emit(slot, j); returns their count.
template <class Warp, class Emit>
ATTNTUNE_HD_INLINE int64_t DecodeCandidates(const Warp& w, int64_t t, int64_t r, const int32_t* evict,
                                     const int32_t* dropped, const Emit& emit) {
  const int64_t recent = t - r + 1 > 0 ? t - r + 1 : 0;
  int64_t count = 0;
  for (int64_t j0 = recent; j0 <= t; j0 += 32) {
    const uint32_t keep = w.Ballot([&](int lane) {
      const int64_t j = j0 + lane;
      return j <= t && !Resident(t, j, evict);
    });
    EmitLanes(w, keep, count, [&](int64_t slot, int lane) { emit(slot, j0 + lane); });
    count += PopCount32(keep);
  }
  for (int64_t q0 = t - r + 1 > 0 ? t - r + 1 : 0; q0 <= t; q0 += 32) {
    const uint32_t keep = w.Ballot([&](int lane) {
      const int64_t q = q0 + lane;
      return q <= t && dropped[q] >= 0 && dropped[q] < recent;
    });
    EmitLanes(w, keep, count, [&](int64_t slot, int lane) { emit(slot, dropped[q0 + lane]); });
    count += PopCount32(keep);
  }
  return count;
}

/// q · k in fp64, in index order, as the host's decode scores its candidates (each
/// product of two fp32 values is exact, so fused or not the sum is the same); fp16 and
/// bf16 elements (the kernels' own tensors) widened where they are read (ToFloat, exact).
template <class E>
ATTNTUNE_HD inline double DecodeDot(const E* q, const E* k, int64_t d) {
  double dot = 0.0;
  for (int64_t c = 0; c < d; ++c) dot = ExactProductAdd(ToFloat(q[c]), ToFloat(k[c]), dot);
  return dot;
}

/// The key dma_decode's candidates are ranked by: larger q·k first (RankKey), every NaN
/// after every number and equal to every other NaN. A NaN q·k comes only from a caller's
/// non-finite q or k (the CPU path refuses those unless told not to check; the device
/// path never checks them); the host's and the device's arithmetic give NaNs of
/// different signs, so a NaN is not ranked by its bits.
ATTNTUNE_HD inline uint64_t ChosenKey(double dot) {
  return dot != dot ? ~uint64_t{0} : RankKey(dot);
}

/// The rank of candidate x among the m candidates cand[0, m) of one row, key[y] the
/// ChosenKey of candidate y's q·k: how many come before it (smaller key, then smaller j,
/// as the host chooses). The order is total, so the ranks are 0 .. m - 1, each once, and
/// each chosen slot is written once. (Compared as doubles, a NaN comes before none and
/// none before it: NaN candidates would share a rank and leave slots unwritten, which
/// the gathered decode kernel would then read as key indices.)
ATTNTUNE_HD inline int64_t ChosenRank(const uint64_t* key, const int32_t* cand, int64_t m,
                                      int64_t x) {
  int64_t rank = 0;
  for (int64_t y = 0; y < m; ++y) rank += RanksBeforeKey(key[y], cand[y], key[x], cand[x]);
  return rank;
}

// ---- LSH bins (ComputeLshBins, bit for bit) ----
//
// The host projects u = x - mu onto R in fp32 with 16 partial sums (lane l sums the
// terms e = l mod 16, e < d16 = d / 16 * 16, in ascending e), adds lanes l and l + 8 in
// fp64, sums those eight as a tree ((0+4)+(2+6)) + ((1+5)+(3+7)), then adds the tail
// e >= d16 in fp64. The bins read only the signs or the argmax of the projections.

/// Partial sum of lane `lane` (0..15) of projection r (d floats): fused as the host.
/// x: the row's elements (float, F16Bits or Bf16Bits, each read as its fp32 value).
template <class E>
ATTNTUNE_HD inline float LshLane(const E* x, const float* mu, const float* r, int64_t d,
                                 int lane, bool fused) {
  const int64_t d16 = d / 16 * 16;
  float acc = 0.f;
  for (int64_t e = lane; e < d16; e += 16) {
    const float u = mu != nullptr ? ToFloat(x[e]) - mu[e] : ToFloat(x[e]);
    acc = MulAddF(u, r[e], acc, fused);
  }
  return acc;
}

/// A lane's terms u_e = x[e] - mu[e] (x[e] without mu), e = lane + 16 m < d16, in u[m]:
/// computed once per row and reused by every projection (LshLaneTermsN). d16 <= 16 * kPer
/// (the kernel takes kPer = 8 up to d = 143, so that no unrolled step is dead for d = 128).
constexpr int kLshMaxPerLane = 16;
template <int kPer = kLshMaxPerLane, class E>
ATTNTUNE_HD_INLINE void LshTerms(const E* x, const float* mu, int64_t d, int lane, float* u) {
  const int d16 = static_cast<int>(d / 16 * 16);
  ATTNTUNE_UNROLL
  for (int m = 0; m < kPer; ++m) {
    const int e = lane + 16 * m;
    u[m] = e < d16 ? (mu != nullptr ? ToFloat(x[e]) - mu[e] : ToFloat(x[e])) : 0.f;
  }
}

/// LshLane of up to kC projections at once from the lane's terms (LshTerms): acc[c] is
/// projection r + c * d's sum for c < count (count <= kC), the same products in the same
/// order, the projections' products interleaved so that a lane has kC independent sums in
/// flight.
template <int kPer, int kC>
ATTNTUNE_HD_INLINE void LshLaneTermsN(const float* u, const float* r, int d, int lane, int count,
                                      bool fused, float* acc) {
  const int d16 = d / 16 * 16;
  ATTNTUNE_UNROLL
  for (int c = 0; c < kC; ++c) acc[c] = 0.f;
  ATTNTUNE_UNROLL
  for (int m = 0; m < kPer; ++m) {
    const int e = lane + 16 * m;
    if (e >= d16) continue;
    ATTNTUNE_UNROLL
    for (int c = 0; c < kC; ++c) {
      if (c < count) acc[c] = MulAddF(u[m], r[c * d + e], acc[c], fused);
    }
  }
}

/// The fp64 tree of the 16 lanes' sums: lanes l and l + 8 (l < 8), then v_l + v_(l+4),
/// then a_l + a_(l+2), then the two: ((0+4)+(2+6)) + ((1+5)+(3+7)) of the pairs (l, l+8).
/// Each step adds lane l + off to lane l (off = 8, 4, 2, 1), which the device runs as
/// shuffles of the lanes' own sums.
ATTNTUNE_HD inline double LshTree(const float lanes[16]) {
  double v[16];
  for (int l = 0; l < 16; ++l) v[l] = static_cast<double>(lanes[l]);
  for (int off = 8; off >= 1; off /= 2) {
    for (int l = 0; l < off; ++l) v[l] = AddD(v[l], v[l + off]);
  }
  return v[0];
}

/// The tail of a projection: sum plus the terms e >= d / 16 * 16 in fp64, in order.
template <class E>
ATTNTUNE_HD inline double LshTail(double sum, const E* x, const float* mu, const float* r,
                                  int64_t d) {
  for (int64_t e = d / 16 * 16; e < d; ++e) {
    const float u = mu != nullptr ? ToFloat(x[e]) - mu[e] : ToFloat(x[e]);
    sum = ExactProductAdd(u, r[e], sum);
  }
  return sum;
}

/// One projection c = 0, 1, ... of a bin: the sign rule appends bit [P_c > 0] (bin =
/// sum_c [P_c > 0] 2^(h-1-c)), the argmax rule keeps the first maximum (best = its P).
ATTNTUNE_HD inline void LshBinStep(int64_t c, double proj, bool argmax_rule, int32_t* bin,
                                   double* best) {
  if (argmax_rule) {
    if (c == 0 || proj > *best) {
      *best = proj;
      *bin = static_cast<int32_t>(c);
    }
  } else {
    *bin = *bin * 2 + (proj > 0.0 ? 1 : 0);
  }
}

/// The bin of projections proj[0, h).
ATTNTUNE_HD inline int32_t LshBin(const double* proj, int64_t h, bool argmax_rule) {
  int32_t bin = 0;
  double best = 0.0;
  for (int64_t c = 0; c < h; ++c) LshBinStep(c, proj[c], argmax_rule, &bin, &best);
  return bin;
}

// ---- the bucketed layout (SortQueries and BuildBucketLists in parallel) ----
//
// Per (batch, KV head): keys sorted by (bin, position) (perm; bin c holds perm[start[c],
// start[c+1])); per chunk of query positions, the rows m = g * Lq + i of the group's
// heads sorted by (bin, position, head); each row's lsh window [lo, hi) of perm; rows
// cut into blocks at a chunk's start, a new bin, windows that stop overlapping, and
// every br rows of a run without such a break.

/// The lsh window of a query at position p in bin c: perm indices [lo, hi), the k most
/// recent same-bin keys j <= p (perm ascending within a bin).
ATTNTUNE_HD inline void LshWindowOf(const int32_t* perm, int64_t begin, int64_t end, int64_t p,
                                    int64_t k, int32_t* lo, int32_t* hi) {
  const int64_t h = UpperBound<int32_t>(perm, begin, end, static_cast<int32_t>(p));
  *hi = static_cast<int32_t>(h);
  *lo = static_cast<int32_t>(h - k > begin ? h - k : begin);
}

/// Whether sorted row n (of a chunk starting at row `first`) starts a run: the chunk's
/// first row, a new bin, or a window that does not overlap the previous row's.
ATTNTUNE_HD inline bool RunBreak(int64_t n, int64_t first, int32_t bin, int32_t prev_bin,
                                 int32_t lo, int32_t prev_hi) {
  return n == first || bin != prev_bin || lo > prev_hi;
}

/// Whether sorted row n starts a block: its run starts at run_start (<= n), blocks of br.
ATTNTUNE_HD inline bool BlockStart(int64_t n, int64_t run_start, int64_t br) {
  return (n - run_start) % br == 0;
}

/// hax: whether key j of the chunk's prefix top-k union is attended by a row of the block
/// and not already in the block's lsh range: the block's row positions pos[0, rows)
/// ascending; its lsh keys are perm[lo_first, hi_last) of bin `bin`.
ATTNTUNE_HD inline bool HaxExtraKey(int64_t j, const int64_t* pos, int64_t rows,
                                    const int32_t* evict, int32_t key_bin_j, int32_t bin,
                                    int32_t spos_j, int32_t lo_first, int32_t hi_last) {
  if (key_bin_j == bin && lo_first <= spos_j && spos_j < hi_last) return false;
  const int64_t x = LowerBound<int64_t>(pos, 0, rows, j);  // the first row at or after j
  return x < rows && InTopK(pos[x], j, evict);
}

/// hax's extra keys of one block: the entries of its chunk's prefix top-k list
/// list[0, list_n) that HaxExtraKey keeps (pos: the block's row positions, ascending),
/// in list order; one warp, emit(slot, j); returns their count.
template <class Warp, class Emit>
ATTNTUNE_HD_INLINE int64_t HaxExtrasWalk(const Warp& w, const int32_t* list, int64_t list_n,
                                  const int64_t* pos, int64_t rows, const int32_t* evict,
                                  const int32_t* key_bin, const int32_t* spos, int32_t bin,
                                  int32_t lo_first, int32_t hi_last, const Emit& emit) {
  int64_t count = 0;
  for (int64_t x0 = 0; x0 < list_n; x0 += 32) {
    const uint32_t keep = w.Ballot([&](int lane) {
      const int64_t x = x0 + lane;
      if (x >= list_n) return false;
      const int32_t j = list[x];
      return HaxExtraKey(j, pos, rows, evict, key_bin[j], bin, spos[j], lo_first, hi_last);
    });
    EmitLanes(w, keep, count, [&](int64_t slot, int lane) { emit(slot, list[x0 + lane]); });
    count += PopCount32(keep);
  }
  return count;
}

/// An upper bound of the blocks of one chunk's R rows spanning P query positions: runs
/// start at a new bin (at most min(R, bins) runs) or where the windows stop overlapping
/// (the next row's window ends more than k same-bin keys later: at most P / (k + 1)
/// times), and a run of len rows makes ceil(len / br) blocks.
ATTNTUNE_HD constexpr int64_t BucketBlocksBound(int64_t rows, int64_t positions, int64_t bins,
                                                int64_t k, int64_t br) {
  // k past the positions breaks no window (and k + 1 must not overflow at INT64_MAX).
  const int64_t kk = k < positions ? k : positions;
  const int64_t runs = (rows < bins ? rows : bins) + positions / (kk + 1);
  const int64_t bound = rows / br + 1 + runs;
  return bound < rows ? bound : rows;
}

/// An upper bound of the lsh keys listed by the blocks of one chunk: each block's range
/// [lo_first, hi_last) holds at most min(k, lk) keys plus the same-bin keys between its
/// first and last rows' positions, which the chunk's blocks share out (at most P).
ATTNTUNE_HD inline int64_t BucketKeysBound(int64_t blocks, int64_t positions, int64_t k,
                                           int64_t lk) {
  return blocks * (k < lk ? k : lk) + positions;
}

/// The query positions of one chunk of the bucketed layout: hax's Chunk (0: the whole
/// sequence) within Lq, lsh's the whole sequence.
inline int64_t BucketChunk(bool hax, int64_t chunk, int64_t lq) {
  return hax && chunk > 0 ? (chunk < lq ? chunk : lq) : lq;
}

/// The bucketed layout's sizes over `heads` KV heads of `group` query heads each
/// (EnqueueBucketLayout's buffers, and what CanSelect refuses before a launch): its
/// blocks and their listed keys, lsh's ranges plus, where k_ks >= 0 (hax), each block's
/// bound on its chunk's ks union. `chunk` is BucketChunk's. The callers check first that
/// heads * group * lq is below 2^31, which keeps every sum here below 2^55.
struct BucketSizes {
  int64_t blocks = 0, keys = 0;
};
inline BucketSizes BucketLayoutSizes(int64_t heads, int64_t group, int64_t lq, int64_t lk,
                                     int64_t bins, int64_t k_lsh, int64_t br, int64_t chunk,
                                     int64_t k_ks) {
  BucketSizes out;
  const int64_t chunks = (lq + chunk - 1) / chunk > 1 ? (lq + chunk - 1) / chunk : 1;
  for (int64_t c = 0; c < chunks; ++c) {
    const int64_t end = (c + 1) * chunk < lq ? (c + 1) * chunk : lq;
    const int64_t positions = end - c * chunk;
    const int64_t blocks = BucketBlocksBound(positions * group, positions, bins, k_lsh, br);
    out.blocks += blocks;
    out.keys += BucketKeysBound(blocks, positions, k_lsh, lk);
    if (k_ks >= 0) {
      int64_t p0, p1;
      BlockPositions(c, chunk, lq, lk, &p0, &p1);
      const int64_t union_bound = ListBound(p0, p1, k_ks);
      out.keys += blocks * (union_bound < lk ? union_bound : lk);
    }
  }
  out.blocks *= heads;
  out.keys *= heads;
  return out;
}

}  // namespace cuda_plan
}  // namespace attntune
