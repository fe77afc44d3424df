#include "profiler/cuda/cuda_probe.h"

#include <cuda_runtime_api.h>

#include <string>

namespace attntune {

CudaProbe ProbeCudaRuntime() {
  CudaProbe probe;
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  const std::string code = std::to_string(static_cast<int>(error));
  switch (error) {
    case cudaSuccess:
      probe.device_count = count;
      probe.usable = count > 0;
      if (!probe.usable) probe.reason = "no CUDA device (cudaGetDeviceCount returned 0)";
      break;
    case cudaErrorInsufficientDriver:
      probe.reason =
          "no usable CUDA driver (cudaGetDeviceCount: cudaErrorInsufficientDriver, " + code + ")";
      break;
    case cudaErrorNoDevice:
      probe.reason = "no CUDA device (cudaErrorNoDevice, " + code + ")";
      break;
    default:
      probe.reason = std::string("CUDA runtime error (cudaGetDeviceCount: ") +
                     cudaGetErrorName(error) + ", " + code + ")";
      break;
  }
  return probe;
}

}  // namespace attntune
