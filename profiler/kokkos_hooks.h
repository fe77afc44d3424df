// Kokkos Tools callbacks that record the kernels Kokkos launches (names, durations),
// so that what ran for a candidate can be shown and stored.
#pragma once

#include <vector>

#include "profiler/launches.h"

namespace attntune {

/// While alive, records every Kokkos parallel dispatch (nested captures not supported:
/// at most one alive at a time). Kokkos must be initialised.
class KernelCapture : public LaunchRecorder {
 public:
  KernelCapture();
  ~KernelCapture() override;
  KernelCapture(const KernelCapture&) = delete;
  KernelCapture& operator=(const KernelCapture&) = delete;
  /// Events recorded so far, in launch order.
  std::vector<KernelEvent> Events() const override;
};

}  // namespace attntune
