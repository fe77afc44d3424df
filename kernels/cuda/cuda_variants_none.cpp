// cuda_variants.h in a build without the CUDA kernels.
#include <stdexcept>

#include "kernels/cuda/cuda_variants.h"

namespace attntune {

bool CudaKernelsBuilt() { return false; }

std::optional<Implementation> CudaImplementation(const Variant&, const std::string&, int64_t) {
  return std::nullopt;
}

std::optional<Implementation> CudaDecodeImplementation(const Variant&, const std::string&, int64_t) {
  return std::nullopt;
}

std::string SelectCudaDevice(int) { return "this attntune was built without CUDA kernels"; }

void FlushL2() { throw std::runtime_error("this attntune was built without CUDA kernels"); }

}  // namespace attntune
