// Greedy iterated local search: first-improvement hill climbing over the one-value
// changes of the current point (adjacent values first), then a perturbation (a short
// random walk from the best local optimum) when no neighbour improves.
#include <limits>
#include <utility>

#include "search/strategies/common.h"

namespace attntune {
namespace strategies {
namespace {

class Ils : public EngineStrategy {
 public:
  using EngineStrategy::EngineStrategy;
  std::string Name() const override { return "ils"; }

 protected:
  std::optional<Point> Propose() override {
    if (has_current_) {
      while (!queue_.empty()) {
        Point p = std::move(queue_.back());
        queue_.pop_back();
        if (!Asked(p)) return p;
      }
      // A local optimum: the next climb starts from a perturbation of the best one.
      ++climbs_without_gain_;
      has_current_ = false;
    }
    const Evaluation* best = Best();
    // After kRestartAfter climbs that found nothing better, start afresh at random.
    if (best != nullptr && climbs_without_gain_ < kRestartAfter) {
      if (std::optional<Point> p = Perturb(best->point)) return p;
    }
    climbs_without_gain_ = 0;
    return RandomUnasked();
  }

  void Learn(const Evaluation& e, bool /*own*/) override {
    if (!e.ok) return;
    if (Best() != nullptr && Best()->point == e.point) climbs_without_gain_ = 0;  // a new best
    if (!has_current_ || e.objective < current_value_) {
      has_current_ = true;
      current_value_ = e.objective;
      Requeue(e.point);
    }
  }

 private:
  // Climbs in a row without a new best before a random restart.
  static constexpr int kRestartAfter = 3;
  // Steps of the perturbation's random walk.
  static constexpr int kWalk = 3;

  void Requeue(const Point& p) {
    // Stack order: adjacent moves are popped first, each group shuffled.
    std::vector<Point> adjacent = UnaskedNeighbours(p, true);
    std::vector<Point> far;
    for (Point& n : UnaskedNeighbours(p, false)) {
      bool is_adjacent = false;
      for (const Point& a : adjacent) is_adjacent = is_adjacent || a == n;
      if (!is_adjacent) far.push_back(std::move(n));
    }
    Shuffle(adjacent);
    Shuffle(far);
    queue_ = std::move(far);
    for (Point& a : adjacent) queue_.push_back(std::move(a));
  }

  void Shuffle(std::vector<Point>& v) {
    for (size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[rng().Below(i)]);
  }

  std::optional<Point> Perturb(const Point& from) {
    for (int attempt = 0; attempt < 8; ++attempt) {
      Point p = from;
      for (int step = 0; step < kWalk; ++step) {
        std::vector<Point> n = index().Neighbours(p, false);
        if (n.empty()) break;
        p = n[rng().Below(n.size())];
      }
      if (!Asked(p)) return p;
    }
    return std::nullopt;
  }

  bool has_current_ = false;
  double current_value_ = std::numeric_limits<double>::infinity();
  std::vector<Point> queue_;
  int climbs_without_gain_ = 0;
};

}  // namespace

std::unique_ptr<EngineStrategy> MakeIls(std::shared_ptr<const SpaceIndex> index, uint64_t seed) {
  return std::make_unique<Ils>(std::move(index), seed);
}

}  // namespace strategies
}  // namespace attntune
