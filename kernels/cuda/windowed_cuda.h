// Launchers of the CUDA kernels (windowed, top-k and bucketed families, split-KV
// decode). Plain C++ header: the callers (tuner wiring, GPU tests) never include a CUDA
// header.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kernels/cuda/plan.h"
#include "core/tensors.h"

namespace attntune {
namespace cuda_plan {

/// Device pointers of one launch; q, k, v, o hold 2-byte elements of tile.dtype.
struct WindowedDeviceArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  const int32_t* windows = nullptr;  // device [Hkv] when problem.per_head_windows
  void* stream = nullptr;            // cudaStream_t; nullptr = the default stream
  // Which kernel of the tile runs. kTopK (ks, dma): attntune_blocksparse_* over KeyLists
  // (device copies of offsets and keys), the eviction positions evict[B,Hkv,Lk] and an
  // optional bias b_j * log2(e) [B,Hkv,Lk]. kBucketed (lsh, hax): attntune_bucketed_*
  // over BucketLists (key_offsets and keys in list_offsets and list_keys, the others
  // below, `blocks` of them), evict for hax's ks part or nullptr (lsh), no bias. Both
  // ignore the problem's window, sink and per-head windows.
  Family family = Family::kWindowed;
  // List x is list_keys[list_offsets[x], list_ends[x]); list_ends nullptr: the lists are
  // CSR, list_ends = list_offsets + 1 (the device's top-k lists leave room between them).
  const int32_t* list_offsets = nullptr;
  const int32_t* list_ends = nullptr;
  const int32_t* list_keys = nullptr;
  const int32_t* evict = nullptr;
  const float* bias_log2 = nullptr;
  // Beside each listed key: top-k, its eviction (list_aux) and bias (list_bias, b_j *
  // log2(e), or nullptr); bucketed, its spos (list_aux) and hax's eviction (list_aux2);
  // gathered decode, the resident key's eviction step (list_aux).
  const int32_t* list_aux = nullptr;
  const int32_t* list_aux2 = nullptr;
  const float* list_bias = nullptr;
  const int32_t* block_head = nullptr;
  const int32_t* row_offsets = nullptr;
  const int32_t* rows = nullptr;
  const int32_t* row_lo = nullptr;
  const int32_t* row_hi = nullptr;
  const int32_t* spos = nullptr;
  int64_t blocks = 0;                    // blocks launched (an upper bound of the count)
  const int32_t* block_count = nullptr;  // device: the blocks that hold rows (nullptr: all)
  // Gathered decode (LaunchGatheredDecode) also: the chosen keys of each (b, hq, step),
  // and the steps it computes: [first_step, first_step + steps) (steps 0: every step).
  const int32_t* chosen_offsets = nullptr;
  const int32_t* chosen = nullptr;
  int64_t first_step = 0;
  int64_t steps = 0;
};

/// Round-to-nearest conversion of fp32 to the 2-byte `dtype` and back (host side).
uint16_t ToBits(float x, Dtype dtype);
float FromBits(uint16_t bits, Dtype dtype);

/// Enqueues one launch of `tile`; returns "" or the CUDA error ("cudaErrorInvalidValue:
/// ..."). Does not synchronise.
std::string LaunchWindowed(const WindowedProblem& problem, const WindowedTile& tile,
                           const WindowedDeviceArgs& args);

/// Enqueues split-KV decode (PlanDecode): the split kernel and the combine kernel, for
/// one query row per head; `workspace` holds PlanDecode(...).workspace_bytes on the device.
/// Returns "" or the reason / CUDA error.
std::string LaunchDecode(const WindowedProblem& problem, Dtype dtype, int64_t splits,
                         const WindowedDeviceArgs& args, void* workspace);

/// Enqueues gathered decode (dma_decode: every step, Lq = Lk) on q, k, v, o of `args`
/// and its lists: the resident sets' KeyLists (BuildKeyLists(shape, evict,
/// kDecodeListSteps)) in list_offsets and list_keys, the eviction steps in evict, the
/// chosen keys (DecodeSelection's offsets and chosen) in chosen_offsets and chosen, an
/// optional bias_log2. Returns "" or the reason / CUDA error.
std::string LaunchGatheredDecode(const Shape& shape, Dtype dtype, const WindowedDeviceArgs& args);

/// Run-time confirmation of the static table on the current device: reads
/// cudaFuncGetAttributes and the occupancy of `tile`; "" when at least one block fits.
std::string ConfirmOnDevice(const WindowedTile& tile);

/// Host convenience for tests and `attntune run`: converts the fp32 tensors to the
/// tile's dtype, runs once on the current device, returns O as fp32 in `out`
/// (poisoned with NaN before the launch). `windows` is read when per_head_windows.
std::string RunWindowedOnDevice(const WindowedProblem& problem, const WindowedTile& tile,
                                const Tensors& tensors, const std::vector<int32_t>& windows,
                                std::vector<float>* out);

}  // namespace cuda_plan
}  // namespace attntune
