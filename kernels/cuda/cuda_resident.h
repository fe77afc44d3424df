// How a kernel that runs on device tensors (a library's: cuDNN, FlashInfer) becomes a
// CUDA implementation of the variant table: cuda_implementations.cpp wires its `run`
// (inputs resident on the device, O poisoned, launched, copied back), `launch` (the
// work alone, for the timers) and `run_device` (the caller's buffers and stream) from one
// device launcher, as it does for attntune's own kernels. Plain C++ header.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "kernels/variant.h"

namespace attntune {

/// Enqueues a windowed problem (dense, swa, hybrid) on `t` (its stream): `windows` holds
/// each KV head's window on the host (0 = full; dense all 0, swa all w, hybrid its
/// windows); `p` the complete params. Throws std::runtime_error on failure.
using WindowedDeviceLaunch = std::function<void(const DeviceTensors& t, const Params& p,
                                                const std::vector<int64_t>& windows)>;

/// Sets impl->run, launch, run_device and tolerance for `variant` in `dtype` (fp16 or
/// bf16) from `launch`.
void WireWindowedDeviceLaunch(Implementation* impl, const std::string& variant, Dtype dtype,
                              WindowedDeviceLaunch launch);

}  // namespace attntune
