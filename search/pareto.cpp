#include "search/pareto.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <numeric>

#include "core/check.h"

namespace attntune {
namespace {

// Every objective turned into one to minimise.
std::vector<Scores> Minimised(const std::vector<Scores>& points, const std::vector<Sense>& senses) {
  std::vector<Scores> out = points;
  for (Scores& p : out) {
    ATTNTUNE_CHECK_MSG(p.size() == senses.size(), "a point has the wrong number of objectives");
    for (size_t k = 0; k < p.size(); ++k) {
      if (senses[k] == Sense::kMaximize) p[k] = -p[k];
    }
  }
  return out;
}

// Hypervolume of minimisation points (all strictly below `ref`) in the first k objectives.
double Slice(std::vector<Scores> points, const Scores& ref, size_t k) {
  if (points.empty()) return 0;
  if (k == 1) {
    double best = points[0][0];
    for (const Scores& p : points) best = std::min(best, p[0]);
    return ref[0] - best;
  }
  const size_t last = k - 1;
  std::sort(points.begin(), points.end(),
            [last](const Scores& a, const Scores& b) { return a[last] < b[last]; });
  double volume = 0;
  for (size_t i = 0; i < points.size(); ++i) {
    const double next = i + 1 < points.size() ? points[i + 1][last] : ref[last];
    const double depth = next - points[i][last];
    if (depth <= 0) continue;
    // Between this point's value and the next one's, the first i+1 points dominate.
    std::vector<Scores> head(points.begin(), points.begin() + static_cast<std::ptrdiff_t>(i + 1));
    volume += depth * Slice(std::move(head), ref, last);
  }
  return volume;
}

}  // namespace

namespace {

// A score as a cost (smaller is better); one that is not a number is the worst of all
// (a NaN compares false with everything: it dominated points and was never beaten).
double Cost(double score, Sense sense) {
  if (std::isnan(score)) return std::numeric_limits<double>::infinity();
  return sense == Sense::kMinimize ? score : -score;
}

}  // namespace

bool Dominates(const Scores& a, const Scores& b, const std::vector<Sense>& senses) {
  ATTNTUNE_CHECK(a.size() == senses.size() && b.size() == senses.size());
  bool better = false;
  for (size_t k = 0; k < senses.size(); ++k) {
    const double x = Cost(a[k], senses[k]);
    const double y = Cost(b[k], senses[k]);
    if (x > y) return false;
    if (x < y) better = true;
  }
  return better;
}

std::vector<int> NonDominatedRanks(const std::vector<Scores>& points,
                                   const std::vector<Sense>& senses) {
  // Deb's fast non-dominated sort.
  const size_t n = points.size();
  std::vector<std::vector<size_t>> dominated(n);
  std::vector<int> count(n, 0), rank(n, -1);
  for (size_t i = 0; i < n; ++i) {
    for (size_t j = i + 1; j < n; ++j) {
      if (Dominates(points[i], points[j], senses)) {
        dominated[i].push_back(j);
        ++count[j];
      } else if (Dominates(points[j], points[i], senses)) {
        dominated[j].push_back(i);
        ++count[i];
      }
    }
  }
  std::vector<size_t> front;
  for (size_t i = 0; i < n; ++i) {
    if (count[i] == 0) front.push_back(i);
  }
  for (int r = 0; !front.empty(); ++r) {
    std::vector<size_t> next;
    for (size_t i : front) {
      rank[i] = r;
      for (size_t j : dominated[i]) {
        if (--count[j] == 0) next.push_back(j);
      }
    }
    front = std::move(next);
  }
  return rank;
}

std::vector<size_t> ParetoFront(const std::vector<Scores>& points,
                                const std::vector<Sense>& senses) {
  const std::vector<int> rank = NonDominatedRanks(points, senses);
  std::vector<size_t> front;
  for (size_t i = 0; i < rank.size(); ++i) {
    if (rank[i] == 0) front.push_back(i);
  }
  return front;
}

double Hypervolume(const std::vector<Scores>& points, const std::vector<Sense>& senses,
                   const Scores& reference) {
  ATTNTUNE_CHECK(reference.size() == senses.size());
  if (senses.empty()) return 0;
  const Scores ref = Minimised({reference}, senses)[0];
  std::vector<Scores> inside;
  for (Scores& p : Minimised(points, senses)) {
    bool below = true;
    for (size_t k = 0; k < p.size(); ++k) below = below && p[k] < ref[k];
    if (below) inside.push_back(std::move(p));
  }
  // Only the front matters; dropping dominated points keeps the slicing small.
  std::vector<Sense> all_min(senses.size(), Sense::kMinimize);
  std::vector<Scores> front;
  for (size_t i : ParetoFront(inside, all_min)) front.push_back(inside[i]);
  return Slice(std::move(front), ref, senses.size());
}

Bound ParseBound(const std::string& text, const std::vector<Objective>& objectives,
                 const std::string& what) {
  size_t op = text.find(">=");
  bool at_least = true;
  if (op == std::string::npos) {
    op = text.find("<=");
    at_least = false;
  }
  const std::string expected = " (expected NAME>=VALUE or NAME<=VALUE, e.g. mass_recall>=0.95)";
  if (op == std::string::npos) throw UserError(what + ": '" + text + "' is not a bound" + expected);
  const std::string name = text.substr(0, op);
  const std::string number = text.substr(op + 2);
  Bound bound;
  bound.at_least = at_least;
  bool found = false;
  std::string known;
  for (size_t k = 0; k < objectives.size(); ++k) {
    known += (known.empty() ? "" : ", ") + objectives[k].name;
    if (objectives[k].name == name) {
      bound.objective = k;
      found = true;
    }
  }
  if (!found) {
    throw UserError(what + ": '" + name + "' is not an objective of this search (objectives: " +
                    known + ")");
  }
  char* end = nullptr;
  errno = 0;
  bound.value = std::strtod(number.c_str(), &end);
  if (number.empty() || end != number.c_str() + number.size() || errno != 0 ||
      !std::isfinite(bound.value)) {
    throw UserError(what + ": '" + number + "' is not a number" + expected);
  }
  return bound;
}

std::optional<size_t> BestSubjectTo(const std::vector<Scores>& points,
                                    const std::vector<Sense>& senses, size_t target,
                                    const std::vector<Bound>& bounds) {
  ATTNTUNE_CHECK(target < senses.size());
  std::optional<size_t> best;
  for (size_t i = 0; i < points.size(); ++i) {
    const Scores& p = points[i];
    ATTNTUNE_CHECK(p.size() == senses.size());
    bool meets = true;
    for (const Bound& b : bounds) {
      ATTNTUNE_CHECK(b.objective < p.size());
      meets = meets && (b.at_least ? p[b.objective] >= b.value : p[b.objective] <= b.value);
    }
    if (!meets) continue;
    if (std::isnan(p[target])) continue;  // no value: never the best
    const double v = Cost(p[target], senses[target]);
    if (!best || v < Cost(points[*best][target], senses[target])) best = i;
  }
  return best;
}

}  // namespace attntune
