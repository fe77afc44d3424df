#include <catch2/catch.hpp>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"

#include "search/strategy.h"

namespace attntune {

namespace {

using Values = std::map<std::string, std::string>;

// 4 x 3 x 5 = 60 points, of which those with Bc > Br are infeasible.
Space ConstrainedSpace() {
  Space space;
  space.AddDimension("Br", {"16", "32", "64", "128"});
  space.AddDimension("Bc", {"16", "32", "64"});
  space.AddDimension("stages", {"1", "2", "3", "4", "5"});
  space.AddConstraint([](const Values& v) -> std::string {
    return std::stoi(v.at("Bc")) > std::stoi(v.at("Br")) ? "Bc > Br" : "";
  });
  return space;
}

std::vector<Point> Feasible(const Space& space) {
  std::vector<Point> points;
  for (int64_t i = 0; i < space.Size(); ++i) {
    Point p = space.FromIndex(i);
    if (space.Violation(p).empty()) points.push_back(p);
  }
  return points;
}

std::vector<Point> Drain(Strategy& strategy, size_t limit) {
  std::vector<Point> points;
  while (points.size() < limit) {
    std::optional<Point> p = strategy.Next();
    if (!p) break;
    points.push_back(*p);
  }
  return points;
}

// 10^12 points; about a third infeasible (d0 + d1 divisible by 3).
Space HugeSpace() {
  Space space;
  for (int d = 0; d < 6; ++d) {
    std::vector<std::string> values;
    for (int v = 0; v < 100; ++v) values.push_back(std::to_string(v));
    space.AddDimension("d" + std::to_string(d), values);
  }
  space.AddConstraint([](const Values& v) -> std::string {
    return (std::stoi(v.at("d0")) + std::stoi(v.at("d1"))) % 3 == 0 ? "d0 + d1 divisible by 3" : "";
  });
  return space;
}

}  // namespace

TEST_CASE("StrategyNames lists the table") {
  CHECK(StrategyNames() == std::vector<std::string>{"exhaustive", "random", "annealing", "genetic",
                                                   "ils", "bo", "bandit", "auto"});
}

TEST_CASE("MakeStrategy: unknown name is a user error naming the input") {
  const Space space = ConstrainedSpace();
  try {
    MakeStrategy("anealing", space, 1, "--strategy");
    FAIL("no error");
  } catch (const UserError& e) {
    CHECK(std::string(e.what()) ==
          "--strategy: unknown strategy 'anealing' (known: exhaustive, random, annealing, "
          "genetic, ils, bo, bandit, auto)");
  }
  CHECK(MakeStrategy("exhaustive", space, 1, "--strategy")->Name() == "exhaustive");
  CHECK(MakeStrategy("random", space, 1, "--strategy")->Name() == "random");
}

TEST_CASE("exhaustive: every feasible point once, in row-major order") {
  const Space space = ConstrainedSpace();
  const std::vector<Point> feasible = Feasible(space);
  REQUIRE(feasible.size() == 45);  // Br=16: 1 Bc, 32: 2, 64: 3, 128: 3 -> 9 * 5
  std::unique_ptr<Strategy> s = MakeStrategy("exhaustive", space, 0, "test");
  CHECK(Drain(*s, 1000) == feasible);
  CHECK(!s->Next());  // stays exhausted
}

TEST_CASE("random: deterministic per seed, different across seeds") {
  const Space space = ConstrainedSpace();
  const std::vector<Point> a = Drain(*MakeStrategy("random", space, 42, "test"), 20);
  const std::vector<Point> b = Drain(*MakeStrategy("random", space, 42, "test"), 20);
  const std::vector<Point> c = Drain(*MakeStrategy("random", space, 43, "test"), 20);
  CHECK(a.size() == 20);
  CHECK(a == b);
  CHECK(a != c);
  const std::vector<Point> feasible = Feasible(space);
  CHECK(a != std::vector<Point>(feasible.begin(), feasible.begin() + 20));  // not row-major
}

TEST_CASE("random: covers the feasible set once, never a constrained point") {
  const Space space = ConstrainedSpace();
  for (uint64_t seed : {1, 2, 3}) {
    std::unique_ptr<Strategy> s = MakeStrategy("random", space, seed, "test");
    const std::vector<Point> points = Drain(*s, 1000);
    const std::vector<Point> feasible = Feasible(space);
    CHECK(points.size() == feasible.size());
    CHECK(std::set<Point>(points.begin(), points.end()) ==
          std::set<Point>(feasible.begin(), feasible.end()));
    for (const Point& p : points) CHECK(space.Violation(p).empty());
    CHECK(!s->Next());
  }
}

TEST_CASE("random: works on a space too large to enumerate") {
  const Space space = HugeSpace();
  REQUIRE(space.Size() == 1000000000000);
  const std::vector<Point> a = Drain(*MakeStrategy("random", space, 7, "test"), 2000);
  const std::vector<Point> b = Drain(*MakeStrategy("random", space, 7, "test"), 2000);
  const std::vector<Point> c = Drain(*MakeStrategy("random", space, 8, "test"), 2000);
  REQUIRE(a.size() == 2000);
  CHECK(a == b);
  CHECK(a != c);
  CHECK(std::set<Point>(a.begin(), a.end()).size() == a.size());
  std::set<int> first_values;
  for (const Point& p : a) {
    CHECK(space.Violation(p).empty());
    first_values.insert(p[0]);
  }
  CHECK(first_values.size() > 90);  // spread over the slowest dimension, not a corner
}

TEST_CASE("random: a huge space whose points are all infeasible ends") {
  Space space = HugeSpace();
  space.AddConstraint([](const Values&) -> std::string { return "never"; });
  CHECK(!MakeStrategy("random", space, 1, "test")->Next());
}

TEST_CASE("RunSearch: respects the budget and passes failures through") {
  const Space space = ConstrainedSpace();
  std::unique_ptr<Strategy> s = MakeStrategy("exhaustive", space, 0, "test");
  int calls = 0;
  const std::vector<Evaluation> evals = RunSearch(*s, 7, [&](const Point& p) {
    ++calls;
    Evaluation e;
    e.ok = p[2] != 1;  // stages=2 "fails on the hardware"
    e.objective = e.ok ? 1.0 + p[2] : 0.0;
    return e;
  });
  CHECK(calls == 7);
  REQUIRE(evals.size() == 7);
  const std::vector<Point> feasible = Feasible(space);
  for (size_t i = 0; i < evals.size(); ++i) {
    CHECK(evals[i].point == feasible[i]);  // the asked point is filled in
    CHECK(evals[i].ok == (feasible[i][2] != 1));
  }
  CHECK(!evals[1].ok);
  CHECK(!evals[6].ok);
}

TEST_CASE("RunSearch: stops when the strategy runs out, and at zero budget") {
  const Space space = ConstrainedSpace();
  const auto ok = [](const Point& p) {
    Evaluation e;
    e.point = p;
    e.ok = true;
    return e;
  };
  std::unique_ptr<Strategy> s = MakeStrategy("random", space, 5, "test");
  CHECK(RunSearch(*s, 1000, ok).size() == 45);
  std::unique_ptr<Strategy> t = MakeStrategy("random", space, 5, "test");
  CHECK(RunSearch(*t, 0, ok).empty());
}

TEST_CASE("RunSearch: a time budget stops before the first evaluation past it") {
  const Space space = ConstrainedSpace();  // 45 feasible points
  double clock = 100.0;  // a fake clock: each evaluation takes 1.5 s, each reading 1 ms
  const auto slow = [&](const Point& p) {
    clock += 1.5;
    Evaluation e;
    e.point = p;
    e.ok = true;
    e.objective = 1;
    return e;
  };
  const SecondsClock fake = [&] { return clock += 0.001; };
  // Evaluations start at about 0, 1.5, 3 and 4.5 s; at 6 s the 5 s are spent.
  std::unique_ptr<Strategy> s = MakeStrategy("random", space, 5, "test");
  CHECK(RunSearch(*s, SearchBudget{-1, 5.0}, slow, fake).size() == 4);
  // Whichever limit comes first.
  std::unique_ptr<Strategy> t = MakeStrategy("random", space, 5, "test");
  CHECK(RunSearch(*t, SearchBudget{2, 5.0}, slow, fake).size() == 2);
  // The first evaluation always starts, even with the time already spent.
  std::unique_ptr<Strategy> u = MakeStrategy("random", space, 5, "test");
  CHECK(RunSearch(*u, SearchBudget{-1, 1e-9}, slow, fake).size() == 1);
  // No limit on either: until the strategy has nothing left.
  std::unique_ptr<Strategy> v = MakeStrategy("random", space, 5, "test");
  CHECK(RunSearch(*v, SearchBudget{}, slow, fake).size() == 45);
  // The same seed under a time budget asks the same points as under the equal count.
  std::unique_ptr<Strategy> a = MakeStrategy("auto", space, 9, "test");
  std::unique_ptr<Strategy> b = MakeStrategy("auto", space, 9, "test");
  const std::vector<Evaluation> by_time = RunSearch(*a, SearchBudget{-1, 9.0}, slow, fake);
  const std::vector<Evaluation> by_count = RunSearch(*b, 6, slow);
  REQUIRE(by_time.size() == 6);
  for (size_t i = 0; i < by_time.size(); ++i) CHECK(by_time[i].point == by_count[i].point);
}

TEST_CASE("RunSearch: the strategy is told every evaluation in order") {
  // A recording strategy in the style of ninja's FakeCommandRunner.
  class Recording : public Strategy {
   public:
    std::string Name() const override { return "recording"; }
    std::optional<Point> Next() override {
      if (next_ == 3) return std::nullopt;
      return Point{next_++};
    }
    void Tell(const Evaluation& e) override { told.push_back(e); }
    std::vector<Evaluation> told;

   private:
    int next_ = 0;
  };
  Recording r;
  const std::vector<Evaluation> evals = RunSearch(r, 10, [](const Point& p) {
    Evaluation e;
    e.ok = p[0] != 1;
    e.objective = 10.0 * p[0];
    return e;
  });
  REQUIRE(r.told.size() == 3);
  for (int i = 0; i < 3; ++i) {
    CHECK(r.told[i].point == Point{i});
    CHECK(r.told[i].ok == (i != 1));
    CHECK(r.told[i].objective == evals[i].objective);
  }
}

}  // namespace attntune
