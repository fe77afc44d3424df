#include "tuner/session.h"

#include <algorithm>
#include <map>
#include <memory>
#include <utility>

#include "tuner/store.h"
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

// What the searches of one run share.
struct RunState {
  TunePlan& plan;
  Timer& timer;
  const ProgressFn& progress;
  TrialStore store;
  TuneSummary summary;
  SecondsClock clock;
  double run_start = 0;
  int64_t problem_count = 0;
  // The ok trials of this run without hardware counters, for the counter passes.
  std::map<int64_t, std::vector<UncountedTrial>> uncounted;  // by sequence length
};

// The search budget of the problem numbered `problem_index`: the options' evaluation
// count and, with a time budget, an equal share of the time left (this problem's
// included).
SearchBudget ProblemBudget(const RunState& run, int64_t problem_index) {
  const TuneOptions& options = run.plan.options;
  SearchBudget budget{options.budget > 0 ? options.budget : -1, 0.0};
  if (options.time_budget_s > 0) {
    const double left = options.time_budget_s - (run.clock() - run.run_start);
    const int64_t problems_left = run.problem_count - problem_index + 1;
    budget.max_seconds = std::max(left / static_cast<double>(problems_left), 1e-9);
  }
  return budget;
}

// The metric a floor ranks candidates by when none meets it: the worst-case mass_recall
// (higher is closer), else minus the worst-case rel_err.
double Closeness(const QualityFloor& floor, const TrialResult& r) {
  auto worst = [&](const char* name, double none) {
    auto it = r.metrics.find(name);
    return it == r.metrics.end() ? none : it->second;
  };
  return floor.min_mass_recall || !floor.max_rel_err ? worst("mass_recall_worst", 0.0)
                                                     : -worst("rel_err_worst", 1e300);
}

// Folds one evaluated candidate into the problem's choice under `floor`.
void NoteChoice(const QualityFloor& floor, const std::string& config, const TrialResult& r,
                ProblemChoice* choice) {
  if (r.status != TrialStatus::kOk) return;
  auto ratio = r.metrics.find("pair_ratio");
  const bool sparse = ratio != r.metrics.end() && ratio->second < 1.0;
  if (floor.MetBy(r.metrics)) {
    choice->sparse_found = choice->sparse_found || sparse;
    if (!choice->found || r.median_ms < choice->result.median_ms) {
      choice->found = true;
      choice->sparse = sparse;
      choice->config = config;
      choice->result = r;
    }
  } else if (sparse && (choice->closest.empty() ||
                        Closeness(floor, r) > Closeness(floor, choice->closest_result))) {
    choice->closest = config;
    choice->closest_result = r;
  }
}

// Searches variant `v` of the plan at length L on `context`: builds its space, warm-starts
// and runs the strategy, each candidate evaluated or reused and stored.
void SearchProblem(RunState& run, size_t v, int64_t L, int64_t problem_index,
                   ProblemContext& context) {
  const TuneOptions& options = run.plan.options;
  const Variant& variant = *run.plan.variants[v];
  Database& db = run.store.Db();
  const Shape& shape = context.GetShape();
  const ProblemRecord record{0, shape, options.dtype, options.phase, run.plan.calib_id};
  const int64_t problem_id = db.PutProblem(record);
  db.PutRunProblem({run.store.RunId(), problem_id, options.floor.ToString()});
  const std::string problem_name = variant.id +
                                   (options.phase == Phase::kDecode ? " decode" : "") +
                                   " L=" + std::to_string(L);
  NvtxRange problem_range("tune " + problem_name);
  // The implementation is a search dimension (DESIGN.md s2): every one the backend runs.
  const SearchSpace search = BuildSearchSpace(variant, run.plan.impls[v], shape, run.plan.Kind());
  auto strategy = MakeStrategy(options.strategy, search.space, options.seed, "--strategy");
  if (options.warm_start) {
    ProblemRecord here = record;
    here.id = problem_id;
    WarmStart(*strategy, WarmStartPoints(db, run.store.DeviceRowId(), variant, search, here,
                                         kWarmStartPoints, options.floor));
  }
  ProblemChoice choice{problem_name, variant.id};
  int64_t eval_index = 0;
  RunSearch(*strategy, ProblemBudget(run, problem_index), [&](const Point& point) {
    ++eval_index;
    const Implementation& impl = search.ImplOf(point);
    const Params params = search.ParamsOf(point);
    ProgressEvent ev{problem_index, run.problem_count, problem_name, eval_index,
                     options.budget, search.Describe(point), "", "", 0.0, false};
    NvtxRange candidate_range("candidate " + ev.config);
    const TrialStore::Trial trial = run.store.EvaluateOrReuse(
        problem_id, variant, impl, params, context, run.timer, options.evaluate, [&] {
          if (!run.progress) return;
          ev.status = "running";
          run.progress(ev);
        });
    const TrialResult& result = trial.result;
    ev.reused = trial.reused;
    ++(trial.reused ? run.summary.reused : run.summary.measured);
    if (options.metrics && result.status == TrialStatus::kOk &&
        !result.metrics.count(kCounterProbe)) {
      run.uncounted[L].push_back(
          {trial.id, problem_index, problem_name, v, &impl, params, ev.config});
    }
    ++run.summary.evaluations;
    if (result.status != TrialStatus::kOk) ++run.summary.failed;
    ev.status = ToString(result.status);
    ev.median_ms = result.median_ms;
    if (run.progress) run.progress(ev);
    NoteChoice(options.floor, ev.config, result, &choice);
    // A candidate below the floor is no answer to the search (it is stored all the same).
    const bool answer = result.status == TrialStatus::kOk && options.floor.MetBy(result.metrics);
    return Evaluation{point, answer, result.median_ms};
  }, run.clock);
  run.summary.choices.push_back(std::move(choice));
}

}  // namespace

TuneSummary RunTune(TunePlan& plan, Timer& timer, const ProgressFn& progress) {
  const TuneOptions& options = plan.options;
  RunState run{plan, timer, progress, TrialStore(*plan.db, plan.backend->Device(), options.args_json),
               {}, options.clock ? options.clock : SecondsClock(SteadySeconds), 0,
               static_cast<int64_t>(plan.variants.size() * options.seq_lens.size()), {}};
  run.summary.db_path = plan.db_path;
  run.summary.quality_source = plan.calibration ? plan.calibration->Describe() : "gaussian inputs";
  run.run_start = run.clock();
  int64_t problem_index = 0;
  for (int64_t L : options.seq_lens) {
    // Inputs depend on the shape and the seed only, so every variant of a shape sees the
    // same ones (in decode, one step's shape and a token-by-token variant's all steps).
    std::map<int64_t, std::unique_ptr<ProblemContext>> contexts;  // by Lq
    for (size_t v = 0; v < plan.variants.size(); ++v) {
      const Shape shape = TuneShape(options, plan.model, *plan.variants[v], L);
      std::unique_ptr<ProblemContext>& slot = contexts[shape.Lq];
      if (!slot) slot = std::make_unique<ProblemContext>(shape, options.seed ^ static_cast<uint64_t>(L));
      SearchProblem(run, v, L, ++problem_index, *slot);
    }
  }
  if (options.metrics) {
    NvtxRange range("counters");
    CounterPasses(plan, run.uncounted, run.problem_count, progress, &run.summary);
  }
  run.store.Finish();
  {
    NvtxRange range("emit");
    run.summary.outputs = EmitOutputs(*plan.db, options.out_dir);
  }
  return run.summary;
}

}  // namespace attntune
