// The store stage: each candidate of a run evaluated (gate, then measure) unless the
// database holds a reusable trial of it, and stored in a transaction of its own, so that
// a killed run loses at most the candidate in flight (DESIGN.md s4). A candidate being
// measured is claimed in the database, so that two tunes on one file measure it once.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "db/database.h"
#include "profiler/device.h"
#include "tuner/evaluate.h"

namespace attntune {

/// The rows a run's trials hang off: its device, build and run.
class TrialStore {
 public:
  /// Stores the device and this build, and begins a run with `args_json`.
  TrialStore(Database& db, const DeviceInfo& device, const std::string& args_json);
  /// Marks the run finished.
  void Finish();

  Database& Db() { return db_; }
  int64_t DeviceRowId() const { return device_id_; }
  int64_t RunId() const { return run_id_; }

  struct Trial {
    int64_t id = 0;
    TrialResult result;
    bool reused = false;  // answered from the database
  };
  /// The trial of (`variant`, `impl`, `params`) on the stored problem `problem_id`: a
  /// reusable stored one, else evaluated now on `context` and stored, under a claim that
  /// makes another tune of the same candidate wait for this trial (a dead claimant's claim
  /// is taken over). `before_evaluate` (may be empty) is called just before a new
  /// evaluation starts.
  Trial EvaluateOrReuse(int64_t problem_id, const Variant& variant, const Implementation& impl,
                        const Params& params, ProblemContext& context, Timer& timer,
                        const EvaluateOptions& options,
                        const std::function<void()>& before_evaluate = nullptr);

 private:
  Database& db_;
  int64_t device_id_ = 0;
  int64_t build_id_ = 0;
  int64_t run_id_ = 0;
};

}  // namespace attntune
