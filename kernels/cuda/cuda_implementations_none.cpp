// cuda_implementations.h in a build without the CUDA kernels.
#include <stdexcept>

#include "kernels/cuda/cuda_implementations.h"

namespace attntune {

bool CudaKernelsBuilt() { return false; }

void AddCudaImplementations(std::vector<Variant>*, std::vector<AbsentImplementation>* absent) {
  for (const char* id : {"cuda", "cuda_decode", "cudnn", "flashinfer"}) {
    absent->push_back({id, kCudaPlatform, "this attntune was built without the CUDA toolkit"});
  }
}

std::string CudaRuntimeLibraries() { return ""; }

std::string SelectCudaDevice(int) { return "this attntune was built without CUDA kernels"; }

void FlushL2() { throw std::runtime_error("this attntune was built without CUDA kernels"); }

}  // namespace attntune
