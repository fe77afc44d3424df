#include "tuner/allocation/allocate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <optional>
#include <functional>
#include <set>

#include "core/error.h"
#include "search/pareto.h"
#include "tuner/evaluate.h"
#include "tuner/allocation/io.h"

namespace attntune {

namespace {

// Largest group size of a granularity: its rho grid is k / n.
int64_t GroupSize(Granularity g, const ModelGeometry& m) {
  switch (g) {
    case Granularity::kLayer:
      return m.layers;
    case Granularity::kHead:
      return m.kv_heads;
    case Granularity::kHeadGlobal:
      return m.layers * m.kv_heads;
  }
  return 1;
}

// The rho values the front is swept over: every reachable share k / n when n <= 32,
// else k / 16; rho values that round to the same SWA count are kept once.
std::vector<double> SweepRhos(Granularity g, const ModelGeometry& m) {
  const int64_t n = GroupSize(g, m);
  const int64_t steps = std::min<int64_t>(n, 32) == n ? n : 16;
  std::vector<double> rhos;
  std::set<int64_t> seen;
  for (int64_t k = 0; k <= steps; ++k) {
    const double rho = static_cast<double>(k) / static_cast<double>(steps);
    if (seen.insert(TargetSwaCount(g, m.layers, m.kv_heads, rho)).second) rhos.push_back(rho);
  }
  return rhos;
}

// The SWA window: --window, else the model's sliding_window below the context, else a
// quarter of the context.
int64_t AllocationWindow(const AllocateOptions& o, const ModelGeometry& m) {
  if (o.window > 0) return o.window;
  return m.sliding_window > 0 && m.sliding_window < o.context ? m.sliding_window : o.context / 4;
}

std::string Num(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", x);
  return b;
}

// Whether every SWA KV head of `a` keeps `floor` under the statistics `stats` were taken at.
bool KeepsFloor(const Allocation& a, const CalibStats& stats, const QualityFloor& floor) {
  for (size_t u = 0; u < a.swa.size(); ++u) {
    const HeadStats& h = stats.heads[u];
    if (a.swa[u] && !floor.MetBy({{"mass_recall", h.mass_kept}, {"rel_err", h.swa_rel_err}}))
      return false;
  }
  return true;
}

// Under o.floor: the smallest window of WindowGrid whose statistics let the allocation at
// o.rho (or the import's) keep the floor on every SWA KV head; sets r->window, stats,
// calib_window and window_choice. UserError when no window of the grid does.
void ChooseWindow(const AllocateOptions& o, const ModelGeometry& m, const HeadScores* scores,
                  AllocateResult* r) {
  const std::vector<int64_t> grid = WindowGrid(o.context);
  std::string tried;
  for (int64_t w : grid) {
    CalibStats stats = SafetensorsStats(o.calib, m, w, o.context, o.sink, "--calib");
    const Allocation a = o.rho >= 0 ? AllocateWith(o.strategy, o.granularity, stats, scores, o.rho, o.seed)
                                    : AllocationFromScores(*scores, o.granularity, -1.0);
    if (KeepsFloor(a, stats, o.floor)) {
      r->window = w;
      r->calib_window = stats.window;
      r->stats = std::move(stats);
      r->window_choice = "the smallest of " + std::to_string(grid.front()) + ".." +
                         std::to_string(grid.back()) + " (powers of 2) that keeps " +
                         o.floor.ToString() + " on every SWA KV head";
      return;
    }
    tried = std::to_string(w);
  }
  throw UserError("--min-quality: no window up to " + tried + " keeps " + o.floor.ToString() +
                  " on every SWA KV head of the allocation (lower --rho, or the floor)");
}

// The allocation of the options' budget into r->chosen, r->rho_target and r->budget: the
// target rho, the smallest rho whose KV cache fits, the best quality within the latency
// (from r->sweep), or the import's own.
void ChooseAllocation(const AllocateOptions& o, const ModelGeometry& m, const CostOptions& co,
                      const std::function<Allocation(double)>& allocate, const HeadScores& scores,
                      AllocateResult* result) {
  AllocateResult& r = *result;
  if (o.rho >= 0) {
    r.rho_target = o.rho;
    r.budget = "rho=" + Num(o.rho);
    r.chosen = allocate(o.rho);
  } else if (o.kv_bytes >= 0) {
    // KV bytes depend only on the SWA count: the smallest reachable rho that fits.
    const int64_t n = GroupSize(o.granularity, m);
    bool found = false;
    for (int64_t k = 0; k <= n && !found; ++k) {
      const double rho = static_cast<double>(k) / static_cast<double>(n);
      const Allocation a = allocate(rho);
      if (KvCacheBytes(m, a, co) <= o.kv_bytes) r.rho_target = rho, r.chosen = a, found = true;
    }
    if (!found)
      throw UserError("--kv-bytes: " + std::to_string(o.kv_bytes) +
                      " is below the smallest KV cache, " +
                      std::to_string(KvCacheBytes(m, allocate(1.0), co)) + " bytes at rho=1");
    r.budget = "kv_bytes=" + std::to_string(o.kv_bytes);
  } else if (o.latency_ms >= 0) {
    const SweepPoint* best = nullptr;
    for (const auto& p : r.sweep)
      if (p.cost.prefill_ms <= o.latency_ms &&
          (best == nullptr || p.quality_loss < best->quality_loss))
        best = &p;
    if (best == nullptr) {
      const SweepPoint* fastest = &r.sweep.front();
      for (const auto& p : r.sweep)
        if (p.cost.prefill_ms < fastest->cost.prefill_ms) fastest = &p;
      throw UserError("--latency-ms: no allocation reaches " + Num(o.latency_ms) +
                      " ms (fastest: " + Num(fastest->cost.prefill_ms) +
                      " ms at rho=" + Num(fastest->rho) + ")");
    }
    r.rho_target = best->rho;
    r.chosen = best->allocation;
    r.budget = "latency_ms=" + Num(o.latency_ms);
  } else {  // import with the file's own binary allocation
    r.chosen = AllocationFromScores(scores, o.granularity, -1.0);
    r.rho_target = r.chosen.SwaFraction();
    r.budget = "import";
  }
}

}  // namespace

std::vector<int64_t> WindowGrid(int64_t context) {
  std::vector<int64_t> grid;
  for (int64_t w = 16; w < context; w *= 2) grid.push_back(w);
  return grid;
}

double QualityLoss(const Allocation& a, const CalibStats& stats) {
  return AllocationLoss(a, stats.Loss()) / static_cast<double>(a.swa.size());
}

Allocation AllocateWith(const std::string& strategy, Granularity g, const CalibStats& stats,
                        const HeadScores* scores, double rho, uint64_t seed) {
  if (strategy == "rule") return AllocateRule(g, stats.layers, stats.kv_heads, rho);
  if (strategy == "greedy")
    return AllocateGreedy(g, stats.layers, stats.kv_heads, rho, stats.Loss());
  if (strategy == "consa") {
    ConsaOptions o;
    o.seed = seed;
    return AllocateConsa(g, stats.layers, stats.kv_heads, rho, stats.Loss(), o);
  }
  if (strategy == "import") {
    if (scores == nullptr) throw UserError("--strategy import needs --import FILE");
    return AllocationFromScores(*scores, g, rho);
  }
  throw UserError("--strategy: '" + strategy +
                  "' is not a strategy (expected rule, greedy, consa or import)");
}

void ValidateAllocate(const AllocateOptions& o) {
  const ModelGeometry m = LoadModel(o.model, "--model");
  if (o.strategy != "rule" && o.strategy != "greedy" && o.strategy != "consa" &&
      o.strategy != "import")
    throw UserError("--strategy: '" + o.strategy +
                    "' is not a strategy (expected rule, greedy, consa or import)");
  const int budgets = (o.rho >= 0) + (o.latency_ms >= 0) + (o.kv_bytes >= 0);
  if (budgets > 1) throw UserError("--rho, --latency-ms and --kv-bytes: give only one");
  if (budgets == 0 && o.strategy != "import")
    throw UserError("--rho: missing (give --rho R, --latency-ms T or --kv-bytes N)");
  if (o.rho >= 0) TargetSwaUnits(o.rho, 1, "--rho");
  if (o.latency_ms >= 0 && !o.measure)
    throw UserError("--latency-ms: needs measured times (drop --no-measure)");
  if (!o.floor.Empty()) {
    if (o.calib.empty())
      throw UserError("--min-quality: needs --calib (the floor is kept on the model's captured "
                      "attention)");
    if (o.latency_ms >= 0 || o.kv_bytes >= 0)
      throw UserError("--min-quality: chooses the window of the allocation at --rho (or the "
                      "import's); with --latency-ms or --kv-bytes give --window instead");
    if (o.window > 0)
      throw UserError("--window: with --min-quality the window is chosen under the floor; "
                      "drop --window");
    if (WindowGrid(o.context).empty())
      throw UserError("--context: " + std::to_string(o.context) + " leaves no window to choose "
                      "(the smallest is 16)");
  }
  if (o.context <= 0) throw UserError("--context: must be a positive integer");
  if (o.tune_budget < 0) throw UserError("--tune-budget: must be a non-negative integer");
  const int64_t window = AllocationWindow(o, m);
  if (window >= o.context)
    throw UserError("--window: " + std::to_string(window) + " must be below --context " +
                    std::to_string(o.context) +
                    " (a window that covers the context is full attention)");
  if (o.measure) {  // each measured layer is checked against its fp64 reference
    const Shape prefill{1, m.q_heads, m.kv_heads, o.context, o.context, m.head_dim, true};
    CheckProblemFitsHost(prefill, true, "--context");
  }
}

AllocateResult RunAllocate(const AllocateOptions& o, Database& db, const DeviceInfo& device,
                           Timer& timer) {
  ValidateAllocate(o);
  AllocateResult r;
  r.model = LoadModel(o.model, "--model");
  const ModelGeometry& m = r.model;
  r.window = AllocationWindow(o, m);

  // Statistics on calibration inputs.
  if (o.calib.empty()) {
    GeneratorSpec spec;
    spec.layers = m.layers;
    spec.kv_heads = m.kv_heads;
    spec.group = m.q_heads / m.kv_heads;
    spec.head_dim = std::min<int64_t>(m.head_dim, 64);  // the logit structure, not d, matters
    spec.length = o.calib_len;
    spec.seed = o.seed;
    Shape head;  // one generated head at a time, its statistics against fp64 attention
    head.Hq = spec.group;
    head.Lq = head.Lk = spec.length;
    head.d = spec.head_dim;
    CheckProblemFitsHost(head, true, "--calib-len");
    r.calib_window = CalibWindow(r.window, o.context, o.calib_len);
    r.stats = GeneratorStats(spec, r.calib_window, o.sink);
  } else if (o.floor.Empty()) {
    r.stats = SafetensorsStats(o.calib, m, r.window, o.context, o.sink, "--calib");
    r.calib_window = r.stats.window;
  }

  HeadScores scores;
  if (o.strategy == "import") {
    if (o.import_path.empty()) throw UserError("--strategy import needs --import FILE");
    scores = ReadHeadScores(o.import_path, "--import");
    if (scores.layers != m.layers || scores.kv_heads != m.kv_heads)
      throw UserError("--import: " + o.import_path + " has " + std::to_string(scores.layers) +
                      " layers x " + std::to_string(scores.kv_heads) + " KV heads, but " + m.name +
                      " has " + std::to_string(m.layers) + " x " + std::to_string(m.kv_heads));
  }
  if (!o.floor.Empty()) ChooseWindow(o, m, &scores, &r);
  auto allocate = [&](double rho) {
    return AllocateWith(o.strategy, o.granularity, r.stats, &scores, rho, o.seed);
  };

  CostOptions co = o.cost;
  co.context = o.context;
  co.window = r.window;
  co.sink = o.sink;
  co.measure = o.measure;
  std::optional<MeasureRun> run;
  if (o.measure) {
    EvaluateOptions evaluate;
    evaluate.policy = o.cost.policy;
    run = BeginMeasureRun(db, device, timer, evaluate, o.args_json);
  }
  CostMeter meter(m, co, run ? &*run : nullptr);
  r.cost_method = meter.Method();

  for (double rho : SweepRhos(o.granularity, m)) {
    SweepPoint p;
    p.rho = rho;
    p.allocation = allocate(rho);
    p.quality_loss = QualityLoss(p.allocation, r.stats);
    p.cost = meter.Cost(p.allocation);
    r.sweep.push_back(p);
  }
  std::vector<Scores> points;
  for (const auto& p : r.sweep)
    points.push_back({p.quality_loss,
                      o.measure ? p.cost.prefill_ms : static_cast<double>(p.cost.prefill_pairs),
                      static_cast<double>(p.cost.kv_bytes)});
  for (size_t i : ParetoFront(points, {Sense::kMinimize, Sense::kMinimize, Sense::kMinimize}))
    r.sweep[i].on_front = true;

  ChooseAllocation(o, m, co, allocate, scores, &r);
  r.quality_loss = QualityLoss(r.chosen, r.stats);
  r.cost = meter.Cost(r.chosen);
  r.tuned = meter.TuneTiles(r.chosen, o.tune_budget, o.seed);
  r.trials = meter.Counts();
  if (run) FinishMeasureRun(*run);
  return r;
}

}  // namespace attntune
