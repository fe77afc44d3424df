// The tuning session: model geometry -> problems -> candidates -> validate -> measure
// -> store -> emit.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "db/database.h"
#include "profiler/device.h"
#include "reports/reports.h"
#include "search/space.h"
#include "search/strategy.h"
#include "tuner/emit.h"
#include "tuner/evaluate.h"
#include "tuner/model.h"

namespace attntune {

struct TuneOptions {
  std::string model = "qwen3-1.7b";
  std::vector<std::string> variants = {"dense", "swa"};
  std::vector<int64_t> seq_lens = {512, 1024, 2048};
  // "prefill": the problem of each length L is every query row, Lq = Lk = L. "decode": one
  // query row per head against L keys, Lq = 1, Lk = L (a token_by_token variant such as
  // dma_decode runs all L steps, Lq = Lk = L). Stored as the problems' phase.
  std::string phase = "prefill";
  int64_t batch = 1;
  int64_t budget = 6;  // evaluations per (variant, sequence length); 0: no limit (needs a
                       // time budget)
  /// > 0: wall-time budget, in seconds, of the run's searches. Each (variant, sequence
  /// length) gets an equal share of the time left when its search starts (what a fast
  /// problem leaves goes to the later ones), and at least one evaluation; the counter
  /// passes and the outputs come after and are not counted. With `budget` > 0 too, each
  /// search stops at whichever limit comes first.
  double time_budget_s = 0;
  SecondsClock clock;  // the time budget's clock; empty: SteadySeconds
  std::string strategy = "auto";
  // Ask first the best stored configurations of the same variant on the same device
  // (fingerprint) at the nearest other sequence length of the same shape otherwise.
  bool warm_start = true;
  /// On the CPU, also search the generic block-sparse executor as an implementation of
  /// every variant (DESIGN.md s2: the implementation is a search dimension); false: each
  /// variant's specialised kernel only, so that a small budget is not spent on the
  /// baseline.
  bool generic = true;
  uint64_t seed = 1;
  std::string out_dir = "attntune_out";
  std::string db_path;  // empty: <out_dir>/attntune.db
  EvaluateOptions evaluate;
  std::string args_json;  // the command line, stored with the run
  std::string device = "cpu";  // or "cuda:N" (the caller made N current)
  std::string dtype = "fp32";  // the problems' dtype: fp32 on the CPU, fp16/bf16 on CUDA
  /// Optional (`tune --metrics` on a GPU): the hardware counters of one candidate. RunTune
  /// calls it in passes of its own after every candidate of the run was timed (counters
  /// never mix with timed runs, DESIGN.md s6), once per ok trial of the run that has no
  /// counters stored yet, with `launch` enqueueing that candidate's work once (already run
  /// once before, so inputs and selection are resident). Returns the metrics to store with
  /// the trial ("hw_*"); throws std::runtime_error when the counters cannot be read.
  std::function<std::map<std::string, double>(const std::function<void()>& launch)> counters;
};

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
};
using ProgressFn = std::function<void(const ProgressEvent&)>;

struct TuneSummary {
  int64_t evaluations = 0;
  int64_t measured = 0;  // evaluated in this run
  int64_t reused = 0;    // answered from the database
  int64_t failed = 0;    // stored with a status other than ok
  int64_t counted = 0;   // ok trials given hardware counters (TuneOptions::counters)
  int64_t counter_failures = 0;
  std::string db_path;
  OutputPaths outputs;
};

/// A validated tuning session: everything a user could have got wrong is checked
/// (model, variants, lengths, budget, strategy, output folder, database) before any
/// work starts.
struct TunePlan {
  TuneOptions options;
  ModelGeometry model;
  std::vector<const Variant*> variants;
  /// On a GPU: the CUDA implementation of each variant (same order; in the decode phase
  /// its CudaDecodeImplementation); empty on the CPU, where each variant's first
  /// implementation runs.
  std::vector<Implementation> gpu_impls;
  std::string db_path;
  std::unique_ptr<Database> db;
};

/// Validates the options (UserError on bad input) and opens the database.
TunePlan PlanTune(const TuneOptions& options);

/// Tunes every (sequence length, variant) of the plan, then emits the outputs.
TuneSummary RunTune(TunePlan& plan, const DeviceInfo& device, Timer& timer,
                    const ProgressFn& progress);

/// The search space of one variant on one problem (DESIGN.md s2: tile sizes and the
/// implementation are search dimensions): the variant's own parameters, the
/// implementation as a dimension "impl" when there is more than one, and the
/// implementations' tunables, one dimension per name holding the union of their grids. A
/// point whose implementation lacks a tunable holds that dimension's first value, and a
/// value outside the implementation's own grid violates the space's constraint, so each
/// configuration is one valid point. Br values at or above the problem's rows per (batch,
/// KV head) give the same blocks: only the smallest of them is kept.
struct SearchSpace {
  Space space;
  std::vector<const Implementation*> impls;  // not owned
  std::vector<std::string> tunables;         // the tunable dimensions' names
  /// The implementation of a valid point, and its complete params (the variant's and
  /// that implementation's tunables; none of another's).
  const Implementation& ImplOf(const Point& p) const;
  Params ParamsOf(const Point& p) const;
  /// "Bc=64,Br=32", or "generic Bc=64,Br=32" when the implementation is a dimension.
  std::string Describe(const Point& p) const;
};
SearchSpace BuildSearchSpace(const Variant& variant,
                             const std::vector<const Implementation*>& impls, const Shape& shape);

/// Warm start of one search: the `count` best distinct ok configurations (implementation
/// and params) of `variant` among `search`'s implementations stored for `device_id` at
/// the sequence length (Lk) nearest to `problem`'s (by ratio; the shorter on a tie) among
/// stored problems of the same phase that differ from `problem` only in the length (Lq =
/// Lk in both, or the same Lq: a decode step's one row), as points of `search.space`,
/// best first. Empty when there is none, or when the space is too large to match
/// configurations against.
std::vector<Point> WarmStartPoints(const Database& db, int64_t device_id, const Variant& variant,
                                   const SearchSpace& search, const ProblemRecord& problem,
                                   size_t count);

}  // namespace attntune
