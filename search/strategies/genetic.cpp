// A steady-state genetic algorithm: a population of the best points seen, children
// by tournament selection, uniform crossover and ordered mutation, repaired into
// unasked feasible points; a failed child scores worst and never enters.
#include <algorithm>
#include <limits>
#include <utility>

#include "search/strategies/common.h"

namespace attntune {
namespace strategies {
namespace {

class Genetic : public EngineStrategy {
 public:
  using EngineStrategy::EngineStrategy;
  std::string Name() const override { return "genetic"; }

 protected:
  std::optional<Point> Propose() override {
    if (population_.size() < kPopulation / 2) return RandomUnasked();
    for (int attempt = 0; attempt < kAttempts; ++attempt) {
      const Point& a = Tournament();
      const Point& b = Tournament();
      Point child(a.size());
      for (size_t d = 0; d < a.size(); ++d) child[d] = rng().Chance(0.5) ? a[d] : b[d];
      Mutate(child, attempt);
      if (index().IsFeasible(child) && !Asked(child)) return child;
    }
    return RandomUnasked();
  }

  void Learn(const Evaluation& e, bool /*own*/) override {
    if (!e.ok) return;
    if (population_.size() < kPopulation) {
      population_.push_back({e.point, e.objective});
      return;
    }
    auto worst = std::max_element(population_.begin(), population_.end(),
                                  [](const Member& x, const Member& y) { return x.value < y.value; });
    if (e.objective < worst->value) *worst = {e.point, e.objective};
  }

 private:
  static constexpr size_t kPopulation = 20;
  static constexpr int kAttempts = 32;

  struct Member {
    Point point;
    double value;
  };

  const Point& Tournament() {
    const Member* best = nullptr;
    for (int i = 0; i < 3; ++i) {
      const Member& m = population_[rng().Below(population_.size())];
      if (best == nullptr || m.value < best->value) best = &m;
    }
    return best->point;
  }

  // Each gene mutates with probability 1/dims (more on later attempts, so that a child
  // that keeps landing on asked points moves further away): to an adjacent value
  // half of the time, to any value otherwise.
  void Mutate(Point& p, int attempt) {
    const int dims = index().Dims();
    const double rate = std::min(1.0, (1.0 + attempt / 4) / std::max(dims, 1));
    for (int d = 0; d < dims; ++d) {
      const int n = index().Levels(d);
      if (n < 2 || !rng().Chance(rate)) continue;
      int& v = p[static_cast<size_t>(d)];
      if (rng().Chance(0.5)) {
        int pos = index().Pos(d, v) + (rng().Chance(0.5) ? 1 : -1);
        pos = std::max(0, std::min(n - 1, pos));
        v = index().ValueAt(d, pos);
      } else {
        v = static_cast<int>(rng().Below(static_cast<uint64_t>(n)));
      }
    }
  }

  std::vector<Member> population_;
};

}  // namespace

std::unique_ptr<EngineStrategy> MakeGenetic(std::shared_ptr<const SpaceIndex> index,
                                            uint64_t seed) {
  return std::make_unique<Genetic>(std::move(index), seed);
}

}  // namespace strategies
}  // namespace attntune
