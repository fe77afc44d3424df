#include "tuner/allocation/allocate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <set>

#include "core/error.h"
#include "core/shape.h"
#include "profiler/device.h"
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

// The most attended pairs allocate sums (all layers' query heads at the context): 2^62,
// so that no sum of them overflows int64.
constexpr double kMaxPairs = 4611686018427387904.0;

// Host memory the measured layers hold at once: the prefill problem's fp32 q, k, v and
// output, its fp64 references (dense's, with its rows' log-sum-exp, and one per layer
// pattern measured: each count of SWA heads in a layer, kept while the run lasts), and
// the decode step's own inputs and references.
double MeasuredHostBytes(const ModelGeometry& m, int64_t context, Granularity g,
                         int64_t* references) {
  const Shape prefill{1, m.q_heads, m.kv_heads, context, context, m.head_dim, true};
  Shape decode = prefill;
  decode.Lq = 1;
  const int64_t patterns = g == Granularity::kLayer ? 2 : m.kv_heads + 1;  // 0..Hkv SWA heads
  *references = 1 + patterns;
  const double q = static_cast<double>(prefill.Hq) * context * m.head_dim;
  const double decode_q = static_cast<double>(decode.Hq) * m.head_dim;
  return ProblemHostBytes(prefill, false) + 8.0 * q * static_cast<double>(*references) +
         8.0 * static_cast<double>(prefill.Hq) * context + ProblemHostBytes(decode, false) +
         8.0 * decode_q * static_cast<double>(*references);
}

// --context: at most 2^24 tokens, pair sums below 2^62, and (measuring) the layers'
// inputs and references within this machine's memory.
void CheckContext(const AllocateOptions& o, const ModelGeometry& m) {
  if (o.context <= 0) throw UserError("--context: must be a positive integer");
  CheckSequenceLength(o.context, "--context");
  const double L = static_cast<double>(o.context);
  const double pairs = static_cast<double>(m.layers) * m.q_heads * (L * (L + 1) / 2);
  if (pairs > kMaxPairs) {
    char text[96];
    std::snprintf(text, sizeof text, "%.3g attended pairs, more than attntune counts (2^62)",
                  pairs);
    throw UserError("--context: " + std::to_string(o.context) + " tokens over " + m.name +
                    "'s " + std::to_string(m.layers) + " layers of " +
                    std::to_string(m.q_heads) + " query heads make " + text);
  }
  if (!o.measure) return;  // each measured layer is checked against its fp64 references
  int64_t references = 0;
  const double need = MeasuredHostBytes(m, o.context, o.granularity, &references);
  const double have = HostMemoryBytes();
  if (have <= 0.0 || need <= have) return;
  const Shape prefill{1, m.q_heads, m.kv_heads, o.context, o.context, m.head_dim, true};
  char text[224];
  std::snprintf(text, sizeof text,
                " needs %.1f GiB for its inputs and outputs and %lld fp64 references (dense and "
                "each layer pattern), more than this machine's %.1f GiB of memory",
                need / 1073741824.0, static_cast<long long>(references), have / 1073741824.0);
  throw UserError("--context: " + prefill.ToString() + text);
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
  // Read only by --strategy import: given to another, it was ignored without a word.
  if (!o.import_path.empty() && o.strategy != "import")
    throw UserError("--import: read by --strategy import only (this run's is " + o.strategy + ")");
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
  CheckContext(o, m);
  CheckSequenceLength(o.calib_len, "--calib-len");
  if (o.calib.empty()) {  // one generated head at a time, its statistics against fp64 attention
    Shape head;
    head.Hq = m.q_heads / m.kv_heads;
    head.Lq = head.Lk = o.calib_len;
    head.d = std::min<int64_t>(m.head_dim, 64);  // as the generator's (RunAllocate)
    CheckProblemFitsHost(head, true, "--calib-len");
  }
  if (o.sink > o.context)
    throw UserError("--sink: " + std::to_string(o.sink) + " is more than --context " +
                    std::to_string(o.context));
  if (o.tune_budget < 0) throw UserError("--tune-budget: must be a non-negative integer");
  const int64_t window = AllocationWindow(o, m);
  if (window < 1)  // a window of 0 would read as full attention in the outputs
    throw UserError("--context: " + std::to_string(o.context) +
                    " leaves a window of 0 (a quarter of the context); give --window");
  if (window >= o.context)
    throw UserError("--window: " + std::to_string(window) + " must be below --context " +
                    std::to_string(o.context) +
                    " (a window that covers the context is full attention)");
  if (o.calib.empty() && o.floor.Empty())
    CheckCalibCoverage(CalibWindow(window, o.context, o.calib_len), o.sink, o.calib_len,
                       "--calib-len");
}

namespace {

using Allocator = std::function<Allocation(double rho)>;

// Statistics of the calibration inputs: generated (the default) or captured (--calib; under
// --min-quality ChooseWindow takes them at the window it chooses).
void Calibrate(const AllocateOptions& o, AllocateResult* r) {
  const ModelGeometry& m = r->model;
  if (!o.calib.empty()) {
    if (!o.floor.Empty()) return;  // ChooseWindow takes them at each window it tries
    r->stats = SafetensorsStats(o.calib, m, r->window, o.context, o.sink, "--calib");
    r->calib_window = r->stats.window;
    return;
  }
  GeneratorSpec spec;
  spec.layers = m.layers;
  spec.kv_heads = m.kv_heads;
  spec.group = m.q_heads / m.kv_heads;
  spec.head_dim = std::min<int64_t>(m.head_dim, 64);  // the logit structure, not d, matters
  spec.length = o.calib_len;
  spec.seed = o.seed;
  r->calib_window = CalibWindow(r->window, o.context, o.calib_len);
  r->stats = GeneratorStats(spec, r->calib_window, o.sink);
}

// --strategy import's scores, checked against the model's layers and KV heads (empty for
// the other strategies).
HeadScores ImportScores(const AllocateOptions& o, const ModelGeometry& m) {
  HeadScores scores;
  if (o.strategy != "import") return scores;
  if (o.import_path.empty()) throw UserError("--strategy import needs --import FILE");
  scores = ReadHeadScores(o.import_path, "--import");
  if (scores.layers != m.layers || scores.kv_heads != m.kv_heads)
    throw UserError("--import: " + o.import_path + " has " + std::to_string(scores.layers) +
                    " layers x " + std::to_string(scores.kv_heads) + " KV heads, but " + m.name +
                    " has " + std::to_string(m.layers) + " x " + std::to_string(m.kv_heads));
  return scores;
}

// The cost meter's options: the run's tiles and policy at its context, window and sink.
CostOptions CostOptionsOf(const AllocateOptions& o, int64_t window) {
  CostOptions co = o.cost;
  co.context = o.context;
  co.window = window;
  co.sink = o.sink;
  co.measure = o.measure;
  return co;
}

// The sweep over rho (SweepRhos), each point's loss and cost, and the Pareto front of
// (loss, prefill time or pairs, KV bytes).
void SweepFront(const AllocateOptions& o, const Allocator& allocate, CostMeter& meter,
                AllocateResult* r) {
  for (double rho : SweepRhos(o.granularity, r->model)) {
    SweepPoint p;
    p.rho = rho;
    p.allocation = allocate(rho);
    p.quality_loss = QualityLoss(p.allocation, r->stats);
    p.cost = meter.Cost(p.allocation);
    r->sweep.push_back(p);
  }
  std::vector<Scores> points;
  for (const auto& p : r->sweep)
    points.push_back({p.quality_loss,
                      o.measure ? p.cost.prefill_ms : static_cast<double>(p.cost.prefill_pairs),
                      static_cast<double>(p.cost.kv_bytes)});
  for (size_t i : ParetoFront(points, {Sense::kMinimize, Sense::kMinimize, Sense::kMinimize}))
    r->sweep[i].on_front = true;
}

// --kv-bytes: the smallest reachable rho whose KV cache fits. KV bytes depend only on the
// SWA count and do not grow with it, so the first fitting count k of n is found by
// bisection (the same k as trying 0, 1, 2, ... in turn, in log n allocations).
void ChooseByKvBytes(const AllocateOptions& o, const Allocator& allocate, const CostOptions& co,
                     AllocateResult* r) {
  const ModelGeometry& m = r->model;
  const int64_t n = GroupSize(o.granularity, m);
  auto rho_of = [n](int64_t k) { return static_cast<double>(k) / static_cast<double>(n); };
  if (KvCacheBytes(m, allocate(1.0), co) > o.kv_bytes)
    throw UserError("--kv-bytes: " + std::to_string(o.kv_bytes) +
                    " is below the smallest KV cache, " +
                    std::to_string(KvCacheBytes(m, allocate(1.0), co)) + " bytes at rho=1");
  int64_t lo = 0, hi = n;  // the answer is in [lo, hi]; hi fits
  while (lo < hi) {
    const int64_t mid = lo + (hi - lo) / 2;
    if (KvCacheBytes(m, allocate(rho_of(mid)), co) <= o.kv_bytes) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  r->rho_target = rho_of(lo);
  r->chosen = allocate(r->rho_target);
  r->budget = "kv_bytes=" + std::to_string(o.kv_bytes);
}

// --latency-ms: the swept allocation of least loss whose prefill time fits.
void ChooseByLatency(const AllocateOptions& o, AllocateResult* r) {
  const SweepPoint* best = nullptr;
  for (const auto& p : r->sweep)
    if (p.cost.prefill_ms <= o.latency_ms &&
        (best == nullptr || p.quality_loss < best->quality_loss))
      best = &p;
  if (best == nullptr) {
    const SweepPoint* fastest = &r->sweep.front();
    for (const auto& p : r->sweep)
      if (p.cost.prefill_ms < fastest->cost.prefill_ms) fastest = &p;
    throw UserError("--latency-ms: no allocation reaches " + Num(o.latency_ms) +
                    " ms (fastest: " + Num(fastest->cost.prefill_ms) +
                    " ms at rho=" + Num(fastest->rho) + ")");
  }
  r->rho_target = best->rho;
  r->chosen = best->allocation;
  r->budget = "latency_ms=" + Num(o.latency_ms);
}

// The allocation the budget picks: --rho, --kv-bytes, --latency-ms, else the import
// file's own binary allocation.
void Choose(const AllocateOptions& o, const HeadScores& scores, const Allocator& allocate,
            const CostOptions& co, AllocateResult* r) {
  if (o.rho >= 0) {
    r->rho_target = o.rho;
    r->budget = "rho=" + Num(o.rho);
    r->chosen = allocate(o.rho);
  } else if (o.kv_bytes >= 0) {
    ChooseByKvBytes(o, allocate, co, r);
  } else if (o.latency_ms >= 0) {
    ChooseByLatency(o, r);
  } else {
    r->chosen = AllocationFromScores(scores, o.granularity, -1.0);
    r->rho_target = r->chosen.SwaFraction();
    r->budget = "import";
  }
}

}  // namespace

AllocateResult RunAllocate(const AllocateOptions& o, Database& db, const DeviceInfo& device,
                           Timer& timer) {
  ValidateAllocate(o);
  AllocateResult r;
  r.model = LoadModel(o.model, "--model");
  r.window = AllocationWindow(o, r.model);
  Calibrate(o, &r);
  const HeadScores scores = ImportScores(o, r.model);
  if (!o.floor.Empty()) ChooseWindow(o, r.model, &scores, &r);
  const Allocator allocate = [&](double rho) {
    return AllocateWith(o.strategy, o.granularity, r.stats, &scores, rho, o.seed);
  };
  const CostOptions co = CostOptionsOf(o, r.window);
  std::optional<MeasureRun> run;
  if (o.measure) {
    EvaluateOptions evaluate;
    evaluate.policy = o.cost.policy;
    run = BeginMeasureRun(db, device, timer, evaluate, o.args_json);
  }
  CostMeter meter(r.model, co, run ? &*run : nullptr);
  r.cost_method = meter.Method();
  SweepFront(o, allocate, meter, &r);
  Choose(o, scores, allocate, co, &r);
  r.quality_loss = QualityLoss(r.chosen, r.stats);
  r.cost = meter.Cost(r.chosen);
  r.tuned = meter.TuneTiles(r.chosen, o.tune_budget, o.seed);
  r.trials = meter.Counts();
  if (run) FinishMeasureRun(*run);
  return r;
}

}  // namespace attntune
