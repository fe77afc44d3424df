// The CUDA runtime probe behind ProbeCuda() (profiler/device.h); built only with the
// CUDA toolkit. Plain C++ over the runtime API, no device code.
#pragma once

#include <map>
#include <string>

#include "profiler/device.h"

namespace attntune {

/// Calls cudaGetDeviceCount and names why CUDA is unusable when it is.
CudaProbe ProbeCudaRuntime();

/// The fingerprint of CUDA device `index` (DESIGN.md s4); throws std::runtime_error.
DeviceInfo CudaDeviceRuntime(int index);

/// Clocks and temperature of CUDA device `index` now, from NVML (dlopen'd
/// libnvidia-ml.so.1): sm_clock_mhz, mem_clock_mhz, gpu_temp_c, throttle_reasons; empty
/// when NVML is unavailable.
std::map<std::string, double> ReadGpuClocksRuntime(int index);

}  // namespace attntune
