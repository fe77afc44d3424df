// cuda_implementations.h in a build without the CUDA kernels.
#include <stdexcept>

#include "kernels/cuda/cuda_implementations.h"

namespace attntune {

bool CudaKernelsBuilt() { return false; }

void AddCudaImplementations(std::vector<Variant>*) {}

std::string SelectCudaDevice(int) { return "this attntune was built without CUDA kernels"; }

void FlushL2() { throw std::runtime_error("this attntune was built without CUDA kernels"); }

}  // namespace attntune
