// The CUDA runtime probe behind ProbeCuda() (profiler/device.h); built only with the
// CUDA toolkit. Plain C++ over the runtime API, no device code.
#pragma once

#include "profiler/device.h"

namespace attntune {

/// Calls cudaGetDeviceCount and names why CUDA is unusable when it is.
CudaProbe ProbeCudaRuntime();

}  // namespace attntune
