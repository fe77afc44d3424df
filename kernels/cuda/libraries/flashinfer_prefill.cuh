// The prefill instantiations shared by flashinfer_prefill_f16.cu and _bf16.cu: FlashInfer's
// SinglePrefillWithKVCacheDispatched for head dims 64 and 128, causal, with and without
// its sliding window (DefaultAttention<no custom mask, window, no soft cap, no ALiBi>).
#pragma once

#include <flashinfer/attention/default_prefill_params.cuh>
#include <flashinfer/attention/prefill.cuh>
#include <flashinfer/attention/variants.cuh>

#include <exception>
#include <string>

#include "kernels/cuda/libraries/flashinfer_entry.h"

namespace attntune {
namespace flashinfer_cuda {
namespace detail {

template <typename T, uint32_t D, bool kWindow>
cudaError_t PrefillTyped(const CallArgs& a) {
  using Params = flashinfer::SinglePrefillParams<T, T, T>;
  using Variant = flashinfer::DefaultAttention<false, kWindow, false, false>;
  Params p(static_cast<T*>(const_cast<void*>(a.q)), static_cast<T*>(const_cast<void*>(a.k)),
           static_cast<T*>(const_cast<void*>(a.v)), nullptr, static_cast<T*>(a.o), nullptr,
           nullptr, a.num_qo_heads, a.num_kv_heads, a.qo_len, a.kv_len, a.q_stride_n,
           a.q_stride_h, a.kv_stride_n, a.kv_stride_h, D, a.window_left, 0.0f,
           1.0f / std::sqrt(static_cast<float>(D)), 1.0f, 1e4f);
  return flashinfer::SinglePrefillWithKVCacheDispatched<
      D, D, flashinfer::PosEncodingMode::kNone, false, flashinfer::MaskMode::kCausal, Variant,
      Params>(p, static_cast<T*>(a.tmp), static_cast<cudaStream_t>(a.stream));
}

template <typename T>
std::string Prefill(const CallArgs& a) {
  cudaError_t status = cudaSuccess;
  try {
    const bool window = a.window_left >= 0;
    if (a.head_dim == 64) {
      status = window ? PrefillTyped<T, 64, true>(a) : PrefillTyped<T, 64, false>(a);
    } else if (a.head_dim == 128) {
      status = window ? PrefillTyped<T, 128, true>(a) : PrefillTyped<T, 128, false>(a);
    } else {
      return "flashinfer: head dim " + std::to_string(a.head_dim) + " is not compiled";
    }
  } catch (const std::exception& e) {
    return std::string("flashinfer: ") + e.what();
  }
  if (status != cudaSuccess) {
    return std::string("flashinfer prefill: ") + cudaGetErrorName(status) + ": " +
           cudaGetErrorString(status);
  }
  return "";
}

}  // namespace detail
}  // namespace flashinfer_cuda
}  // namespace attntune
