#include "core/check.h"
#undef CHECK

#include <catch2/catch.hpp>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "search/pareto.h"

namespace attntune {
namespace {

const std::vector<Sense> kMinMin = {Sense::kMinimize, Sense::kMinimize};

std::vector<Scores> RandomPoints(int n, int dims, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<Scores> points(static_cast<size_t>(n), Scores(static_cast<size_t>(dims)));
  for (Scores& p : points) {
    for (double& x : p) x = static_cast<double>(rng() % 6);  // ties on purpose
  }
  return points;
}

TEST_CASE("the Pareto front matches brute force", "[search][pareto]") {
  const std::vector<Sense> senses = {Sense::kMinimize, Sense::kMaximize, Sense::kMinimize};
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    const std::vector<Scores> points = RandomPoints(40, 3, seed);
    std::vector<size_t> brute;
    for (size_t i = 0; i < points.size(); ++i) {
      bool dominated = false;
      for (size_t j = 0; j < points.size(); ++j) {
        bool no_worse = true, better = false;
        for (size_t k = 0; k < 3; ++k) {
          const double a = senses[k] == Sense::kMinimize ? points[j][k] : -points[j][k];
          const double b = senses[k] == Sense::kMinimize ? points[i][k] : -points[i][k];
          no_worse = no_worse && a <= b;
          better = better || a < b;
        }
        dominated = dominated || (no_worse && better);
      }
      if (!dominated) brute.push_back(i);
    }
    CHECK(ParetoFront(points, senses) == brute);
    // Each later front is dominated by some point of the one before, never by its own.
    const std::vector<int> rank = NonDominatedRanks(points, senses);
    for (size_t i = 0; i < points.size(); ++i) {
      for (size_t j = 0; j < points.size(); ++j) {
        if (Dominates(points[j], points[i], senses)) CHECK(rank[j] < rank[i]);
      }
      if (rank[i] > 0) {
        bool by_previous = false;
        for (size_t j = 0; j < points.size(); ++j) {
          by_previous = by_previous || (rank[j] == rank[i] - 1 && Dominates(points[j], points[i], senses));
        }
        CHECK(by_previous);
      }
    }
  }
}

TEST_CASE("hypervolume of hand-computed cases", "[search][pareto]") {
  // Staircase (1,3), (2,2), (3,1) under (4,4): 1 + 2 + 3.
  CHECK(Hypervolume({{1, 3}, {2, 2}, {3, 1}}, kMinMin, {4, 4}) == Approx(6.0));
  // A dominated point and one outside the reference add nothing.
  CHECK(Hypervolume({{1, 3}, {2, 2}, {3, 1}, {3, 3}, {5, 0}}, kMinMin, {4, 4}) == Approx(6.0));
  CHECK(Hypervolume({}, kMinMin, {4, 4}) == 0.0);
  // Maximised objectives: mirror images.
  CHECK(Hypervolume({{-1, 3}}, {Sense::kMaximize, Sense::kMinimize}, {-4, 4}) == Approx(3.0));
  // 3-D: two boxes of 0.5 and 0.25 overlapping in 0.125.
  const std::vector<Sense> min3(3, Sense::kMinimize);
  CHECK(Hypervolume({{0, 0, 0.5}, {0.5, 0.5, 0}}, min3, {1, 1, 1}) == Approx(0.625));
  CHECK(Hypervolume({{1, 1, 1}}, min3, {2, 3, 4}) == Approx(6.0));
}

TEST_CASE("hypervolume matches counting unit cells", "[search][pareto]") {
  for (int dims = 2; dims <= 4; ++dims) {
    const std::vector<Sense> senses(static_cast<size_t>(dims), Sense::kMinimize);
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      const std::vector<Scores> points = RandomPoints(12, dims, seed * 7 + dims);
      const Scores ref(static_cast<size_t>(dims), 6.0);
      // Integer coordinates: a unit cell [c, c+1) is dominated when some point <= c.
      int cells = 0, total = 1;
      for (int d = 0; d < dims; ++d) total *= 6;
      for (int c = 0; c < total; ++c) {
        Scores cell;
        for (int d = 0, x = c; d < dims; ++d, x /= 6) cell.push_back(x % 6);
        bool covered = false;
        for (const Scores& p : points) {
          bool below = true;
          for (int d = 0; d < dims; ++d) below = below && p[static_cast<size_t>(d)] <= cell[static_cast<size_t>(d)];
          covered = covered || below;
        }
        cells += covered;
      }
      CHECK(Hypervolume(points, senses, ref) == Approx(cells));
    }
  }
}

TEST_CASE("constrained queries", "[search][pareto]") {
  const std::vector<Objective> objectives = {{"time", Sense::kMinimize},
                                             {"mass_recall", Sense::kMaximize}};
  const std::vector<Sense> senses = {Sense::kMinimize, Sense::kMaximize};
  const std::vector<Scores> points = {{1.0, 0.90}, {2.0, 0.96}, {1.5, 0.95}, {3.0, 0.99}};
  const Bound b = ParseBound("mass_recall>=0.95", objectives, "--query");
  CHECK(b.objective == 1);
  CHECK(b.at_least);
  CHECK(b.value == 0.95);
  CHECK(BestSubjectTo(points, senses, 0, {b}) == 2u);
  CHECK(BestSubjectTo(points, senses, 0, {}) == 0u);
  CHECK(BestSubjectTo(points, senses, 1, {ParseBound("time<=2", objectives, "--query")}) == 1u);
  CHECK(!BestSubjectTo(points, senses, 0, {ParseBound("mass_recall>=0.999", objectives, "--query")}));
  CHECK_THROWS_WITH(ParseBound("recall>=0.9", objectives, "--query"),
                    "--query: 'recall' is not an objective of this search (objectives: time, "
                    "mass_recall)");
  CHECK_THROWS_WITH(ParseBound("time<3ms", objectives, "--query"),
                    "--query: 'time<3ms' is not a bound (expected NAME>=VALUE or NAME<=VALUE, "
                    "e.g. mass_recall>=0.95)");
  CHECK_THROWS_WITH(ParseBound("time<=3ms", objectives, "--query"),
                    "--query: '3ms' is not a number (expected NAME>=VALUE or NAME<=VALUE, e.g. "
                    "mass_recall>=0.95)");
  CHECK_THROWS_WITH(ParseBound("mass_recall>=nan", objectives, "--query"),
                    "--query: 'nan' is not a number (expected NAME>=VALUE or NAME<=VALUE, e.g. "
                    "mass_recall>=0.95)");
}

TEST_CASE("a score that is not a number is the worst, never a winner", "[search][pareto]") {
  // A NaN compared false with everything: it dominated a valid point and, first in the
  // list, was never beaten.
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<Sense> senses = {Sense::kMinimize, Sense::kMinimize};
  CHECK_FALSE(Dominates({nan, 1}, {5, 2}, senses));
  CHECK(Dominates({5, 2}, {nan, 2}, senses));
  CHECK(ParetoFront({{nan, 1}, {5, 2}, {1, 3}}, senses) == std::vector<size_t>{0, 1, 2});
  CHECK(BestSubjectTo({{nan, 1}, {1, 1}, {0.5, 1}}, senses, 0, {}) == 2u);
  CHECK(!BestSubjectTo({{nan, 1}}, senses, 0, {}));
}

}  // namespace
}  // namespace attntune
