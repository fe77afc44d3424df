// Timers behind one narrow interface (STYLE.md): CPU wall clock here; CUDA events and
// CUPTI activity records in profiler/cuda.
#pragma once

#include <functional>
#include <optional>
#include <string>

namespace attntune {

class Timer {
 public:
  virtual ~Timer() = default;
  virtual std::string Name() const = 0;
  /// Runs `fn` once and returns its duration in milliseconds (fn synchronises).
  virtual double TimeMs(const std::function<void()>& fn) = 0;
  /// Of the last TimeMs, where its time is the device's kernels summed: the span from the
  /// first kernel's start to the last one's end (the gaps between launches included).
  virtual std::optional<double> LastSpanMs() const { return std::nullopt; }
  /// Of the last TimeMs, where its time is named kernels summed: the part of it spent in
  /// the selection's kernels (a sparse variant's selection phase on the device).
  virtual std::optional<double> LastSelectMs() const { return std::nullopt; }
};

/// steady_clock around the call.
class CpuTimer : public Timer {
 public:
  std::string Name() const override { return "cpu-steady-clock"; }
  double TimeMs(const std::function<void()>& fn) override;
};

}  // namespace attntune
