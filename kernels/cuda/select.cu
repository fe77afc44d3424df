// Selection on the device (select_cuda.h): ks and dma scores, prefix top-k evictions,
// gathered key lists, LSH bins and the bucketed layout, dma_decode's resident sets and
// chosen keys. Each kernel is a thin loop over the select_core.h function that does its
// work (the CPU tests run the same functions); sorts and scans are CUB's. Every kernel is
// extern "C" attntune_select_<phase>, so that CUPTI's records name the selection's
// phases plainly (SelectionPhaseOf).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>

#include "kernels/cuda/plan.h"
#include "kernels/cuda/select_core.h"
#include "kernels/cuda/select_cuda.h"

namespace attntune {
namespace cuda_plan {
namespace {

/// The calling lane of a full warp (select_core.h's Warp).
struct DeviceWarp {
  static constexpr int kSlots = 1;
  int lane;
  __host__ __device__ int Slot(int) const { return 0; }
  template <class F>
  __host__ __device__ double Sum(const F& f) const {
    double x = f(lane);
#if defined(__CUDA_ARCH__)
#pragma unroll
    for (int off = 16; off > 0; off /= 2) x += __shfl_xor_sync(0xffffffffu, x, off);
#endif
    return x;
  }
  template <class F>
  __host__ __device__ int32_t Max(const F& f) const {
#if defined(__CUDA_ARCH__)
    return __reduce_max_sync(0xffffffffu, static_cast<int32_t>(f(lane)));
#else
    return f(lane);
#endif
  }
  template <class F>
  __host__ __device__ uint32_t Ballot(const F& f) const {
#if defined(__CUDA_ARCH__)
    return __ballot_sync(0xffffffffu, f(lane));
#else
    return 0;
#endif
  }
  template <class F>
  __host__ __device__ void Each(const F& f) const {
    f(lane);
  }
  __host__ __device__ void Sync() const {
#if defined(__CUDA_ARCH__)
    __syncwarp();
#endif
  }
  /// The lanes' worst (key[0], j[0]): the largest key, then the smallest j >= 0.
  __host__ __device__ int64_t WorstOf(const uint64_t* key, const int64_t* j) const {
#if defined(__CUDA_ARCH__)
    uint64_t k = key[0];
    int64_t x = j[0];
#pragma unroll
    for (int off = 16; off > 0; off /= 2) {
      const uint64_t ok = __shfl_xor_sync(0xffffffffu, k, off);
      const int64_t ox = __shfl_xor_sync(0xffffffffu, x, off);
      if (ox >= 0 && (x < 0 || ok > k || (ok == k && ox < x))) {
        k = ok;
        x = ox;
      }
    }
    return x;
#else
    return j[0];
#endif
  }
};

/// The calling thread's warp of a block of kChunkWarps warps (select_core.h's Block).
struct DeviceBlock {
  static constexpr int kWarps = kChunkWarps;
  static constexpr int kWarpSlots = 1;
  using Warp = DeviceWarp;
  __host__ __device__ int WarpSlot(int) const { return 0; }
  template <class F>
  __host__ __device__ void Warps(const F& f) const {
#if defined(__CUDA_ARCH__)
    f(static_cast<int>(threadIdx.x / 32), DeviceWarp{static_cast<int>(threadIdx.x % 32)});
#endif
  }
  __host__ __device__ void Sync() const {
#if defined(__CUDA_ARCH__)
    __syncthreads();
#endif
  }
};

__device__ __forceinline__ int64_t GlobalThread() {
  return static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

constexpr double kLog2e = 1.4426950408889634;

// ---- generic ----

struct SeqParams {
  int32_t* a;
  int64_t count;
  int64_t step;
  int64_t modulo;  // a[x] = (x % modulo) * step; 0: x * step
};

struct HeadSortParams {
  const uint64_t* keys_in;  // [heads * n]
  const int32_t* index;     // sorted global indices
  uint64_t* head_key;
  uint64_t* keys_out;
  int32_t* positions;
  int64_t count;
  int32_t n;
};

struct FillParams {
  int32_t* a;
  int64_t count;
  int32_t value;
};

struct WidenScoreParams {
  const float* in;
  double* out;
  int64_t count;
};

// ---- scores ----

struct KsParams {
  const void* q;  // [B,Hq,Lq,d], of the kernel's element type (SelectKernels)
  const void* k;  // [B,Hkv,Lk,d]
  double* sums;    // [B,Hq,chunks,d]: per chunk, then its exclusive prefix
  uint64_t* key;   // [B,Hkv,Lk]
  int64_t lq, lk, d, chunk, chunks;
  int hq, hkv;
};

constexpr int kKsChunk = 64;    // query rows per chunk of the prefix sums
constexpr int kKsMaxGroup = 8;  // the prefixes of a group in shared memory (d <= 256)

struct ScoreKeyParams {
  const double* x;
  uint64_t* key;
  float* bias_log2;
  int64_t count;
};

struct DmaParams {
  const void* v;  // of the kernel's element type (SelectKernels)
  const double* delta;  // [Hkv,d]
  const double* a;      // [Hkv]
  uint64_t* key;
  float* bias_log2;
  int64_t lk, d;
  int hkv, b;
  bool fused;
};

// ---- top-k ----

struct TopKParams {
  const uint64_t* key;
  const int32_t* order;
  int32_t* evict;
  // The chunks' states and their members' RankKeys ([heads, chunks, state_cap]) where
  // they do not fit in shared memory beside the chunk's keys (TopKStateShared; nullptr
  // where they do).
  int32_t* state;
  uint64_t* state_key;
  int32_t* tile_max;
  // The chunks' states from the scan of top-k lists ([heads, chunks, state_cap] and
  // [heads, chunks]: entry c is the top-k of chunks 0..c), or nullptr: from `order`.
  const uint64_t* scan_key;
  const int32_t* scan_pos;
  const int32_t* scan_n;
  int64_t n, k, chunk, chunks, state_cap, tiles, heads;
  bool state_global;  // the states in global memory (not TopKStateShared)
};

// One step of the scan of the chunks' top-k lists ([heads, chunks, cap] entries, the
// counts [heads, chunks]): in_* read, out_* written; `offset` the step's distance.
struct ScanParams {
  const uint64_t* key;  // [heads, n] (attntune_select_chunk_top)
  const uint64_t* in_key;
  const int32_t* in_pos;
  const int32_t* in_n;
  uint64_t* out_key;
  int32_t* out_pos;
  int32_t* out_n;
  int64_t n, chunk, chunks, heads, cap, offset;
  bool staged;  // top_merge: the two lists in shared memory (2 x cap entries within 48 KB)
};

struct ListParams {
  const int32_t* evict;
  const int32_t* tile_max;
  const float* bias;
  int32_t* begin;  // [lists]: each list's first entry (ListBegin)
  int32_t* end;    // [lists]: one past its last
  int32_t* keys;
  int32_t* key_evict;
  float* key_bias;
  int64_t n, lq, br, k, query_blocks, lists, tiles;
  int64_t rest_cap;  // ListRestCap: the shared entries for the keys after the held ones
  bool held_first;   // KeyOrder::kHeldFirst
};

// ---- LSH ----

struct BinParams {
  const void* q;  // of the kernel's element type (SelectKernels)
  const void* k;
  const float* mu;  // [Hkv,d] or nullptr
  const float* rt;  // [Hkv,h,d]
  int32_t* key_bin;
  int32_t* query_bin;
  int64_t lq, lk, d, h;
  int hq, hkv;
  int32_t key_heads, key_head_blocks, query_head_blocks;  // B * Hkv; blocks per head
  bool argmax, fused;
  bool staged;  // the projections and mu in shared memory (they fit in 48 KB)
};

constexpr int kLshBlockRows = 32;  // rows of a block of attntune_select_lsh_bins

struct LayoutParams {
  const int32_t* key_bin;    // [heads, Lk]
  const int32_t* query_bin;  // [B,Hq,Lq]
  uint64_t* ckey;             // (segment, bin) keys of the keys, then of the rows
  const int32_t* kbin_sorted;  // the keys' bins in (bin, position) order
  const int32_t* perm;
  int32_t* starts;  // [heads, bins + 1]
  int32_t* spos;
  int32_t* qrow;
  const int32_t* qbin_sorted;
  const int32_t* rows;  // sorted rows m = g * Lq + i
  int32_t* lo;
  int32_t* hi;
  int32_t* run_mark;
  const int32_t* run_start;
  int32_t* flag;
  const int32_t* block_id;
  int32_t* row_offsets;
  int32_t* head;
  int64_t lq, lk, group, bins, k, br, chunk, chunks, heads, total_rows;
  int bin_bits;
  int hq, hkv;
};

struct StripParams {
  const uint64_t* in;
  int32_t* out;
  int64_t count;
  uint64_t mask;
};

struct BucketKeyParams {
  const int32_t* block_count;
  const int32_t* row_offsets;
  const int32_t* head;
  const int32_t* rows;
  const int32_t* lo;
  const int32_t* hi;
  const int32_t* qbin_sorted;
  const int32_t* perm;
  const int32_t* spos;
  const int32_t* key_bin;
  const int32_t* evict;       // hax: the ks part, else nullptr
  const int32_t* list_begin;  // hax: the chunks' prefix top-k lists (ListsDevice)
  const int32_t* list_end;
  const int32_t* list_keys;
  int32_t* counts;
  const int32_t* key_offsets;
  int32_t* keys;
  int32_t* key_spos;
  int32_t* key_evict;
  int64_t lq, lk, chunk, chunks, blocks_bound, capacity;
};

// ---- dma_decode ----

struct DecodeParams {
  const uint64_t* key;
  const int32_t* evict_s;
  const uint64_t* sorted_key;
  const int32_t* order;
  int32_t* slot;                   // [heads, n]: sorted slot of each key
  int32_t* dropped;                // [heads, n]: key evicted at each step, -1: none
  uint64_t* event_key;             // [heads, n]
  const uint64_t* event_key_sorted;
  const int32_t* event_step_sorted;
  int32_t* evict_d;
  int64_t n, heads;
};

struct ChosenParams {
  const void* q;  // [B,Hq,Lk,d] of the kernel's element type (ATTNTUNE_SELECT_KERNELS)
  const void* k;  // [B,Hkv,Lk,d]
  const int32_t* evict;    // dma_decode's, [B,Hkv,Lk]
  const int32_t* dropped;  // dma_decode's, [B,Hkv,Lk]
  int32_t* counts;         // [B*Hq*Lk + 1]
  const int32_t* offsets;
  int32_t* chosen;
  int64_t lk, d, w_q, r, group, capacity;
  int64_t first_step;  // block x computes step first_step + x
  int hq, hkv;
};

struct StepParams {
  const uint64_t* key;           // [B,Hkv,Lk]
  const int32_t* list_begin;     // the resident lists (kDecodeListSteps steps a list)
  const int32_t* list_end;
  const int32_t* list_keys;
  const int32_t* list_evict;
  int32_t* replaced;             // [B*Hkv]
  int64_t lk, w_kv, step, query_blocks;
};

}  // namespace
}  // namespace cuda_plan
}  // namespace attntune

using namespace attntune::cuda_plan;

// ---- kernels (global namespace: extern "C" names) ----

// A kernel's dynamic shared memory: extern __shared__ on the device, the running block's
// buffer in the CPU emulator that runs these kernels in tests (tests/gpu/emu).
#if defined(ATTNTUNE_CUDA_EMULATION)
#define ATTNTUNE_DYNAMIC_SHARED(T, name) T* name = attntune_emu::DynamicShared<T>()
#else
#define ATTNTUNE_DYNAMIC_SHARED(T, name) extern __shared__ T name[]
#endif

extern "C" __global__ void __launch_bounds__(256) attntune_select_seq(SeqParams p) {
  const int64_t x = GlobalThread();
  if (x < p.count) p.a[x] = static_cast<int32_t>((p.modulo > 0 ? x % p.modulo : x) * p.step);
}

// Per-head sort, after one sort of every head's (key, global index) pairs by key: the
// head of each sorted item (a sort key), then each head's sorted keys and positions.
extern "C" __global__ void __launch_bounds__(256) attntune_select_sort_heads(HeadSortParams p) {
  const int64_t x = GlobalThread();
  if (x < p.count) p.head_key[x] = static_cast<uint64_t>(p.index[x] / p.n);
}

extern "C" __global__ void __launch_bounds__(256) attntune_select_sort_gather(HeadSortParams p) {
  const int64_t x = GlobalThread();
  if (x >= p.count) return;
  const int32_t i = p.index[x];
  p.keys_out[x] = p.keys_in[i];
  p.positions[x] = i % p.n;
}

extern "C" __global__ void __launch_bounds__(256) attntune_select_fill(FillParams p) {
  const int64_t x = GlobalThread();
  if (x < p.count) p.a[x] = p.value;
}

// The kernels that read q, k or v come in one kernel per element type (DeviceInput::type): `name`
// reads fp32 (copies of inputs that are not values of the kernels' dtype), `name`_f16 and
// `name`_bf16 the kernels' own tensors in place (a library caller's, tune's and bench's),
// each element widened where it is read (ToFloat). Body<E>(p) is the kernel; each kernel
// holds one body, so the fp32 kernels compile as they did alone.
#define ATTNTUNE_SELECT_KERNELS(name, threads, Params, Body)                                   \
  extern "C" __global__ void __launch_bounds__(threads) name(Params p) { Body<float>(p); }    \
  extern "C" __global__ void __launch_bounds__(threads) name##_f16(Params p) {                \
    Body<F16Bits>(p);                                                                          \
  }                                                                                            \
  extern "C" __global__ void __launch_bounds__(threads) name##_bf16(Params p) {               \
    Body<Bf16Bits>(p);                                                                         \
  }

extern "C" __global__ void __launch_bounds__(256) attntune_select_widen_scores(
    WidenScoreParams p) {
  const int64_t x = GlobalThread();
  if (x < p.count) p.out[x] = static_cast<double>(p.in[x]);
}

// ks: per (chunk, hq, b) the sums of q over the chunk's rows, one thread per dim.
template <class E>
__device__ __forceinline__ void KsChunkSumsKernel(const KsParams& p) {
  const int64_t c = blockIdx.x, hq = blockIdx.y, b = blockIdx.z;
  const int64_t i0 = c * p.chunk, i1 = min(p.lq, i0 + p.chunk);
  const E* q = static_cast<const E*>(p.q) + (b * p.hq + hq) * p.lq * p.d;
  double* out = p.sums + ((b * p.hq + hq) * p.chunks + c) * p.d;
  for (int64_t e = threadIdx.x; e < p.d; e += blockDim.x) {
    double s = 0.0;
    for (int64_t i = i0; i < i1; ++i) s += static_cast<double>(ToFloat(q[i * p.d + e]));
    out[e] = s;
  }
}
ATTNTUNE_SELECT_KERNELS(attntune_select_ks_chunk_sums, 128, KsParams, KsChunkSumsKernel)

// ks: the chunk sums' exclusive prefix per (hq, b), in place: a block of kChunkWarps warps
// per (32 dims, query head), KsChunkPrefix (one warp per (32 dims, query head), each lane
// a dim's running sum over the chunks in order, 32 loads in flight, ran 64 warps at
// Hq=16, d=128 and took 10.7 us on the H200).
extern "C" __global__ void __launch_bounds__(32 * kChunkWarps)
    attntune_select_ks_chunk_prefix(KsParams p) {
  __shared__ double totals[kChunkWarps][32];
  const int64_t hq = blockIdx.y, b = blockIdx.z;
  KsChunkPrefix(DeviceBlock(), p.sums + (b * p.hq + hq) * p.chunks * p.d, p.chunks, p.d,
                static_cast<int64_t>(blockIdx.x) * 32, totals);
}

// ks: one block per (chunk of query rows, KV head, batch), one warp per query head g of
// the group (group x 32 threads): warp g runs the running sum S of head g from the chunk's
// prefix and writes k_j · S / |S| (0 when |S| = 0) to its own row of xs; then
// x_j = xs[0] + xs[1] + ... in g order, the sum the host's one loop over g gives (a sum
// that starts at +0 is never -0, so adding an absent head's +0 changes nothing). Then
// the RankKeys. Keys before the first query position score 0.
// Shared memory is sized to the group and d at launch (KsScoresSmem): a fixed size for
// the largest group and d held occupancy to 31% on an H200 at group 2, d = 128.
template <class E>
__device__ __forceinline__ void KsScoresKernel(const KsParams& p) {
  ATTNTUNE_DYNAMIC_SHARED(double, ks_smem);
  const int64_t group = p.hq / p.hkv;
  double (*xs)[kKsChunk] = reinterpret_cast<double (*)[kKsChunk]>(ks_smem);  // [group][chunk]
  double* prefix = ks_smem + group * kKsChunk;                                // [group][d]
  const int64_t c = blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int g = static_cast<int>(threadIdx.x / 32);
  const DeviceWarp w{static_cast<int>(threadIdx.x % 32)};
  const int64_t i0 = c * p.chunk, i1 = min(p.lq, i0 + p.chunk);
  const int64_t shift = p.lk - p.lq;  // key j = i + shift
  const int64_t hq = hk * group + g;
  for (int64_t x = w.lane; x < kKsChunk; x += 32) xs[g][x] = 0.0;
  for (int64_t x = w.lane; x < p.d; x += 32) {  // head g's prefix, [g][d]
    prefix[g * p.d + x] = p.sums[((b * p.hq + hq) * p.chunks + c) * p.d + x];
  }
  __syncwarp();
  const E* qh = static_cast<const E*>(p.q) + (b * p.hq + hq) * p.lq * p.d;
  const E* kh = static_cast<const E*>(p.k) + (b * p.hkv + hk) * p.lk * p.d;
  if (KsPerLane(p.d) == 4) {  // d <= 128: no fp64 work on the dims past d
    KsChunkScores<4>(w, qh, p.lq * p.d, kh, prefix + g * p.d, 1, i0, i1, shift, p.d, xs[g]);
  } else {
    KsChunkScores(w, qh, p.lq * p.d, kh, prefix + g * p.d, 1, i0, i1, shift, p.d, xs[g]);
  }
  __syncthreads();
  uint64_t* key = p.key + (b * p.hkv + hk) * p.lk;
  for (int64_t i = i0 + threadIdx.x; i < i1; i += blockDim.x) {
    double x = xs[0][i - i0];
    for (int64_t h = 1; h < group; ++h) x = AddD(x, xs[h][i - i0]);
    key[i + shift] = RankKey(x);
  }
  if (c == 0) {
    for (int64_t j = threadIdx.x; j < shift; j += blockDim.x) key[j] = RankKey(0.0);
  }
}
ATTNTUNE_SELECT_KERNELS(attntune_select_ks_scores, 32 * kKsMaxGroup, KsParams, KsScoresKernel)

extern "C" __global__ void __launch_bounds__(256) attntune_select_score_keys(ScoreKeyParams p) {
  const int64_t x = GlobalThread();
  if (x >= p.count) return;
  p.key[x] = RankKey(p.x[x]);
  if (p.bias_log2 != nullptr) p.bias_log2[x] = static_cast<float>(p.x[x] * kLog2e);
}

// dma: a block of kDmaWarps warps per 32 x kDmaWarps keys of one head, the head's Δ in
// shared memory (read by every lane at once); each warp scores its 32 keys, a key a lane,
// staging their value rows a segment at a time in its own shared memory (DmaWarpScores),
// with the host's fusing as a constant of each branch, so no product computes both ways.
// (A block of 128 threads per 32 keys, all staging, the first warp computing: 0.046 ms
// at L=16384, Hkv=8, d=128 on the H200, CUPTI, fp32 reads.)
template <class E>
__device__ __forceinline__ void DmaScoresKernel(const DmaParams& p) {
  ATTNTUNE_DYNAMIC_SHARED(double, dma_smem);  // [d] Δ, then kDmaWarps x kDmaStageFloats floats
  const int64_t head = blockIdx.y;  // b * Hkv + hk
  const int64_t hk = head % p.hkv;
  const int d = static_cast<int>(p.d);
  for (int c = threadIdx.x; c < d; c += blockDim.x) dma_smem[c] = p.delta[hk * p.d + c];
  __syncthreads();
  const int warp = static_cast<int>(threadIdx.x / 32);
  const int64_t j0 = (static_cast<int64_t>(blockIdx.x) * kDmaWarps + warp) * 32;
  if (j0 >= p.lk) return;  // the whole warp
  const int count = static_cast<int>(min(static_cast<int64_t>(32), p.lk - j0));
  float* stage = reinterpret_cast<float*>(dma_smem + d) + warp * kDmaStageFloats;
  const E* v = static_cast<const E*>(p.v) + (head * p.lk + j0) * p.d;
  const DeviceWarp w{static_cast<int>(threadIdx.x % 32)};
  auto emit = [&](int lane, double b) {
    const int64_t j = head * p.lk + j0 + lane;
    p.key[j] = RankKey(b);
    if (p.bias_log2 != nullptr) p.bias_log2[j] = static_cast<float>(b * kLog2e);
  };
  const double a = p.a[hk];
  if (p.fused) {
    DmaWarpScores<true>(w, v, count, d, dma_smem, a, stage, emit);
  } else {
    DmaWarpScores<false>(w, v, count, d, dma_smem, a, stage, emit);
  }
}
ATTNTUNE_SELECT_KERNELS(attntune_select_dma_scores, 32 * kDmaWarps, DmaParams, DmaScoresKernel)

// top-k: one block of kChunkWarps warps per (chunk, head). The block takes the chunk's
// state from the scan of top-k lists, or scans it from the sorted order; then every
// thread takes state members and chunk keys and finds their eviction in the chunk
// (select_core.h).
extern "C" __global__ void __launch_bounds__(32 * kChunkWarps)
    attntune_select_topk_chunks(TopKParams p) {
  ATTNTUNE_DYNAMIC_SHARED(uint64_t, chunk_key);  // [chunk], then (shared state) [state_cap] twice
  __shared__ int32_t counts[kChunkWarps];
  static_assert(sizeof(counts) == kTopKChunksStaticBytes, "kTopKChunksStaticBytes");
  const int64_t c = blockIdx.x, head = blockIdx.y;
  const int64_t a = c * p.chunk, b = min(p.n, a + p.chunk);
  const uint64_t* key = p.key + head * p.n;
  int32_t* evict = p.evict + head * p.n;
  // The state and its members' keys: shared memory (the binary searches' dependent reads
  // there) unless they do not fit.
  uint64_t* state_key = chunk_key + p.chunk;
  int32_t* state = reinterpret_cast<int32_t*>(state_key + p.state_cap);
  if (p.state_global && p.scan_pos == nullptr) {
    state = p.state + (head * p.chunks + c) * p.state_cap;
    state_key = p.state_key + (head * p.chunks + c) * p.state_cap;
  }
  for (int64_t x = threadIdx.x; x < b - a; x += blockDim.x) chunk_key[x] = key[a + x];
  const int32_t* members = state;  // what the evictions read: the state, or the scan's
  const uint64_t* member_keys = state_key;
  int64_t ns;
  if (p.scan_pos != nullptr) {  // the scan's entry c - 1: the prefix's top-k, rank order
    const int64_t before = head * p.chunks + (c > 0 ? c - 1 : 0);  // chunk 0: no state
    ns = c == 0 ? 0 : p.scan_n[before];
    const int32_t* pos = p.scan_pos + before * p.state_cap;
    const uint64_t* sk = p.scan_key + before * p.state_cap;
    if (p.state_global) {  // global memory either way: read the scan's in place
      members = pos;
      member_keys = sk;
    } else {
      for (int64_t x = threadIdx.x; x < ns; x += blockDim.x) {
        state[x] = pos[x];
        state_key[x] = sk[x];
      }
    }
  } else {
    ns = ChunkState(DeviceBlock(), p.order + head * p.n, p.n, a, p.k, state, counts);
    __syncthreads();  // the state (every warp's members)
    for (int64_t x = threadIdx.x; x < ns; x += blockDim.x) state_key[x] = key[state[x]];
  }
  __syncthreads();  // chunk_key and state_key
  for (int64_t x = threadIdx.x; x < ns + (b - a); x += blockDim.x) {
    int64_t j;
    const int64_t e = ChunkPassWrite(chunk_key, a, b, members, member_keys, ns, x, p.k, p.n,
                                     c == p.chunks - 1, &j);
    if (e >= 0) evict[j] = static_cast<int32_t>(e);
  }
}

// The scan's first lists: one block per (chunk, head) ranks the chunk's keys by counting
// (ChunkTopRank) and writes its top-min(cap, size) in rank order.
extern "C" __global__ void __launch_bounds__(256) attntune_select_chunk_top(ScanParams p) {
  ATTNTUNE_DYNAMIC_SHARED(uint64_t, top_key);  // [chunk]
  const int64_t c = blockIdx.x, head = blockIdx.y;
  const int64_t a = c * p.chunk, b = min(p.n, a + p.chunk);
  const uint64_t* key = p.key + head * p.n;
  for (int64_t x = threadIdx.x; x < b - a; x += blockDim.x) top_key[x] = key[a + x];
  __syncthreads();
  const int64_t list = head * p.chunks + c, base = list * p.cap;
  for (int64_t x = threadIdx.x; x < b - a; x += blockDim.x) {
    const int64_t rank = ChunkTopRank(top_key, a, b, x);
    if (rank < p.cap) {
      p.out_key[base + rank] = top_key[x];
      p.out_pos[base + rank] = static_cast<int32_t>(a + x);
    }
  }
  if (threadIdx.x == 0) p.out_n[list] = static_cast<int32_t>(min(p.cap, b - a));
}

// One step of the scan: a block per list; entry c takes the top-cap of its list and entry
// c - offset's (MergeSlot: each output slot by its own binary search), entries before
// `offset` are copied. Where the two lists fit in shared memory (p.staged), they are
// staged there first (coalesced), so that the binary searches read shared memory rather
// than chains of dependent global loads.
extern "C" __global__ void __launch_bounds__(256) attntune_select_top_merge(ScanParams p) {
  ATTNTUNE_DYNAMIC_SHARED(uint64_t, merge_smem);  // staged: keys of A and B [cap] each, then positions
  const int64_t list = blockIdx.x, c = list % p.chunks, base = list * p.cap;
  const int64_t nb = p.in_n[list];
  if (c < p.offset) {
    if (threadIdx.x == 0) p.out_n[list] = static_cast<int32_t>(nb);
    for (int64_t o = threadIdx.x; o < nb; o += blockDim.x) {
      p.out_key[base + o] = p.in_key[base + o];
      p.out_pos[base + o] = p.in_pos[base + o];
    }
    return;
  }
  const int64_t abase = (list - p.offset) * p.cap, na = p.in_n[list - p.offset];
  const int64_t total = min(p.cap, na + nb);
  const uint64_t* ka = p.in_key + abase;
  const int32_t* pa = p.in_pos + abase;
  const uint64_t* kb = p.in_key + base;
  const int32_t* pb = p.in_pos + base;
  if (p.staged) {
    uint64_t* ska = merge_smem;
    uint64_t* skb = ska + p.cap;
    int32_t* spa = reinterpret_cast<int32_t*>(skb + p.cap);
    int32_t* spb = spa + p.cap;
    for (int64_t x = threadIdx.x; x < na; x += blockDim.x) {
      ska[x] = ka[x];
      spa[x] = pa[x];
    }
    for (int64_t x = threadIdx.x; x < nb; x += blockDim.x) {
      skb[x] = kb[x];
      spb[x] = pb[x];
    }
    __syncthreads();
    ka = ska;
    pa = spa;
    kb = skb;
    pb = spb;
  }
  if (threadIdx.x == 0) p.out_n[list] = static_cast<int32_t>(total);
  for (int64_t o = threadIdx.x; o < total; o += blockDim.x) {
    int64_t i;
    const bool from_a = MergeSlot(ka, pa, na, kb, pb, nb, o, &i);
    p.out_key[base + o] = from_a ? ka[i] : kb[i];
    p.out_pos[base + o] = from_a ? pa[i] : pb[i];
  }
}

// The largest eviction of each tile of 32 keys (ListBuild skips tiles held by no row):
// a warp per tile, a lane per key (one coalesced load; a thread per tile with 32 loads
// of its own took 5.3 us at n = 16384, 8 heads, on the H200).
extern "C" __global__ void __launch_bounds__(256) attntune_select_tile_max(TopKParams p) {
  const int64_t x = GlobalThread() / 32;  // the warp's tile: the same for all its lanes
  if (x >= p.heads * p.tiles) return;
  const int64_t head = x / p.tiles, t = x % p.tiles;
  const DeviceWarp w{static_cast<int>(threadIdx.x % 32)};
  const int32_t m = TileMax(w, p.evict + head * p.n, p.n, t);
  if (w.lane == 0) p.tile_max[x] = m;
}

// ListBuild's counts of a round, by parity: attntune_select_lists' static shared memory.
using ListCountsShared = int32_t[2][2 * kListWarps];
static_assert(sizeof(ListCountsShared) == kListStaticBytes, "kListStaticBytes");
// ListBuild runs on a DeviceBlock: the lists kernel's blocks have its warps.
static_assert(DeviceBlock::kWarps == kListWarps, "a lists block is a DeviceBlock");

// Key lists: a block per list (head, query block), one pass over its tiles (ListBuild),
// written at the list's ListBegin: the room ListBound gives every list, so no list waits
// for the counts of the lists before it. Dynamic shared memory: the keys placed after the
// held ones (ListRestCap entries of 12 bytes).
extern "C" __global__ void __launch_bounds__(32 * kListWarps)
    attntune_select_lists(ListParams p) {
  __shared__ ListCountsShared counts;
  ATTNTUNE_DYNAMIC_SHARED(int32_t, list_rest);  // [rest_cap] keys, then evictions, then biases
  const int64_t list = blockIdx.x;
  if (list >= p.lists) return;  // none: one block launched
  const int64_t head = list / p.query_blocks, qb = list % p.query_blocks;
  int64_t p0, p1;
  BlockPositions(qb, p.br, p.lq, p.n, &p0, &p1);
  const int64_t first = ListBegin(head, qb, p.br, p.lq, p.n, p.k);
  const int64_t room = ListBound(p0, p1, p.k);
  const int32_t* evict = p.evict + head * p.n;
  const float* bias = p.bias != nullptr ? p.bias + head * p.n : nullptr;
  // Each key's eviction and bias come from the walk's loads (no second, dependent read).
  const int64_t n = ListBuild(DeviceBlock(), evict, p.tile_max + head * p.tiles,
                              bias, p.n, p0, p1, p.held_first, counts,
                              ListRest{list_rest, list_rest + p.rest_cap,
                                       reinterpret_cast<float*>(list_rest + 2 * p.rest_cap),
                                       p.rest_cap},
                              [&](int64_t x, int64_t j, int32_t e, float b) {
                                // ListBound bounds a prefix top-k's lists; any other
                                // evictions' are cut at their room.
                                if (x >= room) return;
                                p.keys[first + x] = static_cast<int32_t>(j);
                                p.key_evict[first + x] = e;
                                if (bias != nullptr) p.key_bias[first + x] = b;
                              });
  if (threadIdx.x == 0) {
    p.begin[list] = static_cast<int32_t>(first);
    p.end[list] = static_cast<int32_t>(first + (n < room ? n : room));
  }
}

// LSH bins: a block per kLshBlockRows rows of one head's keys or queries, that head's
// projections (and mu) staged in shared memory; a half-warp per row, each lane one of the
// host's 16 fp32 partial sums of four projections at a time from its terms x - mu held in
// registers; the fp64 tree of the 16 sums by shuffles (LshTree's pairs), lane 0 the tail
// and the bin. Every lane of a warp runs every step (rows past the head's end compute
// zeros and write nothing), so the shuffles take the whole warp.
template <int kPer, bool kFused, class E>
__device__ void LshBinsRows(const BinParams& p, const E* x0, const float* mu, const float* r,
                            int32_t first, int32_t count, int32_t* out) {
  const int half = threadIdx.x / 16, lane = threadIdx.x % 16;
  const int d = static_cast<int>(p.d), h = static_cast<int>(p.h);
  for (int t = 0; t < kLshBlockRows / 8; ++t) {
    const int32_t row = first + half + 8 * t;
    const bool valid = row < count;
    const E* x = x0 + static_cast<int64_t>(valid ? row : 0) * d;
    [[maybe_unused]] float u[kPer > 0 ? kPer : 1];
    if constexpr (kPer > 0) LshTerms<kPer>(x, mu, valid ? d : 0, lane, u);  // invalid: none read
    int32_t bin = 0;
    double best = 0.0;
    for (int c0 = 0; c0 < h; c0 += 4) {
      const int n = min(4, h - c0);
      float acc[4];
      if constexpr (kPer > 0) {
        LshLaneTermsN<kPer, 4>(u, r + c0 * d, d, lane, n, kFused, acc);
      } else {
#pragma unroll
        for (int c = 0; c < 4; ++c) {
          acc[c] = valid && c < n ? LshLane(x, mu, r + (c0 + c) * d, d, lane, kFused) : 0.f;
        }
      }
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        if (c >= n) break;  // the same n on every lane
        double v = static_cast<double>(acc[c]);
#pragma unroll
        for (int off = 8; off >= 1; off /= 2) {
          v = AddD(v, __shfl_down_sync(0xffffffffu, v, off, 16));
        }
        if (valid && lane == 0) {
          LshBinStep(c0 + c, LshTail(v, x, mu, r + (c0 + c) * d, d), p.argmax, &bin, &best);
        }
      }
    }
    if (valid && lane == 0) out[row] = bin;
  }
}

// The block's head, rows and staged projections, then its rows at unroll kPer (in
// LshTerms: 8 for d < 144, 16 for d < 272, 0 past it: no terms held).
template <int kPer, class E>
__device__ void LshBinsBlock(const BinParams& p) {
  ATTNTUNE_DYNAMIC_SHARED(float, staged);  // [h][d] projections, then [d] mu (when p.staged)
  // 32-bit block arithmetic (the launcher checks the count): 64-bit divisions are calls.
  int32_t bx = static_cast<int32_t>(blockIdx.x);
  const int32_t key_blocks = p.key_heads * p.key_head_blocks;
  int32_t seg, hk, count, chunk;
  const E* x0;
  int32_t* out;
  if (bx < key_blocks) {
    seg = bx / p.key_head_blocks;
    chunk = bx % p.key_head_blocks;
    hk = seg % p.hkv;
    count = static_cast<int32_t>(p.lk);
    x0 = static_cast<const E*>(p.k) + static_cast<int64_t>(seg) * p.lk * p.d;
    out = p.key_bin + static_cast<int64_t>(seg) * p.lk;
  } else {
    bx -= key_blocks;
    seg = bx / p.query_head_blocks;
    chunk = bx % p.query_head_blocks;
    hk = seg % p.hq / (p.hq / p.hkv);
    count = static_cast<int32_t>(p.lq);
    x0 = static_cast<const E*>(p.q) + static_cast<int64_t>(seg) * p.lq * p.d;
    out = p.query_bin + static_cast<int64_t>(seg) * p.lq;
  }
  const int hd = static_cast<int>(p.h * p.d), d = static_cast<int>(p.d);
  const float* r = p.rt + static_cast<int64_t>(hk) * hd;
  const float* mu = p.mu != nullptr ? p.mu + static_cast<int64_t>(hk) * d : nullptr;
  if (p.staged) {
    for (int x = threadIdx.x; x < hd; x += blockDim.x) staged[x] = r[x];
    if (mu != nullptr) {
      for (int x = threadIdx.x; x < d; x += blockDim.x) staged[hd + x] = mu[x];
      mu = staged + hd;
    }
    r = staged;
    __syncthreads();
  }
  const int32_t first = chunk * kLshBlockRows;
  if (p.fused) {
    LshBinsRows<kPer, true>(p, x0, mu, r, first, count, out);
  } else {
    LshBinsRows<kPer, false>(p, x0, mu, r, first, count, out);
  }
}

// d < 144 (the terms' loops unrolled to 8 steps: none dead at d = 128) in one kernel, wider
// rows in another, so that their registers do not set this one's occupancy.
template <class E>
__device__ __forceinline__ void LshBinsKernel(const BinParams& p) {
  LshBinsBlock<8, E>(p);
}
ATTNTUNE_SELECT_KERNELS(attntune_select_lsh_bins, 128, BinParams, LshBinsKernel)

template <class E>
__device__ __forceinline__ void LshBinsWideKernel(const BinParams& p) {
  if (p.d / 16 <= kLshMaxPerLane) {
    LshBinsBlock<kLshMaxPerLane, E>(p);
  } else {
    LshBinsBlock<0, E>(p);
  }
}
ATTNTUNE_SELECT_KERNELS(attntune_select_lsh_bins_wide, 128, BinParams, LshBinsWideKernel)

// Bucketed layout, one thread per item: bin starts of the sorted keys, spos, the rows'
// bins in (position, head) order with their segment offsets, windows, run breaks, block
// starts and block rows.
extern "C" __global__ void __launch_bounds__(256) attntune_select_bin_starts(LayoutParams p) {
  const int64_t x = GlobalThread();
  if (x >= p.heads * (p.bins + 1)) return;
  const int64_t head = x / (p.bins + 1), c = x % (p.bins + 1);
  p.starts[x] = static_cast<int32_t>(
      LowerBound<int32_t>(p.kbin_sorted + head * p.lk, 0, p.lk, static_cast<int32_t>(c)));
}

extern "C" __global__ void __launch_bounds__(256) attntune_select_spos(LayoutParams p) {
  const int64_t x = GlobalThread();
  if (x >= p.heads * p.lk) return;
  const int64_t head = x / p.lk;
  p.spos[head * p.lk + p.perm[x]] = static_cast<int32_t>(x % p.lk);
}

// Sort keys of the keys ((head, bin), so that one stable sort orders every head's keys
// by (bin, position)) and of the rows ((head, chunk, bin), rows in (position, head)
// order within a chunk).
extern "C" __global__ void __launch_bounds__(256) attntune_select_key_keys(LayoutParams p) {
  const int64_t x = GlobalThread();
  if (x >= p.heads * p.lk) return;
  p.ckey[x] = (static_cast<uint64_t>(x / p.lk) << p.bin_bits) | static_cast<uint64_t>(p.key_bin[x]);
}

extern "C" __global__ void __launch_bounds__(256) attntune_select_query_keys(LayoutParams p) {
  const int64_t x = GlobalThread();
  if (x >= p.total_rows) return;
  const int64_t head = x / (p.group * p.lq), local = x % (p.group * p.lq);
  const int64_t i = local / p.group, g = local % p.group;
  const int64_t b = head / p.hkv, hq = head % p.hkv * p.group + g;
  const uint64_t segment = static_cast<uint64_t>(head * p.chunks + i / p.chunk);
  p.ckey[x] = (segment << p.bin_bits) |
              static_cast<uint64_t>(p.query_bin[(b * p.hq + hq) * p.lq + i]);
  p.qrow[x] = static_cast<int32_t>(g * p.lq + i);
}

extern "C" __global__ void __launch_bounds__(256) attntune_select_strip(StripParams p) {
  const int64_t x = GlobalThread();
  if (x < p.count) p.out[x] = static_cast<int32_t>(p.in[x] & p.mask);
}

extern "C" __global__ void __launch_bounds__(256) attntune_select_windows(LayoutParams p) {
  const int64_t n = GlobalThread();
  if (n >= p.total_rows) return;
  const int64_t head = n / (p.group * p.lq);
  const int64_t i = p.rows[n] % p.lq;
  const int32_t c = p.qbin_sorted[n];
  const int32_t* starts = p.starts + head * (p.bins + 1);
  LshWindowOf(p.perm + head * p.lk, starts[c], starts[c + 1], p.lk - p.lq + i, p.k, &p.lo[n],
              &p.hi[n]);
}

extern "C" __global__ void __launch_bounds__(256) attntune_select_runs(LayoutParams p) {
  const int64_t n = GlobalThread();
  if (n >= p.total_rows) return;
  const int64_t head = n / (p.group * p.lq), local = n % (p.group * p.lq);
  const int64_t first = head * p.group * p.lq + local / (p.chunk * p.group) * p.chunk * p.group;
  const bool brk = n == first || RunBreak(n, first, p.qbin_sorted[n], p.qbin_sorted[n - 1],
                                          p.lo[n], p.hi[n - 1]);
  p.run_mark[n] = brk ? static_cast<int32_t>(n) : 0;
}

extern "C" __global__ void __launch_bounds__(256) attntune_select_block_starts(LayoutParams p) {
  const int64_t n = GlobalThread();
  if (n == 0) p.flag[p.total_rows] = 0;
  if (n >= p.total_rows) return;
  p.flag[n] = BlockStart(n, p.run_start[n], p.br) ? 1 : 0;
}

extern "C" __global__ void __launch_bounds__(256) attntune_select_block_rows(LayoutParams p) {
  const int64_t n = GlobalThread();
  if (n >= p.total_rows) return;
  if (p.flag[n] != 0) {
    const int32_t x = p.block_id[n];
    p.row_offsets[x] = static_cast<int32_t>(n);
    p.head[x] = static_cast<int32_t>(n / (p.group * p.lq));
  }
  if (n == p.total_rows - 1) p.row_offsets[p.block_id[p.total_rows]] = static_cast<int32_t>(p.total_rows);
}

// Bucketed keys: one warp per block (of blocks_bound; those past the count write 0),
// counted, then filled: the lsh range perm[lo_first, hi_last), then (hax) the chunk's
// prefix top-k keys that a row attends and the range does not hold.
namespace {

struct BlockView {
  int64_t rb, re, head, list;
  int32_t lo_first, hi_last, bin;
};

__device__ __forceinline__ bool LoadBlock(const BucketKeyParams& p, int64_t x, int64_t* pos, BlockView* v) {
  if (x >= *p.block_count) return false;
  v->rb = p.row_offsets[x];
  v->re = p.row_offsets[x + 1];
  v->head = p.head[x];
  v->lo_first = p.lo[v->rb];
  v->hi_last = p.hi[v->re - 1];
  v->bin = p.qbin_sorted[v->rb];
  // 32-bit divisions (rows < 2^31): 64-bit ones are calls, and the calls spill.
  const int32_t lq = static_cast<int32_t>(p.lq);
  v->list = v->head * p.chunks + (p.rows[v->rb] % lq) / static_cast<int32_t>(p.chunk);
  for (int r = threadIdx.x % 32; r < v->re - v->rb; r += 32) {
    pos[r] = p.lk - p.lq + p.rows[v->rb + r] % lq;
  }
  __syncwarp();
  return true;
}

template <class Emit>
__device__ __forceinline__ int64_t HaxExtras(const BucketKeyParams& p, const DeviceWarp& w, const int64_t* pos,
                             const BlockView& v, const Emit& emit) {
  if (p.evict == nullptr) return 0;
  const int32_t* list = p.list_keys + p.list_begin[v.list];
  const int64_t list_n = p.list_end[v.list] - p.list_begin[v.list];
  const int64_t head_keys = v.head * p.lk;
  return HaxExtrasWalk(w, list, list_n, pos, v.re - v.rb, p.evict + head_keys,
                       p.key_bin + head_keys, p.spos + head_keys, v.bin, v.lo_first, v.hi_last,
                       emit);
}

}  // namespace

constexpr int kMaxBucketRows = 128;  // the largest compiled Br

extern "C" __global__ void __launch_bounds__(128) attntune_select_block_key_count(BucketKeyParams p) {
  __shared__ int64_t pos_all[4][kMaxBucketRows];
  const int64_t x = static_cast<int64_t>(blockIdx.x) * 4 + threadIdx.x / 32;
  const DeviceWarp w{static_cast<int>(threadIdx.x % 32)};
  if (x == 0 && w.lane == 0) p.counts[p.blocks_bound] = 0;
  if (x >= p.blocks_bound) return;
  int64_t* pos = pos_all[threadIdx.x / 32];
  BlockView v;
  int64_t count = 0;
  if (LoadBlock(p, x, pos, &v)) {
    count = (v.hi_last - v.lo_first) + HaxExtras(p, w, pos, v, [](int64_t, int64_t) {});
  }
  if (w.lane == 0) p.counts[x] = static_cast<int32_t>(count);
}

extern "C" __global__ void __launch_bounds__(128) attntune_select_block_key_fill(BucketKeyParams p) {
  __shared__ int64_t pos_all[4][kMaxBucketRows];
  const int64_t x = static_cast<int64_t>(blockIdx.x) * 4 + threadIdx.x / 32;
  if (x >= p.blocks_bound) return;
  const DeviceWarp w{static_cast<int>(threadIdx.x % 32)};
  int64_t* pos = pos_all[threadIdx.x / 32];
  BlockView v;
  if (!LoadBlock(p, x, pos, &v)) return;
  const int64_t base = p.key_offsets[x];
  const int64_t head_keys = v.head * p.lk;
  const int64_t lsh = v.hi_last - v.lo_first;
  for (int64_t u = w.lane; u < lsh; u += 32) {
    const int64_t at = base + u;
    if (at >= p.capacity) break;  // cannot happen: capacity bounds every list
    const int32_t j = p.perm[head_keys + v.lo_first + u];
    p.keys[at] = j;
    p.key_spos[at] = static_cast<int32_t>(v.lo_first + u);
    if (p.evict != nullptr) p.key_evict[at] = p.evict[head_keys + j];
  }
  HaxExtras(p, w, pos, v, [&](int64_t slot, int64_t j) {
    const int64_t at = base + lsh + slot;
    if (at >= p.capacity) return;
    p.keys[at] = static_cast<int32_t>(j);
    p.key_spos[at] = p.spos[head_keys + j];
    p.key_evict[at] = p.evict[head_keys + j];
  });
}

// dma_decode: each key's slot in the sorted order, the top-k run's drops, their (value,
// step) keys, the decode evictions, and then its own drops.
extern "C" __global__ void __launch_bounds__(256) attntune_select_decode_slots(DecodeParams p) {
  const int64_t x = GlobalThread();
  if (x >= p.heads * p.n) return;
  const int64_t head = x / p.n;
  p.slot[head * p.n + p.order[x]] = static_cast<int32_t>(x % p.n);
}

// dropped[head][q] = j for evict[j] == q (j < q < n): evict = p.evict_d when set, else
// the top-k run's.
extern "C" __global__ void __launch_bounds__(256) attntune_select_decode_dropped(DecodeParams p) {
  const int64_t x = GlobalThread();
  if (x >= p.heads * p.n) return;
  const int64_t head = x / p.n, j = x % p.n;
  const int32_t e = (p.evict_d != nullptr ? p.evict_d : p.evict_s)[x];
  if (j < e && e < p.n) p.dropped[head * p.n + e] = static_cast<int32_t>(j);
}

extern "C" __global__ void __launch_bounds__(256) attntune_select_decode_events(DecodeParams p) {
  const int64_t x = GlobalThread();
  if (x >= p.heads * p.n) return;
  const int64_t head = x / p.n;
  p.event_key[x] = EventKey(p.key + head * p.n, p.dropped[x]);
}

extern "C" __global__ void __launch_bounds__(256) attntune_select_decode_evict(DecodeParams p) {
  const int64_t x = GlobalThread();
  if (x >= p.heads * p.n) return;
  const int64_t head = x / p.n, j = x % p.n, h = head * p.n;
  p.evict_d[x] = static_cast<int32_t>(
      DecodeEviction(p.key + h, p.evict_s + h, j, p.sorted_key + h, p.slot[x],
                     p.event_key_sorted + h, p.event_step_sorted + h, p.n, p.n));
}

// Chosen keys: one warp per (step, KV head, batch): the step's candidates, counted for
// each query head of the group, then scored per head and ranked.
extern "C" __global__ void __launch_bounds__(32) attntune_select_decode_count(ChosenParams p) {
  const int64_t t = p.first_step + blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const DeviceWarp w{static_cast<int>(threadIdx.x)};
  const int64_t head = b * p.hkv + hk;
  if (t == 0 && hk == 0 && b == 0 && w.lane == 0) p.counts[p.hq * p.lk * gridDim.z] = 0;
  const int64_t m = DecodeCandidates(w, t, p.r, p.evict + head * p.lk, p.dropped + head * p.lk,
                                     [](int64_t, int64_t) {});
  for (int64_t g = w.lane; g < p.group; g += 32) {
    p.counts[(b * p.hq + hk * p.group + g) * p.lk + t] = static_cast<int32_t>(min(m, p.w_q));
  }
}

template <class E>
__device__ __forceinline__ void DecodeChosenKernel(const ChosenParams& p) {
  ATTNTUNE_DYNAMIC_SHARED(uint64_t, dot_keys);  // [capacity] ChosenKeys of q·k, then the candidates
  int32_t* cand = reinterpret_cast<int32_t*>(dot_keys + p.capacity);
  const int64_t t = p.first_step + blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const DeviceWarp w{static_cast<int>(threadIdx.x)};
  const int64_t head = b * p.hkv + hk;
  const int64_t m = DecodeCandidates(w, t, p.r, p.evict + head * p.lk, p.dropped + head * p.lk,
                                     [&](int64_t slot, int64_t j) {
                                       if (slot < p.capacity) cand[slot] = static_cast<int32_t>(j);
                                     });
  __syncwarp();
  const E* kh = static_cast<const E*>(p.k) + head * p.lk * p.d;
  for (int64_t g = 0; g < p.group; ++g) {
    const int64_t row = (b * p.hq + hk * p.group + g) * p.lk + t;
    const E* q = static_cast<const E*>(p.q) + row * p.d;
    for (int64_t x = w.lane; x < m; x += 32) {
      dot_keys[x] = ChosenKey(DecodeDot(q, kh + cand[x] * p.d, p.d));
    }
    __syncwarp();
    const int64_t base = p.offsets[row];
    for (int64_t x = w.lane; x < m; x += 32) {
      const int64_t rank = ChosenRank(dot_keys, cand, m, x);
      if (rank < p.w_q) p.chosen[base + rank] = cand[x];
    }
    __syncwarp();
  }
}
ATTNTUNE_SELECT_KERNELS(attntune_select_decode_chosen, 32, ChosenParams, DecodeChosenKernel)

// One decode step's update of the resident sets (a warp per KV head and batch): the key
// step `step` replaces, from the resident set of step - 1 (StepReplace).
extern "C" __global__ void __launch_bounds__(32) attntune_select_decode_step(StepParams p) {
  const int64_t head = blockIdx.x;
  const DeviceWarp w{static_cast<int>(threadIdx.x)};
  const int64_t list = head * p.query_blocks + (p.step - 1) / kDecodeListSteps;
  const int32_t first = p.list_begin[list];
  const int64_t replaced =
      StepReplace(w, p.list_keys + first, p.list_evict + first, p.list_end[list] - first,
                  p.step, p.w_kv, p.key + head * p.lk);
  if (w.lane == 0) p.replaced[head] = static_cast<int32_t>(replaced);
}

namespace attntune {
namespace cuda_plan {
namespace {

// A failed call's text. The runtime also keeps a failed call's error for the next
// cudaGetLastError, which the next launch's check (Launched) reads: it is read off here,
// where it is reported, so that it fails no later launch.
std::string ErrorOf(cudaError_t error, const char* what) {
  (void)cudaGetLastError();
  return std::string(what) + ": " + cudaGetErrorName(error) + ": " + cudaGetErrorString(error);
}

cudaStream_t Stream(void* stream) { return static_cast<cudaStream_t>(stream); }

unsigned Blocks(int64_t items, int threads) {
  return static_cast<unsigned>((items + threads - 1) / threads > 0 ? (items + threads - 1) / threads : 1);
}

std::string Launched(const char* what) {
  const cudaError_t error = cudaGetLastError();
  return error == cudaSuccess ? "" : ErrorOf(error, what);
}

template <class T>
std::string Run(const char* what, void (*kernel)(T), dim3 grid, dim3 block, const T& params,
                void* stream, size_t smem = 0) {
#if defined(ATTNTUNE_CUDA_EMULATION)
  (void)stream;
  attntune_emu::Launch(kernel, grid, block, smem, params, what);
#else
  kernel<<<grid, block, smem, Stream(stream)>>>(params);
#endif
  return Launched(what);
}

/// Runs the kernel of the inputs' element type among a phase's three
/// (ATTNTUNE_SELECT_KERNELS; ATTNTUNE_TYPED(name) names them in order).
#define ATTNTUNE_TYPED(name) name, name##_f16, name##_bf16
template <class T>
std::string RunTyped(attntune::Dtype type, const char* what, void (*f32)(T), void (*f16)(T),
                     void (*bf16)(T), dim3 grid, dim3 block, const T& params, void* stream,
                     size_t smem = 0) {
  void (*kernel)(T) = type == attntune::Dtype::kF16    ? f16
                      : type == attntune::Dtype::kBf16 ? bf16
                                                       : f32;
  return Run(what, kernel, grid, block, params, stream, smem);
}

/// Runs a CUB algorithm: `call(temp, bytes)` once to size its temporary storage (kept in
/// `ws` under `name`), then for real.
template <class Call>
std::string Cub(SelectWorkspace& ws, const std::string& name, const Call& call) {
  size_t bytes = 0;
  cudaError_t error = call(nullptr, bytes);
  if (error != cudaSuccess) return ErrorOf(error, name.c_str());
  void* temp = ws.Get(name + ".cub", bytes > 0 ? bytes : 1);
  error = call(temp, bytes);
  return error == cudaSuccess ? "" : ErrorOf(error, name.c_str());
}

std::string Seq(int32_t* a, int64_t count, int64_t step, int64_t modulo, void* stream) {
  return Run("attntune_select_seq", attntune_select_seq, dim3(Blocks(count, 256)), dim3(256),
             SeqParams{a, count, step, modulo}, stream);
}

std::string Fill(int32_t* a, int64_t count, int32_t value, void* stream) {
  return Run("attntune_select_fill", attntune_select_fill, dim3(Blocks(count, 256)), dim3(256),
             FillParams{a, count, value}, stream);
}

/// Stable sort of (key, value) pairs by the key's bits [0, end_bit).
std::string Sort(SelectWorkspace& ws, const std::string& name, const uint64_t* keys_in,
                 uint64_t* keys_out, const int32_t* values_in, int32_t* values_out, int64_t items,
                 int end_bit, void* stream) {
  if (items >= INT32_MAX) return name + ": more than 2^31 items";
  return Cub(ws, name, [&](void* temp, size_t& bytes) {
    return cub::DeviceRadixSort::SortPairs(temp, bytes, keys_in, keys_out, values_in, values_out,
                                           static_cast<int>(items), 0, end_bit, Stream(stream));
  });
}

int BitsFor(int64_t values) {  // bits that hold 0 .. values - 1
  int bits = 1;
  while ((int64_t{1} << bits) < values) ++bits;
  return bits;
}

/// Each head's n keys keys_in[head * n, +n) sorted stably: keys_out and positions (in
/// [0, n)) in (key, position) order per head. One DeviceRadixSort of all heads' keys with
/// their global index (stable: equal keys in index order), then a stable sort of that
/// order by head: both over every key at once (a segmented sort gives one block per head).
std::string SortHeads(SelectWorkspace& ws, const std::string& name, const uint64_t* keys_in,
                      uint64_t* keys_out, int32_t* positions, int64_t heads, int64_t n,
                      void* stream) {
  const int64_t items = heads * n;
  if (items >= INT32_MAX) return name + ": more than 2^31 items";
  int32_t* index = ws.Get<int32_t>(name + ".index", items);
  int32_t* by_key = ws.Get<int32_t>(name + ".by_key", items);
  int32_t* by_head = ws.Get<int32_t>(name + ".by_head", items);
  uint64_t* key_scratch = ws.Get<uint64_t>(name + ".key_scratch", items);
  uint64_t* head_key = ws.Get<uint64_t>(name + ".head_key", items);
  HeadSortParams p{keys_in, by_key, head_key, keys_out, positions, items, static_cast<int32_t>(n)};
  const dim3 grid(Blocks(items, 256));
  std::string error = Seq(index, items, 1, 0, stream);
  if (error.empty()) {
    error = Sort(ws, name + ".key_sort", keys_in, key_scratch, index, by_key, items, 64, stream);
  }
  if (error.empty()) {
    error = Run("attntune_select_sort_heads", attntune_select_sort_heads, grid, dim3(256), p, stream);
  }
  if (error.empty()) {
    error = Sort(ws, name + ".head_sort", head_key, key_scratch, by_key, by_head, items,
                 BitsFor(heads), stream);
  }
  p.index = by_head;
  if (error.empty()) {
    error = Run("attntune_select_sort_gather", attntune_select_sort_gather, grid, dim3(256), p, stream);
  }
  return error;
}

std::string Strip(const uint64_t* in, int32_t* out, int64_t count, int bits, void* stream) {
  return Run("attntune_select_strip", attntune_select_strip, dim3(Blocks(count, 256)), dim3(256),
             StripParams{in, out, count, (uint64_t{1} << bits) - 1}, stream);
}

std::string ExclusiveSum(SelectWorkspace& ws, const std::string& name, const int32_t* in,
                         int32_t* out, int64_t items, void* stream) {
  return Cub(ws, name, [&](void* temp, size_t& bytes) {
    return cub::DeviceScan::ExclusiveSum(temp, bytes, in, out, static_cast<int>(items),
                                         Stream(stream));
  });
}

struct MaxOp {
  __device__ int32_t operator()(int32_t a, int32_t b) const { return a > b ? a : b; }
};

}  // namespace

SelectWorkspace::~SelectWorkspace() {
  for (auto& entry : buffers_) Free(entry.second.ptr);
}

void SelectWorkspace::Free(void* ptr) const {
  if (ptr == nullptr) return;
  if (ordered_) {
    cudaFreeAsync(ptr, Stream(stream_));
  } else {
    cudaFree(ptr);
  }
}

void* SelectWorkspace::Get(const std::string& name, size_t bytes) {
  Buffer& buffer = buffers_[name];
  if (buffer.ptr != nullptr && buffer.bytes >= bytes) return buffer.ptr;
  Free(buffer.ptr);
  buffer = Buffer();
  void* ptr = nullptr;
  const cudaError_t error =
      ordered_ ? cudaMallocAsync(&ptr, bytes, Stream(stream_)) : cudaMalloc(&ptr, bytes);
  if (error != cudaSuccess) {
    const std::string what = std::string(ordered_ ? "cudaMallocAsync" : "cudaMalloc") +
                             " (selection buffer " + name + ")";
    throw std::runtime_error(ErrorOf(error, what.c_str()));
  }
  buffer.ptr = ptr;
  buffer.bytes = bytes;
  if (poison_) {
    const cudaError_t set = ordered_ ? cudaMemsetAsync(ptr, 0xFF, bytes, Stream(stream_))
                                     : cudaMemset(ptr, 0xFF, bytes);
    if (set != cudaSuccess) throw std::runtime_error(ErrorOf(set, "cudaMemset (poison)"));
  }
  return ptr;
}

std::string CopyToDevice(void* device, const void* host, size_t bytes) {
  if (bytes == 0) return "";
  const cudaError_t error = cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice);
  return error == cudaSuccess ? "" : ErrorOf(error, "cudaMemcpy");
}

std::string CopyToHost(void* host, const void* device, size_t bytes) {
  if (bytes == 0) return "";
  const cudaError_t error = cudaMemcpy(host, device, bytes, cudaMemcpyDeviceToHost);
  return error == cudaSuccess ? "" : ErrorOf(error, "cudaMemcpy");
}

void AllocTopK(int64_t heads, int64_t n, int64_t k, bool bias, SelectWorkspace& ws,
               const std::string& tag, TopKDevice* out) {
  out->heads = heads;
  out->n = n;
  out->k = k;
  out->key = ws.Get<uint64_t>(tag + ".key", heads * n);
  out->bias_log2 = bias ? ws.Get<float>(tag + ".bias", heads * n) : nullptr;
  out->evict = ws.Get<int32_t>(tag + ".evict", heads * n);
  out->tile_max = ws.Get<int32_t>(tag + ".tile_max", heads * ((n + 31) / 32));
  out->sorted_key = nullptr;  // EnqueueTopK's, where it sorts
  out->order = nullptr;
}

std::string EnqueueKsScores(const Shape& s, DeviceInput q, DeviceInput k, TopKDevice* out,
                            SelectWorkspace& ws, void* stream) {
  if (s.d > 32 * kKsMaxPerLane) return "ks scores on the device take d <= 256";
  if (s.Group() > kKsMaxGroup) return "ks scores on the device take at most 8 query heads per KV head";
  if (q.type != k.type) return "ks scores: q and k of two element types";
  KsParams p{};
  p.q = q.data;
  p.k = k.data;
  p.key = out->key;
  p.lq = s.Lq;
  p.lk = s.Lk;
  p.d = s.d;
  p.hq = static_cast<int>(s.Hq);
  p.hkv = static_cast<int>(s.Hkv);
  p.chunk = kKsChunk;
  p.chunks = (s.Lq + kKsChunk - 1) / kKsChunk;
  p.sums = ws.Get<double>("ks.sums", s.B * s.Hq * p.chunks * s.d);
  const dim3 grid(static_cast<unsigned>(p.chunks), static_cast<unsigned>(s.Hq),
                  static_cast<unsigned>(s.B));
  std::string error = RunTyped(q.type, "attntune_select_ks_chunk_sums",
                               ATTNTUNE_TYPED(attntune_select_ks_chunk_sums), grid, dim3(128), p,
                               stream);
  if (error.empty()) {
    error = Run("attntune_select_ks_chunk_prefix", attntune_select_ks_chunk_prefix,
                dim3(static_cast<unsigned>((s.d + 31) / 32), static_cast<unsigned>(s.Hq),
                     static_cast<unsigned>(s.B)),
                dim3(32 * kChunkWarps), p, stream);
  }
  if (error.empty()) {
    const size_t smem = sizeof(double) * static_cast<size_t>(s.Group() * (kKsChunk + s.d));
    error = RunTyped(q.type, "attntune_select_ks_scores",
                     ATTNTUNE_TYPED(attntune_select_ks_scores),
                     dim3(static_cast<unsigned>(p.chunks), static_cast<unsigned>(s.Hkv),
                          static_cast<unsigned>(s.B)),
                     dim3(static_cast<unsigned>(32 * s.Group())), p, stream, smem);
  }
  return error;
}

std::string EnqueueWidenScores(const float* in, int64_t count, double* out, void* stream) {
  return Run("attntune_select_widen_scores", attntune_select_widen_scores,
             dim3(Blocks(count, 256)), dim3(256), WidenScoreParams{in, out, count}, stream);
}

std::string EnqueueScoreKeys(const double* x, TopKDevice* out, void* stream) {
  const int64_t count = out->heads * out->n;
  return Run("attntune_select_score_keys", attntune_select_score_keys,
             dim3(Blocks(count, 256)), dim3(256),
             ScoreKeyParams{x, out->key, out->bias_log2, count}, stream);
}

std::string EnqueueDmaScores(const Shape& s, DeviceInput v, const double* delta,
                             const double* a, bool fused, TopKDevice* out, void* stream) {
  if (s.B * s.Hkv > kSelectMaxHeads) return SelectHeadsWhy(s.B * s.Hkv);
  if (DmaScoresSharedBytes(s.d) > kNoOptInSharedBytes) {
    return "dma scores on the device take d <= " + std::to_string(kDmaScoresMaxD) +
           " (the head's delta in one block's shared memory)";
  }
  DmaParams p{v.data, delta, a, out->key, out->bias_log2, s.Lk, s.d, static_cast<int>(s.Hkv),
              static_cast<int>(s.B), fused};
  const size_t smem = static_cast<size_t>(DmaScoresSharedBytes(s.d));
  return RunTyped(v.type, "attntune_select_dma_scores", ATTNTUNE_TYPED(attntune_select_dma_scores),
                  dim3(Blocks(s.Lk, 32 * kDmaWarps), static_cast<unsigned>(s.B * s.Hkv)),
                  dim3(32 * kDmaWarps), p, stream, smem);
}

/// The scan of the chunks' top-k lists for `p` (p.key, n, chunk, chunks, heads,
/// state_cap): its last entries into p.scan_*.
std::string EnqueueTopKScan(TopKParams& p, SelectWorkspace& ws, const std::string& tag,
                            void* stream) {
  const int64_t lists = p.heads * p.chunks, entries = lists * p.state_cap;
  uint64_t* keys[2] = {ws.Get<uint64_t>(tag + ".scan_key0", entries),
                       ws.Get<uint64_t>(tag + ".scan_key1", entries)};
  int32_t* pos[2] = {ws.Get<int32_t>(tag + ".scan_pos0", entries),
                     ws.Get<int32_t>(tag + ".scan_pos1", entries)};
  int32_t* counts[2] = {ws.Get<int32_t>(tag + ".scan_n0", lists),
                        ws.Get<int32_t>(tag + ".scan_n1", lists)};
  ScanParams s{};
  s.key = p.key;
  s.n = p.n;
  s.chunk = p.chunk;
  s.chunks = p.chunks;
  s.heads = p.heads;
  s.cap = p.state_cap;
  s.out_key = keys[0];
  s.out_pos = pos[0];
  s.out_n = counts[0];
  std::string error = Run("attntune_select_chunk_top", attntune_select_chunk_top,
                          dim3(static_cast<unsigned>(p.chunks), static_cast<unsigned>(p.heads)),
                          dim3(256), s, stream, static_cast<size_t>(p.chunk * 8));
  // A block per list, a thread per output slot up to 256 (whole warps).
  const unsigned threads =
      static_cast<unsigned>(std::min<int64_t>(256, (p.state_cap + 31) / 32 * 32));
  s.staged = 2 * p.state_cap * 12 <= kNoOptInSharedBytes;
  int cur = 0;
  for (int64_t offset = 1; offset < p.chunks && error.empty(); offset *= 2) {
    s.in_key = keys[cur];
    s.in_pos = pos[cur];
    s.in_n = counts[cur];
    s.out_key = keys[1 - cur];
    s.out_pos = pos[1 - cur];
    s.out_n = counts[1 - cur];
    s.offset = offset;
    error = Run("attntune_select_top_merge", attntune_select_top_merge,
                dim3(static_cast<unsigned>(lists)), dim3(threads), s, stream,
                s.staged ? static_cast<size_t>(2 * p.state_cap * 12) : 0);
    cur = 1 - cur;
  }
  p.scan_key = keys[cur];
  p.scan_pos = pos[cur];
  p.scan_n = counts[cur];
  return error;
}

std::string EnqueueTopK(TopKDevice* out, SelectWorkspace& ws, const std::string& tag,
                        void* stream, bool sorted) {
  const int64_t heads = out->heads, n = out->n, k = out->k;
  if (heads > kSelectMaxHeads) return SelectHeadsWhy(heads);
  // k = 0 would launch the merges with no threads (a failed launch, not a refusal).
  if (k < 1) return "the prefix top-k on the device takes k >= 1";
  TopKParams p{};
  p.key = out->key;
  p.evict = out->evict;
  p.tile_max = out->tile_max;
  p.n = n;
  p.k = k;
  p.heads = heads;
  p.tiles = (n + 31) / 32;
  p.chunk = TopKChunk(k);
  p.chunks = (n + p.chunk - 1) / p.chunk;
  p.state_cap = std::min(k, n);
  // The chunks' states from the scan of top-k lists where its buffers fit and nothing
  // reads the sorted order (dma_decode does); else from that order.
  const bool scan = !sorted && k < n && TopKScanFits(heads, p.chunk, p.chunks, p.state_cap);
  std::string error;
  if (!sorted && (scan || k >= n)) {
    out->sorted_key = nullptr;  // not computed
    out->order = nullptr;
    if (scan) error = EnqueueTopKScan(p, ws, tag, stream);
  } else {
    out->sorted_key = ws.Get<uint64_t>(tag + ".sorted_key", heads * n);
    out->order = ws.Get<int32_t>(tag + ".order", heads * n);
    p.order = out->order;
    error = SortHeads(ws, tag + ".sort", out->key, out->sorted_key, out->order, heads, n,
                      stream);
  }
  // k >= n: every key is held to the end; else topk_chunks writes every eviction.
  if (error.empty() && k >= n) error = Fill(out->evict, heads * n, static_cast<int32_t>(n), stream);
  if (error.empty() && k < n) {
    const bool shared = TopKStateShared(p.chunk, p.state_cap);
    p.state_global = !shared;
    if (!shared && !scan) {
      p.state = ws.Get<int32_t>(tag + ".state", heads * p.chunks * p.state_cap);
      p.state_key = ws.Get<uint64_t>(tag + ".state_key", heads * p.chunks * p.state_cap);
    }
    const int64_t smem = p.chunk * 8 + (shared ? p.state_cap * 12 : 0);
    error = Run("attntune_select_topk_chunks", attntune_select_topk_chunks,
                dim3(static_cast<unsigned>(p.chunks), static_cast<unsigned>(heads)),
                dim3(32 * kChunkWarps), p, stream, static_cast<size_t>(smem));
  }
  if (error.empty()) {
    error = Run("attntune_select_tile_max", attntune_select_tile_max,
                dim3(Blocks(heads * p.tiles, 8)), dim3(256), p, stream);
  }
  return error;
}

std::string EnqueueKeyLists(const TopKDevice& topk, int64_t lq, int br, KeyOrder order,
                            ListsDevice* out, SelectWorkspace& ws, const std::string& tag,
                            void* stream) {
  const int64_t n = topk.n;
  // Before any division by br or room computed from Lk - Lq.
  if (lq > n) return tag + ": key lists need Lq <= Lk (causal, the last query at the last key)";
  if (br < 1) return tag + ": key lists need query blocks of at least one row";
  ListParams p{};
  p.evict = topk.evict;
  p.tile_max = topk.tile_max;
  p.bias = topk.bias_log2;
  p.n = n;
  p.lq = lq;
  p.br = br;
  p.k = topk.k;
  p.query_blocks = (lq + br - 1) / br;
  p.lists = topk.heads * p.query_blocks;
  p.tiles = (n + 31) / 32;
  p.held_first = order == KeyOrder::kHeldFirst;
  p.rest_cap = ListRestCap(br, p.held_first);
  // The buffer beside the kernel's counts (static) within the 48 KB that need no opt-in.
  if (p.rest_cap * 12 + kListStaticBytes > kNoOptInSharedBytes)
    return tag + ": held-first key lists of Br > 2042 (their buffer past 48 KB)";
  const int64_t capacity = ListBegin(topk.heads, 0, br, lq, n, topk.k);  // every head's room
  if (capacity >= INT32_MAX) return tag + ": key lists of 2^31 entries or more";
  if (p.lists > INT32_MAX) return tag + ": 2^31 key lists or more";
  p.begin = ws.Get<int32_t>(tag + ".begin", p.lists);
  p.end = ws.Get<int32_t>(tag + ".end", p.lists);
  p.keys = ws.Get<int32_t>(tag + ".keys", capacity);
  p.key_evict = ws.Get<int32_t>(tag + ".key_evict", capacity);
  p.key_bias = topk.bias_log2 != nullptr ? ws.Get<float>(tag + ".key_bias", capacity) : nullptr;
  const std::string error = Run("attntune_select_lists", attntune_select_lists,
                                dim3(Blocks(p.lists, 1)), dim3(32 * kListWarps), p,
                                stream, static_cast<size_t>(p.rest_cap * 12));
  out->query_blocks = p.query_blocks;
  out->lists = p.lists;
  out->capacity = capacity;
  out->begin = p.begin;
  out->end = p.end;
  out->keys = p.keys;
  out->key_evict = p.key_evict;
  out->key_bias = p.key_bias;
  return error;
}

std::string EnqueueLshBins(const Shape& s, DeviceInput q, DeviceInput k, const float* mu,
                           const float* rt, int64_t h, bool argmax_rule, bool fused,
                           int32_t* key_bin, int32_t* query_bin, void* stream) {
  if (h < 1 || h > 16) return "LSH bins take 1 to 16 projections";
  if (q.type != k.type) return "LSH bins: q and k of two element types";
  BinParams p{};
  p.q = q.data;
  p.k = k.data;
  p.mu = mu;
  p.rt = rt;
  p.key_bin = key_bin;
  p.query_bin = query_bin;
  p.lq = s.Lq;
  p.lk = s.Lk;
  p.d = s.d;
  p.h = h;
  p.hq = static_cast<int>(s.Hq);
  p.hkv = static_cast<int>(s.Hkv);
  p.argmax = argmax_rule;
  p.fused = fused;
  const int64_t key_head_blocks = (s.Lk + kLshBlockRows - 1) / kLshBlockRows,
                query_head_blocks = (s.Lq + kLshBlockRows - 1) / kLshBlockRows,
                blocks = s.B * s.Hkv * key_head_blocks + s.B * s.Hq * query_head_blocks;
  if (blocks >= INT32_MAX || s.Lk >= INT32_MAX || s.Lq >= INT32_MAX || h * s.d >= INT32_MAX) {
    return "LSH bins: 2^31 blocks, rows or projection terms or more";
  }
  p.key_heads = static_cast<int32_t>(s.B * s.Hkv);
  p.key_head_blocks = static_cast<int32_t>(key_head_blocks);
  p.query_head_blocks = static_cast<int32_t>(query_head_blocks);
  const size_t smem = static_cast<size_t>((h + 1) * s.d) * sizeof(float);
  p.staged = static_cast<int64_t>(smem) <= kNoOptInSharedBytes;
  const dim3 grid(static_cast<unsigned>(blocks));
  if (s.d / 16 <= 8) {
    return RunTyped(q.type, "attntune_select_lsh_bins", ATTNTUNE_TYPED(attntune_select_lsh_bins),
                    grid, dim3(128), p, stream, p.staged ? smem : 0);
  }
  return RunTyped(q.type, "attntune_select_lsh_bins_wide",
                  ATTNTUNE_TYPED(attntune_select_lsh_bins_wide), grid, dim3(128), p, stream,
                  p.staged ? smem : 0);
}

std::string EnqueueBucketLayout(const Shape& s, int64_t bins, const int32_t* key_bin,
                                const int32_t* query_bin, int64_t k_lsh, const TopKDevice* topk,
                                int br, int64_t chunk, BucketDevice* out, SelectWorkspace& ws,
                                void* stream) {
  if (br > kMaxBucketRows) return "bucketed blocks take Br <= 128";
  const bool hax = topk != nullptr;
  const int64_t heads = s.B * s.Hkv, group = s.Group();
  LayoutParams p{};
  p.lq = s.Lq;
  p.lk = s.Lk;
  p.group = group;
  p.bins = bins;
  p.k = k_lsh;
  p.br = br;
  p.chunk = BucketChunk(hax, chunk, s.Lq);
  p.chunks = std::max<int64_t>(1, (s.Lq + p.chunk - 1) / p.chunk);
  p.heads = heads;
  p.total_rows = heads * group * s.Lq;
  p.hq = static_cast<int>(s.Hq);
  p.hkv = static_cast<int>(s.Hkv);
  p.key_bin = key_bin;
  p.query_bin = query_bin;
  if (p.total_rows + 1 >= INT32_MAX || heads * s.Lk >= INT32_MAX) return "bucketed layout: 2^31 rows or keys";
  // Sizes: blocks and keys bounded per chunk (select_core.h), lists of the ks part.
  ListsDevice chunk_lists;
  std::string error;
  if (hax) {
    error = EnqueueKeyLists(*topk, s.Lq, static_cast<int>(p.chunk), KeyOrder::kAscending,
                            &chunk_lists, ws, "hax.chunks", stream);
  }
  if (!error.empty()) return error;
  const BucketSizes sizes = BucketLayoutSizes(heads, group, s.Lq, s.Lk, bins, k_lsh, br, p.chunk,
                                              hax ? topk->k : -1);
  const int64_t blocks_bound = sizes.blocks, key_capacity = sizes.keys;
  if (key_capacity >= INT32_MAX) return "bucketed layout: key lists of 2^31 entries or more";
  const std::string t = "bucket";
  const int bin_bits = BitsFor(bins);
  const int key_bits = bin_bits + BitsFor(heads);
  const int row_bits = bin_bits + BitsFor(heads * p.chunks);
  if (row_bits > 64) return "bucketed layout: too many chunks and bins to sort";
  p.bin_bits = bin_bits;
  int32_t* iota = ws.Get<int32_t>(t + ".iota", heads * s.Lk);
  p.ckey = ws.Get<uint64_t>(t + ".ckey", std::max(heads * s.Lk, p.total_rows));
  uint64_t* ckey_sorted = ws.Get<uint64_t>(t + ".ckey_sorted", std::max(heads * s.Lk, p.total_rows));
  int32_t* kbin_sorted = ws.Get<int32_t>(t + ".kbin_sorted", heads * s.Lk);
  int32_t* perm = ws.Get<int32_t>(t + ".perm", heads * s.Lk);
  p.kbin_sorted = kbin_sorted;
  p.perm = perm;
  p.starts = ws.Get<int32_t>(t + ".starts", heads * (bins + 1));
  p.spos = ws.Get<int32_t>(t + ".spos", heads * s.Lk);
  p.qrow = ws.Get<int32_t>(t + ".qrow", p.total_rows);
  int32_t* qbin_sorted = ws.Get<int32_t>(t + ".qbin_sorted", p.total_rows);
  int32_t* rows = ws.Get<int32_t>(t + ".rows", p.total_rows);
  p.qbin_sorted = qbin_sorted;
  p.rows = rows;
  p.lo = ws.Get<int32_t>(t + ".lo", p.total_rows);
  p.hi = ws.Get<int32_t>(t + ".hi", p.total_rows);
  p.run_mark = ws.Get<int32_t>(t + ".run_mark", p.total_rows);
  int32_t* run_start = ws.Get<int32_t>(t + ".run_start", p.total_rows);
  p.run_start = run_start;
  p.flag = ws.Get<int32_t>(t + ".flag", p.total_rows + 1);
  int32_t* block_id = ws.Get<int32_t>(t + ".block_id", p.total_rows + 1);
  p.block_id = block_id;
  p.row_offsets = ws.Get<int32_t>(t + ".row_offsets", blocks_bound + 1);
  p.head = ws.Get<int32_t>(t + ".head", blocks_bound);
  const unsigned rows_grid = Blocks(p.total_rows, 256);
  const unsigned keys_grid = Blocks(heads * s.Lk, 256);
  if (error.empty()) error = Seq(iota, heads * s.Lk, 1, s.Lk, stream);
  if (error.empty()) {
    error = Run("attntune_select_key_keys", attntune_select_key_keys, dim3(keys_grid), dim3(256), p,
                stream);
  }
  if (error.empty()) {
    error = Sort(ws, t + ".key_sort", p.ckey, ckey_sorted, iota, perm, heads * s.Lk, key_bits,
                 stream);
  }
  if (error.empty()) error = Strip(ckey_sorted, kbin_sorted, heads * s.Lk, bin_bits, stream);
  if (error.empty()) {
    error = Run("attntune_select_bin_starts", attntune_select_bin_starts,
                dim3(Blocks(heads * (bins + 1), 256)), dim3(256), p, stream);
  }
  if (error.empty()) {
    error = Run("attntune_select_spos", attntune_select_spos, dim3(keys_grid), dim3(256), p, stream);
  }
  if (error.empty()) {
    error = Run("attntune_select_query_keys", attntune_select_query_keys, dim3(rows_grid), dim3(256),
                p, stream);
  }
  if (error.empty()) {
    error = Sort(ws, t + ".query_sort", p.ckey, ckey_sorted, p.qrow, rows, p.total_rows, row_bits,
                 stream);
  }
  if (error.empty()) error = Strip(ckey_sorted, qbin_sorted, p.total_rows, bin_bits, stream);
  if (error.empty()) {
    error = Run("attntune_select_windows", attntune_select_windows, dim3(rows_grid), dim3(256), p,
                stream);
  }
  if (error.empty()) {
    error = Run("attntune_select_runs", attntune_select_runs, dim3(rows_grid), dim3(256), p, stream);
  }
  if (error.empty()) {
    error = Cub(ws, t + ".run_scan", [&](void* temp, size_t& bytes) {
      return cub::DeviceScan::InclusiveScan(temp, bytes, p.run_mark, run_start, MaxOp(),
                                            static_cast<int>(p.total_rows), Stream(stream));
    });
  }
  if (error.empty()) {
    error = Run("attntune_select_block_starts", attntune_select_block_starts, dim3(rows_grid),
                dim3(256), p, stream);
  }
  if (error.empty()) error = ExclusiveSum(ws, t + ".block_scan", p.flag, block_id, p.total_rows + 1, stream);
  if (error.empty()) {
    error = Run("attntune_select_block_rows", attntune_select_block_rows, dim3(rows_grid),
                dim3(256), p, stream);
  }
  // Keys of each block: counted, offsets, filled.
  BucketKeyParams kp{};
  kp.block_count = block_id + p.total_rows;
  kp.row_offsets = p.row_offsets;
  kp.head = p.head;
  kp.rows = rows;
  kp.lo = p.lo;
  kp.hi = p.hi;
  kp.qbin_sorted = qbin_sorted;
  kp.perm = perm;
  kp.spos = p.spos;
  kp.key_bin = key_bin;
  kp.evict = hax ? topk->evict : nullptr;
  kp.list_begin = hax ? chunk_lists.begin : nullptr;
  kp.list_end = hax ? chunk_lists.end : nullptr;
  kp.list_keys = hax ? chunk_lists.keys : nullptr;
  kp.lq = s.Lq;
  kp.lk = s.Lk;
  kp.chunk = p.chunk;
  kp.chunks = p.chunks;
  kp.blocks_bound = blocks_bound;
  kp.capacity = key_capacity;
  kp.counts = ws.Get<int32_t>(t + ".key_counts", blocks_bound + 1);
  int32_t* key_offsets = ws.Get<int32_t>(t + ".key_offsets", blocks_bound + 1);
  kp.key_offsets = key_offsets;
  kp.keys = ws.Get<int32_t>(t + ".keys", key_capacity);
  kp.key_spos = ws.Get<int32_t>(t + ".key_spos", key_capacity);
  kp.key_evict = ws.Get<int32_t>(t + ".key_evict", hax ? key_capacity : 1);
  const dim3 block_grid(Blocks(blocks_bound, 4));
  if (error.empty()) {
    error = Run("attntune_select_block_key_count", attntune_select_block_key_count, block_grid,
                dim3(128), kp, stream);
  }
  if (error.empty()) {
    error = ExclusiveSum(ws, t + ".key_scan", kp.counts, key_offsets, blocks_bound + 1, stream);
  }
  if (error.empty()) {
    error = Run("attntune_select_block_key_fill", attntune_select_block_key_fill, block_grid,
                dim3(128), kp, stream);
  }
  out->blocks_bound = blocks_bound;
  out->key_capacity = key_capacity;
  out->block_count = kp.block_count;
  out->head = p.head;
  out->row_offsets = p.row_offsets;
  out->rows = rows;
  out->lo = p.lo;
  out->hi = p.hi;
  out->key_offsets = key_offsets;
  out->keys = kp.keys;
  out->spos = p.spos;
  out->key_spos = kp.key_spos;
  out->key_evict = hax ? kp.key_evict : nullptr;
  return error;
}

std::string CanSelectDecode(const Shape& s, int64_t w_q, int64_t r) {
  const int64_t cap = 2 * std::min(r, s.Lk);
  // The candidates of one step and their scores sit in one block's shared memory.
  if (cap * static_cast<int64_t>(sizeof(uint64_t) + sizeof(int32_t)) > kNoOptInSharedBytes) {
    return "dma_decode's selection on the device takes r <= 2048";
  }
  if (s.B * s.Hkv > kSelectMaxHeads) return SelectHeadsWhy(s.B * s.Hkv);
  const int64_t rows = s.B * s.Hq * s.Lk;
  if (rows + 1 >= INT32_MAX) return "B * Hq * Lk must be below 2^31";
  // A row chooses at most min(w_q, cap) keys; their offsets are int32 (one scan).
  if (w_q > 0 && rows > INT32_MAX / std::min(w_q, std::max<int64_t>(cap, 1))) {
    return "dma_decode's selection on the device takes B * Hq * Lk * min(w_q, 2 * min(r, Lk)) "
           "below 2^31 (its chosen keys' offsets)";
  }
  return "";
}

std::string EnqueueDecodeSelection(const Shape& s, DeviceInput q, DeviceInput k,
                                   const TopKDevice& topk, int64_t w_q, int64_t r,
                                   DecodeDevice* out, SelectWorkspace& ws, void* stream) {
  const std::string why = CanSelectDecode(s, w_q, r);
  if (!why.empty()) return why;
  if (q.type != k.type) return "dma_decode's selection: q and k of two element types";
  out->w_q = w_q;
  out->r = r;
  const int64_t heads = topk.heads, n = topk.n;
  const std::string t = "decode";
  DecodeParams p{};
  p.key = topk.key;
  p.evict_s = topk.evict;
  p.sorted_key = topk.sorted_key;
  p.order = topk.order;
  p.n = n;
  p.heads = heads;
  p.slot = ws.Get<int32_t>(t + ".slot", heads * n);
  p.dropped = ws.Get<int32_t>(t + ".dropped_s", heads * n);
  p.event_key = ws.Get<uint64_t>(t + ".event_key", heads * n);
  uint64_t* event_key_sorted = ws.Get<uint64_t>(t + ".event_key_sorted", heads * n);
  int32_t* event_step_sorted = ws.Get<int32_t>(t + ".event_step_sorted", heads * n);
  p.event_key_sorted = event_key_sorted;
  p.event_step_sorted = event_step_sorted;
  const unsigned grid = Blocks(heads * n, 256);
  std::string error = Run("attntune_select_decode_slots", attntune_select_decode_slots, dim3(grid),
                          dim3(256), p, stream);
  if (error.empty()) error = Fill(p.dropped, heads * n, -1, stream);
  if (error.empty()) {
    error = Run("attntune_select_decode_dropped", attntune_select_decode_dropped, dim3(grid),
                dim3(256), p, stream);
  }
  if (error.empty()) {
    error = Run("attntune_select_decode_events", attntune_select_decode_events, dim3(grid),
                dim3(256), p, stream);
  }
  if (error.empty()) {
    error = SortHeads(ws, t + ".event_sort", p.event_key, event_key_sorted, event_step_sorted,
                      heads, n, stream);
  }
  out->evict = ws.Get<int32_t>(t + ".evict", heads * n);
  p.evict_d = out->evict;
  if (error.empty()) {
    error = Run("attntune_select_decode_evict", attntune_select_decode_evict, dim3(grid),
                dim3(256), p, stream);
  }
  // The decode run's own drops (the candidates' evicted keys), then its resident lists.
  int32_t* dropped_d = ws.Get<int32_t>(t + ".dropped_d", heads * n);
  out->dropped = dropped_d;
  p.dropped = dropped_d;
  if (error.empty()) error = Fill(dropped_d, heads * n, -1, stream);
  if (error.empty()) {
    error = Run("attntune_select_decode_dropped", attntune_select_decode_dropped, dim3(grid),
                dim3(256), p, stream);
  }
  TopKDevice resident = topk;
  resident.evict = out->evict;
  resident.tile_max = ws.Get<int32_t>(t + ".tile_max", heads * ((n + 31) / 32));
  resident.bias_log2 = nullptr;
  if (error.empty()) {
    TopKParams tp{};
    tp.evict = resident.evict;
    tp.tile_max = resident.tile_max;
    tp.n = n;
    tp.heads = heads;
    tp.tiles = (n + 31) / 32;
    error = Run("attntune_select_tile_max", attntune_select_tile_max,
                dim3(Blocks(heads * tp.tiles, 8)), dim3(256), tp, stream);
  }
  if (error.empty()) {
    error = EnqueueKeyLists(resident, n, kDecodeListSteps, KeyOrder::kAscending, &out->resident,
                            ws, t + ".lists", stream);
  }
  // Chosen keys: counts per (b, hq, t), offsets, then the chosen ones.
  ChosenParams cp{};
  cp.q = q.data;
  cp.k = k.data;
  cp.evict = out->evict;
  cp.dropped = dropped_d;
  cp.lk = s.Lk;
  cp.d = s.d;
  cp.w_q = w_q;
  cp.r = r;
  cp.group = s.Group();
  cp.hq = static_cast<int>(s.Hq);
  cp.hkv = static_cast<int>(s.Hkv);
  cp.capacity = 2 * std::min(r, s.Lk);
  cp.first_step = 0;
  const int64_t rows = s.B * s.Hq * s.Lk;
  cp.counts = ws.Get<int32_t>(t + ".chosen_counts", rows + 1);
  out->chosen_offsets = ws.Get<int32_t>(t + ".chosen_offsets", rows + 1);
  cp.offsets = out->chosen_offsets;
  out->chosen_capacity = rows * std::min(w_q, cp.capacity);
  out->chosen = ws.Get<int32_t>(t + ".chosen", out->chosen_capacity);
  cp.chosen = out->chosen;
  const dim3 steps(static_cast<unsigned>(s.Lk), static_cast<unsigned>(s.Hkv),
                   static_cast<unsigned>(s.B));
  if (error.empty()) {
    error = Run("attntune_select_decode_count", attntune_select_decode_count, steps, dim3(32), cp,
                stream);
  }
  if (error.empty()) error = ExclusiveSum(ws, t + ".chosen_scan", cp.counts, out->chosen_offsets, rows + 1, stream);
  if (error.empty() && w_q > 0 && cp.capacity > 0) {
    const size_t smem = static_cast<size_t>(cp.capacity) * (sizeof(uint64_t) + sizeof(int32_t));
    error = RunTyped(q.type, "attntune_select_decode_chosen",
                     ATTNTUNE_TYPED(attntune_select_decode_chosen), steps, dim3(32), cp, stream,
                     smem);
  }
  return error;
}

std::string EnqueueDecodeStep(const Shape& s, DeviceInput q, DeviceInput k,
                              const TopKDevice& topk, int64_t w_q, int64_t r, int64_t step,
                              const DecodeDevice& sel, SelectWorkspace& ws, void* stream) {
  if (step < 1 || step >= s.Lk) return "a decode step follows step 0 and lies within Lk";
  // The chosen lists were sized by the selection's w_q and r: a step with others would
  // write past a row's room.
  if (w_q != sel.w_q || r != sel.r) return "dma_decode's step takes its selection's w_q and r";
  if (q.type != k.type) return "dma_decode's step: q and k of two element types";
  StepParams sp{};
  sp.key = topk.key;
  sp.list_begin = sel.resident.begin;
  sp.list_end = sel.resident.end;
  sp.list_keys = sel.resident.keys;
  sp.list_evict = sel.resident.key_evict;
  sp.replaced = ws.Get<int32_t>("decode.replaced", s.B * s.Hkv);
  sp.lk = s.Lk;
  sp.w_kv = topk.k;
  sp.step = step;
  sp.query_blocks = sel.resident.query_blocks;
  std::string error = Run("attntune_select_decode_step", attntune_select_decode_step,
                          dim3(static_cast<unsigned>(s.B * s.Hkv)), dim3(32), sp, stream);
  ChosenParams cp{};
  cp.q = q.data;
  cp.k = k.data;
  cp.evict = sel.evict;
  cp.dropped = sel.dropped;
  cp.offsets = sel.chosen_offsets;
  cp.chosen = sel.chosen;
  cp.lk = s.Lk;
  cp.d = s.d;
  cp.w_q = w_q;
  cp.r = r;
  cp.group = s.Group();
  cp.hq = static_cast<int>(s.Hq);
  cp.hkv = static_cast<int>(s.Hkv);
  cp.capacity = 2 * std::min(r, s.Lk);
  cp.first_step = step;
  if (error.empty() && w_q > 0 && cp.capacity > 0) {
    const size_t smem = static_cast<size_t>(cp.capacity) * (sizeof(uint64_t) + sizeof(int32_t));
    error = RunTyped(q.type, "attntune_select_decode_chosen",
                     ATTNTUNE_TYPED(attntune_select_decode_chosen),
                     dim3(1, static_cast<unsigned>(s.Hkv), static_cast<unsigned>(s.B)), dim3(32),
                     cp, stream, smem);
  }
  return error;
}

}  // namespace cuda_plan
}  // namespace attntune
