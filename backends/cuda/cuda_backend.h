// The CUDA backend: the CUDA implementations of the table (fp16, bf16), CUPTI activity
// timing (CUDA events as fallback), CUPTI range-profiler counters, L2 flush, SM and
// memory clocks with each measurement, the GPU fingerprint. Opening it without a usable
// driver, device or kernels is refused in one line.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace attntune {

/// The backend of --device cuda:N (device N made current). `what` names the flag for
/// errors ("--device cuda:1").
std::unique_ptr<Backend> OpenCudaBackend(const DeviceId& id, const std::string& what);

/// `attntune devices`: each CUDA device and its fingerprint, or why there is none.
std::vector<std::string> DescribeCudaDevices();

}  // namespace attntune
