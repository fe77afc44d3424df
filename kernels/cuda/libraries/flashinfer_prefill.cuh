// The prefill instantiations shared by flashinfer_prefill_f16.cu and _bf16.cu: FlashInfer's
// SinglePrefillWithKVCacheDispatched for head dims 64 and 128, causal, with and without
// its sliding window (DefaultAttention<no custom mask, window, no soft cap, no ALiBi>).
#pragma once

#include <flashinfer/attention/default_prefill_params.cuh>
#include <flashinfer/attention/prefill.cuh>
#include <flashinfer/attention/variants.cuh>

#include <algorithm>
#include <cmath>
#include <exception>
#include <string>

#include "kernels/cuda/libraries/flashinfer_entry.h"

namespace attntune {
namespace flashinfer_cuda {
namespace detail {

// FlashInfer's prefill launch with the CTA tile over (packed) query rows fixed by the
// caller: SinglePrefillWithKVCacheDispatched's own steps for one CTA_TILE_Q in place of its
// FA2DetermineCtaTileQ choice (fp16/bf16 K and V, no RoPE, d <= 128: its repack, shared-K/V,
// VO-split and RoPE shared-memory terms are all 0). Same kernels (the same KernelTraits), so
// no more device code is compiled than its own dispatch already instantiates.
template <uint32_t CTA_TILE_Q, uint32_t D, typename Variant, typename Params>
cudaError_t PrefillAtTile(Params params, typename Params::DTypeO* tmp, cudaStream_t stream) {
  using namespace flashinfer;
  using T = typename Params::DTypeKV;
  static_assert(D <= 128 && sizeof(T) == 2, "the shared-memory budget below is for 16-bit d <= 128");
  static_assert(!use_kv_repack<T, CTA_TILE_Q, D, D>(kPrefillLauncherRepacksFp4));
  constexpr uint32_t NUM_WARPS_Q = get_num_warps_q(CTA_TILE_Q);
  constexpr uint32_t NUM_WARPS_KV = get_num_warps_kv(CTA_TILE_Q);
  constexpr uint32_t NUM_MMA_Q = get_num_mma_q(CTA_TILE_Q);
  constexpr uint32_t NUM_MMA_D = D / 16;
  constexpr uint32_t kKVSmemPerMmaKV = 2 * D * 16 * NUM_WARPS_KV * sizeof(T);
  constexpr uint32_t kFixedSmem = CTA_TILE_Q * D * sizeof(T);
  const uint32_t num_kv_heads = params.num_kv_heads;
  const uint32_t qo_len = params.qo_len;
  const uint32_t kv_len = params.kv_len;
  const uint32_t group_size = params.num_qo_heads / num_kv_heads;
  int dev_id = 0, max_smem_per_sm = 0, max_smem_per_block_optin = 0;
  FLASHINFER_CUDA_CALL(cudaGetDevice(&dev_id));
  FLASHINFER_CUDA_CALL(cudaDeviceGetAttribute(
      &max_smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, dev_id));
  FLASHINFER_CUDA_CALL(cudaDeviceGetAttribute(
      &max_smem_per_block_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev_id));
  const int num_ctas_per_sm = max_smem_per_sm >= 2 * (kFixedSmem + kKVSmemPerMmaKV) ? 2 : 1;
  const int max_smem_per_threadblock =
      std::min(max_smem_per_sm / num_ctas_per_sm, max_smem_per_block_optin);
  const uint32_t max_num_mma_kv_reg = 8 / NUM_MMA_Q;
  const int max_num_mma_kv_smem = (max_smem_per_threadblock - static_cast<int>(kFixedSmem)) /
                                  static_cast<int>(kKVSmemPerMmaKV);
  if (max_num_mma_kv_smem < 1) {
    FLASHINFER_ERROR("CtaTileQ=" + std::to_string(CTA_TILE_Q) +
                     ": even the smallest KV tile exceeds this GPU's shared memory per block");
  }
  DISPATCH_NUM_MMA_KV(std::min(static_cast<uint32_t>(max_num_mma_kv_smem), max_num_mma_kv_reg),
                      NUM_MMA_KV, {
    using KTraits = KernelTraits<MaskMode::kCausal, CTA_TILE_Q, NUM_MMA_Q, NUM_MMA_KV, NUM_MMA_D,
                                 NUM_MMA_D, NUM_WARPS_Q, NUM_WARPS_KV, PosEncodingMode::kNone, T,
                                 T, T, float, typename Params::IdType, Variant,
                                 kPrefillLauncherRepacksFp4>;
    if constexpr (KTraits::IsInvalid()) {
      FLASHINFER_ERROR("CtaTileQ=" + std::to_string(CTA_TILE_Q) + " with NUM_MMA_KV=" +
                       std::to_string(NUM_MMA_KV) + " is not a valid FlashInfer configuration");
    } else {
      constexpr uint32_t num_threads = NUM_WARPS_Q * NUM_WARPS_KV * WARP_SIZE;
      auto kernel = SinglePrefillWithKVCacheKernel<KTraits, Params>;
      using SmemStorage = std::conditional_t<KTraits::USE_SINGLE_PREFILL_SOFTMAX_VO_SPLIT,
                                             typename KTraits::SharedStoragePaged,
                                             typename KTraits::SharedStorage>;
      const size_t smem_size = sizeof(SmemStorage);
      if (smem_size > static_cast<size_t>(max_smem_per_block_optin)) {
        FLASHINFER_ERROR("CtaTileQ=" + std::to_string(CTA_TILE_Q) + " needs " +
                         std::to_string(smem_size) + " bytes of shared memory per block, over "
                         "this GPU's " + std::to_string(max_smem_per_block_optin));
      }
      FLASHINFER_CUDA_CALL(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_size));
      int num_blocks_per_sm = 0, num_sm = 0;
      FLASHINFER_CUDA_CALL(cudaDeviceGetAttribute(&num_sm, cudaDevAttrMultiProcessorCount, dev_id));
      FLASHINFER_CUDA_CALL(cudaOccupancyMaxActiveBlocksPerMultiprocessor(
          &num_blocks_per_sm, kernel, num_threads, smem_size));
      const uint32_t max_num_kv_chunks = (num_blocks_per_sm * num_sm) /
                                         (num_kv_heads * ceil_div(qo_len * group_size, CTA_TILE_Q));
      uint32_t num_chunks = 0;
      if (max_num_kv_chunks > 0) {
        const uint32_t chunk_size = std::max(ceil_div(kv_len, max_num_kv_chunks), 256u);
        num_chunks = ceil_div(kv_len, chunk_size);
      }
      const dim3 nthrs(32, NUM_WARPS_Q, NUM_WARPS_KV);
      if (num_chunks <= 1 || tmp == nullptr) {
        params.partition_kv = false;
        void* args[] = {(void*)&params};
        const dim3 nblks(ceil_div(qo_len * group_size, CTA_TILE_Q), 1, num_kv_heads);
        FLASHINFER_CUDA_CALL(cudaLaunchKernel((void*)kernel, nblks, nthrs, args, smem_size, stream));
      } else {
        params.partition_kv = true;
        float* tmp_lse = (float*)(tmp + num_chunks * qo_len * params.num_qo_heads * D);
        auto* o = params.o;
        auto* lse = params.lse;
        params.o = tmp;
        params.lse = tmp_lse;
        void* args[] = {(void*)&params};
        const dim3 nblks(ceil_div(qo_len * group_size, CTA_TILE_Q), num_chunks, num_kv_heads);
        FLASHINFER_CUDA_CALL(cudaLaunchKernel((void*)kernel, nblks, nthrs, args, smem_size, stream));
        FLASHINFER_CUDA_CALL(
            MergeStates(tmp, tmp_lse, o, lse, num_chunks, qo_len, params.num_qo_heads, D, stream));
      }
    }
  })
  return cudaSuccess;
}

template <typename T, uint32_t D, bool kWindow>
cudaError_t PrefillTyped(const CallArgs& a) {
  using Params = flashinfer::SinglePrefillParams<T, T, T>;
  using Variant = flashinfer::DefaultAttention<false, kWindow, false, false>;
  Params p(static_cast<T*>(const_cast<void*>(a.q)), static_cast<T*>(const_cast<void*>(a.k)),
           static_cast<T*>(const_cast<void*>(a.v)), nullptr, static_cast<T*>(a.o), nullptr,
           nullptr, a.num_qo_heads, a.num_kv_heads, a.qo_len, a.kv_len, a.q_stride_n,
           a.q_stride_h, a.kv_stride_n, a.kv_stride_h, D, a.window_left, 0.0f,
           1.0f / std::sqrt(static_cast<float>(D)), 1.0f, 1e4f);
  T* tmp = static_cast<T*>(a.tmp);
  const cudaStream_t stream = static_cast<cudaStream_t>(a.stream);
  switch (a.cta_tile_q) {
    case 16: return PrefillAtTile<16, D, Variant>(p, tmp, stream);
    case 64: return PrefillAtTile<64, D, Variant>(p, tmp, stream);
    case 128: return PrefillAtTile<128, D, Variant>(p, tmp, stream);
    default: break;  // 0: FlashInfer's own choice
  }
  return flashinfer::SinglePrefillWithKVCacheDispatched<
      D, D, flashinfer::PosEncodingMode::kNone, false, flashinfer::MaskMode::kCausal, Variant,
      Params>(p, tmp, stream);
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
    return ErrorText(e.what());
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
