// The run loop of a tune: for each (sequence length, variant) of a plan, build the
// search space, search it, evaluate each candidate (gate, then measure) or reuse its
// stored trial, store it in its own transaction; then the counter passes and the outputs.
// The candidates go to the slots of a WorkerPool (tuner/pool.h): one slot in a process's
// own tune, one per MPI rank under mpirun. Slots of one model of device share the
// searches: problems are shared out, and a search asks a batch of points when slots
// outnumber the problems left.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "tuner/emit.h"
#include "tuner/plan.h"
#include "tuner/space.h"

namespace attntune {

struct ProgressEvent {
  int64_t problem_index = 0;  // 1-based
  int64_t problem_count = 0;
  std::string problem;        // "dense L=1024"
  int64_t eval_index = 0;     // 1-based within the problem
  int64_t budget = 0;         // the problem's evaluation budget; 0: none (a time budget)
  std::string config;         // "Bc=64,Br=32"
  std::string status;         // "running" (before a candidate is evaluated), then its status;
                              // in the counter passes "counters" or "counters failed"
  std::string message;        // why, when the counters failed
  double median_ms = 0;
  bool reused = false;
  std::string worker;  // the slot that evaluated it ("rank 2"), when the pool has several
};
using ProgressFn = std::function<void(const ProgressEvent&)>;

/// What the search of one problem found under the run's floor (TuneOptions::floor).
struct ProblemChoice {
  std::string problem;  // "swa L=1024"
  std::string variant;
  bool found = false;   // some ok candidate met the floor (every ok one, without a floor)
  bool sparse = false;  // the fastest of them attends fewer pairs than dense (pair_ratio < 1)
  std::string config;   // the fastest of them ("w=128,sink=4 Bc=64,Br=32")
  TrialResult result;   // its trial
  bool sparse_found = false;  // some sparse candidate met the floor
  /// The sparse ok candidate closest to the floor among those that missed it (the
  /// largest worst-case mass_recall, else the smallest worst-case rel_err); "" if none.
  std::string closest;
  TrialResult closest_result;
};

struct TuneSummary {
  int64_t evaluations = 0;
  int64_t measured = 0;  // evaluated in this run
  int64_t reused = 0;    // answered from the database
  int64_t failed = 0;    // stored with a status other than ok
  int64_t counted = 0;   // ok trials given hardware counters (TuneOptions::counters)
  int64_t counter_failures = 0;
  /// The re-timing against the default (tuner/confirm.h): configurations re-timed, and
  /// those the default was as fast as.
  int64_t retimed = 0;
  int64_t lost_to_default = 0;
  /// The run loop's own CPU time in the searches (strategies, database, handing out
  /// candidates), not waiting for slots: the part of a tune on many ranks that does not
  /// shrink with more of them. (With InlinePool, whose slots evaluate when a task is
  /// handed out, the evaluations too.)
  double loop_seconds = 0;
  std::string db_path;
  OutputPaths outputs;
  std::string quality_source;          // "gaussian inputs" or the calibration set's Describe()
  std::vector<ProblemChoice> choices;  // per problem, in the order searched
};

/// Tunes every (sequence length, variant) of the plan on its backend, timing with
/// `timer`, then emits the outputs.
TuneSummary RunTune(TunePlan& plan, Timer& timer, const ProgressFn& progress);

class WorkerPool;
/// The same on the slots of `pool`: each problem searched once per model of device among
/// the slots (DeviceInfo::unit_fields), each trial stored under the device that measured
/// it. A lost slot's candidate goes to another slot of its model; when a model has no
/// slot left with work to do, std::runtime_error naming the slots. Counter passes
/// (options.metrics) need a pool of one slot.
TuneSummary RunTune(TunePlan& plan, WorkerPool& pool, const ProgressFn& progress);

}  // namespace attntune
