// flashinfer_cuda.h's per-translation-unit entry points: each .cu file instantiates part
// of FlashInfer's templates (prefill fp16, prefill bf16, decode), so that their heavy
// compiles run in parallel and apart. Plain C++ header.
#pragma once

#include <cstdint>
#include <string>

namespace attntune {
namespace flashinfer_cuda {
namespace detail {

/// One FlashInfer call on one batch element: pointers already offset to its first head
/// and key; strides in elements (token n, head h).
struct CallArgs {
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;    // prefill: [qo_len, num_qo_heads, d]; decode: [num_qo_heads, d]
  void* tmp = nullptr;  // FlashInfer's split-KV buffer; nullptr: no split
  uint32_t num_qo_heads = 0, num_kv_heads = 0, qo_len = 0, kv_len = 0;
  uint32_t q_stride_n = 0, q_stride_h = 0, kv_stride_n = 0, kv_stride_h = 0;
  uint32_t head_dim = 0;
  int32_t window_left = -1;  // -1: no window (flashinfer_cuda::Run maps bands)
  uint32_t cta_tile_q = 0;   // prefill: 16, 64 or 128 packed query rows per CTA; 0: FlashInfer's choice
  void* stream = nullptr;
};

/// FlashInfer's message from its exception's text ("Error in function 'F' at FILE:LINE:
/// MESSAGE"), prefixed "flashinfer: ".
std::string ErrorText(const std::string& what);

/// "" when the call was enqueued, else FlashInfer's or CUDA's message.
std::string PrefillF16(const CallArgs& args);
std::string PrefillBf16(const CallArgs& args);
std::string Decode(const CallArgs& args, bool bf16);

}  // namespace detail
}  // namespace flashinfer_cuda
}  // namespace attntune
