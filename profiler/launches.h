// What one run of a candidate launched (kernel names, kinds, times), as a backend records
// it: bench prints it and takes the selection phase's time from it.
#pragma once

#include <memory>
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

/// The events of several recorders: each one's in turn.
class CombinedRecorder : public LaunchRecorder {
 public:
  explicit CombinedRecorder(std::vector<std::unique_ptr<LaunchRecorder>> parts)
      : parts_(std::move(parts)) {}
  std::vector<KernelEvent> Events() const override {
    std::vector<KernelEvent> all;
    for (const auto& part : parts_) {
      const std::vector<KernelEvent> events = part->Events();
      all.insert(all.end(), events.begin(), events.end());
    }
    return all;
  }

 private:
  std::vector<std::unique_ptr<LaunchRecorder>> parts_;
};

}  // namespace attntune
