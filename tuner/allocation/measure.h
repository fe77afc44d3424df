// The allocation's measurements on the tuner's stages, as `tune` makes them: one
// problem's search space from the implementations' declared tunables, a strategy under a
// budget, each candidate gated against the fp64 reference and measured, and every trial
// stored in the database, so that a re-run reuses it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/types.h"
#include "db/database.h"
#include "profiler/device.h"
#include "profiler/timer.h"
#include "tuner/evaluate.h"
#include "tuner/store.h"

namespace attntune {

/// One run of the database that measurements are stored under (the tuner's store stage).
struct MeasureRun {
  std::shared_ptr<TrialStore> store;
  Timer* timer = nullptr;  // not owned
  EvaluateOptions evaluate;
};

/// Stores the device and this build and begins a run with `args_json` (the command line).
MeasureRun BeginMeasureRun(Database& db, const DeviceInfo& device, Timer& timer,
                           const EvaluateOptions& evaluate, const std::string& args_json);
/// Marks the run finished.
void FinishMeasureRun(const MeasureRun& run);

struct ProblemSearch {
  std::string strategy = "random";  // a MakeStrategy name
  int64_t budget = 1;               // evaluations
  uint64_t seed = 1;
};

struct ProblemMeasurement {
  bool found = false;                    // some candidate was ok
  const Implementation* impl = nullptr;  // the fastest ok candidate (one of the given)
  Params params;
  TrialResult result;
  int64_t evaluations = 0, measured = 0, reused = 0, failed = 0;
};

/// Searches `impls` of `variant` on `problem` (stored as a problem of `phase`, fp32) over
/// BuildSearchSpace's space with `search`: each candidate is answered by a reusable stored
/// trial or evaluated by EvaluateCandidate (a wrong output is stored as wrong_result,
/// never timed) and stored. Returns the fastest ok candidate (found false: none).
ProblemMeasurement MeasureProblem(MeasureRun& run, ProblemContext& problem, Phase phase,
                                  const Variant& variant,
                                  const std::vector<const Implementation*>& impls,
                                  const ProblemSearch& search);

/// A copy of `variant` in which each parameter or implementation tunable named in `fixed`
/// has that one value as its grid and default, so that its search space varies the
/// others alone. Its implementations are copies: pass those to MeasureProblem.
Variant PinParams(const Variant& variant, const Params& fixed);

}  // namespace attntune
