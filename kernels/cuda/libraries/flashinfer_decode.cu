// flashinfer_entry.h's decode: FlashInfer's SingleDecodeWithKVCacheDispatched for head
// dims 64 and 128 in fp16 and bf16 (it dispatches on the GQA group: 1, 2, 3, 4, 6, 8, 16).
// A window in decode is a contiguous run of keys (library_plan.h PlanWindowCalls): the
// call starts at its first key, so no sliding-window instantiation is needed.
#include <flashinfer/attention/decode.cuh>
#include <flashinfer/attention/default_decode_params.cuh>
#include <flashinfer/attention/variants.cuh>

#include <cmath>
#include <exception>
#include <string>

#include "kernels/cuda/libraries/flashinfer_entry.h"

namespace attntune {
namespace flashinfer_cuda {
namespace detail {
namespace {

template <typename T, uint32_t D>
cudaError_t DecodeTyped(const CallArgs& a) {
  using Params = flashinfer::SingleDecodeParams<T, T, T>;
  using Variant = flashinfer::DefaultAttention<false, false, false, false>;
  Params p(static_cast<T*>(const_cast<void*>(a.q)), static_cast<T*>(const_cast<void*>(a.k)),
           static_cast<T*>(const_cast<void*>(a.v)), static_cast<T*>(a.o), nullptr, a.kv_len,
           a.num_qo_heads, a.num_kv_heads, flashinfer::QKVLayout::kHND, D, -1, 0.0f,
           1.0f / std::sqrt(static_cast<float>(D)), 1.0f, 1e4f);
  // attntune's strides (the constructor assumes a contiguous [H, L, d] K and V).
  p.q_stride_n = a.q_stride_n;
  p.q_stride_h = a.q_stride_h;
  p.kv_stride_n = a.kv_stride_n;
  p.kv_stride_h = a.kv_stride_h;
  return flashinfer::SingleDecodeWithKVCacheDispatched<D, flashinfer::PosEncodingMode::kNone,
                                                       Variant, Params>(
      p, static_cast<T*>(a.tmp), static_cast<cudaStream_t>(a.stream));
}

template <typename T>
std::string DecodeAs(const CallArgs& a) {
  cudaError_t status = cudaSuccess;
  try {
    if (a.head_dim == 64) {
      status = DecodeTyped<T, 64>(a);
    } else if (a.head_dim == 128) {
      status = DecodeTyped<T, 128>(a);
    } else {
      return "flashinfer: head dim " + std::to_string(a.head_dim) + " is not compiled";
    }
  } catch (const std::exception& e) {
    return ErrorText(e.what());
  }
  if (status != cudaSuccess) {
    return std::string("flashinfer decode: ") + cudaGetErrorName(status) + ": " +
           cudaGetErrorString(status);
  }
  return "";
}

}  // namespace

std::string Decode(const CallArgs& args, bool bf16) {
  return bf16 ? DecodeAs<nv_bfloat16>(args) : DecodeAs<half>(args);
}

}  // namespace detail
}  // namespace flashinfer_cuda
}  // namespace attntune
