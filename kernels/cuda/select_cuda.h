// Selection on the device (select.cu): the enqueue functions that turn fp32 inputs on
// the device into what the attention kernels read: prefix top-k evictions and gathered
// key lists (ks, dma, hax's ks part, dma_decode's resident sets), LSH bins and the
// bucketed layout (lsh, hax), dma_decode's evictions and query-chosen keys. The logic
// of every kernel is in select_core.h (tested on the CPU); this header is plain C++ so
// that the callers (cuda_implementations.cpp, the GPU tests) include no CUDA header.
//
// Every selection kernel is named attntune_select_<phase>; SelectionPhaseOf() (plan.h)
// maps the kernel names of CUPTI's records onto the phases bench reports.
// All functions enqueue on `stream` (a cudaStream_t; nullptr = the default stream),
// never synchronise, and return "" or the CUDA error.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "core/shape.h"
#include "core/types.h"
#include "kernels/cuda/plan.h"

namespace attntune {
namespace cuda_plan {

/// Device memory the selection reuses from launch to launch: named buffers, each grown
/// when a launch needs more (its contents are then lost). Freed when destroyed.
class SelectWorkspace {
 public:
  /// Buffers from cudaMalloc, kept until destroyed (attntune's own launches).
  SelectWorkspace() = default;
  /// Buffers ordered on `stream` (a cudaStream_t: cudaMallocAsync, cudaFreeAsync), for
  /// one call on a caller's stream: nothing shared with other calls, no synchronisation.
  explicit SelectWorkspace(void* stream) : stream_(stream), ordered_(true) {}
  SelectWorkspace(const SelectWorkspace&) = delete;
  SelectWorkspace& operator=(const SelectWorkspace&) = delete;
  ~SelectWorkspace();
  /// At least `bytes` of device memory under `name`; throws std::runtime_error on failure.
  void* Get(const std::string& name, size_t bytes);
  /// Every buffer allocated from now on is filled with 0xFF bytes (-1 as int32, NaN as
  /// float) before it is handed out, so that a kernel that leaves part of its output
  /// unwritten is seen by the tests.
  void PoisonNewBuffers() { poison_ = true; }
  template <class T>
  T* Get(const std::string& name, int64_t count) {
    return static_cast<T*>(Get(name, static_cast<size_t>(count > 0 ? count : 1) * sizeof(T)));
  }

 private:
  struct Buffer {
    void* ptr = nullptr;
    size_t bytes = 0;
  };
  void Free(void* ptr) const;
  std::map<std::string, Buffer> buffers_;
  void* stream_ = nullptr;
  bool ordered_ = false;
  bool poison_ = false;
};

/// Host <-> device copies (synchronous), for uploads of static inputs and for tests.
std::string CopyToDevice(void* device, const void* host, size_t bytes);
std::string CopyToHost(void* host, const void* device, size_t bytes);

/// A tensor the selection reads (q, k or v) on the device: an fp16 or bf16 tensor read in
/// place (a library caller's, or tune's and bench's copies for the kernels when the inputs
/// are exactly that dtype's values), each element widened to its fp32 value where it is
/// read (exact: the selection is the reference's on the values the kernel reads), or fp32
/// (tune's and bench's copies of inputs that are not); `type` is its element type.
struct DeviceInput {
  const void* data = nullptr;
  attntune::Dtype type = attntune::Dtype::kF32;
};
inline DeviceInput F32Input(const float* data) { return {data, attntune::Dtype::kF32}; }

/// fp64 copies of `count` fp32 values on the device (a caller's supplied scores).
std::string EnqueueWidenScores(const float* in, int64_t count, double* out, void* stream);

/// A prefix top-k selection of `heads` heads of n keys each (keys of head h at h * n).
struct TopKDevice {
  int64_t heads = 0, n = 0, k = 0;
  uint64_t* key = nullptr;        // RankKey of each score [heads, n]; filled by a scores step
  float* bias_log2 = nullptr;     // dma: b_j * log2(e) [heads, n], or nullptr
  int32_t* evict = nullptr;       // [heads, n] (PrefixTopKEvictions)
  int32_t* tile_max = nullptr;    // [heads, ceil(n / 32)]: largest evict of 32 keys
  uint64_t* sorted_key = nullptr;  // [heads, n] in (key, position) order (EnqueueTopK's
  int32_t* order = nullptr;        // sort); [heads, n] positions in that order
};

/// Allocates `out` for heads x n keys with budget k (key and bias_log2 included).
void AllocTopK(int64_t heads, int64_t n, int64_t k, bool bias, SelectWorkspace& ws,
               const std::string& tag, TopKDevice* out);

/// ks's default scores x[B,Hkv,Lk] (KsScores, summed in another order: equal to rounding)
/// of q, k on the device, as RankKeys into out->key.
std::string EnqueueKsScores(const Shape& s, DeviceInput q, DeviceInput k, TopKDevice* out,
                            SelectWorkspace& ws, void* stream);
/// RankKeys (and, when out->bias_log2, b_j * log2(e)) of given fp64 scores on the device.
std::string EnqueueScoreKeys(const double* x, TopKDevice* out, void* stream);
/// dma's b[B,Hkv,Lk] = A_h softplus(v_j · Delta_h) (DmaScores, the dot in index order,
/// `fused` as HostFusesDmaProducts()) of v and fp64 delta [Hkv,d], a [Hkv] on the device.
std::string EnqueueDmaScores(const Shape& s, DeviceInput v, const double* delta,
                             const double* a, bool fused, TopKDevice* out, void* stream);
/// Prefix top-k evictions of out->key with budget out->k >= 1 (chunks of TopKChunk(k)
/// positions, each from the top-k of the positions before it), and the tiles' largest
/// evictions. With `sorted` (what dma_decode's selection reads) out->sorted_key and
/// out->order hold every head's stable sort, from which the chunks' states are read; else
/// the states come from a scan of the chunks' top-k lists where its buffers fit
/// (TopKScanFits), and out->sorted_key and out->order are nullptr.
std::string EnqueueTopK(TopKDevice* out, SelectWorkspace& ws, const std::string& tag,
                        void* stream, bool sorted = true);

/// Gathered key lists (KeyLists' lists) of query blocks of br rows over a top-k selection:
/// list x = head * query_blocks + qb, its keys in `order` at [begin[x], end[x]), each list
/// at its ListBegin (the room ListBound gives it; the rest of the room unwritten); each
/// listed key's eviction and bias beside it.
struct ListsDevice {
  int64_t query_blocks = 0, lists = 0, capacity = 0;
  int32_t* begin = nullptr;      // [lists]
  int32_t* end = nullptr;        // [lists]
  int32_t* keys = nullptr;       // [capacity]
  int32_t* key_evict = nullptr;  // evict[key] per listed key
  float* key_bias = nullptr;     // bias_log2[key] per listed key (when the selection has one)
};
std::string EnqueueKeyLists(const TopKDevice& topk, int64_t lq, int br, KeyOrder order,
                            ListsDevice* out, SelectWorkspace& ws, const std::string& tag,
                            void* stream);

/// LSH bins (ComputeLshBins, bit for bit) of q, k on the device: rt = R transposed to
/// [Hkv][h][d] in fp32, mu [Hkv][d] or nullptr; `fused` as HostFusesLshProducts().
std::string EnqueueLshBins(const Shape& s, DeviceInput q, DeviceInput k, const float* mu,
                           const float* rt, int64_t h, bool argmax_rule, bool fused,
                           int32_t* key_bin, int32_t* query_bin, void* stream);

/// The bucketed layout and its lists (BucketLists), built on the device. The number of
/// blocks is known on the device only (*block_count); blocks_bound of them are allocated
/// and launched, those past the count exit at once.
struct BucketDevice {
  int64_t blocks_bound = 0, key_capacity = 0;
  const int32_t* block_count = nullptr;
  int32_t *head = nullptr, *row_offsets = nullptr, *rows = nullptr, *lo = nullptr,
          *hi = nullptr;
  int32_t *key_offsets = nullptr, *keys = nullptr, *spos = nullptr;
  int32_t* key_spos = nullptr;   // spos of each listed key
  int32_t* key_evict = nullptr;  // hax: evict of each listed key
};
/// `topk` (hax: the ks part with budget k_ks, else nullptr); chunk 0: one chunk.
std::string EnqueueBucketLayout(const Shape& s, int64_t bins, const int32_t* key_bin,
                                const int32_t* query_bin, int64_t k_lsh, const TopKDevice* topk,
                                int br, int64_t chunk, BucketDevice* out, SelectWorkspace& ws,
                                void* stream);

/// dma_decode's selection (every step, Lq = Lk) from the top-k run of b with k = w_kv:
/// the resident sets' evictions, their KeyLists of kDecodeListSteps steps, and each
/// (b, hq, t)'s chosen keys (CSR over x = (b * Hq + hq) * Lk + t).
struct DecodeDevice {
  int32_t* evict = nullptr;    // [B,Hkv,Lk]
  int32_t* dropped = nullptr;  // [B,Hkv,Lk]: the key evicted at each step, -1: none
  ListsDevice resident;
  int32_t* chosen_offsets = nullptr;
  int32_t* chosen = nullptr;
  int64_t chosen_capacity = 0;
  int64_t w_q = 0, r = 0;  // the selection's (EnqueueDecodeStep takes the same)
};
/// Why dma_decode's device selection cannot take (shape, w_q, r) ("" = it can).
std::string CanSelectDecode(const Shape& s, int64_t w_q, int64_t r);
/// q and k are read for the candidates' q·k (one element type, fp32 or the kernels' own).
std::string EnqueueDecodeSelection(const Shape& s, DeviceInput q, DeviceInput k,
                                   const TopKDevice& topk, int64_t w_q, int64_t r,
                                   DecodeDevice* out, SelectWorkspace& ws, void* stream);

/// One decode step `step` (1 <= step < Lk) as a server runs it with its cache, on a
/// selection of the whole sequence enqueued before (EnqueueDecodeSelection on `sel`):
/// the resident sets' update for key `step` (StepReplace, from the set of step - 1) and
/// the chosen keys of that step (rewritten in place). With LaunchGatheredDecode of that
/// step alone it is the work of one step, for timing (benchmarks/cuda_decode_step).
std::string EnqueueDecodeStep(const Shape& s, DeviceInput q, DeviceInput k,
                              const TopKDevice& topk, int64_t w_q, int64_t r, int64_t step,
                              const DecodeDevice& sel, SelectWorkspace& ws, void* stream);

}  // namespace cuda_plan
}  // namespace attntune
