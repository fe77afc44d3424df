// FlashInfer's FA2-style single-request kernels (flashinfer/attention/prefill.cuh
// SinglePrefillWithKVCacheDispatched, decode.cuh SingleDecodeWithKVCacheDispatched, with
// its DefaultAttention: causal mask, sliding window through window_left, no soft cap,
// scale 1/sqrt(d)) on attntune's [B, H, L, d] device tensors, for dense and swa in both
// phases. Compiled from FlashInfer's headers (found at configure time,
// cmake/attention_libraries.cmake) for head dims 64 and 128 in fp16 and bf16. Plain C++
// header (no FlashInfer or CUDA type).
#pragma once

#include <cstdint>
#include <string>

#include "core/shape.h"
#include "kernels/cuda/libraries/library_plan.h"

namespace attntune {
namespace flashinfer_cuda {

/// The FlashInfer version the build compiled ("0.7.2.post1").
std::string Version();

/// How a call runs: FlashInfer's choices that attntune searches.
struct Choices {
  /// FlashInfer gets its temporary buffer and splits the keys across thread blocks
  /// (merging the parts) where its heuristics see too few blocks; false: never split.
  bool split_kv = true;
  /// Prefill: packed query rows (query rows times the GQA group) per thread block, 16, 64
  /// or 128; 0: FlashInfer's own choice (FA2DetermineCtaTileQ). Decode has no such tile.
  int cta_tile_q = 0;
};

/// Enqueues every call of `plan` on `stream` (a cudaStream_t; nullptr: default), one
/// FlashInfer call per batch element and call. q, k, v, o are the problem's [B, H, L, d]
/// device tensors in fp16 or bf16. Prefill writes O token-major
/// ([Lq, Hq, d], FlashInfer's only output layout) into a buffer that one transpose
/// kernel copies to O; decode (Lq = 1) writes O directly. Throws std::runtime_error with
/// FlashInfer's or CUDA's message.
void Run(const Shape& shape, const library_plan::WindowPlan& plan, bool bf16,
         const Choices& choices, const void* q, const void* k, const void* v, void* o,
         void* stream);

}  // namespace flashinfer_cuda
}  // namespace attntune
