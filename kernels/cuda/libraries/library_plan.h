// Planning for the attention libraries attntune offers as implementations (cuDNN's SDPA,
// FlashInfer's kernels): how a dense, swa or hybrid problem maps onto their calls, the
// masks they apply (mirrored from their sources, so that a test can compare them with the
// variant table's key sets), the tensors each call describes, and what they refuse.
// Plain C++, no CUDA or library header: built and tested on every machine.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "core/shape.h"

namespace attntune {
namespace library_plan {

/// One attention call of a library on part of a problem: KV heads [kv_begin, kv_end)
/// (and their query heads), keys [key_begin, Lk) of them, and a diagonal band: query row
/// i (at position p(i) = Lk - Lq + i) keeps keys j with p(i) - left < j <= p(i), or every
/// j <= p(i) when left is 0.
struct WindowCall {
  int64_t kv_begin = 0;
  int64_t kv_end = 0;
  int64_t key_begin = 0;
  int64_t left = 0;
  bool operator==(const WindowCall& o) const {
    return kv_begin == o.kv_begin && kv_end == o.kv_end && key_begin == o.key_begin &&
           left == o.left;
  }
};

/// The calls of a windowed problem, or why a library cannot run it exactly.
struct WindowPlan {
  std::vector<WindowCall> calls;
  std::string refusal;  // "" when the calls run it
};

/// The calls that run dense, swa or hybrid with `windows` (one per KV head; 0 = full)
/// and `sink` sink keys: one per run of neighbouring KV heads with the same effective
/// window (a window of Lk or more is full attention). With one query row (Lq = 1) a
/// window is a contiguous run of keys: the call starts at the window's first key and
/// needs no band. Sinks are refused: both libraries mask one diagonal band, and the sink
/// keys outside it would need a second pass merged exactly, which attntune does not build.
WindowPlan PlanWindowCalls(const Shape& shape, const std::vector<int64_t>& windows,
                           int64_t sink);

/// Whether the cuDNN graph of a call of s_q rows and s_kv keys aligns its band at the top
/// left (the plain causal mask, as PyTorch's cuDNN call builds it) rather than the bottom
/// right: when s_q == s_kv, where both put the diagonal in the same place. The bottom-right
/// band passes the two lengths into the mask (cudnn_frontend attn_score_modifiers.h
/// sliding_window_mask); the top-left one does not.
bool CudnnTopLeft(int64_t s_q, int64_t s_kv);

/// Whether cuDNN's SDPA keeps key j of row i in a call of s_q rows and s_kv keys: the band
/// the cuDNN frontend builds (cudnn_frontend attn_score_modifiers.h sliding_window_mask),
/// with shift = 0 at the top left (CudnnTopLeft) and s_kv - s_q at the bottom right: right
/// bound 0, row + shift >= col; left bound `left` (0: none), col + left - shift > row.
bool CudnnKeeps(int64_t s_q, int64_t s_kv, int64_t left, int64_t i, int64_t j);

/// Whether every row of the call keeps every key of its range [key_begin, Lk), so that it
/// runs with no mask: one query row (a decode step; PlanWindowCalls starts a window's call
/// at its first key, with no band).
bool SeesEveryKey(const Shape& shape, const WindowCall& call);

/// FlashInfer's window_left for a band `left` (0: -1, no window): its sliding window keeps
/// kv_idx + qo_len + window_left >= kv_len + qo_idx, so window_left = left - 1.
int64_t FlashInferWindowLeft(int64_t left);

/// Whether FlashInfer's causal mask and sliding window keep key j of row i
/// (flashinfer/attention/variants.cuh DefaultAttention, prefill.cuh's causal mask:
/// j + qo_len > kv_len + i is masked).
bool FlashInferKeeps(int64_t qo_len, int64_t kv_len, int64_t window_left, int64_t i, int64_t j);

/// A 4-D tensor as cuDNN describes it: dims [B, H, L, d], strides in elements, and the
/// offset of its first element from the problem tensor's start.
struct TensorView {
  std::array<int64_t, 4> dim{};
  std::array<int64_t, 4> stride{};
  int64_t offset = 0;
  bool operator==(const TensorView& o) const {
    return dim == o.dim && stride == o.stride && offset == o.offset;
  }
};

/// The views of Q (and O), K and V of one call on the problem's [B, H, L, d] tensors.
struct CallViews {
  TensorView q, kv, o;
};
CallViews ViewsOf(const Shape& shape, const WindowCall& call);

/// Why cuDNN's SDPA cannot take a problem of this head dimension ("" when it can): the
/// fused flash-attention engines take d a multiple of 8 up to 256.
std::string CudnnHeadDimRefusal(int64_t d);

/// Why attntune's FlashInfer build cannot take a problem of this head dimension ("" when
/// it can): its templates are instantiated for d = 64 and 128 only (compile time).
std::string FlashInferHeadDimRefusal(int64_t d);

/// Why FlashInfer cannot run a problem of this shape ("" when it can): its single-request
/// decode kernel is compiled for GQA groups of 1, 2, 3, 4, 6, 8 and 16 query heads per KV
/// head (decode.cuh dispatches on the group, utils.cuh DISPATCH_GQA_GROUP_SIZE); prefill
/// takes any group.
std::string FlashInferShapeRefusal(const Shape& shape);

}  // namespace library_plan
}  // namespace attntune
