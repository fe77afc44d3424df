// flashinfer_entry.h's bf16 prefill (flashinfer_prefill.cuh's instantiations).
#include "kernels/cuda/libraries/flashinfer_prefill.cuh"

namespace attntune {
namespace flashinfer_cuda {
namespace detail {

std::string PrefillBf16(const CallArgs& args) { return Prefill<nv_bfloat16>(args); }

}  // namespace detail
}  // namespace flashinfer_cuda
}  // namespace attntune
