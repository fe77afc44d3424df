// Planning for the CUDA kernels (windowed: dense, swa, hybrid; top-k: ks, dma; bucketed:
// lsh, hax): tile table, per-arch limits, shared-memory and grid sizes, the key-block
// list of a query block, the gathered key and row lists, and the static resource table
// read from ptxas at build time. Plain C++, no CUDA header:
// built and tested on every machine (STYLE.md "Planning apart from running"). The
// inline ATTNTUNE_HD functions are the very code the kernel runs on the device.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/selection/selection.h"
#include "core/shape.h"
#include "core/tensors.h"
#include "core/types.h"

#if defined(__CUDACC__)
#define ATTNTUNE_HD __host__ __device__
#else
#define ATTNTUNE_HD
#endif

namespace attntune {
namespace cuda_plan {

/// The kernels' element types are the project's (core/types.h): kF16 and kBf16, the
/// 2-byte types the attention kernels compile for (the selection reads kF32 too).
using attntune::Dtype;

/// "f16" or "bf16" (the tag used in kernel names and the resource table); "f32" for kF32,
/// which no attention kernel takes.
const char* DtypeTag(Dtype dtype);

/// Limits of one compute capability that decide whether a tile can launch.
struct ArchLimits {
  int sm = 0;                  // 80, 86, 89, 90
  const char* chip = "";       // CUPTI chip name, "GA100"
  int64_t max_smem_block = 0;  // opt-in dynamic + static shared memory per block
  int64_t max_smem_sm = 0;     // shared memory per SM
  int64_t regs_sm = 65536;     // 32-bit registers per SM
  int max_threads_sm = 0;
  int max_regs_thread = 255;
};

/// The architectures the kernels are built for, in build order.
const std::vector<ArchLimits>& SupportedArchs();
/// Limits of `sm` (80, 86, 89, 90) or nullptr when attntune has no kernels for it.
const ArchLimits* FindArch(int sm);

/// One compiled instantiation of the windowed kernel (a row of instantiations.def).
struct WindowedTile {
  Dtype dtype = Dtype::kF16;
  int d = 128;     // head dimension, compiled in
  int br = 64;     // query rows per block
  int bc = 64;     // keys per tile
  int warps = 4;   // br / 16 or br / 32: each warp owns one or two tiles of 16 query rows
  int stages = 2;  // K/V tiles in flight (cp.async); 1 = no prefetch
  bool operator==(const WindowedTile& o) const {
    return dtype == o.dtype && d == o.d && br == o.br && bc == o.bc && warps == o.warps &&
           stages == o.stages;
  }
};

/// Every compiled tile, in instantiations.def order.
const std::vector<WindowedTile>& WindowedTiles();

/// The kernel families every tile is compiled in (one tensor-core body, three ways of
/// choosing rows and keys): windowed (dense, swa, hybrid: key blocks of the window
/// spans), top-k (ks, dma: a query block over its gathered prefix top-k keys, KeyLists)
/// and bucketed (lsh, hax: a block of rows sorted by (bin, position), gathered through
/// a row list, over its gathered keys, BucketLists).
enum class Family { kWindowed, kTopK, kBucketed };
constexpr Family kFamilies[] = {Family::kWindowed, Family::kTopK, Family::kBucketed};

/// "attntune_windowed_f16_d128_br64_bc64_w4_s2": the extern "C" kernel symbol of `tile`
/// in `family` ("attntune_blocksparse_..." for top-k, "attntune_bucketed_..." for bucketed).
std::string KernelName(const WindowedTile& tile, Family family = Family::kWindowed);
/// KernelName(tile, Family::kTopK).
std::string BlockSparseKernelName(const WindowedTile& tile);
/// Dynamic shared memory of one block: Q tile plus `stages` K and V tiles, rows padded
/// by 8 elements (16 bytes) so that the fragment loads hit distinct banks.
int64_t SmemBytes(const WindowedTile& tile);
int Threads(const WindowedTile& tile);

/// Resource usage of one compiled kernel on one arch, as ptxas reports it (-Xptxas -v).
struct KernelResources {
  int sm = 0;
  std::string kernel;
  int registers = 0;
  int64_t stack = 0;         // stack frame bytes per thread
  int64_t spill_stores = 0;  // bytes per thread
  int64_t spill_loads = 0;
  int64_t static_smem = 0;  // static shared memory; the dynamic part is SmemBytes()
};

/// Parses the ptxas -v log of a build ("Compiling entry function 'NAME' for 'sm_NN'",
/// then "N bytes stack frame, N bytes spill stores, N bytes spill loads" and "Used N
/// registers[, N bytes smem]..."). Throws std::runtime_error naming the line when a
/// kernel's record is incomplete.
std::vector<KernelResources> ParseResourceUsage(const std::string& text);
/// "sm,kernel,registers,stack,spill_stores,spill_loads,static_smem" plus one row each.
std::string ResourcesToCsv(const std::vector<KernelResources>& rows);
std::vector<KernelResources> ResourcesFromCsv(const std::string& csv);
/// The table read from ptxas when this build compiled the kernels (every tile x every
/// arch of SupportedArchs()); empty in a build without the CUDA toolkit.
const std::vector<KernelResources>& CompiledResources();
const KernelResources* FindResources(const std::vector<KernelResources>& table, int sm,
                                     const std::string& kernel);

/// Why `tile` of `family` cannot run on `arch` given its compiled resources ("" = it
/// can): missing from the table, spills, too many registers for one block, too much
/// shared memory.
std::string TileInfeasibleReason(const WindowedTile& tile, const ArchLimits& arch,
                                 const std::vector<KernelResources>& table,
                                 Family family = Family::kWindowed);

/// Arguments of one windowed launch (what the variant table's parameters become).
struct WindowedProblem {
  Shape shape;
  int64_t window = 0;             // 0: dense; else keys p(i)-w < j <= p(i)
  int64_t sink = 0;               // keys j < sink always attended (if j <= p(i))
  bool per_head_windows = false;  // hybrid: windows[Hkv] tensor overrides `window`
};

/// A launch decided on the host: grid, block, shared memory, workspace.
struct WindowedLaunchPlan {
  WindowedTile tile;
  int64_t grid_x = 0;  // query blocks
  int64_t grid_y = 0;  // query heads
  int64_t grid_z = 0;  // batch
  int threads = 0;
  int64_t smem_bytes = 0;
  int64_t workspace_bytes = 0;  // none: one pass, no split-KV
};

/// Why `tile` cannot compute `problem` ("" = it can): head dim, causal, shape limits.
std::string CanImplement(const WindowedProblem& problem, const WindowedTile& tile);
/// The launch of `tile` for `problem`; CHECKs CanImplement.
WindowedLaunchPlan PlanWindowed(const WindowedProblem& problem, const WindowedTile& tile);
/// Whether `tile` is `family`'s measured default at its (dtype, d): where one compiled tile
/// ran faster than the table's first, it comes first (docs/gpu.md, Kernels).
bool PreferredTile(const WindowedTile& tile, Family family);
/// The default tile for (dtype, d) of `family` on `arch`: the first feasible PreferredTile,
/// else the first feasible compiled tile, or nullptr when none fits.
const WindowedTile* DefaultTile(Dtype dtype, int d, const ArchLimits& arch,
                                const std::vector<KernelResources>& table,
                                Family family = Family::kWindowed);
/// The same over every compiled tile, whatever the arch (the "Tile" parameter's default).
const WindowedTile* DefaultTile(Dtype dtype, int d, Family family);

/// The gathered key lists of the block-skipping family (dma, ks: prefix top-k), CSR over
/// (batch, KV head, query block): keys[offsets[x] .. offsets[x+1]) ascending, x =
/// (b * Hkv + h) * QueryBlocks + qb. Key j belongs to S(i) iff j <= p(i) < evict[j]
/// (evict[B,Hkv,Lk], as the prefix top-k selection computes it), so query block qb
/// lists exactly the union of its rows' sets: the keys with j <= p(last row) and
/// evict[j] > max(j, p(first row)). The kernel loads them Bc at a time (DESIGN.md s2:
/// "prefix top-k sets shared by a query block and gathered once"). Causal, Lq <= Lk.
/// kHeldFirst (the block-skipping kernel's lists): the keys every row of the block
/// attends (HeldThrough(j, evict[j], p(first row), p(last row))) first, in ascending j,
/// then the others in ascending j, so that a warp's tiles take the mask only where they
/// reach the keys that enter or leave within the block. kAscending (hax's chunk unions,
/// dma_decode's resident sets): every key in ascending j.
enum class KeyOrder { kAscending, kHeldFirst };
struct KeyLists {
  int64_t query_blocks = 0;
  std::vector<int32_t> offsets;  // size B * Hkv * query_blocks + 1
  std::vector<int32_t> keys;
};
KeyLists BuildKeyLists(const Shape& shape, const std::vector<int32_t>& evict, int br,
                       KeyOrder order = KeyOrder::kAscending);

/// The gathered lists of the bucketed family (lsh, hax; DESIGN.md s2 "bucketed window"
/// and "union"). One thread block per block of the bucketed layout (SortQueries in
/// kernels/selection/lsh_layout.h): block x computes the rows
/// rows[row_offsets[x] .. row_offsets[x+1]) (at most Br) of (batch, KV head) head[x] =
/// b * Hkv + hkv, a row m = g * Lq + i being query head hkv * Group() + g at position i,
/// with its lsh window [lo, hi) of that head's keys in (bin, position) order; it visits
/// keys[key_offsets[x] .. key_offsets[x+1]) (ascending j), the union of its rows' sets.
/// spos[(b * Hkv + hkv) * Lk + j] = the place of key j in that order. A row attends key
/// j iff BucketAttends(p(i), j, lo, hi, spos[j], evict of the head) (hax; lsh: nullptr).
struct BucketLists {
  std::vector<int32_t> head, row_offsets, rows, lo, hi;
  std::vector<int32_t> key_offsets, keys, spos;
  int64_t Blocks() const { return static_cast<int64_t>(head.size()); }
};
/// lsh: `bins` (ComputeLshBins), k_lsh keys per row, `evict` empty, one chunk. hax: plus
/// the ks part, evict = the prefix top-k evictions [B,Hkv,Lk] of k_ks
/// (PrefixTopKEvictions), rows sorted a chunk of `chunk` query positions at a time (0:
/// one chunk), so that a block's rows, and its ks union, span at most a chunk's
/// positions. Causal, Lq <= Lk. Defined in bucket_lists.cpp.
BucketLists BuildBucketLists(const Shape& shape, const LshBins& bins, int64_t k_lsh,
                             const std::vector<int32_t>& evict, int br, int64_t chunk);

/// "attntune::select::<phase>" for a selection kernel's name (attntune_select_<phase>, or
/// one of CUB's kernels: only the selection sorts and scans with CUB, all of it as
/// "attntune::select::cub"); "" for any other kernel (the attention's).
std::string SelectionPhaseOf(const std::string& kernel_name);

/// Whether the host's LSH projection (ComputeLshBins, built with -march=native) fuses its
/// fp32 multiply-adds: found once by binning a key whose two projections differ only in
/// the rounding of one product. The device bins with the same choice (select_core.h), so
/// that its bins equal the host's bit for bit. Defined in bucket_lists.cpp.
bool HostFusesLshProducts();

/// Whether the host's DmaScores fuses the multiply-adds of its dot products: found once by
/// scoring values on which the two differ.
bool HostFusesDmaProducts();

/// R of every KV head transposed to [Hkv][bits][d] in fp32 (the values ComputeLshBins
/// projects onto; LshProjection's, supplied or seeded). Defined in bucket_lists.cpp.
std::vector<float> LshProjectionRows(const Tensors& t, int64_t bits, uint64_t seed);

/// Split-KV decode (dense and swa, one query row per head: Lq = 1): the keys the row
/// attends are cut into `splits` contiguous ranges of the key axis, one thread block per
/// (split, KV head, batch) computes the partial softmax state (max, sum, unnormalised O)
/// of every query head of its group, and a combine kernel merges the splits.
struct DecodePlan {
  int64_t splits = 0;
  int64_t keys_per_split = 0;   // the last split may hold fewer
  int64_t first_key = 0;        // keys before it are never attended (window, no sink)
  int64_t grid_x = 0, grid_y = 0, grid_z = 0;  // splits, Hkv, B
  int threads = 128;
  int64_t workspace_bytes = 0;  // fp32 partial O [B,Hq,splits,d] + (max, sum) [B,Hq,splits,2]
};
/// Head dims and groups the decode kernels are compiled for.
constexpr int kDecodeMaxGroup = 8;
/// Why split-KV decode cannot compute `problem` with `splits` ("" = it can).
std::string CanImplementDecode(const WindowedProblem& problem, int64_t splits);
/// The plan; CHECKs CanImplementDecode. Splits past the attended keys are dropped
/// (never more splits than attended keys).
DecodePlan PlanDecode(const WindowedProblem& problem, int64_t splits);

/// Gathered decode (dma_decode, every step of a sequence: Lq = Lk): one thread block per
/// (step, KV head, batch), 4 warps, over the step's resident keys and then each query
/// head's chosen keys (SelectDecodeKokkos in kernels/kokkos/sparse.h). The resident keys
/// come from KeyLists (BuildKeyLists over the resident sets' eviction steps) with query
/// blocks of kDecodeListSteps steps: a step's list holds the resident keys of its run of
/// steps, kept per key by InTopK(t, j, evict).
constexpr int kDecodeListSteps = 32;  // steps per shared list: at most 31 keys wasted a step
/// Why gathered decode cannot compute `shape` ("" = it can).
std::string CanImplementGatheredDecode(const Shape& shape);

// ---- shared host/device logic: the kernel calls exactly these ----

/// fp16 and bf16 values as their bits, and their fp32 values (exact): what the selection
/// reads of a library caller's q, k, v in place, and the kernels' outputs read back
/// (FromBits).
struct F16Bits {
  uint16_t bits;
};
struct Bf16Bits {
  uint16_t bits;
};

ATTNTUNE_HD inline float ToFloat(float x) { return x; }

ATTNTUNE_HD inline float ToFloat(Bf16Bits x) {
  const uint32_t u = static_cast<uint32_t>(x.bits) << 16;
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

ATTNTUNE_HD inline float ToFloat(F16Bits x) {
#if defined(__CUDA_ARCH__)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(x.bits));
  return f;
#else
  const uint32_t sign = static_cast<uint32_t>(x.bits & 0x8000u) << 16;
  const uint32_t exponent = (x.bits >> 10) & 0x1fu, mantissa = x.bits & 0x3ffu;
  float f;
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact in fp32
    f = static_cast<float>(mantissa) * 5.9604644775390625e-8f;
    return sign != 0 ? -f : f;
  }
  const uint32_t u = sign | (exponent == 31 ? 0x7f800000u : (exponent + 112) << 23) |
                     mantissa << 13;  // inf and nan keep their payload
  std::memcpy(&f, &u, sizeof f);
  return f;
#endif
}

/// Whether query row i (absolute position p) attends key j (DESIGN.md s1, causal):
/// j <= p, and (window <= 0, or j > p - window, or j < sink). The predicates here combine
/// plain values with & and | rather than && and ||: the kernels' masked tiles then
/// evaluate them without branches (nvcc branches around the short-circuited operands).
/// p - j < window is j > p - window without the overflow of p - window. I: int64_t, or
/// the kernel's 32-bit positions with the window and sink clamped to them (Clamp32).
template <class I>
ATTNTUNE_HD inline bool Attends(I p, I j, I window, I sink) {
  return (j <= p) & (j >= 0) & ((window <= 0) | (p - j < window) | (j < sink));
}

/// The windowed kernel's `ldmatrix.x4` addresses: the element offset, in a row-major
/// shared tile of row stride `ld`, of the 16-byte row that lane `lane` gives (row
/// lane % 8 of matrix lane / 8). Register m of each lane then holds matrix m's part of
/// an mma fragment:
/// Q's A fragment of the 16 rows from `row0`, dims kc*16..: matrices (rows +0..7, dims
/// +0..7), (rows +8..15, dims +0..7), (rows +0..7, dims +8..15), (rows +8..15, dims +8..15).
ATTNTUNE_HD inline int LdmQ(int ld, int row0, int kc, int lane) {
  return (row0 + (lane / 8 % 2) * 8 + lane % 8) * ld + kc * 16 + (lane / 16) * 8;
}
/// K's B fragments of S = Q K^T for key tiles nt and nt + 1, dims kc*16..: matrices (keys
/// nt*8.., dims +0..7), (the same keys, dims +8..15), then key tile nt + 1 alike.
ATTNTUNE_HD inline int LdmK(int ld, int nt, int kc, int lane) {
  return ((nt + lane / 16) * 8 + lane % 8) * ld + kc * 16 + (lane / 8 % 2) * 8;
}
/// V's B fragments of O += P V (loaded transposed) for keys kk*16.. and dim tiles dt and
/// dt + 1: matrices (keys +0..7, dims dt*8..), (keys +8..15, dims dt*8..), then dims
/// (dt + 1)*8.. alike.
ATTNTUNE_HD inline int LdmV(int ld, int kk, int dt, int lane) {
  return (kk * 16 + (lane / 8 % 2) * 8 + lane % 8) * ld + (dt + lane / 16) * 8;
}

/// Whether every row at positions [p_lo, p_hi] attends every key of [j_lo, j_hi]
/// (Attends), so that a tile of them needs no mask element by element.
/// I as Attends'.
template <class I>
ATTNTUNE_HD inline bool AttendsAll(I p_lo, I p_hi, I j_lo, I j_hi, I window, I sink) {
  if (j_lo < 0 || j_hi > p_lo) return false;
  if (window <= 0) return true;
  const I first_plain = j_lo > sink ? j_lo : sink;  // the first key that is no sink
  return first_plain > j_hi || p_hi - first_plain < window;
}

/// A window or sink as the kernel's 32-bit predicates take it: clamped to [0, 2^31 - 1].
/// For positions below 2^31 - 1 (CanImplement) Attends and AttendsAll answer the same
/// with it as with the 64-bit value: a window <= 0 means none, and one of 2^31 - 1 or more
/// holds every earlier key; a sink <= 0 holds no key, one of 2^31 - 1 or more every key.
ATTNTUNE_HD inline int32_t Clamp32(int64_t v) {
  return static_cast<int32_t>(v < 0 ? 0 : v > INT32_MAX ? INT32_MAX : v);
}

/// Whether the prefix top-k set of a row at position p holds key j (ks, dma, hax's ks
/// part): j <= p < evict[j], evict = the head's PrefixTopKEvictions (read only when j <= p).
ATTNTUNE_HD inline bool InTopK(int64_t p, int64_t j, const int32_t* evict) {
  return j <= p && p < evict[j];
}

/// Whether the prefix top-k set of every row at positions [p0, p1] holds key j, evicted at
/// e: it entered by p0 and is held past p1 (the kernel's unmasked tiles, KeyOrder). I:
/// the kernel's 32-bit positions, or int64_t.
template <class I>
ATTNTUNE_HD inline bool HeldThrough(I j, I e, I p0, I p1) {
  return (j <= p0) & (e > p1);
}

/// Whether a row of the bucketed family (BucketLists) at position p attends key j: the
/// row's lsh window [lo, hi) holds spos_j, j's place in the (bin, position) key order,
/// or (hax) j is in the row's prefix top-k set; lsh passes evict = nullptr (no ks part).
/// A key in both sets counts once: the key list holds it once.
ATTNTUNE_HD inline bool BucketAttends(int64_t p, int64_t j, int64_t lo, int64_t hi,
                                      int64_t spos_j, const int32_t* evict) {
  return (lo <= spos_j && spos_j < hi) || (evict != nullptr && InTopK(p, j, evict));
}

/// BucketAttends with key j's eviction position given (the kernel reads it beside the
/// key in the list): `ks` says whether there is a ks part (hax). I: the kernel's 32-bit
/// positions, or int64_t.
template <class I>
ATTNTUNE_HD inline bool BucketAttendsKey(I p, I j, I lo, I hi, I spos_j, bool ks, I evict_j) {
  return ((lo <= spos_j) & (spos_j < hi)) | (ks && ((j <= p) & (p < evict_j)));
}

/// Gathered decode's walk over the keys of one step of one (batch, KV head): the
/// kernel's key loop (DecodeSplitBody in decode.cu), tested on the host. x = 0, 1, ...
/// (a warp takes every 4th x, with a walk of its own) is first resident[x], x <
/// n_resident (the step's list: every query head of the group attends it if resident,
/// InTopK(step, j, evict)), then the chosen keys of group head 0, 1, ... in turn
/// (chosen[chosen_offsets[c] ..], c = row0 + head * stride; that head only).
struct DecodeWalk {
  enum { kEnd, kAttend, kSkip };
  const int32_t* resident = nullptr;
  int64_t n_resident = 0;
  const int32_t* evict = nullptr;           // [Lk] of the head, read when resident_evict is null
  const int32_t* resident_evict = nullptr;  // evict of each listed key (beside `resident`)
  int64_t step = 0;
  const int32_t* chosen_offsets = nullptr;
  const int32_t* chosen = nullptr;
  int64_t row0 = 0, stride = 0;
  int group = 0;
  int head = -1;     // the group head whose chosen keys the walk is in
  int64_t end = -1;  // one past its last x (-1: not started)

  /// Key x (ascending across calls on one walk): kEnd past the last key, kSkip for a
  /// listed key not resident at `step`, else kAttend with *j and *only (-1: every head).
  ATTNTUNE_HD int At(int64_t x, int64_t* j, int* only) {
    if (x < n_resident) {
      *j = resident[x];
      *only = -1;
      const int64_t e = resident_evict != nullptr ? resident_evict[x] : evict[*j];
      return *j <= step && step < e ? kAttend : kSkip;
    }
    if (end < 0) end = n_resident;
    while (x >= end && head + 1 < group) {
      ++head;
      const int64_t c = row0 + head * stride;
      end += chosen_offsets[c + 1] - chosen_offsets[c];
    }
    if (x >= end) return kEnd;
    const int64_t c = row0 + head * stride;
    *j = chosen[chosen_offsets[c + 1] - (end - x)];
    *only = head;
    return kAttend;
  }
};

/// The query block and query head that thread block (x, y) of the windowed and top-k
/// grids computes (x < `blocks` query blocks, y a query head, `group` query heads per KV
/// head): the blocks of one KV head's query heads are launched together, from the last
/// query block to the first, the group's heads interleaved. Under a causal mask a query
/// block's work grows with its index, and blocks start in launch order, so the longest
/// start first and the last to start are the shortest; in (query block, head) order a
/// grid would end on the last head's longest blocks, one a slot.
/// Trivial (no member initialisers): the kernels keep one in a __shared__ variable,
/// which CUDA allows only for types whose default constructor is empty.
struct LaunchSlot {
  int32_t qb, h;
};
/// 32-bit: CanImplement refuses a grid whose query blocks times group reach 2^31.
ATTNTUNE_HD inline LaunchSlot BlockOfLaunch(int32_t x, int32_t y, int32_t blocks,
                                            int32_t group) {
  const int32_t l = y % group * blocks + x;  // launch order within the KV head y / group
  LaunchSlot slot;
  slot.qb = blocks - 1 - l / group;
  slot.h = y - y % group + l % group;
  return slot;
}

/// Key blocks (of width bc) that query block qb (rows [qb*br, qb*br+br) ∩ [0, Lq)) must
/// visit, as at most two half-open spans [lo0, hi0) ∪ [lo1, hi1): the sink blocks and
/// the window blocks, disjoint and ascending. Out-of-window blocks are not listed.
struct BlockSpans {
  int64_t lo0 = 0, hi0 = 0, lo1 = 0, hi1 = 0;
  ATTNTUNE_HD int64_t Count() const { return (hi0 - lo0) + (hi1 - lo1); }
  /// The k-th listed block.
  ATTNTUNE_HD int64_t At(int64_t k) const {
    return k < hi0 - lo0 ? lo0 + k : lo1 + (k - (hi0 - lo0));
  }
};

ATTNTUNE_HD inline BlockSpans KeyBlocks(int64_t qb, int64_t br, int64_t bc, int64_t lq, int64_t lk,
                                        int64_t window, int64_t sink) {
  BlockSpans s;
  const int64_t first_row = qb * br;
  int64_t last_row = first_row + br - 1;
  if (last_row > lq - 1) last_row = lq - 1;
  if (first_row > last_row) return s;
  const int64_t p_first = lk - lq + first_row;
  const int64_t p_last = lk - lq + last_row;
  if (p_last < 0) return s;
  const int64_t end = p_last / bc + 1;  // one past the block holding key p_last
  int64_t win_lo = 0;
  if (window > 0) {
    int64_t j_lo = p_first - window + 1;  // the smallest key any row's window holds
    if (j_lo < 0) j_lo = 0;
    win_lo = j_lo / bc;
  }
  int64_t sink_hi = 0;  // one past the last block holding a sink key some row can see
  if (window > 0 && sink > 0) {
    int64_t j_hi = sink - 1;
    if (j_hi > p_last) j_hi = p_last;
    sink_hi = j_hi / bc + 1;
  }
  if (sink_hi >= win_lo) {  // sink blocks touch or overlap the window: one span
    s.lo1 = 0;
    s.hi1 = end;
    return s;
  }
  s.lo0 = 0;
  s.hi0 = sink_hi;
  s.lo1 = win_lo;
  s.hi1 = end;
  return s;
}

}  // namespace cuda_plan
}  // namespace attntune
