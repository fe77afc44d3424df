// check.h's CHECK (abort) and Catch2's CHECK (report) share a name: take UserError
// from check.h, then let Catch2 own CHECK in this file.
#include "core/check.h"
#undef CHECK

#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "search/strategies/bo.h"
#include "search/strategies/common.h"
#include "search/strategies/registry.h"
#include "search/strategy.h"

namespace attntune {
namespace {

using Values = std::map<std::string, std::string>;

std::vector<std::string> Numbers(int n, int scale = 1) {
  std::vector<std::string> v;
  for (int i = 0; i < n; ++i) v.push_back(std::to_string(i * scale));
  return v;
}

// 12 x 10 x 8 = 960 points; x + y > 18 is infeasible. Values are listed out of order
// for z, so that the strategies must order them numerically.
Space BowlSpace() {
  Space space;
  space.AddDimension("x", Numbers(12));
  space.AddDimension("y", Numbers(10));
  space.AddDimension("z", {"7", "0", "3", "1", "6", "2", "5", "4"});
  space.AddConstraint([](const Values& v) -> std::string {
    return std::stoi(v.at("x")) + std::stoi(v.at("y")) > 18 ? "x + y > 18" : "";
  });
  return space;
}

// A smooth bowl with its minimum 1.0 at x=7, y=2, z=5, plus a ripple.
double Bowl(const Values& v) {
  const double x = std::stoi(v.at("x")), y = std::stoi(v.at("y")), z = std::stoi(v.at("z"));
  return 1.0 + 0.05 * ((x - 7) * (x - 7) + 2 * (y - 2) * (y - 2) + (z - 5) * (z - 5)) +
         0.01 * std::abs(std::sin(x * 3.1 + y * 1.7 + z));
}

struct Run {
  std::vector<Point> points;
  double best = INFINITY;
};

// Drives `name` for `budget` evaluations, checking the Strategy promises on the way.
Run Drive(const std::string& name, const Space& space, uint64_t seed, int budget,
          const std::function<Evaluation(const Point&)>& f) {
  std::unique_ptr<Strategy> s = MakeExtendedStrategy(name, space, seed);
  REQUIRE(s != nullptr);
  Run run;
  std::set<Point> seen;
  for (int i = 0; i < budget; ++i) {
    std::optional<Point> p = s->Next();
    if (!p) break;
    REQUIRE(space.Violation(*p).empty());
    REQUIRE(seen.insert(*p).second);
    Evaluation e = f(*p);
    e.point = *p;
    s->Tell(e);
    if (e.ok) run.best = std::min(run.best, e.objective);
    run.points.push_back(*p);
  }
  return run;
}

Evaluation BowlEval(const Space& space, const Point& p) {
  return Evaluation{p, true, Bowl(space.Values(p))};
}

TEST_CASE("every engine strategy finds the bowl's optimum", "[search]") {
  const Space space = BowlSpace();
  for (const std::string& name : ExtendedStrategyNames()) {
    INFO(name);
    int found = 0;
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      const Run run = Drive(name, space, seed, 200, [&](const Point& p) { return BowlEval(space, p); });
      // The minimum is 1.0 + the ripple there (|sin(7*3.1 + 2*1.7 + 5)| * 0.01).
      found += run.best <= 1.0 + 0.01 * std::abs(std::sin(7 * 3.1 + 2 * 1.7 + 5)) + 1e-12;
    }
    CHECK(found >= 2);
  }
}

TEST_CASE("engine strategies are deterministic per seed", "[search]") {
  const Space space = BowlSpace();
  for (const std::string& name : ExtendedStrategyNames()) {
    INFO(name);
    auto f = [&](const Point& p) { return BowlEval(space, p); };
    const Run a = Drive(name, space, 42, 60, f);
    const Run b = Drive(name, space, 42, 60, f);
    const Run c = Drive(name, space, 43, 60, f);
    CHECK(a.points == b.points);
    CHECK(a.points != c.points);
  }
}

TEST_CASE("engine strategies ask every feasible point once, then stop", "[search]") {
  Space space;
  space.AddDimension("a", Numbers(6));
  space.AddDimension("b", {"x", "y", "z"});
  space.AddConstraint([](const Values& v) -> std::string {
    return v.at("b") == "y" && std::stoi(v.at("a")) % 2 == 1 ? "odd a with y" : "";
  });
  // 18 points, 3 of them infeasible.
  for (const std::string& name : ExtendedStrategyNames()) {
    INFO(name);
    const Run run = Drive(name, space, 7, 100, [&](const Point& p) {
      return Evaluation{p, true, 1.0 + p[0] + p[1]};
    });
    CHECK(run.points.size() == 15);
  }
}

TEST_CASE("engine strategies learn from failures", "[search]") {
  const Space space = BowlSpace();
  // Half of the space fails (z < 4 by value), the optimum at z=5 does not.
  auto f = [&](const Point& p) {
    const Values v = space.Values(p);
    if (std::stoi(v.at("z")) < 4) return Evaluation{p, false, 0};
    return Evaluation{p, true, Bowl(v)};
  };
  for (const std::string& name : ExtendedStrategyNames()) {
    INFO(name);
    const Run run = Drive(name, space, 3, 250, f);
    CHECK(run.best <= 1.0 + 0.05 + 0.01);  // within one step of the optimum
  }
  // Every evaluation failing: the strategies go on proposing distinct feasible points.
  for (const std::string& name : ExtendedStrategyNames()) {
    INFO(name);
    const Run run = Drive(name, space, 3, 80, [](const Point& p) { return Evaluation{p, false, 0}; });
    CHECK(run.points.size() == 80);
  }
}

TEST_CASE("engine strategies work on spaces too large to list", "[search]") {
  Space space;
  for (int d = 0; d < 6; ++d) space.AddDimension("d" + std::to_string(d), Numbers(100));
  space.AddConstraint([](const Values& v) -> std::string {
    return (std::stoi(v.at("d0")) + std::stoi(v.at("d1"))) % 3 == 0 ? "divisible by 3" : "";
  });
  for (const std::string& name : ExtendedStrategyNames()) {
    INFO(name);
    const Run run = Drive(name, space, 5, 40, [&](const Point& p) {
      double s = 0;
      for (int x : p) s += (x - 50) * (x - 50);
      return Evaluation{p, true, 1 + s};
    });
    CHECK(run.points.size() == 40);
  }
}

TEST_CASE("warm start asks the given points first", "[search]") {
  const Space space = BowlSpace();
  const std::vector<Point> warm = {{7, 2, 6}, {11, 9, 0} /* infeasible: skipped */, {1, 1, 1}};
  for (const std::string& name : ExtendedStrategyNames()) {
    INFO(name);
    std::unique_ptr<Strategy> s = MakeExtendedStrategy(name, space, 1);
    WarmStart(*s, warm);
    std::optional<Point> p = s->Next();
    REQUIRE(p);
    CHECK(*p == warm[0]);
    s->Tell(BowlEval(space, *p));
    p = s->Next();
    REQUIRE(p);
    CHECK(*p == warm[2]);
  }
}

// Each dimension's values matter on their own, with no order among them (as GPU
// parameters often do): log objective = sum of per-value effects from fixed tables
// that are rough in the value order. 16 x 8 x 6 = 768 points, optimum 1.0 at
// (13, 2, 4).
double Rough(const Point& p) {
  static const double a[16] = {0.9, 0.2, 1.0, 0.5, 0.8, 0.3, 1.0, 0.6,
                               0.9, 0.4, 1.0, 0.7, 0.8, 0.0, 0.9, 0.5};
  static const double b[8] = {0.8, 0.3, 0.0, 0.9, 0.4, 1.0, 0.5, 0.7};
  static const double c[6] = {0.6, 1.0, 0.3, 0.8, 0.0, 0.9};
  return std::exp(a[p[0]] + b[p[1]] + c[p[2]]);
}

// Rough's space: 16 x 8 x 6 values.
std::shared_ptr<const strategies::SpaceIndex> RoughIndex() {
  Space space;
  space.AddDimension("a", Numbers(16));
  space.AddDimension("b", Numbers(8));
  space.AddDimension("c", Numbers(6));
  return std::make_shared<const strategies::SpaceIndex>(space);
}

// Mean over seeds of the best objective after `budget` evaluations of bo with `options`.
double MeanBest(const std::shared_ptr<const strategies::SpaceIndex>& index,
                const strategies::BoOptions& options, int budget,
                const std::function<double(const Point&)>& f) {
  double sum = 0;
  const int seeds = 8;
  for (int seed = 1; seed <= seeds; ++seed) {
    std::unique_ptr<strategies::EngineStrategy> s = strategies::MakeBoWith(index, seed, options);
    double best = INFINITY;
    for (int i = 0; i < budget; ++i) {
      std::optional<Point> p = s->Next();
      REQUIRE(p);
      s->Tell(Evaluation{*p, true, f(*p)});
      best = std::min(best, f(*p));
    }
    sum += best;
  }
  return sum / seeds;
}

double RoughMeanBest(const strategies::BoOptions& options, int budget,
                     const std::function<double(const Point&)>& f = Rough) {
  return MeanBest(RoughIndex(), options, budget, f);
}

TEST_CASE("bo's categorical kernel learns values that matter without order", "[search]") {
  strategies::BoOptions with;  // the defaults: categorical share tuned by likelihood
  strategies::BoOptions without;
  without.categorical = 0;
  without.tune_categorical = false;
  const double mean_with = RoughMeanBest(with, 40);
  const double mean_without = RoughMeanBest(without, 40);
  INFO("with " << mean_with << ", without " << mean_without);
  CHECK(mean_with < mean_without);
  // Random search's expected best of 40 draws is 1.81; the second-best point is 1.22.
  CHECK(mean_with < 1.1);
}

// Rough with a cliff: a third of the space (b >= 5) is 1000 times slower, as failing-
// slow GPU configurations are; the optimum is unchanged.
double Cliff(const Point& p) { return Rough(p) * (p[1] >= 5 ? 1000.0 : 1.0); }

TEST_CASE("bo with rank targets is not misled by a slow cliff", "[search]") {
  strategies::BoOptions plain;
  strategies::BoOptions ranks;
  ranks.rank_targets = true;
  for (auto f : {Rough, Cliff}) {
    const double mean_plain = RoughMeanBest(plain, 40, f);
    const double mean_ranks = RoughMeanBest(ranks, 40, f);
    INFO("plain " << mean_plain << ", ranks " << mean_ranks);
    CHECK(mean_ranks < 1.1);
    // Behind the cliff the log model is misled by how slow the slow third is.
    if (f == Cliff) CHECK(mean_ranks < mean_plain);
  }
}

// The points `options`' bo asks in `budget` evaluations of `f` over Rough's space.
std::vector<Point> RoughPoints(const strategies::BoOptions& options, uint64_t seed, int budget,
                               const std::function<double(const Point&)>& f) {
  std::unique_ptr<strategies::EngineStrategy> s =
      strategies::MakeBoWith(RoughIndex(), seed, options);
  std::vector<Point> points;
  for (int i = 0; i < budget; ++i) {
    std::optional<Point> p = s->Next();
    REQUIRE(p);
    s->Tell(Evaluation{*p, true, f(*p)});
    points.push_back(*p);
  }
  return points;
}

TEST_CASE("bo with rank targets sees only the order of the objective", "[search]") {
  // Rough with its ties broken by far more than rounding, and an increasing transform
  // of it that is not affine in log (so that standardised log targets would change).
  auto distinct = [](const Point& p) { return Rough(p) + 1e-3 * (p[0] * 48 + p[1] * 6 + p[2]); };
  auto exponential = [&](const Point& p) { return std::exp(distinct(p)); };
  strategies::BoOptions ranks;
  ranks.rank_targets = true;
  strategies::BoOptions plain;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    INFO("seed " << seed);
    CHECK(RoughPoints(ranks, seed, 40, distinct) == RoughPoints(ranks, seed, 40, exponential));
    // The log model sees the change (so the check above can fail).
    CHECK(RoughPoints(plain, seed, 40, distinct) != RoughPoints(plain, seed, 40, exponential));
  }
  // Ties (plateaus of equal values) share one score; the optimum is still found.
  auto plateaus = [](const Point& p) { return std::exp(std::ceil(std::log(Rough(p)) * 4) / 4); };
  const double mean = RoughMeanBest(ranks, 40, plateaus);
  INFO("mean best " << mean);
  CHECK(mean < 1.1);
}

// Six dimensions of five values (15,625 points), each value with an effect of its own
// and no interactions: log objective = sum of per-value effects from a seeded table.
// The optimum is 1.0 (every dimension at its best value).
double Additive(const Point& p) {
  static const std::vector<std::vector<double>> effects = [] {
    std::vector<std::vector<double>> e(6, std::vector<double>(5));
    uint64_t state = 12345;
    for (auto& dim : e) {
      for (double& v : dim) {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        v = static_cast<double>(state >> 40) / static_cast<double>(1 << 24);  // [0, 1)
      }
      const double lo = *std::min_element(dim.begin(), dim.end());
      for (double& v : dim) v -= lo;
    }
    return e;
  }();
  double s = 0;
  for (size_t d = 0; d < p.size(); ++d) s += effects[d][static_cast<size_t>(p[d])];
  return std::exp(s);
}

TEST_CASE("bo's additive kernel carries per-value effects across points", "[search]") {
  Space space;
  for (int d = 0; d < 6; ++d) space.AddDimension("d" + std::to_string(d), Numbers(5));
  auto index = std::make_shared<const strategies::SpaceIndex>(space);
  strategies::BoOptions with;
  with.tune_additive = true;
  strategies::BoOptions without;
  const double mean_with = MeanBest(index, with, 40, Additive);
  const double mean_without = MeanBest(index, without, 40, Additive);
  INFO("with " << mean_with << ", without " << mean_without);
  CHECK(mean_with < mean_without);
}

// Drives `name` in batches of `batch`: every point of a batch asked before any of it is
// told (as slots on several ranks ask), the batch told in order; checks the promises of
// Strategy on the way. `warm`: points to ask first.
Run DriveBatched(const std::string& name, const Space& space, uint64_t seed, int budget, int batch,
                 const std::function<Evaluation(const Point&)>& f,
                 const std::vector<Point>& warm = {}) {
  std::unique_ptr<Strategy> s = MakeExtendedStrategy(name, space, seed);
  REQUIRE(s != nullptr);
  WarmStart(*s, warm);
  Run run;
  std::set<Point> seen;
  while (static_cast<int>(run.points.size()) < budget) {
    std::vector<Point> asked;
    for (int i = 0; i < batch && static_cast<int>(run.points.size() + asked.size()) < budget; ++i) {
      std::optional<Point> p = s->Next();
      if (!p) break;
      REQUIRE(space.Violation(*p).empty());
      REQUIRE(seen.insert(*p).second);
      asked.push_back(*p);
    }
    if (asked.empty()) break;
    for (const Point& p : asked) {
      Evaluation e = f(p);
      e.point = p;
      s->Tell(e);
      if (e.ok) run.best = std::min(run.best, e.objective);
      run.points.push_back(p);
    }
  }
  return run;
}

TEST_CASE("engine strategies ask batches: distinct feasible points, and a batch of one is the sequential search", "[search]") {
  const Space space = BowlSpace();
  auto f = [&](const Point& p) { return BowlEval(space, p); };
  const std::vector<Point> warm = {{7, 2, 6}, {11, 9, 0} /* infeasible */, {1, 1, 1}, {3, 3, 3}};
  const double optimum = 1.0 + 0.01 * std::abs(std::sin(7 * 3.1 + 2 * 1.7 + 5));
  for (const std::string& name : ExtendedStrategyNames()) {
    INFO(name);
    CHECK(DriveBatched(name, space, 9, 60, 1, f).points == Drive(name, space, 9, 60, f).points);
    for (const int batch : {4, 7}) {
      INFO("batch " << batch);
      // Warm-start points pending in a batch are never proposed again by any part.
      const Run warmed = DriveBatched(name, space, 9, 60, batch, f, warm);
      CHECK(warmed.points.size() == 60);
      CHECK(warmed.points[0] == warm[0]);
      int found = 0;
      for (uint64_t seed = 1; seed <= 3; ++seed) {
        found += DriveBatched(name, space, seed, 200, batch, f).best <= optimum + 1e-12;
      }
      CHECK(found >= 2);
    }
    // Every feasible point once, then nothing, in batches too.
    Space small;
    small.AddDimension("a", Numbers(6));
    small.AddDimension("b", {"x", "y", "z"});
    const Run all = DriveBatched(name, small, 7, 100, 5, [](const Point& p) {
      return Evaluation{p, true, 1.0 + p[0] + p[1]};
    });
    CHECK(all.points.size() == 18);
  }
}

// The points bo asks in one batch of `batch` after `told` evaluations of Rough.
std::vector<Point> RoughBatch(strategies::BatchLie lie, uint64_t seed, int told, int batch) {
  strategies::BoOptions options;
  options.lie = lie;
  std::unique_ptr<strategies::EngineStrategy> s = strategies::MakeBoWith(RoughIndex(), seed, options);
  for (int i = 0; i < told; ++i) {
    std::optional<Point> p = s->Next();
    REQUIRE(p);
    s->Tell(Evaluation{*p, true, Rough(*p)});
  }
  std::vector<Point> points;
  for (int i = 0; i < batch; ++i) points.push_back(*s->Next());
  return points;
}

TEST_CASE("bo's batch: the points pending enter the model with a lie, which steers the rest of the batch", "[search]") {
  using strategies::BatchLie;
  int differ = 0;
  for (uint64_t seed = 1; seed <= 4; ++seed) {
    const std::vector<Point> low = RoughBatch(BatchLie::kMin, seed, 20, 4);
    const std::vector<Point> high = RoughBatch(BatchLie::kMax, seed, 20, 4);
    const std::vector<Point> believer = RoughBatch(BatchLie::kBeliever, seed, 20, 4);
    // The first point of a batch has nothing pending: the same whatever the lie.
    CHECK(low[0] == high[0]);
    CHECK(low[0] == believer[0]);
    differ += low != high ? 1 : 0;
  }
  CHECK(differ >= 3);
}

TEST_CASE("unknown extended names give nullptr", "[search]") {
  CHECK(MakeExtendedStrategy("nope", BowlSpace(), 1) == nullptr);
  const std::vector<std::string> names = ExtendedStrategyNames();
  CHECK(names == std::vector<std::string>{"annealing", "genetic", "ils", "bo", "bandit", "auto"});
}

}  // namespace
}  // namespace attntune
