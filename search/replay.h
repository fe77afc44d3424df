// Replay of recorded tuning data: a Kernel Tuner cache file (or its T4 form) becomes
// a space whose evaluations are answered from the file, for judging strategies
// offline with the scores of Schoonhoven et al. (fraction of optimum at a budget)
// and Willemsen et al. (the methodology's performance score over a time budget).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "search/space.h"
#include "search/strategy.h"

namespace attntune {

namespace strategies {
class SpaceIndex;
}

/// One recorded configuration.
struct ReplayEntry {
  bool ok = false;    // false: CompilationFailedConfig, RuntimeFailedConfig, ...
  double value = 0;   // the objective (ms), when ok
  double cost = 0;    // what evaluating it took (ms): compile + benchmark + framework + ...
};

/// A recorded search space. The space is the product of the tuning parameters with the
/// constraint "recorded in the file".
struct ReplayCache {
  std::string path;
  std::string kernel;
  std::string device;
  std::string objective;
  Space space;
  std::unordered_map<int64_t, ReplayEntry> entries;  // by linear index in `space`
  std::shared_ptr<const strategies::SpaceIndex> index;

  double Optimum() const;
  /// The entry of a point (CHECKs that it is recorded).
  const ReplayEntry& At(const Point& p) const;
};

/// The most evaluations a replay runs and keeps: the largest budget times the repeats
/// (the best-so-far curve holds one value per evaluation and repeat).
constexpr int64_t kMaxReplayEvaluations = 10000000;
/// The most threads a replay starts.
constexpr int kMaxReplayThreads = 1024;

/// The most JSON text (after gunzip) attntune reads from one cache or T4 file.
constexpr uint64_t kMaxCacheBytes = uint64_t{1} << 30;

/// Reads a .json or .json.gz cache file (Kernel Tuner's format or T4), at most
/// `max_bytes` of JSON. A file that is not one throws UserError "<path>: not a Kernel
/// Tuner cache file (<reason>)".
ReplayCache ReadReplayCache(const std::string& path, uint64_t max_bytes = kMaxCacheBytes);
/// The same from text already read (`path` names it in errors).
ReplayCache ParseReplayCache(const std::string& text, const std::string& path);

/// Mean and standard deviation (over repeats, n - 1 in the denominator).
struct MeanStd {
  double mean = 0;
  double std = 0;
};

/// Settings of the methodology score (Willemsen et al., FGCS 2024): the time budget
/// runs from the time random search needs to reach `start` of the way from the median
/// to the optimum to the time it needs to reach `cutoff` of the way.
struct ScoreSettings {
  double cutoff = 0.95;
  double start = 0.5;
  int resolution = 1000;  // points of P(t) averaged
};

/// The scores' inputs, separated from files so that tests can hand-compute them.
struct ReplayStatistics {
  std::vector<double> values;  // ok objectives, ascending
  int64_t invalid = 0;         // failed entries
  double median_cost = 0;      // median cost over all entries (ms): the budget's unit
  double cost_per_eval = 0;    // random search's expected cost per evaluation (ms)
};
ReplayStatistics Statistics(const ReplayCache& cache);

/// Expected best objective of `m` uniformly random draws without replacement from the
/// entries (failed entries count as draws; all draws failing counts as the worst value).
double ExpectedRandomBest(const ReplayStatistics& s, double m);

/// Evaluations random search needs to reach `percentile` of the way from the median to
/// the optimum: ceil(i / (n + 1 - i)), i the number of values worse than the target.
int64_t FevalsToCutoff(const ReplayStatistics& s, double percentile);

/// One search's trace: the cost (ms) of each evaluation and its best-so-far objective
/// (infinity while nothing ok was found).
struct Trace {
  std::vector<double> cost;
  std::vector<double> best;
  double wall = 0;             // simulated wall time (ms): each batch takes its slowest cost
  double strategy_seconds = 0;  // measured: the strategy's own Next() and Tell() calls
};

/// The performance score: the mean of P(t) = (f_alg(t) - f_rand(t)) / (f_opt - f_rand(t))
/// over the settings' time budget, f_alg the mean best-so-far of `traces` at time t.
double PerformanceScore(const ReplayStatistics& s, const std::vector<Trace>& traces,
                        const ScoreSettings& settings);

struct ReplayOptions {
  std::string strategy = "auto";
  std::vector<int64_t> budgets = {25, 50, 100, 200, 400};
  int repeats = 100;
  uint64_t seed = 1;
  int threads = 0;  // 0: one per hardware thread
  /// Points asked before any of them is told, as a tune with this many workers asks them
  /// (1: the sequential search). Scores count evaluations and their costs as before.
  int batch = 1;
  ScoreSettings score;
};

struct ReplayResult {
  std::string file;
  std::string device;
  std::string kernel;
  int64_t size = 0;  // recorded configurations
  struct Budget {
    int64_t evals = 0;
    MeanStd fraction;  // fraction_of_optimum = t_opt / t_best_found (0 when none ok)
  };
  std::vector<Budget> budgets;
  double p_score = 0;
  int64_t score_fevals = 0;  // the score's budget in evaluations of median cost
  // Per evaluation, mean over repeats: the simulated wall time with `batch` workers (each
  // batch takes its slowest cost, ms) and the strategy's own time (measured, ms).
  double wall_ms_per_eval = 0;
  double strategy_ms_per_eval = 0;
  // Per evaluation 1..max budget: mean, 10th and 90th percentile of fraction of optimum
  // over repeats, and random search's expected fraction (for the report).
  std::vector<double> curve_mean, curve_p10, curve_p90, curve_random;
};

/// Replays `options.strategy` on `cache`: `repeats` seeded searches, each long enough
/// for the largest budget and the score's time budget. Deterministic for a seed.
ReplayResult Replay(const ReplayCache& cache, const ReplayOptions& options);

}  // namespace attntune
