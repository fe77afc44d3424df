// The windowed family (dense, swa, hybrid) on tensor cores: FlashAttention-2 style,
// one thread block per (query block, query head, batch), each warp owning one or two
// tiles of 16 query rows.
// The same body serves the top-k family (ks, dma: the block's gathered key list) and
// the bucketed family (lsh, hax: one thread block per block of BucketLists, Q gathered
// and O scattered through its row list).
// S = Q K^T and O += P V use mma.sync m16n8k16 (fp16/bf16 in, fp32 accumulate), their
// K and V fragments read from shared memory by ldmatrix (V's transposed); the
// online softmax runs in fp32 in the accumulator registers; K/V tiles stream through
// shared memory with cp.async, STAGES tiles in flight. Only the key blocks that
// KeyBlocks() lists (sink + window) are ever loaded. A warp's tile whose keys all of its
// rows attend skips the mask.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cuda/plan.h"
#include "kernels/cuda/windowed_cuda.h"

namespace attntune {
namespace cuda_plan {
namespace {

struct KernelParams {
  const uint16_t* q;
  const uint16_t* k;
  const uint16_t* v;
  uint16_t* o;
  const int32_t* windows;  // [Hkv] or nullptr
  int64_t lq, lk;
  int hq, hkv;
  int64_t window, sink;
  float scale_log2;  // log2(e) / sqrt(d): softmax in base 2
  // The top-k and bucketed families: the key lists (KeyLists, or BucketLists' keys),
  // the prefix top-k eviction positions [B,Hkv,Lk] (bucketed: hax's ks part, nullptr
  // for lsh), and the additive logit bias already in base 2 ([B,Hkv,Lk] b_j * log2(e),
  // or nullptr; top-k only).
  const int32_t* list_offsets;
  const int32_t* list_keys;
  const int32_t* evict;
  const float* bias_log2;
  int64_t query_blocks;
};

// The gathered families' second argument. Both: beside each listed key (same index as
// list_keys), copied with its K and V rows into shared memory so that the predicate
// reads no per-key array: top-k, its eviction (list_aux) and bias (list_bias, or
// nullptr); bucketed, its spos (list_aux) and, for hax, its eviction (list_aux2).
// Bucketed: BucketLists' head, row_offsets, rows, lo, hi and spos, and the device's
// block count. (Apart from KernelParams, so that the windowed kernel keeps the parameter
// block, and the code, that ran on the H100.)
struct BucketParams {
  const int32_t* block_head;
  const int32_t* row_offsets;
  const int32_t* rows;
  const int32_t* row_lo;
  const int32_t* row_hi;
  const int32_t* spos;
  const int32_t* block_count;  // blocks past it hold no rows and return at once (nullptr: none)
  const int32_t* list_end;     // one past each list's last key (list_offsets: its first)
  const int32_t* list_aux;
  const int32_t* list_aux2;
  const float* list_bias;
};

template <Dtype DT>
struct Math;

template <>
struct Math<Dtype::kF16> {
  static __device__ __forceinline__ uint32_t Pack(float lo, float hi) {
    __half2 h = __floats2half2_rn(lo, hi);  // .x (low 16 bits) = lo
    uint32_t u;
    memcpy(&u, &h, 4);
    return u;
  }
  static __device__ __forceinline__ void Mma(float c[4], const uint32_t a[4], uint32_t b0,
                                             uint32_t b1) {
#if defined(ATTNTUNE_CUDA_EMULATION)
    attntune_emu::MmaM16N8K16(c, a, b0, b1, false);
#else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
  }
};

template <>
struct Math<Dtype::kBf16> {
  static __device__ __forceinline__ uint32_t Pack(float lo, float hi) {
    __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    uint32_t u;
    memcpy(&u, &h, 4);
    return u;
  }
  static __device__ __forceinline__ void Mma(float c[4], const uint32_t a[4], uint32_t b0,
                                             uint32_t b1) {
#if defined(ATTNTUNE_CUDA_EMULATION)
    attntune_emu::MmaM16N8K16(c, a, b0, b1, true);
#else
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
        "{%8,%9}, {%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
  }
};

/// 2^x on the special-function unit alone (ex2.approx.ftz.f32). exp2f wraps the same
/// MUFU.EX2 in a compare and two multiplies per call so that results below 2^-126 come
/// out subnormal; here they are 0. A probability that small is 0 once packed to fp16 or
/// bf16 for O += P V, adds nothing to a row sum that holds its maximum's 1, and a rescale
/// factor that small leaves nothing of the sums it multiplies. 2^-inf is 0, as exp2f's.
__device__ __forceinline__ float Exp2(float x) {
#if defined(ATTNTUNE_CUDA_EMULATION)
  return attntune_emu::Ex2Ftz(x);
#else
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
#endif
}

/// 16-byte global -> shared copy; zero-fills when !ok (rows past Lq or Lk), so that
/// masked keys multiply zeros, never stale NaNs.
__device__ __forceinline__ void CpAsync16(void* smem, const void* gmem, bool ok) {
#if defined(ATTNTUNE_CUDA_EMULATION)
  attntune_emu::CpAsync(smem, gmem, 16, ok);
#else
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int bytes = ok ? 16 : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(gmem), "r"(bytes));
#endif
}
/// 4-byte global -> shared copy; zero-fills when !ok.
__device__ __forceinline__ void CpAsync4(void* smem, const void* gmem, bool ok) {
#if defined(ATTNTUNE_CUDA_EMULATION)
  attntune_emu::CpAsync(smem, gmem, 4, ok);
#else
  const unsigned dst = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  const int bytes = ok ? 4 : 0;
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(dst), "l"(gmem), "r"(bytes));
#endif
}
/// Four 8x8 b16 matrices from shared memory: lane l gives the address of row l % 8 of
/// matrix l / 8 (16 contiguous bytes); register m of lane l receives matrix m's row l / 4,
/// columns 2 (l % 4) and 2 (l % 4) + 1 (low half first), or with TRANS its column l / 4,
/// rows 2 (l % 4) and 2 (l % 4) + 1: an mma B fragment from a row-major tile either way.
template <bool TRANS>
__device__ __forceinline__ void LdMatrix4(uint32_t r[4], const uint16_t* smem) {
#if defined(ATTNTUNE_CUDA_EMULATION)
  attntune_emu::LdMatrixX4(r, smem, TRANS);
#else
  const unsigned a = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  if constexpr (TRANS) {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  } else {
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(a));
  }
#endif
}
#if defined(ATTNTUNE_CUDA_EMULATION)
__device__ __forceinline__ void CpAsyncCommit() { attntune_emu::CpAsyncCommit(); }
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  attntune_emu::CpAsyncWait(N);
}
#else
__device__ __forceinline__ void CpAsyncCommit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N>
__device__ __forceinline__ void CpAsyncWait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}
#endif

/// What one thread block visits: the key blocks of the window spans, or (GATHERED: the
/// top-k and bucketed families) the tiles of its gathered key list: tile k holds
/// keys[k*BC .. k*BC+BC) of the list.
template <bool SPARSE, int BC>
struct VisitList;
template <int BC>
struct VisitList<false, BC> {
  BlockSpans spans;
  __device__ int Count() const { return static_cast<int>(spans.Count()); }
  __device__ int64_t At(int k) const { return spans.At(k); }
  /// Key of row r of visited tile `at` (At()'s value); lk or more means none.
  __device__ int64_t Key(int64_t at, int r) const { return at * BC + r; }
  /// Rows of tile `at` that are list entries (BC: the windowed kernel masks by key).
  __device__ int Valid(int64_t) const { return BC; }
};
template <int BC>
struct VisitList<true, BC> {
  const int32_t* keys;
  int n;
  __device__ int Count() const { return (n + BC - 1) / BC; }
  __device__ int64_t At(int k) const { return k; }
  /// Rows of tile `at` that are list entries (the rest pad the last tile).
  __device__ int Valid(int64_t at) const { return static_cast<int>(n - at * BC); }
};

template <Dtype DT, int D, int BR, int BC, int WARPS, int STAGES, Family F>
__device__ __forceinline__ void WindowedBody(const KernelParams& p, const BucketParams& bp) {
  constexpr bool GATHERED = F != Family::kWindowed;
  constexpr bool BUCKETED = F == Family::kBucketed;
  // Each warp owns MT tiles of 16 query rows (WROWS rows from warp * WROWS): every K and
  // V fragment it reads from shared memory feeds MT mma. With one tile Q's A fragments
  // stay in registers for the whole key loop; with two they are read from shared memory
  // (ldmatrix) for each key tile, which leaves the registers to the accumulators.
  constexpr int MT = BR / (16 * WARPS);
  constexpr int WROWS = 16 * MT;
  constexpr bool Q_IN_REGS = MT == 1;
  static_assert((MT == 1 || MT == 2) && BR == WROWS * WARPS, "each warp owns 16 or 32 query rows");
  static_assert(D % 16 == 0 && BC % 16 == 0, "m16n8k16 needs multiples of 16");
  static_assert(((D + 8) * 2) % 16 == 0, "ldmatrix reads 16-byte rows");
  constexpr int LD = D + 8;      // padded smem row, as SmemBytes() assumes
  constexpr int CHUNKS = D / 8;  // 16-byte chunks per row
  constexpr int THREADS = WARPS * 32;
#if defined(ATTNTUNE_CUDA_EMULATION)  // the CPU emulator's block buffer (tests/gpu/emu)
  uint16_t* smem = attntune_emu::DynamicShared<uint16_t>();
#else
  extern __shared__ __align__(16) uint16_t smem[];
#endif
  uint16_t* qs = smem;
  uint16_t* ks = qs + BR * LD;
  uint16_t* vs = ks + STAGES * BC * LD;

  // Windowed and top-k: query block qb of head h, row r at position qb * BR + r, Q and
  // O rows of head h. Bucketed: block qb of BucketLists, row r is rows[r] = g * Lq + i of
  // KV head hk's query heads (Q and O rows counted from head hk * group), r < nr.
  // Windowed and top-k: the longest causal blocks first (BlockOfLaunch).
  const LaunchSlot slot =
      BUCKETED ? LaunchSlot{}
               : BlockOfLaunch(static_cast<int32_t>(blockIdx.x), static_cast<int32_t>(blockIdx.y),
                               static_cast<int32_t>(gridDim.x), p.hq / p.hkv);
  const int qb = BUCKETED ? static_cast<int>(blockIdx.x) : slot.qb;
  if constexpr (BUCKETED) {
    if (bp.block_count != nullptr && qb >= *bp.block_count) return;  // the whole block
  }
  const int head = BUCKETED ? bp.block_head[qb] : 0;  // b * Hkv + hk
  const int h = BUCKETED ? head % p.hkv * (p.hq / p.hkv) : slot.h;
  const int b = BUCKETED ? head / p.hkv : blockIdx.z;
  const int hk = BUCKETED ? head % p.hkv : h / (p.hq / p.hkv);
  const int row_base = BUCKETED ? bp.row_offsets[qb] : 0;
  const int32_t* rows = BUCKETED ? bp.rows + row_base : nullptr;
  const int nr = BUCKETED ? bp.row_offsets[qb + 1] - row_base : BR;
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int g = lane / 4, t = lane % 4;    // mma fragment coordinates
  // Windowed and top-k: the block's query block and head kept in shared memory for the
  // epilogue, which reads them back (computed from blockIdx, held in registers through
  // the key loop, they made the two-row-tile windowed kernel spill on sm_80, 86 and 89).
  __shared__ LaunchSlot slot_s;
  if (!BUCKETED && tid == 0) slot_s = slot;
  const uint16_t* qg = p.q + ((static_cast<int64_t>(b) * p.hq + h) * p.lq) * D;
  const uint16_t* kg = p.k + ((static_cast<int64_t>(b) * p.hkv + hk) * p.lk) * D;
  const uint16_t* vg = p.v + ((static_cast<int64_t>(b) * p.hkv + hk) * p.lk) * D;
  uint16_t* og = p.o + ((static_cast<int64_t>(b) * p.hq + h) * p.lq) * D;
  const int64_t window = p.windows != nullptr ? p.windows[hk] : p.window;
  // The windowed tiles' predicates in 32 bits (every position is below 2^31 - 1024).
  const int32_t window32 = Clamp32(window), sink32 = Clamp32(p.sink);
  const int32_t lk32 = static_cast<int32_t>(p.lk);

  VisitList<GATHERED, BC> spans;
  // Gathered: the tile's keys and their companions (KernelParams' list_aux, list_aux2,
  // list_bias) in shared memory, one 4-byte copy per key each. The companions are copied
  // with the tile's K and V rows; the keys STAGES tiles ahead of them (KEY_RING slots), so
  // that the addresses of a tile's K and V rows are read from shared memory, where a
  // read of the key list in global memory would hold the warp for its latency each tile.
  constexpr int META_STAGES = GATHERED ? STAGES : 1;
  constexpr int META_BC = GATHERED ? BC : 1;
  constexpr int KEY_RING = GATHERED ? 2 * STAGES : 1;
  __shared__ int32_t key_s[KEY_RING][META_BC];
  __shared__ int32_t aux_s[META_STAGES][META_BC];
  __shared__ int32_t aux2_s[META_STAGES][META_BC];  // hax's evictions, or the bias bits
  const int32_t* aux = nullptr;
  const int32_t* aux2 = nullptr;
  if constexpr (GATHERED) {
    const int64_t list =
        BUCKETED ? qb : (static_cast<int64_t>(b) * p.hkv + hk) * p.query_blocks + qb;
    const int64_t first = p.list_offsets[list];
    spans.keys = p.list_keys + first;
    spans.n = bp.list_end[list] - first;
    aux = bp.list_aux + first;
    if (BUCKETED && bp.list_aux2 != nullptr) aux2 = bp.list_aux2 + first;
    if (!BUCKETED && bp.list_bias != nullptr) aux2 = reinterpret_cast<const int32_t*>(bp.list_bias + first);
  } else {
    spans.spans = KeyBlocks(qb, BR, BC, p.lq, p.lk, window, p.sink);
  }
  const int n = spans.Count();
  // Gathered: entry c of the list keys of tile `tile` (padding past the list zero-filled)
  // into its ring slot. 32-bit positions in the list: a list holds fewer than Lk keys.
  auto load_key = [&](int tile, int c) {
    if constexpr (GATHERED) {
      const int x = tile * BC + c;
      const bool ok = x < spans.n;
      CpAsync4(&key_s[tile % KEY_RING][c], ok ? spans.keys + x : spans.keys, ok);
    }
  };

  // Gathered: the keys of the first STAGES tiles in a commit group of their own, ahead of
  // Q's, so that the first tiles' K and V rows are requested while Q is in flight (after
  // Q landed, they would wait for a second round trip).
  if constexpr (GATHERED) {
    for (int x = 0; x < STAGES && x < n; ++x) {
      for (int c = tid; c < BC; c += THREADS) load_key(x, c);
    }
    CpAsyncCommit();
  }
  // Q tile -> shared; one row tile a warp: its A fragments -> registers for the whole key
  // loop.
  for (int c = tid; c < BR * CHUNKS; c += THREADS) {
    const int r = c / CHUNKS, col = (c % CHUNKS) * 8;
    if constexpr (BUCKETED) {
      const bool ok = r < nr;
      const int64_t m = ok ? rows[r] : 0;
      CpAsync16(qs + r * LD + col, ok ? qg + m * D + col : qg, ok);
    } else {
      const int64_t i = static_cast<int64_t>(qb) * BR + r;
      const bool ok = i < p.lq;
      CpAsync16(qs + r * LD + col, ok ? qg + i * D + col : qg, ok);
    }
  }
  // Bucketed: the rows' lsh windows (shared memory rather than registers: a warp of two
  // row tiles has none to spare).
  __shared__ int32_t lo_s[BUCKETED ? BR : 1], hi_s[BUCKETED ? BR : 1];
  if constexpr (BUCKETED) {
    for (int c = tid; c < BR; c += THREADS) {
      const bool ok = c < nr;
      CpAsync4(&lo_s[c], ok ? bp.row_lo + row_base + c : bp.row_lo, ok);
      CpAsync4(&hi_s[c], ok ? bp.row_hi + row_base + c : bp.row_hi, ok);
    }
  }
  CpAsyncCommit();
  // One commit group per tile: its K and V rows, its companions and the keys of the tile
  // STAGES later. The group of tile x - STAGES has landed (and a barrier has passed) by
  // the time tile x's rows are requested, so its keys are in key_s.
  auto load_kv = [&](int64_t kblock, int stage) {
    uint16_t* kd = ks + stage * BC * LD;
    uint16_t* vd = vs + stage * BC * LD;
    for (int c = tid; c < BC * CHUNKS; c += THREADS) {
      const int r = c / CHUNKS, col = (c % CHUNKS) * 8;
      if constexpr (GATHERED) {
        // Past the list the ring holds key 0 (load_key zero-fills it): a row in the
        // tensor, whose copy reads nothing (src-size 0), so no address is selected.
        const bool ok = static_cast<int>(kblock) * BC + r < spans.n;
        const int64_t at = static_cast<int64_t>(key_s[kblock % KEY_RING][r]) * D + col;
        CpAsync16(kd + r * LD + col, kg + at, ok);
        CpAsync16(vd + r * LD + col, vg + at, ok);
      } else {
        const int64_t j = spans.Key(kblock, r);
        const bool ok = j < p.lk;
        CpAsync16(kd + r * LD + col, ok ? kg + j * D + col : kg, ok);
        CpAsync16(vd + r * LD + col, ok ? vg + j * D + col : vg, ok);
      }
    }
    if constexpr (GATHERED) {
      // The tile's companions and the keys of the tile STAGES later: entry e of
      // [companion | second companion | next keys], BC each, spread over the block's
      // threads (a warp a part where BC is a multiple of 32), so that no warp makes all
      // three copies while the others wait for it at the next barrier.
      const int tile = static_cast<int>(kblock), next = tile + STAGES;
      for (int e = tid; e < 3 * BC; e += THREADS) {
        const int part = e / BC, c = e % BC, x = tile * BC + c;
        const bool ok = x < spans.n;
        if (part == 0) {
          CpAsync4(&aux_s[stage][c], ok ? aux + x : aux, ok);
        } else if (part == 1) {
          if (aux2 != nullptr) CpAsync4(&aux2_s[stage][c], ok ? aux2 + x : aux2, ok);
        } else if (next < n) {
          load_key(next, c);
        }
      }
    }
  };

  // Prologue: STAGES - 1 tiles in flight. One commit per slot keeps the group count
  // fixed, so wait_group<STAGES - 1> always means "the tile for this step has landed".
  // Gathered: the first tiles' keys landed (Q may not have), their rows requested, then
  // Q waited for; windowed: Q waited for, then the first tiles requested.
  auto prologue = [&] {
#pragma unroll
    for (int s = 0; s < STAGES - 1; ++s) {
      if (s < n) load_kv(spans.At(s), s);
      CpAsyncCommit();
    }
  };
  if constexpr (GATHERED) {
    CpAsyncWait<1>();  // the keys' group (Q's is the one after it)
    __syncthreads();
    prologue();
    CpAsyncWait<STAGES - 1>();  // Q's group (and the bucketed rows' windows)
  } else {
    CpAsyncWait<0>();
  }
  __syncthreads();
  const int row0 = warp * WROWS;
  // Q's A fragment of row tile mi, dims kc*16.. (LdmQ, plan.h).
  auto q_frag = [&](uint32_t a[4], int mi, int kc) {
    LdMatrix4<false>(a, qs + LdmQ(LD, row0 + mi * 16, kc, lane));
  };
  uint32_t qa[Q_IN_REGS ? D / 16 : 1][4];
  if constexpr (Q_IN_REGS) {
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc) q_frag(qa[kc], 0, kc);
  }

  // This thread's rows of row tile mi: row0 + mi*16 + g (r = 0) and + 8 (r = 1).
  float o[MT][D / 8][4];
  float m[MT][2];  // running max (base-2 logits)
  float l[MT][2];  // this thread's share of the running sums
  int32_t pos[MT][2];  // CanImplement: every position (rows past Lq too) is below 2^31
  // Bucketed: the rows' positions (-1 past the block's last row: they attend nothing);
  // their lsh windows are in lo_s and hi_s.
#pragma unroll
  for (int mi = 0; mi < MT; ++mi) {
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
      o[mi][dt][0] = o[mi][dt][1] = o[mi][dt][2] = o[mi][dt][3] = 0.f;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int x = row0 + mi * 16 + g + 8 * r;
      m[mi][r] = -INFINITY;
      l[mi][r] = 0.f;
      pos[mi][r] = static_cast<int32_t>(p.lk - p.lq + static_cast<int64_t>(qb) * BR + x);
      if constexpr (BUCKETED) {
        pos[mi][r] = -1;
        if (x < nr) {
          pos[mi][r] = static_cast<int32_t>(p.lk - p.lq + rows[x] % p.lq);
        }
      }
    }
  }

  if constexpr (!GATHERED) prologue();
  for (int it = 0; it < n; ++it) {
    const int next = it + STAGES - 1;
    if (next < n) load_kv(spans.At(next), next % STAGES);
    CpAsyncCommit();
    CpAsyncWait<STAGES - 1>();
    __syncthreads();
    const uint16_t* kst = ks + (it % STAGES) * BC * LD;
    const uint16_t* vst = vs + (it % STAGES) * BC * LD;
    const int64_t kblock = spans.At(it);

    float s[MT][BC / 8][4];
#pragma unroll
    for (int mi = 0; mi < MT; ++mi) {
#pragma unroll
      for (int nt = 0; nt < BC / 8; ++nt)
        s[mi][nt][0] = s[mi][nt][1] = s[mi][nt][2] = s[mi][nt][3] = 0.f;
    }
    // Keys of the tile that are list entries (gathered: the last tile's may be fewer than
    // BC; BC or more for the others and for the windowed kernel). A group of 16 keys
    // wholly past them is not multiplied into O (its P is 0: masked to -inf) and, with
    // one row tile a warp, not into S either (its scores stay 0 until masked).
    const int valid = spans.Valid(kblock);
    // B[k][n] = K[key n][dim k]: one ldmatrix gives key tiles nt and nt + 1 (LdmK).
#pragma unroll
    for (int kc = 0; kc < D / 16; ++kc) {
      uint32_t qf[MT][4];
#pragma unroll
      for (int mi = 0; mi < MT; ++mi) {
        if constexpr (Q_IN_REGS) {
#pragma unroll
          for (int x = 0; x < 4; ++x) qf[mi][x] = qa[kc][x];
        } else {
          q_frag(qf[mi], mi, kc);
        }
      }
#pragma unroll
      for (int nt = 0; nt < BC / 8; nt += 2) {
        if (MT == 1 && nt * 8 >= valid) break;  // (two row tiles: no registers to spare)
        uint32_t kb[4];
        LdMatrix4<false>(kb, kst + LdmK(LD, nt, kc, lane));
#pragma unroll
        for (int mi = 0; mi < MT; ++mi) {
          Math<DT>::Mma(s[mi][nt], qf[mi], kb[0], kb[1]);
          Math<DT>::Mma(s[mi][nt + 1], qf[mi], kb[2], kb[3]);
        }
      }
    }

    float mx[MT][2];
#pragma unroll
    for (int mi = 0; mi < MT; ++mi) mx[mi][0] = m[mi][0], mx[mi][1] = m[mi][1];
    // Whether every row of this warp (positions first .. first + WROWS - 1) attends every
    // key of the tile: then no element is masked (windowed: AttendsAll; top-k: every key
    // of a whole tile entered by the warp's first row and held past its last).
    bool full = false;
    const int32_t first = pos[0][0] - g;
    if constexpr (BUCKETED) {
      full = false;
    } else if constexpr (GATHERED) {
      bool held = valid >= BC;
      for (int c = lane; c < BC; c += 32) {
        held = held && HeldThrough<int32_t>(key_s[it % KEY_RING][c], aux_s[it % STAGES][c],
                                            first, first + WROWS - 1);
      }
      full = __all_sync(0xffffffffu, held);
    } else {
      const int64_t j0 = spans.Key(kblock, 0);
      full = j0 + BC <= p.lk &&
             AttendsAll<int32_t>(first, first + WROWS - 1, static_cast<int32_t>(j0),
                                 static_cast<int32_t>(j0 + BC - 1), window32, sink32);
    }
    // Every score of the tile: f(row tile, key tile, element, key column).
    auto each_score = [&](auto&& f) {
#pragma unroll
      for (int mi = 0; mi < MT; ++mi) {
#pragma unroll
        for (int nt = 0; nt < BC / 8; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) f(mi, nt, e, nt * 8 + 2 * t + (e & 1));
        }
      }
    };
    if (full) {
      each_score([&](int mi, int nt, int e, int c) {
        float bias = 0.f;
        if constexpr (GATHERED && !BUCKETED) {
          if (aux2 != nullptr) bias = __int_as_float(aux2_s[it % STAGES][c]);
        }
        s[mi][nt][e] = s[mi][nt][e] * p.scale_log2 + bias;
        mx[mi][e >> 1] = fmaxf(mx[mi][e >> 1], s[mi][nt][e]);
      });
    } else {
      each_score([&](int mi, int nt, int e, int c) {
        const int r = e >> 1;
        float& x = s[mi][nt][e];
        if constexpr (BUCKETED) {
          const int stage = it % STAGES;
          const int x_row = row0 + mi * 16 + g + 8 * r;
          auto attends = [&] {
            return BucketAttendsKey<int32_t>(pos[mi][r], key_s[it % KEY_RING][c], lo_s[x_row],
                                             hi_s[x_row], aux_s[stage][c], aux2 != nullptr,
                                             aux2_s[stage][c]);
          };
          // One row tile a warp: without a branch. Two: the loads behind c < valid's
          // branch, as the branch-free form needs registers that warp does not have (it
          // spills 40 bytes).
          bool keep;
          if constexpr (MT == 1) {
            keep = (c < valid) & attends();
          } else {
            keep = c < valid && attends();
          }
          x = keep ? x * p.scale_log2 : -INFINITY;
        } else if constexpr (GATHERED) {
          const int stage = it % STAGES;
          const int32_t at = pos[mi][r];
          const int32_t key = key_s[it % KEY_RING][c];
          const bool keep = (c < valid) & (key <= at) & (at < aux_s[stage][c]);
          const float bias = aux2 != nullptr ? __int_as_float(aux2_s[stage][c]) : 0.f;
          x = keep ? x * p.scale_log2 + bias : -INFINITY;
        } else {
          const int32_t j = static_cast<int32_t>(spans.Key(kblock, c));  // below Lk + BC
          const bool keep = (j < lk32) & Attends<int32_t>(pos[mi][r], j, window32, sink32);
          x = keep ? x * p.scale_log2 : -INFINITY;
        }
        mx[mi][r] = fmaxf(mx[mi][r], x);
      });
    }
#pragma unroll
    for (int mi = 0; mi < MT; ++mi) {
      float base[2], alpha[2], rs[2] = {0.f, 0.f};
#pragma unroll
      for (int r = 0; r < 2; ++r) {  // the 4 threads of a quad share a row
        mx[mi][r] = fmaxf(mx[mi][r], __shfl_xor_sync(0xffffffffu, mx[mi][r], 1));
        mx[mi][r] = fmaxf(mx[mi][r], __shfl_xor_sync(0xffffffffu, mx[mi][r], 2));
        base[r] = mx[mi][r] == -INFINITY ? 0.f : mx[mi][r];  // nothing kept yet: avoid inf - inf
        alpha[r] = Exp2(m[mi][r] - base[r]);
        m[mi][r] = mx[mi][r];
      }
#pragma unroll
      for (int nt = 0; nt < BC / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          s[mi][nt][e] = Exp2(s[mi][nt][e] - base[e >> 1]);
          rs[e >> 1] += s[mi][nt][e];
        }
      }
      l[mi][0] = l[mi][0] * alpha[0] + rs[0];
      l[mi][1] = l[mi][1] * alpha[1] + rs[1];
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        o[mi][dt][0] *= alpha[0];
        o[mi][dt][1] *= alpha[0];
        o[mi][dt][2] *= alpha[1];
        o[mi][dt][3] *= alpha[1];
      }
    }

    // O += P V: the S accumulators of key tiles 2kk, 2kk+1 are the A fragment of P.
#pragma unroll
    for (int kk = 0; kk < BC / 16; ++kk) {
      if (kk * 16 >= valid) break;
      uint32_t pa[MT][4];
#pragma unroll
      for (int mi = 0; mi < MT; ++mi) {
        pa[mi][0] = Math<DT>::Pack(s[mi][2 * kk][0], s[mi][2 * kk][1]);
        pa[mi][1] = Math<DT>::Pack(s[mi][2 * kk][2], s[mi][2 * kk][3]);
        pa[mi][2] = Math<DT>::Pack(s[mi][2 * kk + 1][0], s[mi][2 * kk + 1][1]);
        pa[mi][3] = Math<DT>::Pack(s[mi][2 * kk + 1][2], s[mi][2 * kk + 1][3]);
      }
      // B[k][n] = V[key k][dim n]: one transposing ldmatrix gives dim tiles dt and dt + 1
      // (LdmV).
#pragma unroll
      for (int dt = 0; dt < D / 8; dt += 2) {
        uint32_t vb[4];
        LdMatrix4<true>(vb, vst + LdmV(LD, kk, dt, lane));
#pragma unroll
        for (int mi = 0; mi < MT; ++mi) {
          Math<DT>::Mma(o[mi][dt], pa[mi], vb[0], vb[1]);
          Math<DT>::Mma(o[mi][dt + 1], pa[mi], vb[2], vb[3]);
        }
      }
    }
    __syncthreads();  // the next step's prefetch overwrites this stage
  }

  int out_qb = qb;  // windowed and top-k: read back from slot_s (barriers since)
  uint16_t* out = og;
  if constexpr (!BUCKETED) {
    const LaunchSlot last = slot_s;
    out_qb = last.qb;
    out = p.o + ((static_cast<int64_t>(b) * p.hq + last.h) * p.lq) * D;
  }
#pragma unroll
  for (int mi = 0; mi < MT; ++mi) {
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float sum = l[mi][r];
      sum += __shfl_xor_sync(0xffffffffu, sum, 1);
      sum += __shfl_xor_sync(0xffffffffu, sum, 2);
      const float inv = sum > 0.f ? 1.f / sum : 0.f;
      const int x = row0 + mi * 16 + g + 8 * r;
      int64_t i = static_cast<int64_t>(out_qb) * BR + x;
      if constexpr (BUCKETED) {
        if (x >= nr) continue;
        i = rows[x];  // g * Lq + i past head hk * group
      } else {
        if (i >= p.lq) continue;
      }
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        *reinterpret_cast<uint32_t*>(out + i * D + dt * 8 + 2 * t) =
            Math<DT>::Pack(o[mi][dt][2 * r] * inv, o[mi][dt][2 * r + 1] * inv);
      }
    }
  }
}

}  // namespace
}  // namespace cuda_plan
}  // namespace attntune

// One extern "C" kernel per row of instantiations.def, so that cuobjdump's resource
// table names each instantiation plainly (KernelName() spells the same symbol).
#define ATTNTUNE_WINDOWED_TILE(dtype, tag, d, br, bc, warps, stages)                          \
  extern "C" __global__ void __launch_bounds__(warps * 32)                                    \
      attntune_windowed_##tag##_d##d##_br##br##_bc##bc##_w##warps##_s##stages(                \
          attntune::cuda_plan::KernelParams p) {                                              \
    attntune::cuda_plan::WindowedBody<attntune::cuda_plan::Dtype::k##dtype, d, br, bc, warps, \
                                      stages, attntune::cuda_plan::Family::kWindowed>(p, {}); \
  }                                                                                           \
  extern "C" __global__ void __launch_bounds__(warps * 32, 1)                                 \
      attntune_blocksparse_##tag##_d##d##_br##br##_bc##bc##_w##warps##_s##stages(             \
          attntune::cuda_plan::KernelParams p, attntune::cuda_plan::BucketParams bp) {        \
    attntune::cuda_plan::WindowedBody<attntune::cuda_plan::Dtype::k##dtype, d, br, bc, warps, \
                                      stages, attntune::cuda_plan::Family::kTopK>(p, bp);     \
  }                                                                                           \
  extern "C" __global__ void __launch_bounds__(warps * 32, 1)                                 \
      attntune_bucketed_##tag##_d##d##_br##br##_bc##bc##_w##warps##_s##stages(                \
          attntune::cuda_plan::KernelParams p, attntune::cuda_plan::BucketParams bp) {        \
    attntune::cuda_plan::WindowedBody<attntune::cuda_plan::Dtype::k##dtype, d, br, bc, warps, \
                                      stages, attntune::cuda_plan::Family::kBucketed>(p, bp); \
  }
#include "kernels/cuda/instantiations.def"
#undef ATTNTUNE_WINDOWED_TILE

namespace attntune {
namespace cuda_plan {
namespace {

struct CompiledKernel {
  WindowedTile tile;
  const void* functions[3];  // by Family: windowed, top-k, bucketed
};

const std::vector<CompiledKernel>& CompiledKernels() {
  static const std::vector<CompiledKernel> kernels = {
#define ATTNTUNE_WINDOWED_TILE(dtype, tag, d, br, bc, warps, stages)                \
  {{Dtype::k##dtype, d, br, bc, warps, stages},                                     \
   {reinterpret_cast<const void*>(                                                  \
        &attntune_windowed_##tag##_d##d##_br##br##_bc##bc##_w##warps##_s##stages),  \
    reinterpret_cast<const void*>(                                                  \
        &attntune_blocksparse_##tag##_d##d##_br##br##_bc##bc##_w##warps##_s##stages), \
    reinterpret_cast<const void*>(                                                  \
        &attntune_bucketed_##tag##_d##d##_br##br##_bc##bc##_w##warps##_s##stages)}},
#include "kernels/cuda/instantiations.def"
#undef ATTNTUNE_WINDOWED_TILE
  };
  return kernels;
}

const void* FindKernel(const WindowedTile& tile, Family family) {
  for (const CompiledKernel& k : CompiledKernels()) {
    if (k.tile == tile) return k.functions[static_cast<int>(family)];
  }
  return nullptr;
}

// A failed call's text; the error is read off the runtime here, where it is reported,
// so that the next launch's check does not find it pending (as select.cu's ErrorOf).
std::string ErrorText(cudaError_t error, const char* call) {
  (void)cudaGetLastError();
  return std::string(cudaGetErrorName(error)) + " (" + call + "): " + cudaGetErrorString(error);
}

}  // namespace

uint16_t ToBits(float x, Dtype dtype) {
  uint16_t bits;
  if (dtype == Dtype::kF16) {
    const __half h = __float2half_rn(x);
    memcpy(&bits, &h, 2);
  } else {
    const __nv_bfloat16 h = __float2bfloat16_rn(x);
    memcpy(&bits, &h, 2);
  }
  return bits;
}

float FromBits(uint16_t bits, Dtype dtype) {
  return dtype == Dtype::kF16 ? ToFloat(F16Bits{bits}) : ToFloat(Bf16Bits{bits});
}

std::string LaunchWindowed(const WindowedProblem& problem, const WindowedTile& tile,
                           const WindowedDeviceArgs& args) {
  const std::string why = CanImplement(problem, tile);
  if (!why.empty()) return why;
  const Family family = args.family;
  const bool gathered = family != Family::kWindowed;
  if (gathered && (args.list_offsets == nullptr || args.list_keys == nullptr))
    return "gathered launch without its key lists";
  if (gathered && args.list_aux == nullptr) return "gathered launch without its keys' evictions or places";
  if (family == Family::kBucketed &&
      (args.block_head == nullptr || args.row_offsets == nullptr || args.rows == nullptr ||
       args.row_lo == nullptr || args.row_hi == nullptr || args.spos == nullptr ||
       args.blocks < 1 || args.blocks > INT32_MAX))
    return "bucketed launch without its row lists";
  const void* function = FindKernel(tile, family);
  if (function == nullptr) return KernelName(tile, family) + " is not compiled";
  WindowedLaunchPlan plan = PlanWindowed(problem, tile);
  if (family == Family::kBucketed) {  // one thread block per block of BucketLists
    plan.grid_x = args.blocks;
    plan.grid_y = plan.grid_z = 1;
  }
  cudaError_t error = cudaFuncSetAttribute(function, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(plan.smem_bytes));
  if (error != cudaSuccess) return ErrorText(error, "cudaFuncSetAttribute");
  KernelParams params{};
  params.q = static_cast<const uint16_t*>(args.q);
  params.k = static_cast<const uint16_t*>(args.k);
  params.v = static_cast<const uint16_t*>(args.v);
  params.o = static_cast<uint16_t*>(args.o);
  params.windows = problem.per_head_windows ? args.windows : nullptr;
  params.lq = problem.shape.Lq;
  params.lk = problem.shape.Lk;
  params.hq = static_cast<int>(problem.shape.Hq);
  params.hkv = static_cast<int>(problem.shape.Hkv);
  params.window = problem.window;
  params.sink = problem.sink;
  params.scale_log2 = static_cast<float>(1.4426950408889634 / std::sqrt(double(tile.d)));
  if (gathered) {
    params.list_offsets = args.list_offsets;
    params.list_keys = args.list_keys;
    params.evict = args.evict;
    params.bias_log2 = family == Family::kTopK ? args.bias_log2 : nullptr;
    params.query_blocks = plan.grid_x;
  }
  BucketParams bucket{};
  if (gathered) {
    bucket.list_end = args.list_ends != nullptr ? args.list_ends : args.list_offsets + 1;
    bucket.list_aux = args.list_aux;
    bucket.list_aux2 = family == Family::kBucketed ? args.list_aux2 : nullptr;
    bucket.list_bias = family == Family::kTopK ? args.list_bias : nullptr;
  }
  if (family == Family::kBucketed) {
    bucket.block_head = args.block_head;
    bucket.row_offsets = args.row_offsets;
    bucket.rows = args.rows;
    bucket.row_lo = args.row_lo;
    bucket.row_hi = args.row_hi;
    bucket.spos = args.spos;
    bucket.block_count = args.block_count;
  }
  void* kernel_args[] = {&params, &bucket};  // the windowed kernel takes params only
  const dim3 grid(static_cast<unsigned>(plan.grid_x), static_cast<unsigned>(plan.grid_y),
                  static_cast<unsigned>(plan.grid_z));
  error = cudaLaunchKernel(function, grid, dim3(plan.threads), kernel_args,
                           static_cast<size_t>(plan.smem_bytes),
                           static_cast<cudaStream_t>(args.stream));
  if (error != cudaSuccess) return ErrorText(error, "cudaLaunchKernel");
  return "";
}

std::string ConfirmOnDevice(const WindowedTile& tile) {
  for (const Family family : kFamilies) {
    const std::string name = KernelName(tile, family);
    const void* function = FindKernel(tile, family);
    if (function == nullptr) return name + " is not compiled";
    cudaFuncAttributes attributes;
    cudaError_t error = cudaFuncGetAttributes(&attributes, function);
    if (error != cudaSuccess) return ErrorText(error, "cudaFuncGetAttributes");
    if (attributes.localSizeBytes > 0) {
      return name + " spills: " + std::to_string(attributes.localSizeBytes) + " bytes local";
    }
    const int smem = static_cast<int>(SmemBytes(tile));
    error = cudaFuncSetAttribute(function, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (error != cudaSuccess) return ErrorText(error, "cudaFuncSetAttribute");
    int blocks = 0;
    error = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, function, Threads(tile), smem);
    if (error != cudaSuccess)
      return ErrorText(error, "cudaOccupancyMaxActiveBlocksPerMultiprocessor");
    if (blocks < 1) return name + ": no block fits on one SM";
  }
  return "";
}

std::string RunWindowedOnDevice(const WindowedProblem& problem, const WindowedTile& tile,
                                const Tensors& tensors, const std::vector<int32_t>& windows,
                                std::vector<float>* out) {
  const size_t nq = tensors.q.size(), nkv = tensors.k.size();
  std::vector<uint16_t> hq(nq), hk(nkv), hv(nkv), ho(nq, 0x7fff);  // 0x7fff: NaN in both
  for (size_t x = 0; x < nq; ++x) hq[x] = ToBits(tensors.q[x], tile.dtype);
  for (size_t x = 0; x < nkv; ++x) {
    hk[x] = ToBits(tensors.k[x], tile.dtype);
    hv[x] = ToBits(tensors.v[x], tile.dtype);
  }
  void *dq = nullptr, *dk = nullptr, *dv = nullptr, *dout = nullptr, *dw = nullptr;
  std::string failure;
  auto check = [&](cudaError_t error, const char* call) {
    if (error != cudaSuccess && failure.empty()) failure = ErrorText(error, call);
    return failure.empty();
  };
  if (check(cudaMalloc(&dq, nq * 2), "cudaMalloc") &&
      check(cudaMalloc(&dk, nkv * 2), "cudaMalloc") &&
      check(cudaMalloc(&dv, nkv * 2), "cudaMalloc") &&
      check(cudaMalloc(&dout, nq * 2), "cudaMalloc") &&
      check(cudaMalloc(&dw, (windows.size() + 1) * 4), "cudaMalloc") &&
      check(cudaMemcpy(dq, hq.data(), nq * 2, cudaMemcpyHostToDevice), "cudaMemcpy") &&
      check(cudaMemcpy(dk, hk.data(), nkv * 2, cudaMemcpyHostToDevice), "cudaMemcpy") &&
      check(cudaMemcpy(dv, hv.data(), nkv * 2, cudaMemcpyHostToDevice), "cudaMemcpy") &&
      check(cudaMemcpy(dout, ho.data(), nq * 2, cudaMemcpyHostToDevice), "cudaMemcpy") &&
      (windows.empty() ||
       check(cudaMemcpy(dw, windows.data(), windows.size() * 4, cudaMemcpyHostToDevice),
             "cudaMemcpy"))) {
    WindowedDeviceArgs args;
    args.q = dq;
    args.k = dk;
    args.v = dv;
    args.o = dout;
    args.windows = static_cast<const int32_t*>(dw);
    const std::string launch = LaunchWindowed(problem, tile, args);
    if (!launch.empty()) failure = launch;
    if (failure.empty() && check(cudaDeviceSynchronize(), "cudaDeviceSynchronize") &&
        check(cudaMemcpy(ho.data(), dout, nq * 2, cudaMemcpyDeviceToHost), "cudaMemcpy")) {
      out->resize(nq);
      for (size_t x = 0; x < nq; ++x) (*out)[x] = FromBits(ho[x], tile.dtype);
    }
  }
  cudaFree(dq);
  cudaFree(dk);
  cudaFree(dv);
  cudaFree(dout);
  cudaFree(dw);
  return failure;
}

}  // namespace cuda_plan
}  // namespace attntune
