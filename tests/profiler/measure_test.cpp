#include "profiler/measure.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attntune {
namespace {

// Returns scripted durations (repeating the last one when the script runs out) and
// records how often it was asked, in the style of ninja's FakeCommandRunner.
class FakeTimer : public Timer {
 public:
  explicit FakeTimer(std::vector<double> script) : script_(std::move(script)) {}
  std::string Name() const override { return "fake"; }
  double TimeMs(const std::function<void()>& fn) override {
    fn();
    const double ms = script_[std::min(calls_, script_.size() - 1)];
    ++calls_;
    return ms;
  }
  size_t calls() const { return calls_; }

 private:
  std::vector<double> script_;
  size_t calls_ = 0;
};

// A FakeTimer whose every time has a span and (given `selects`) a selection part, as a
// device timer's named kernels do: the scripted values, repeating the last (none after
// `spans_until` calls: a timer that lost them).
class FakeSpanTimer : public FakeTimer {
 public:
  FakeSpanTimer(std::vector<double> times, std::vector<double> spans,
                size_t spans_until = SIZE_MAX, std::vector<double> selects = {})
      : FakeTimer(std::move(times)),
        spans_(std::move(spans)),
        selects_(std::move(selects)),
        spans_until_(spans_until) {}
  std::optional<double> LastSpanMs() const override { return Scripted(spans_); }
  std::optional<double> LastSelectMs() const override { return Scripted(selects_); }

 private:
  std::optional<double> Scripted(const std::vector<double>& v) const {
    if (v.empty() || calls() == 0 || calls() > spans_until_) return std::nullopt;
    return v[std::min(calls() - 1, v.size() - 1)];
  }
  std::vector<double> spans_;
  std::vector<double> selects_;
  size_t spans_until_;
};

// Alternates between two very different durations: the median never settles.
std::vector<double> Noisy(int n) {
  std::vector<double> v;
  for (int i = 0; i < n; ++i) v.push_back(i % 2 ? 1.0 : 3.0);
  return v;
}

}  // namespace

TEST_CASE("Summarize: odd count, interpolated percentiles, sample cv") {
  const Stats s = Summarize({5, 1, 4, 2, 3});
  CHECK(s.samples_ms == std::vector<double>{5, 1, 4, 2, 3});  // measurement order kept
  CHECK(s.median_ms == 3.0);
  CHECK(s.p10_ms == Approx(1.4));  // position 0.4 between 1 and 2
  CHECK(s.p90_ms == Approx(4.6));  // position 3.6 between 4 and 5
  CHECK(s.mean_ms == 3.0);
  CHECK(s.cv == Approx(std::sqrt(2.5) / 3.0));  // sum of squares 10 over n-1 = 4
}

TEST_CASE("Summarize: even count interpolates the median") {
  const Stats s = Summarize({10, 20, 40, 30});
  CHECK(s.median_ms == 25.0);
  CHECK(s.p10_ms == Approx(13.0));  // position 0.3
  CHECK(s.p90_ms == Approx(37.0));  // position 2.7
  CHECK(s.mean_ms == 25.0);
  CHECK(s.cv == Approx(std::sqrt(500.0 / 3) / 25.0));
}

TEST_CASE("Summarize: one sample has zero spread") {
  const Stats s = Summarize({7.5});
  CHECK(s.median_ms == 7.5);
  CHECK(s.p10_ms == 7.5);
  CHECK(s.p90_ms == 7.5);
  CHECK(s.mean_ms == 7.5);
  CHECK(s.cv == 0.0);
}

TEST_CASE("Measure: constant samples stop at the floor") {
  FakeTimer timer({2.0});
  int runs = 0;
  MeasurePolicy policy;
  policy.warmup = 2;
  policy.min_reps = 5;
  policy.max_reps = 100;
  const Stats s = Measure(
      timer, [&] { ++runs; }, policy);
  CHECK(s.samples_ms.size() == 5);
  CHECK(s.median_ms == 2.0);
  CHECK(s.cv == 0.0);
  CHECK(s.warmup_runs == 2);
  CHECK(runs == 7);
  CHECK(timer.calls() == 7);  // warm-ups went through the timer too
}

TEST_CASE("Measure: warm-up durations are not samples") {
  // Two slow warm-ups (cold caches), then steady runs.
  FakeTimer timer({100.0, 90.0, 1.0});
  MeasurePolicy policy;
  policy.warmup = 2;
  policy.min_reps = 3;
  const Stats s = Measure(
      timer, [] {}, policy);
  CHECK(s.samples_ms == std::vector<double>{1.0, 1.0, 1.0});
  CHECK(s.warmup_runs == 2);
}

TEST_CASE("Measure: noisy samples continue to max_reps") {
  FakeTimer timer(Noisy(1000));
  MeasurePolicy policy;
  policy.warmup = 0;
  policy.min_reps = 5;
  policy.max_reps = 40;
  policy.max_seconds = 1e9;
  const Stats s = Measure(
      timer, [] {}, policy);
  CHECK(s.samples_ms.size() == 40);
  CHECK(timer.calls() == 40);
}

TEST_CASE("Measure: noise that settles stops between the floor and the ceiling") {
  // Three wild samples, then a steady 1.0: the median's CI narrows once enough
  // steady samples surround it.
  std::vector<double> script = {1.0, 50.0, 0.1, 30.0};
  script.push_back(1.0);
  FakeTimer timer(script);
  MeasurePolicy policy;
  policy.warmup = 0;
  policy.min_reps = 3;
  policy.max_reps = 1000;
  policy.max_seconds = 1e9;
  const Stats s = Measure(
      timer, [] {}, policy);
  CHECK(s.samples_ms.size() > 3);
  CHECK(s.samples_ms.size() < 1000);
  CHECK(s.median_ms == 1.0);
}

TEST_CASE("Measure: the time cap counts timed repetitions after the floor") {
  FakeTimer timer(Noisy(1000));  // 3, 1, 3, 1, ... ms
  MeasurePolicy policy;
  policy.warmup = 0;
  policy.min_reps = 4;  // 3+1+3+1 = 8 ms, not counted against the cap
  policy.max_reps = 1000;
  policy.max_seconds = 0.010;  // 10 ms beyond the floor: 3+1+3+1+3 = 11 ms -> 5 more
  const Stats s = Measure(
      timer, [] {}, policy);
  CHECK(s.samples_ms.size() == 9);
}

TEST_CASE("Measure: a zero time cap still runs the floor") {
  FakeTimer timer(Noisy(1000));
  MeasurePolicy policy;
  policy.warmup = 1;
  policy.min_reps = 6;
  policy.max_seconds = 0;
  const Stats s = Measure(
      timer, [] {}, policy);
  CHECK(s.samples_ms.size() == 6);
  CHECK(timer.calls() == 7);
}

TEST_CASE("Measure: the spans' median is of the timed repetitions, where each has one") {
  MeasurePolicy policy;
  policy.warmup = 1;
  policy.min_reps = 5;
  FakeTimer plain({2.0});
  CHECK_FALSE(Measure(plain, [] {}, policy).span_median_ms.has_value());
  // The warm-up's span (50) is not a sample; the timed ones are 3, 9, 4, 3, 5.
  FakeSpanTimer timer({2.0}, {50.0, 3.0, 9.0, 4.0, 3.0, 5.0});
  const Stats s = Measure(timer, [] {}, policy);
  CHECK(s.samples_ms.size() == 5);
  REQUIRE(s.span_median_ms.has_value());
  CHECK(*s.span_median_ms == 4.0);
  // A repetition without a span: no median of the others passed off as the whole's.
  FakeSpanTimer partial({2.0}, {3.0}, 4);
  CHECK_FALSE(Measure(partial, [] {}, policy).span_median_ms.has_value());
}

TEST_CASE("Measure: the selection times' median is of the timed repetitions, where each has one") {
  MeasurePolicy policy;
  policy.warmup = 1;
  policy.min_reps = 5;
  FakeSpanTimer spans_only({2.0}, {3.0});
  CHECK_FALSE(Measure(spans_only, [] {}, policy).select_median_ms.has_value());
  // The warm-up's (40) is not a sample; the timed ones are 1, 2, 0.5, 1.5, 3.
  FakeSpanTimer timer({2.0}, {3.0}, SIZE_MAX, {40.0, 1.0, 2.0, 0.5, 1.5, 3.0});
  const Stats s = Measure(timer, [] {}, policy);
  REQUIRE(s.select_median_ms.has_value());
  CHECK(*s.select_median_ms == 1.5);
  CHECK(*s.span_median_ms == 3.0);
  FakeSpanTimer partial({2.0}, {3.0}, 4, {1.0});
  CHECK_FALSE(Measure(partial, [] {}, policy).select_median_ms.has_value());
}

TEST_CASE("CpuTimer times the call") {
  CpuTimer timer;
  bool ran = false;
  const double ms = timer.TimeMs([&] {
    ran = true;
    volatile double x = 0;
    for (int i = 0; i < 100000; ++i) x = x + 1;
  });
  CHECK(ran);
  CHECK(ms > 0.0);
  CHECK(ms < 10000.0);
}

TEST_CASE("Measure: before_each runs before every repetition, outside the timed call") {
  FakeTimer timer({2.0});
  std::vector<char> order;  // 'b' = before_each, 'r' = the timed function
  MeasurePolicy policy;
  policy.warmup = 1;
  policy.min_reps = 3;
  policy.before_each = [&] { order.push_back('b'); };
  const Stats s = Measure(
      timer, [&] { order.push_back('r'); }, policy);
  CHECK(s.samples_ms.size() == 3);
  CHECK(order == std::vector<char>{'b', 'r', 'b', 'r', 'b', 'r', 'b', 'r'});
}

}  // namespace attntune
