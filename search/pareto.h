// Multi-objective results: non-dominated sorting, the Pareto front, its hypervolume,
// and constrained queries ("fastest configuration with mass_recall >= 0.95").
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace attntune {

enum class Sense { kMinimize, kMaximize };

/// A declared objective of a search (time, memory, rel_err, mass_recall, ...).
struct Objective {
  std::string name;
  Sense sense = Sense::kMinimize;
};

/// One value per objective, in the order of the declared objectives.
using Scores = std::vector<double>;

/// True when `a` is at least as good as `b` in every objective and better in one.
bool Dominates(const Scores& a, const Scores& b, const std::vector<Sense>& senses);

/// Non-dominated sorting: each point's front number (0 = the Pareto front, 1 = the
/// front once front 0 is removed, ...).
std::vector<int> NonDominatedRanks(const std::vector<Scores>& points,
                                   const std::vector<Sense>& senses);

/// Indices of the Pareto front (rank 0), ascending.
std::vector<size_t> ParetoFront(const std::vector<Scores>& points,
                                const std::vector<Sense>& senses);

/// The volume dominated by `points` and bounded by `reference` (exact, by slicing one
/// objective at a time; meant for fronts of up to a few hundred points and up to four
/// objectives). Points not strictly better than the reference in every objective add
/// nothing.
double Hypervolume(const std::vector<Scores>& points, const std::vector<Sense>& senses,
                   const Scores& reference);

/// A bound on one objective: value >= bound (at_least) or value <= bound.
struct Bound {
  size_t objective = 0;
  bool at_least = true;
  double value = 0;
};

/// Parses "name>=value" or "name<=value" against the declared objectives; a bad text
/// throws UserError naming `what`.
Bound ParseBound(const std::string& text, const std::vector<Objective>& objectives,
                 const std::string& what);

/// The point best in objective `target` among those meeting every bound (ties: the
/// lower index); nullopt when none does.
std::optional<size_t> BestSubjectTo(const std::vector<Scores>& points,
                                    const std::vector<Sense>& senses, size_t target,
                                    const std::vector<Bound>& bounds);

}  // namespace attntune
