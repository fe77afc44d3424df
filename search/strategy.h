// Search strategies: ask for the next point, tell what it cost. Seeded and
// deterministic; a failed evaluation costs budget like any other.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "search/space.h"

namespace attntune {

struct Evaluation {
  Point point;
  bool ok = false;       // false: invalid, wrong result, failed
  double objective = 0;  // lower is better; meaningful when ok
};

class Strategy {
 public:
  virtual ~Strategy() = default;
  virtual std::string Name() const = 0;
  /// The next point to evaluate, or nullopt when the strategy has nothing left.
  /// Never returns a point that violates the space's constraints, nor one already asked.
  virtual std::optional<Point> Next() = 0;
  /// The result of a point returned by Next().
  virtual void Tell(const Evaluation& evaluation) = 0;
};

/// Known names: "exhaustive", "random". Unknown -> UserError naming `what`.
std::unique_ptr<Strategy> MakeStrategy(const std::string& name, const Space& space,
                                       uint64_t seed, const std::string& what);
std::vector<std::string> StrategyNames();
/// "exhaustive" or "random" over a listed feasible set (indices of `space`; a replay's
/// recorded configurations), without walking or sampling the whole product (a sparse
/// recording of a large product: random gave up after 65536 misses and found nothing,
/// exhaustive walked 10^9 points); nullptr for another name. On a space of at most 65536
/// points listed whole, the same points in the same order as MakeStrategy's.
std::unique_ptr<Strategy> MakeListedStrategy(const std::string& name, const Space& space,
                                             std::vector<int64_t> feasible, uint64_t seed);

/// How long a search may go on: by evaluations, by wall time, or both (whichever ends
/// first).
struct SearchBudget {
  int64_t max_evaluations = -1;  // < 0: no limit on their number
  /// > 0: no evaluation starts once this many seconds have passed since the search
  /// began (the one in flight finishes). The first evaluation always starts, so a
  /// search given any time at all has a result. <= 0: no time limit.
  double max_seconds = 0;
};

/// Seconds on a monotonic clock; RunSearch's default is SteadySeconds.
using SecondsClock = std::function<double()>;
double SteadySeconds();  // std::chrono::steady_clock, in seconds

/// Runs `strategy` until the budget is spent or the strategy has nothing left; returns
/// the evaluations of `evaluate` in order. The time includes the strategy's own.
std::vector<Evaluation> RunSearch(Strategy& strategy, const SearchBudget& budget,
                                  const std::function<Evaluation(const Point&)>& evaluate,
                                  const SecondsClock& clock = {});

/// At most `budget` evaluations, no time limit.
std::vector<Evaluation> RunSearch(Strategy& strategy, int64_t budget,
                                  const std::function<Evaluation(const Point&)>& evaluate);

}  // namespace attntune
