// The measurement policy (DESIGN.md s6): warm up through the code path that measures,
// repeat until the median is stable (floor and time cap), keep raw samples.
#pragma once

#include <functional>
#include <optional>
#include <vector>

#include "profiler/timer.h"

namespace attntune {

/// The largest floor of repetitions a command takes (bench and allocate --min-reps): the
/// samples are kept (8 MB at this count), and each repetition runs the kernel once.
constexpr int kMaxMinReps = 1000000;

struct MeasurePolicy {
  int warmup = 1;             // untimed-for-statistics runs through the same path
  int min_reps = 5;           // floor
  int max_reps = 100;         // ceiling
  double max_seconds = 3.0;   // time cap on the timed repetitions (after min_reps)
  double target_rel_ci = 0.02;  // stop when the median's ~95% CI half-width / median is below
  /// Optional, run before every repetition (warm-up included) outside the timed region:
  /// the GPU path flushes L2 here (tune/bench --flush-l2).
  std::function<void()> before_each;
};

struct Stats {
  std::vector<double> samples_ms;  // raw, in measurement order
  double median_ms = 0.0;
  double p10_ms = 0.0;
  double p90_ms = 0.0;
  double mean_ms = 0.0;
  double cv = 0.0;  // stddev / mean
  int warmup_runs = 0;
  /// The median of the timer's spans of the timed repetitions (Timer::LastSpanMs), where
  /// it gave one for each.
  std::optional<double> span_median_ms;
  /// The median of the timer's selection times of the timed repetitions
  /// (Timer::LastSelectMs), where it gave one for each.
  std::optional<double> select_median_ms;
};

/// Statistics of given samples (non-empty).
Stats Summarize(std::vector<double> samples_ms);

/// Measures `fn` with `timer` under `policy`.
Stats Measure(Timer& timer, const std::function<void()>& fn, const MeasurePolicy& policy);

}  // namespace attntune
