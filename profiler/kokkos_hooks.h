// Kokkos Tools callbacks that record the kernels Kokkos launches (names, durations),
// so that what ran for a candidate can be shown and stored.
#pragma once

#include <string>
#include <vector>

namespace attntune {

struct KernelEvent {
  std::string name;
  std::string kind;  // "parallel_for", "parallel_reduce", "parallel_scan"
  double ms = 0.0;
};

/// While alive, records every Kokkos parallel dispatch (nested captures not supported:
/// at most one alive at a time). Kokkos must be initialised.
class KernelCapture {
 public:
  KernelCapture();
  ~KernelCapture();
  KernelCapture(const KernelCapture&) = delete;
  KernelCapture& operator=(const KernelCapture&) = delete;
  /// Events recorded so far, in launch order.
  std::vector<KernelEvent> Events() const;
};

}  // namespace attntune
