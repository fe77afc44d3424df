#include "tuner/session.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <stdexcept>
#include <utility>

#include "build_info.h"
#include "core/files.h"
#include "kernels/cuda/cuda_variants.h"
#include "core/check.h"
#include "profiler/nvtx.h"
#include "search/strategies/registry.h"
#include "search/strategy.h"

namespace attntune {

namespace {

// Stored configurations a warm-started search asks first.
constexpr size_t kWarmStartPoints = 3;

// The dimension that chooses the implementation when a variant has several.
constexpr const char kImplDimension[] = "impl";

// Br (query rows per block, the CPU kernels' row tile) values at or above `rows`, the
// most rows one (batch, KV head) of the problem has (Lq times the GQA group), all give the
// same blocks: only the smallest of them is kept, so that a decode step (Lq = 1) does not
// spend its budget on equivalent tiles. Every other value, and every other tunable, is
// kept as declared.
std::vector<std::string> DistinctRowTiles(const std::vector<std::string>& grid, int64_t rows) {
  std::vector<std::string> out;
  int64_t smallest_above = -1;
  for (const std::string& value : grid) {
    const int64_t br = std::stoll(value);
    if (br < rows) {
      out.push_back(value);
    } else if (smallest_above < 0 || br < smallest_above) {
      smallest_above = br;
    }
  }
  if (smallest_above >= 0) out.push_back(std::to_string(smallest_above));
  return out;
}

// The values a search tries for a parameter: its declared grid, or its default when the
// declaration has none.
std::vector<std::string> DeclaredValues(const ParamDecl& decl) {
  return decl.grid.empty() ? std::vector<std::string>{decl.default_value} : decl.grid;
}

// Warm start matches stored configurations against the points of spaces up to this size.
constexpr int64_t kWarmStartSpaceLimit = int64_t{1} << 16;

// The lengths differ (Lk) and the rows follow them the same way: every row in both
// (Lq = Lk, prefill or a token-by-token decode) or the same number of rows (a decode step).
bool SameButLength(const ProblemRecord& a, const ProblemRecord& b) {
  const Shape& x = a.shape;
  const Shape& y = b.shape;
  const bool same_rows = (x.Lq == x.Lk && y.Lq == y.Lk) || x.Lq == y.Lq;
  return a.dtype == b.dtype && a.phase == b.phase && x.B == y.B && x.Hq == y.Hq &&
         x.Hkv == y.Hkv && x.d == y.d && x.causal == y.causal && same_rows && x.Lk != y.Lk;
}

// The problem of `variant` on `model` at length L in the options' phase (causal): every
// query row in prefill and for a token-by-token variant, else one decode step (Lq = 1).
Shape TuneShape(const TuneOptions& options, const ModelGeometry& model, const Variant& variant,
                int64_t L) {
  Shape shape;
  shape.B = options.batch;
  shape.Hq = model.q_heads;
  shape.Hkv = model.kv_heads;
  shape.Lk = L;
  shape.Lq = options.phase == "decode" && !variant.token_by_token ? 1 : L;
  shape.d = model.head_dim;
  ValidateShape(shape, "--model");
  return shape;
}

// "" when some point of the grid of `variant`'s own parameters passes its constraint on
// `shape`, else the first point's reason: a variant that cannot run the shape at all.
std::string RejectsShape(const Variant& variant, const Shape& shape) {
  if (!variant.check) return "";
  Space grid;
  for (const ParamDecl& decl : variant.params) grid.AddDimension(decl.name, DeclaredValues(decl));
  std::string first;
  for (int64_t i = 0; i < grid.Size(); ++i) {
    const std::string reason = variant.check(shape, grid.Values(grid.FromIndex(i)));
    if (reason.empty()) return "";
    if (first.empty()) first = reason;
  }
  return first;
}

}  // namespace

SearchSpace BuildSearchSpace(const Variant& variant,
                             const std::vector<const Implementation*>& impls,
                             const Shape& shape) {
  ATTNTUNE_CHECK(!impls.empty());
  SearchSpace out;
  out.impls = impls;
  auto grid = [&](const ParamDecl& decl) {
    std::vector<std::string> values = DeclaredValues(decl);
    if (decl.name == "Br" && decl.kind == ParamKind::kInt)
      values = DistinctRowTiles(values, shape.Lq * shape.Group());
    return values;
  };
  if (impls.size() > 1) {
    std::vector<std::string> ids;
    for (const Implementation* impl : impls) ids.push_back(impl->id);
    out.space.AddDimension(kImplDimension, ids);
  }
  for (const ParamDecl& decl : variant.params) out.space.AddDimension(decl.name, grid(decl));
  // The tunables by name, in order of first appearance; each dimension holds the union of
  // the implementations' values, and each implementation its own grid.
  std::vector<std::string> names;
  std::map<std::string, std::vector<std::string>> values;
  std::map<std::string, std::map<std::string, std::set<std::string>>> own;  // impl -> name -> grid
  for (const Implementation* impl : impls) {
    for (const ParamDecl& decl : impl->tunables) {
      if (!values.count(decl.name)) names.push_back(decl.name);
      std::vector<std::string>& union_values = values[decl.name];
      for (const std::string& v : grid(decl)) {
        own[impl->id][decl.name].insert(v);
        if (std::find(union_values.begin(), union_values.end(), v) == union_values.end())
          union_values.push_back(v);
      }
    }
  }
  for (const std::string& name : names) {
    out.tunables.push_back(name);
    out.space.AddDimension(name, values[name]);
  }
  if (impls.size() > 1) {
    std::map<std::string, std::string> first;  // a tunable an implementation lacks holds it
    for (const std::string& name : names) first[name] = values[name].front();
    out.space.AddConstraint([own, first](const std::map<std::string, std::string>& v) {
      const std::string& id = v.at(kImplDimension);
      const auto& grids = own.count(id) ? own.at(id) : std::map<std::string, std::set<std::string>>();
      for (const auto& [name, first_value] : first) {
        const std::string& value = v.at(name);
        const auto it = grids.find(name);
        if (it == grids.end()) {
          if (value != first_value) return name + " is not a tunable of " + id;
        } else if (!it->second.count(value)) {
          return name + "=" + value + " is not in " + id + "'s grid";
        }
      }
      return std::string();
    });
  }
  return out;
}

const Implementation& SearchSpace::ImplOf(const Point& p) const {
  if (impls.size() == 1) return *impls.front();
  const std::string id = space.Values(p).at(kImplDimension);
  for (const Implementation* impl : impls) {
    if (impl->id == id) return *impl;
  }
  ATTNTUNE_CHECK_MSG(false, "no implementation " + id);
  return *impls.front();
}

Params SearchSpace::ParamsOf(const Point& p) const {
  const Implementation& impl = ImplOf(p);
  Params params = space.Values(p);
  params.erase(kImplDimension);
  for (const std::string& name : tunables) {
    const bool mine = std::any_of(impl.tunables.begin(), impl.tunables.end(),
                                  [&](const ParamDecl& d) { return d.name == name; });
    if (!mine) params.erase(name);
  }
  return params;
}

std::string SearchSpace::Describe(const Point& p) const {
  const std::string params = ParamsToString(ParamsOf(p));
  return impls.size() == 1 ? params : ImplOf(p).id + " " + params;
}

std::vector<Point> WarmStartPoints(const Database& db, int64_t device_id, const Variant& variant,
                                   const SearchSpace& search, const ProblemRecord& problem,
                                   size_t count) {
  const Space& space = search.space;
  if (count == 0 || space.Size() > kWarmStartSpaceLimit) return {};
  TrialFilter filter;
  filter.device_id = device_id;
  filter.variant = variant.id;
  filter.ok_only = true;
  std::vector<TrialRow> rows;
  for (TrialRow& row : db.Trials(filter)) {
    const bool ours = std::any_of(search.impls.begin(), search.impls.end(), [&](const Implementation* impl) {
      return impl->id == row.config.implementation;
    });
    if (row.result.status == TrialStatus::kOk && ours &&
        SameButLength(row.problem, problem)) {
      rows.push_back(std::move(row));
    }
  }
  if (rows.empty()) return {};
  // The nearest length by ratio; the shorter one on a tie.
  const double here = std::log(static_cast<double>(problem.shape.Lk));
  auto distance = [&](int64_t L) { return std::abs(std::log(static_cast<double>(L)) - here); };
  int64_t nearest = rows.front().problem.shape.Lk;
  for (const TrialRow& row : rows) {
    const int64_t L = row.problem.shape.Lk;
    const double d = distance(L), best = distance(nearest);
    if (d < best - 1e-12 || (std::abs(d - best) <= 1e-12 && L < nearest)) nearest = L;
  }
  // Each configuration's (implementation and params) best time there, fastest first
  // (ties: the older trial).
  std::vector<std::pair<double, std::string>> configs;
  std::map<std::string, size_t> seen;
  for (const TrialRow& row : rows) {
    if (row.problem.shape.Lk != nearest) continue;
    const std::string key = row.config.implementation + "|" + row.config.params_json + "|" +
                            row.config.tunables_json;
    auto it = seen.find(key);
    if (it == seen.end()) {
      seen.emplace(key, configs.size());
      configs.emplace_back(row.result.median_ms, key);
    } else {
      configs[it->second].first = std::min(configs[it->second].first, row.result.median_ms);
    }
  }
  std::stable_sort(configs.begin(), configs.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::map<std::string, Point> points;  // "impl|canonical params" -> point of this space
  for (int64_t i = 0; i < space.Size(); ++i) {
    Point p = space.FromIndex(i);
    if (!space.Violation(p).empty()) continue;
    const Implementation& impl = search.ImplOf(p);
    const Params params = search.ParamsOf(p);
    points.emplace(impl.id + "|" + CanonicalVariantParamsJson(variant, params) + "|" +
                       CanonicalTunablesJson(impl, params),
                   std::move(p));
  }
  std::vector<Point> out;
  for (const auto& [ms, key] : configs) {
    if (out.size() >= count) break;
    auto it = points.find(key);
    if (it != points.end()) out.push_back(it->second);
  }
  return out;
}

TunePlan PlanTune(const TuneOptions& options) {
  TunePlan plan;
  plan.options = options;
  plan.model = LoadModel(options.model, "--model");
  for (const auto& id : options.variants) plan.variants.push_back(&FindVariant(id, "--variants"));
  if (plan.variants.empty()) throw UserError("--variants: no variant given");
  if (options.phase != "prefill" && options.phase != "decode")
    throw UserError("--phase: '" + options.phase + "' is not prefill or decode");
  const bool decode = options.phase == "decode";
  if (options.device != "cpu") {
    for (const Variant* variant : plan.variants) {
      std::optional<Implementation> impl =
          decode ? CudaDecodeImplementation(*variant, options.dtype, plan.model.head_dim)
                 : CudaImplementation(*variant, options.dtype, plan.model.head_dim);
      if (!impl && decode) {
        throw UserError("--variants: " + variant->id + " has no CUDA decode kernel for " +
                        options.dtype + ", d=" + std::to_string(plan.model.head_dim) +
                        " (CUDA decode: dense, swa, dma_decode; d = 64, 128)");
      }
      if (!impl) {
        throw UserError("--variants: " + variant->id + " has no CUDA kernel for " + options.dtype +
                        ", d=" + std::to_string(plan.model.head_dim) +
                        " (CUDA: dense, swa, hybrid, ks, dma, lsh, hax; d = 64, 128)");
      }
      plan.gpu_impls.push_back(std::move(*impl));
    }
  }
  if (options.seq_lens.empty()) throw UserError("--seq-lens: no sequence length given");
  for (int64_t L : options.seq_lens) {  // before anything is stored
    for (const Variant* variant : plan.variants) {
      const Shape shape = TuneShape(options, plan.model, *variant, L);
      CheckProblemFitsHost(shape, true, "--seq-lens");
      const std::string reason = RejectsShape(*variant, shape);
      if (!reason.empty()) {
        throw UserError("--variants: " + variant->id + " cannot run the " + options.phase +
                        " problem " + shape.ToString() + ": " + reason);
      }
    }
  }
  if (!std::isfinite(options.time_budget_s) || options.time_budget_s < 0) {
    throw UserError("--time-budget: must be a positive duration");
  }
  if (options.budget < 0 || (options.budget == 0 && options.time_budget_s <= 0)) {
    throw UserError("--budget: must be a positive integer");
  }
  {
    Space probe;  // validates the strategy name before anything is stored
    probe.AddDimension("x", {"0"});
    (void)MakeStrategy(options.strategy, probe, options.seed, "--strategy");
  }
  CreateOutputFolder(options.out_dir);
  plan.db_path = options.db_path.empty()
                     ? (std::filesystem::path(options.out_dir) / "attntune.db").string()
                     : options.db_path;
  plan.db = Database::Open(plan.db_path);
  return plan;
}

namespace {

// A metric every counter reading holds: a trial that has it was counted before.
constexpr const char kCounterProbe[] = "hw_passes";

struct UncountedTrial {
  int64_t trial_id;
  int64_t problem_index;
  std::string problem;  // "dense L=1024"
  size_t variant;
  const Implementation* impl;  // the variant's (or plan.gpu_impls') own, outliving the passes
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
        metrics = options.counters(launch);
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

TuneSummary RunTune(TunePlan& plan, const DeviceInfo& device, Timer& timer,
                    const ProgressFn& progress) {
  const TuneOptions& options = plan.options;
  const ModelGeometry& model = plan.model;
  const std::vector<const Variant*>& variants = plan.variants;
  Database* db = plan.db.get();
  TuneSummary summary;
  summary.db_path = plan.db_path;
  const int64_t device_id = db->PutDevice({0, device.kind, device.name, device.fingerprint_json});
  const int64_t build_id = db->PutBuild({0, ATTNTUNE_VERSION, ATTNTUNE_KERNEL_HASH});
  const int64_t run_id = db->BeginRun(options.args_json, device_id, UtcNow());
  // TuneOptions still carries dtype and phase as text, checked by cli and PlanTune.
  const std::optional<Dtype> dtype = DtypeFromString(options.dtype);
  const std::optional<Phase> phase = PhaseFromString(options.phase);
  ATTNTUNE_CHECK_MSG(dtype && phase, "dtype '" + options.dtype + "', phase '" + options.phase + "'");

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
      const int64_t problem_id = db->PutProblem({0, shape, *dtype, *phase});
      std::unique_ptr<ProblemContext>& slot = contexts[shape.Lq];
      const uint64_t seed = options.seed ^ static_cast<uint64_t>(L);
      if (!slot) slot = std::make_unique<ProblemContext>(shape, seed);
      ProblemContext& context = *slot;
      ++problem_index;
      const std::string problem_name =
          variant->id + (options.phase == "decode" ? " decode" : "") + " L=" + std::to_string(L);
      NvtxRange problem_range("tune " + problem_name);
      // The implementation is a search dimension (DESIGN.md s2): on the CPU every
      // implementation of the variant (its specialised kernel and the generic
      // executor), on a GPU its CUDA kernel.
      std::vector<const Implementation*> impls;
      if (plan.gpu_impls.empty()) {
        for (const Implementation& impl : variant->implementations) {
          if (options.generic || impl.id != kGenericImplementation || impls.empty()) impls.push_back(&impl);
        }
      } else {
        impls.push_back(&plan.gpu_impls[v]);
      }
      const SearchSpace search = BuildSearchSpace(*variant, impls, shape);
      auto strategy = MakeStrategy(options.strategy, search.space, options.seed, "--strategy");
      if (options.warm_start) {
        WarmStart(*strategy, WarmStartPoints(*db, device_id, *variant, search,
                                             {problem_id, shape, *dtype, *phase},
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
        const int64_t config_id = db->PutConfig({0, variant->id, impl.id,
                                                 CanonicalVariantParamsJson(*variant, params),
                                                 CanonicalTunablesJson(impl, params)});
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
        if (options.counters && result.status == TrialStatus::kOk &&
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
  if (options.counters) {
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
