#include "profiler/measure.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

#include "core/check.h"

namespace attntune {
namespace {

// Quantile q of sorted samples, interpolating linearly between neighbouring ranks.
double Quantile(const std::vector<double>& sorted, double q) {
  const double pos = q * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return sorted[lo] + frac * (sorted[hi] - sorted[lo]);
}

// The distribution-free ~95% confidence interval of the median: the order statistics
// at ranks n/2 -/+ 0.98*sqrt(n) (0.98 = 1.96/2, the normal approximation of the
// binomial(n, 1/2) rank distribution), widened outwards and clamped to the sample.
// True when its half-width relative to the median is below `target`.
bool MedianCiTight(std::vector<double> samples, double target) {
  std::sort(samples.begin(), samples.end());
  const double n = static_cast<double>(samples.size());
  const double spread = 0.98 * std::sqrt(n);
  const double lo_rank = std::max(1.0, std::floor(n / 2 - spread));   // 1-based
  const double hi_rank = std::min(n, std::ceil(1 + n / 2 + spread));  // 1-based
  const double half_width =
      (samples[static_cast<size_t>(hi_rank) - 1] - samples[static_cast<size_t>(lo_rank) - 1]) / 2;
  if (half_width <= 0) return true;
  const double median = Quantile(samples, 0.5);
  return median > 0 && half_width / median < target;
}

}  // namespace

Stats Summarize(std::vector<double> samples_ms) {
  ATTNTUNE_CHECK_MSG(!samples_ms.empty(), "Summarize needs at least one sample");
  Stats stats;
  std::vector<double> sorted = samples_ms;
  std::sort(sorted.begin(), sorted.end());
  stats.median_ms = Quantile(sorted, 0.5);
  stats.p10_ms = Quantile(sorted, 0.1);
  stats.p90_ms = Quantile(sorted, 0.9);

  const double n = static_cast<double>(sorted.size());
  double sum = 0;
  for (double s : sorted) sum += s;
  stats.mean_ms = sum / n;
  if (sorted.size() > 1 && stats.mean_ms != 0) {
    double squares = 0;
    for (double s : sorted) squares += (s - stats.mean_ms) * (s - stats.mean_ms);
    stats.cv = std::sqrt(squares / (n - 1)) / stats.mean_ms;  // sample stddev (n - 1)
  }
  stats.samples_ms = std::move(samples_ms);
  return stats;
}

Stats Measure(Timer& timer, const std::function<void()>& fn, const MeasurePolicy& policy) {
  ATTNTUNE_CHECK(policy.warmup >= 0);
  ATTNTUNE_CHECK(policy.min_reps >= 1);
  ATTNTUNE_CHECK(policy.max_reps >= policy.min_reps);
  // Figures the timer gives per repetition (its kernels' span, their selection part): a
  // median where it gave one for each timed repetition.
  struct PerRepetition {
    std::vector<double> values;
    bool every = true;
    void Add(const std::optional<double>& v) {
      every = every && v.has_value();
      if (v) values.push_back(*v);
    }
    std::optional<double> Median() {
      if (!every || values.empty()) return std::nullopt;
      return Summarize(std::move(values)).median_ms;
    }
  } spans, selects;
  auto timed = [&] {
    if (policy.before_each) policy.before_each();
    return timer.TimeMs(fn);
  };
  for (int i = 0; i < policy.warmup; ++i) timed();

  // The time cap sums the timed samples beyond the floor (not the wall clock), so the
  // number of repetitions depends on the samples alone.
  const double cap_ms = policy.max_seconds * 1000.0;
  double beyond_floor_ms = 0;
  std::vector<double> samples;
  samples.reserve(static_cast<size_t>(policy.min_reps));
  while (static_cast<int>(samples.size()) < policy.max_reps) {
    const double ms = timed();
    samples.push_back(ms);
    spans.Add(timer.LastSpanMs());
    selects.Add(timer.LastSelectMs());
    const int n = static_cast<int>(samples.size());
    if (n < policy.min_reps) continue;
    if (n > policy.min_reps) beyond_floor_ms += ms;
    if (MedianCiTight(samples, policy.target_rel_ci)) break;
    if (beyond_floor_ms >= cap_ms) break;
  }
  Stats stats = Summarize(std::move(samples));
  stats.warmup_runs = policy.warmup;
  stats.span_median_ms = spans.Median();
  stats.select_median_ms = selects.Median();
  return stats;
}

}  // namespace attntune
