// flashinfer_entry.h's fp16 prefill (flashinfer_prefill.cuh's instantiations).
#include "kernels/cuda/libraries/flashinfer_prefill.cuh"

namespace attntune {
namespace flashinfer_cuda {
namespace detail {

std::string PrefillF16(const CallArgs& args) { return Prefill<half>(args); }

}  // namespace detail
}  // namespace flashinfer_cuda
}  // namespace attntune
