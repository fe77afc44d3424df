#include "tuner/allocation/measure.h"

#include "build_info.h"
#include "core/check.h"
#include "search/strategy.h"
#include "tuner/session.h"

namespace attntune {

MeasureRun BeginMeasureRun(Database& db, const DeviceInfo& device, Timer& timer,
                           const EvaluateOptions& evaluate, const std::string& args_json) {
  MeasureRun run;
  run.db = &db;
  run.timer = &timer;
  run.evaluate = evaluate;
  run.device_id = db.PutDevice({0, device.kind, device.name, device.fingerprint_json});
  run.build_id = db.PutBuild({0, ATTNTUNE_VERSION, ATTNTUNE_KERNEL_HASH});
  run.run_id = db.BeginRun(args_json, run.device_id, UtcNow());
  return run;
}

void FinishMeasureRun(const MeasureRun& run) { run.db->FinishRun(run.run_id, UtcNow()); }

// The store-or-reuse loop over one problem is RunTune's (tuner/session.cpp) without its
// progress events, warm start, time budget and counter passes.
ProblemMeasurement MeasureProblem(MeasureRun& run, ProblemContext& problem, Phase phase,
                                  const Variant& variant,
                                  const std::vector<const Implementation*>& impls,
                                  const ProblemSearch& search) {
  ATTNTUNE_CHECK(run.db != nullptr && run.timer != nullptr);
  Database& db = *run.db;
  const Shape& shape = problem.GetShape();
  const int64_t problem_id = db.PutProblem({0, shape, ToString(Dtype::kF32), ToString(phase)});
  const SearchSpace space = BuildSearchSpace(variant, impls, shape);
  auto strategy = MakeStrategy(search.strategy, space.space, search.seed, "allocation search");
  ProblemMeasurement out;
  RunSearch(*strategy, search.budget, [&](const Point& point) {
    const Implementation& impl = space.ImplOf(point);
    const Params params = space.ParamsOf(point);
    const int64_t config_id =
        db.PutConfig({0, variant.id, impl.id, CanonicalParamsJson(variant, impl, params)});
    TrialResult result;
    if (auto stored = db.FindReusable(run.device_id, problem_id, config_id, run.build_id)) {
      result = stored->result;
      ++out.reused;
    } else {
      result = EvaluateCandidate(problem, variant, impl, params, *run.timer, run.evaluate).result;
      db.InsertTrial(run.run_id, run.device_id, problem_id, config_id, run.build_id, result);
      ++out.measured;
    }
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
