#include "search/strategy.h"

#include <algorithm>
#include <chrono>
#include <random>
#include <unordered_set>
#include <utility>

#include "core/check.h"
#include "search/strategies/registry.h"

namespace attntune {
namespace {

// Every point in row-major order, skipping the constrained ones.
class Exhaustive : public Strategy {
 public:
  explicit Exhaustive(const Space& space) : space_(space), size_(space.Size()) {}
  // Over a listed feasible set (ascending indices of `space`).
  Exhaustive(const Space& space, std::vector<int64_t> listed)
      : space_(space), size_(space.Size()), listed_(std::move(listed)), given_(true) {}
  std::string Name() const override { return "exhaustive"; }

  std::optional<Point> Next() override {
    if (given_) {
      if (next_ >= static_cast<int64_t>(listed_.size())) return std::nullopt;
      return space_.FromIndex(listed_[static_cast<size_t>(next_++)]);
    }
    while (next_ < size_) {
      Point p = space_.FromIndex(next_++);
      if (space_.Violation(p).empty()) return p;
    }
    return std::nullopt;
  }

  void Tell(const Evaluation& /*evaluation*/) override {}

 private:
  const Space space_;  // a copy: the strategy may outlive the caller's space
  const int64_t size_;
  int64_t next_ = 0;
  std::vector<int64_t> listed_;
  bool given_ = false;
};

// Uniformly random feasible points without replacement. Small spaces are enumerated
// and shuffled lazily; large ones are sampled by index, rejecting repeats and
// constrained points.
class Random : public Strategy {
 public:
  Random(const Space& space, uint64_t seed) : space_(space), size_(space.Size()), rng_(seed) {}
  // Over a listed feasible set (ascending indices of `space`): the points a small space's
  // enumeration lists, in the same order, so a seed draws the same points.
  Random(const Space& space, std::vector<int64_t> listed, uint64_t seed)
      : space_(space), size_(space.Size()), rng_(seed), listed_(true), feasible_(std::move(listed)) {}
  std::string Name() const override { return "random"; }

  std::optional<Point> Next() override {
    return listed_ || size_ <= kEnumerateLimit ? NextEnumerated() : NextSampled();
  }

  void Tell(const Evaluation& /*evaluation*/) override {}

 private:
  // Up to this many points the feasible set is listed once (one constraint check each).
  static constexpr int64_t kEnumerateLimit = int64_t{1} << 16;
  // Consecutive rejected draws after which a large space counts as exhausted: a space
  // whose unasked feasible share is below ~1/65536 ends early.
  static constexpr int kMaxAttempts = 1 << 16;

  // Uniform in [0, n), by rejection so that no value is favoured; written out (rather
  // than std::uniform_int_distribution) so a seed gives the same points on every
  // standard library.
  uint64_t Below(uint64_t n) {
    const uint64_t threshold = (0 - n) % n;  // 2^64 mod n
    for (;;) {
      const uint64_t r = rng_();
      if (r >= threshold) return r % n;
    }
  }

  std::optional<Point> NextEnumerated() {
    if (!listed_) {
      for (int64_t i = 0; i < size_; ++i) {
        if (space_.Violation(space_.FromIndex(i)).empty()) feasible_.push_back(i);
      }
      listed_ = true;
    }
    // One step of a Fisher-Yates shuffle per call.
    if (taken_ == feasible_.size()) return std::nullopt;
    const size_t pick = taken_ + static_cast<size_t>(Below(feasible_.size() - taken_));
    std::swap(feasible_[taken_], feasible_[pick]);
    return space_.FromIndex(feasible_[taken_++]);
  }

  std::optional<Point> NextSampled() {
    for (int attempt = 0; attempt < kMaxAttempts; ++attempt) {
      const int64_t index = static_cast<int64_t>(Below(static_cast<uint64_t>(size_)));
      if (asked_.count(index)) continue;
      Point p = space_.FromIndex(index);
      if (!space_.Violation(p).empty()) continue;
      asked_.insert(index);
      return p;
    }
    return std::nullopt;
  }

  const Space space_;  // a copy: the strategy may outlive the caller's space
  const int64_t size_;
  std::mt19937_64 rng_;
  bool listed_ = false;
  std::vector<int64_t> feasible_;
  size_t taken_ = 0;
  std::unordered_set<int64_t> asked_;
};

struct StrategyRow {
  const char* name;
  std::unique_ptr<Strategy> (*make)(const Space& space, uint64_t seed);
};

// The table of strategies (STYLE.md: one explicit table).
const StrategyRow kStrategies[] = {
    {"exhaustive",
     [](const Space& space, uint64_t) -> std::unique_ptr<Strategy> {
       return std::make_unique<Exhaustive>(space);
     }},
    {"random",
     [](const Space& space, uint64_t seed) -> std::unique_ptr<Strategy> {
       return std::make_unique<Random>(space, seed);
     }},
};

}  // namespace

std::unique_ptr<Strategy> MakeListedStrategy(const std::string& name, const Space& space,
                                             std::vector<int64_t> feasible, uint64_t seed) {
  std::sort(feasible.begin(), feasible.end());
  if (name == "exhaustive") return std::make_unique<Exhaustive>(space, std::move(feasible));
  if (name == "random") return std::make_unique<Random>(space, std::move(feasible), seed);
  return nullptr;
}

std::unique_ptr<Strategy> MakeStrategy(const std::string& name, const Space& space, uint64_t seed,
                                       const std::string& what) {
  for (const StrategyRow& row : kStrategies) {
    if (name == row.name) return row.make(space, seed);
  }
  if (auto strategy = MakeExtendedStrategy(name, space, seed)) return strategy;
  std::string known;
  for (const std::string& n : StrategyNames()) known += (known.empty() ? "" : ", ") + n;
  throw UserError(what + ": unknown strategy '" + name + "' (known: " + known + ")");
}

std::vector<std::string> StrategyNames() {
  std::vector<std::string> names;
  for (const StrategyRow& row : kStrategies) names.push_back(row.name);
  for (const std::string& name : ExtendedStrategyNames()) names.push_back(name);
  return names;
}

double SteadySeconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

std::vector<Evaluation> RunSearch(Strategy& strategy, const SearchBudget& budget,
                                  const std::function<Evaluation(const Point&)>& evaluate,
                                  const SecondsClock& clock) {
  const SecondsClock now = clock ? clock : SecondsClock(SteadySeconds);
  const bool timed = budget.max_seconds > 0;
  const double start = timed ? now() : 0.0;
  std::vector<Evaluation> evaluations;
  for (;;) {
    const int64_t done = static_cast<int64_t>(evaluations.size());
    if (budget.max_evaluations >= 0 && done >= budget.max_evaluations) break;
    if (timed && done > 0 && now() - start >= budget.max_seconds) break;
    std::optional<Point> point = strategy.Next();
    if (!point) break;
    Evaluation evaluation = evaluate(*point);
    // The evaluated point is the asked one, whether or not `evaluate` filled it in.
    ATTNTUNE_CHECK_MSG(evaluation.point.empty() || evaluation.point == *point,
              "evaluate returned a different point than it was given");
    evaluation.point = *point;
    strategy.Tell(evaluation);
    evaluations.push_back(std::move(evaluation));
  }
  return evaluations;
}

std::vector<Evaluation> RunSearch(Strategy& strategy, int64_t budget,
                                  const std::function<Evaluation(const Point&)>& evaluate) {
  ATTNTUNE_CHECK(budget >= 0);
  return RunSearch(strategy, SearchBudget{budget, 0}, evaluate);
}

}  // namespace attntune
