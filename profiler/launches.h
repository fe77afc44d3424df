// What one run of a candidate launched (kernel names, kinds, times), as a backend records
// it: bench prints it and takes the selection phase's time from it.
#pragma once

#include <string>
#include <vector>

namespace attntune {

struct KernelEvent {
  std::string name;
  std::string kind;  // "parallel_for", "parallel_reduce", "parallel_scan", ...
  double ms = 0.0;
};

/// Records the launches of the work done while it is alive.
class LaunchRecorder {
 public:
  virtual ~LaunchRecorder() = default;
  /// Events recorded so far, in launch order.
  virtual std::vector<KernelEvent> Events() const = 0;
};

}  // namespace attntune
