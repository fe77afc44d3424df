// Simulated annealing over one-value moves. The acceptance test uses the relative
// change of the objective, so the temperature means the same on every scale; the
// temperature cools geometrically per evaluation and reheats (from the best point)
// once it is cold.
#include <cmath>
#include <limits>
#include <utility>

#include "search/strategies/common.h"

namespace attntune {
namespace strategies {
namespace {

class Annealing : public EngineStrategy {
 public:
  using EngineStrategy::EngineStrategy;
  std::string Name() const override { return "annealing"; }

 protected:
  std::optional<Point> Propose() override {
    if (has_current_) {
      // Adjacent moves most of the time; any value of one dimension otherwise.
      std::vector<Point> moves = UnaskedNeighbours(current_, rng().Chance(kAdjacentShare));
      if (moves.empty()) moves = UnaskedNeighbours(current_, false);
      if (!moves.empty()) return moves[rng().Below(moves.size())];
      // Every neighbour asked: continue from a random walk away from here.
      for (int attempt = 0; attempt < 8; ++attempt) {
        Point p = current_;
        for (int step = 0; step < 3; ++step) {
          std::vector<Point> n = index().Neighbours(p, false);
          if (n.empty()) break;
          p = n[rng().Below(n.size())];
        }
        if (!Asked(p)) {
          has_current_ = false;
          return p;
        }
      }
      has_current_ = false;
    }
    return RandomUnasked();
  }

  void Learn(const Evaluation& e, bool own) override {
    temperature_ *= kCooling;
    if (temperature_ < kColdest) {
      // Reheat from the best point found.
      temperature_ = kHottest;
      if (const Evaluation* best = Best()) Move(best->point, best->objective);
    }
    if (!e.ok) return;  // a failed move is rejected
    if (!has_current_) {
      Move(e.point, e.objective);
      return;
    }
    const double delta = (e.objective - current_value_) / std::max(std::abs(current_value_), 1e-300);
    if (delta <= 0) {
      Move(e.point, e.objective);
    } else if (own && rng().Chance(std::exp(-delta / temperature_))) {
      Move(e.point, e.objective);
    }
  }

 private:
  // Share of moves that step to an adjacent value in the order.
  static constexpr double kAdjacentShare = 0.7;
  // A 10% slowdown is accepted with probability exp(-0.1/0.1) = 0.37 when hottest.
  static constexpr double kHottest = 0.1;
  static constexpr double kColdest = 0.001;
  // From hottest to coldest in about 150 evaluations (0.97^150 = 0.01).
  static constexpr double kCooling = 0.97;

  void Move(const Point& p, double value) {
    has_current_ = true;
    current_ = p;
    current_value_ = value;
  }

  bool has_current_ = false;
  Point current_;
  double current_value_ = std::numeric_limits<double>::infinity();
  double temperature_ = kHottest;
};

}  // namespace

std::unique_ptr<EngineStrategy> MakeAnnealing(std::shared_ptr<const SpaceIndex> index,
                                              uint64_t seed) {
  return std::make_unique<Annealing>(std::move(index), seed);
}

}  // namespace strategies
}  // namespace attntune
