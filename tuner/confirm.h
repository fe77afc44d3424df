// The stage of a tune after its searches: every problem's fastest configuration timed
// again beside the untuned default (the configuration `bench` runs without --impl and
// tunables: the backend's first implementation with its default tunables), back to back,
// so that a tuned entry never loses to the default. The results are metrics of the stored trials (db/records.h
// kMetricConfirm*), which reports/best.cpp reads: a configuration that was not faster
// than the default is not an entry; the next fastest is re-timed in its turn.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "tuner/pool.h"
#include "tuner/session.h"
#include "tuner/store.h"

namespace attntune {

/// What the stage reads and writes: the plan, the pool and the slot that times (one of a
/// model of device: the model's fastest configurations are re-timed on it), that model's
/// store and the slot's unit in it, and the run's problems.
/// A default configuration's ok trial that the stage evaluated or reused: tune's counter
/// passes (--metrics), which come after every timing, read its counters too.
struct DefaultTrialSeen {
  int64_t trial_id;
  size_t problem;  // index into the run's problems
  const Implementation* impl;
  Params params;
  std::map<std::string, double> metrics;  // as stored (counters already read, or not)
};

struct ConfirmContext {
  TunePlan& plan;
  WorkerPool& pool;
  int slot;
  TrialStore& store;
  size_t unit;
  const std::vector<TuneProblem>& problems;
  const ProgressFn& progress;
  std::vector<DefaultTrialSeen>* defaults = nullptr;  // appended to where given
  /// Per slot, lost: set here for another slot whose loss arrives while this one's task
  /// is awaited (a pool reports a loss once), so that the next model's re-timing is not
  /// sent to a slot that is gone and then awaited for ever.
  std::vector<bool>* lost = nullptr;
};

/// For each problem and each of its variant-parameter sets with an ok trial: the default
/// configuration evaluated (checked and stored, or its stored trial reused), then the
/// fastest stored configuration and the default each timed twice, alternately (A B B A);
/// the fastest kept when its mean is below the default's, else marked lost and the next
/// fastest tried, up to kMaxChallengers times. Counts what it timed in `summary`. When
/// the slot is lost, the stage stops for this model (nothing half-done is stored).
void ConfirmAgainstDefault(const ConfirmContext& ctx, TuneSummary* summary);

/// How many configurations of one variant-parameter set may be re-timed before the
/// default itself is left as the entry.
constexpr int kMaxChallengers = 3;

}  // namespace attntune
