#include "tuner/allocation/measure.h"

#include "core/check.h"
#include "search/strategy.h"
#include "tuner/session.h"

namespace attntune {

MeasureRun BeginMeasureRun(Database& db, const DeviceInfo& device, Timer& timer,
                           const EvaluateOptions& evaluate, const std::string& args_json) {
  MeasureRun run;
  run.store = std::make_shared<TrialStore>(db, device, args_json);
  run.store->SetTolerance(evaluate.tolerance);
  run.timer = &timer;
  run.evaluate = evaluate;
  return run;
}

void FinishMeasureRun(const MeasureRun& run) { run.store->Finish(); }

// A problem searched as RunTune searches one (tuner/session.cpp), each candidate through
// the same store stage, without progress events, warm start or a time budget.
ProblemMeasurement MeasureProblem(MeasureRun& run, ProblemContext& problem, Phase phase,
                                  const Variant& variant,
                                  const std::vector<const Implementation*>& impls,
                                  const ProblemSearch& search) {
  ATTNTUNE_CHECK(run.store != nullptr && run.timer != nullptr);
  const Shape& shape = problem.GetShape();
  const int64_t problem_id = run.store->Db().PutProblem({0, shape, Dtype::kF32, phase});
  const SearchSpace space = BuildSearchSpace(variant, impls, shape);
  auto strategy = MakeStrategy(search.strategy, space.space, search.seed, "allocation search");
  ProblemMeasurement out;
  RunSearch(*strategy, search.budget, [&](const Point& point) {
    const Implementation& impl = space.ImplOf(point);
    const Params params = space.ParamsOf(point);
    const TrialStore::Trial trial = run.store->EvaluateOrReuse(
        problem_id, variant, impl, params, problem, *run.timer, run.evaluate);
    const TrialResult& result = trial.result;
    ++(trial.reused ? out.reused : out.measured);
    ++out.evaluations;
    const bool ok = result.status == TrialStatus::kOk;
    if (!ok) ++out.failed;
    if (ok && (!out.found || result.median_ms < out.result.median_ms)) {
      out.found = true;
      out.impl = &impl;
      out.params = params;
      out.result = result;
    }
    return Evaluation{point, ok, result.median_ms};
  });
  return out;
}

Variant PinParams(const Variant& variant, const Params& fixed) {
  auto pin = [&](std::vector<ParamDecl>* decls) {
    for (ParamDecl& decl : *decls) {
      auto it = fixed.find(decl.name);
      if (it == fixed.end()) continue;
      decl.default_value = it->second;
      decl.grid = {it->second};
    }
  };
  Variant pinned = variant;
  pin(&pinned.params);
  for (Implementation& impl : pinned.implementations) pin(&impl.tunables);
  return pinned;
}

}  // namespace attntune
