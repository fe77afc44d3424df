#include "tuner/session.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "build_info.h"
#include "profiler/nvtx.h"
#include "search/strategies/registry.h"
#include "search/strategy.h"

namespace attntune {

namespace {

// Stored configurations a warm-started search asks first.
constexpr size_t kWarmStartPoints = 3;

}  // namespace

namespace {

// A metric every counter reading holds: a trial that has it was counted before.
constexpr const char kCounterProbe[] = "hw_passes";

struct UncountedTrial {
  int64_t trial_id;
  int64_t problem_index;
  std::string problem;  // "dense L=1024"
  size_t variant;
  const Implementation* impl;  // an entry of the variant table
  Params params;
  std::string config;
};

// The counter passes of a run: per sequence length, the inputs are generated again (same
// seed, so the same values as when timed), and every ok trial still without counters runs
// once to make its inputs and selection resident, then under TuneOptions::counters. Each
// trial's counters are stored in a transaction of their own; a failure is reported and
// counted, and the passes go on.
void CounterPasses(TunePlan& plan, const std::map<int64_t, std::vector<UncountedTrial>>& uncounted,
                   int64_t problem_count, const ProgressFn& progress, TuneSummary* summary) {
  const TuneOptions& options = plan.options;
  for (const auto& [L, trials] : uncounted) {
    std::map<int64_t, std::unique_ptr<ProblemContext>> contexts;  // by Lq, as RunTune's
    std::vector<float> scratch;
    for (const UncountedTrial& t : trials) {
      const Variant& variant = *plan.variants[t.variant];
      const Shape shape = TuneShape(options, plan.model, variant, L);
      std::unique_ptr<ProblemContext>& slot = contexts[shape.Lq];
      if (!slot) slot = std::make_unique<ProblemContext>(shape, options.seed ^ static_cast<uint64_t>(L));
      const Tensors& inputs = slot->Inputs();
      const Implementation& impl = *t.impl;
      auto launch = [&] {
        if (impl.launch) {
          impl.launch(inputs, t.params);
        } else {
          scratch.resize(static_cast<size_t>(inputs.shape.QElems()));
          impl.run(inputs, t.params, scratch.data());
        }
      };
      ProgressEvent ev{t.problem_index, problem_count, t.problem, 0, 0, t.config, "counters",
                       "", 0.0, false};
      std::map<std::string, double> metrics;
      bool read = false;
      try {
        NvtxRange range("counters " + t.config);
        launch();
        metrics = plan.counters->Read(launch, nullptr);
        read = true;
      } catch (const std::exception& e) {  // the reading failed: reported, and the passes go on
        ev.status = "counters failed";
        ev.message = e.what();
        ++summary->counter_failures;
      }
      if (read) {
        plan.db->AddMetrics(t.trial_id, metrics);  // a database failure stops the run
        ++summary->counted;
      }
      if (progress) progress(ev);
    }
  }
}

}  // namespace

TuneSummary RunTune(TunePlan& plan, Timer& timer, const ProgressFn& progress) {
  const TuneOptions& options = plan.options;
  const ModelGeometry& model = plan.model;
  const std::vector<const Variant*>& variants = plan.variants;
  Database* db = plan.db.get();
  TuneSummary summary;
  summary.db_path = plan.db_path;
  const DeviceInfo device = plan.backend->Device();
  const int64_t device_id = db->PutDevice({0, device.kind, device.name, device.fingerprint_json});
  const int64_t build_id = db->PutBuild({0, ATTNTUNE_VERSION, ATTNTUNE_KERNEL_HASH});
  const int64_t run_id = db->BeginRun(options.args_json, device_id, UtcNow());

  const int64_t problem_count =
      static_cast<int64_t>(variants.size() * options.seq_lens.size());
  const SecondsClock clock = options.clock ? options.clock : SecondsClock(SteadySeconds);
  const double run_start = clock();
  int64_t problem_index = 0;
  // The ok trials of this run without hardware counters, for the counter passes.
  std::map<int64_t, std::vector<UncountedTrial>> uncounted;  // by sequence length
  for (int64_t L : options.seq_lens) {
    // Inputs depend on the shape and the seed only, so every variant of a shape sees the
    // same ones (in decode, one step's shape and a token-by-token variant's all steps).
    std::map<int64_t, std::unique_ptr<ProblemContext>> contexts;  // by Lq

    for (size_t v = 0; v < variants.size(); ++v) {
      const Variant* variant = variants[v];
      const Shape shape = TuneShape(options, model, *variant, L);
      const int64_t problem_id =
          db->PutProblem({0, shape, ToString(options.dtype), ToString(options.phase)});
      std::unique_ptr<ProblemContext>& slot = contexts[shape.Lq];
      const uint64_t seed = options.seed ^ static_cast<uint64_t>(L);
      if (!slot) slot = std::make_unique<ProblemContext>(shape, seed);
      ProblemContext& context = *slot;
      ++problem_index;
      const std::string problem_name =
          variant->id + (options.phase == Phase::kDecode ? " decode" : "") + " L=" + std::to_string(L);
      NvtxRange problem_range("tune " + problem_name);
      // The implementation is a search dimension (DESIGN.md s2): every one the backend runs.
      const SearchSpace search = BuildSearchSpace(*variant, plan.impls[v], shape, plan.Kind());
      auto strategy = MakeStrategy(options.strategy, search.space, options.seed, "--strategy");
      if (options.warm_start) {
        WarmStart(*strategy, WarmStartPoints(*db, device_id, *variant, search,
                                             {problem_id, shape, ToString(options.dtype),
                                              ToString(options.phase)},
                                             kWarmStartPoints));
      }
      int64_t eval_index = 0;
      SearchBudget budget{options.budget > 0 ? options.budget : -1, 0.0};
      if (options.time_budget_s > 0) {  // an equal share of what is left, this problem's included
        const double left = options.time_budget_s - (clock() - run_start);
        const int64_t problems_left = problem_count - problem_index + 1;
        budget.max_seconds = std::max(left / static_cast<double>(problems_left), 1e-9);
      }

      RunSearch(*strategy, budget, [&](const Point& point) {
        ++eval_index;
        const Implementation& impl = search.ImplOf(point);
        const Params params = search.ParamsOf(point);
        const int64_t config_id = db->PutConfig(
            {0, variant->id, impl.id, CanonicalParamsJson(*variant, impl, params)});
        ProgressEvent ev{problem_index, problem_count, problem_name, eval_index,
                         options.budget, search.Describe(point), "", "", 0.0, false};
        TrialResult result;
        int64_t trial_id = 0;
        if (auto stored = db->FindReusable(device_id, problem_id, config_id, build_id)) {
          result = stored->result;
          trial_id = stored->id;
          ev.reused = true;
          ++summary.reused;
        } else {
          NvtxRange candidate_range("candidate " + ev.config);
          if (progress) {
            ev.status = "running";
            progress(ev);
          }
          result = EvaluateCandidate(context, *variant, impl, params, timer, options.evaluate).result;
          trial_id = db->InsertTrial(run_id, device_id, problem_id, config_id, build_id, result);
          ++summary.measured;
        }
        if (options.metrics && result.status == TrialStatus::kOk &&
            !result.metrics.count(kCounterProbe)) {
          uncounted[L].push_back({trial_id, problem_index, problem_name, v, &impl, params, ev.config});
        }
        ++summary.evaluations;
        if (result.status != TrialStatus::kOk) ++summary.failed;
        ev.status = ToString(result.status);
        ev.median_ms = result.median_ms;
        if (progress) progress(ev);
        return Evaluation{point, result.status == TrialStatus::kOk, result.median_ms};
      }, clock);
    }
  }
  if (options.metrics) {
    NvtxRange range("counters");
    CounterPasses(plan, uncounted, problem_count, progress, &summary);
  }
  db->FinishRun(run_id, UtcNow());
  {
    NvtxRange range("emit");
    summary.outputs = EmitOutputs(*db, options.out_dir);
  }
  return summary;
}

}  // namespace attntune
