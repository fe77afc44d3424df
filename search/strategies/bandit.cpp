// A meta-strategy: the budget goes to the arm (another strategy) whose recent
// proposals improved the best point most. Every arm sees every evaluation, so none
// repeats another's point, and each learns from the others' results.
#include <cmath>
#include <unordered_map>
#include <utility>
#include <vector>

#include "search/strategies/common.h"

namespace attntune {
namespace strategies {
namespace {

class Bandit : public EngineStrategy {
 public:
  Bandit(std::shared_ptr<const SpaceIndex> index, uint64_t seed)
      : EngineStrategy(index, seed) {
    // Each arm gets its own stream of the seed.
    arms_.push_back(MakeBo(index, seed ^ 0x9e3779b97f4a7c15ULL));
    arms_.push_back(MakeIls(index, seed ^ 0xbf58476d1ce4e5b9ULL));
    arms_.push_back(MakeGenetic(index, seed ^ 0x94d049bb133111ebULL));
    arms_.push_back(MakeAnnealing(index, seed ^ 0x2545f4914f6cdd1dULL));
    credit_.assign(arms_.size(), 0.0);
  }
  std::string Name() const override { return "bandit"; }

 protected:
  std::optional<Point> Propose() override {
    std::vector<double> weight(arms_.size());
    double total_credit = 0;
    for (double c : credit_) total_credit += c;
    for (size_t i = 0; i < arms_.size(); ++i) {
      const double share = total_credit > 0 ? credit_[i] / total_credit : 1.0 / arms_.size();
      weight[i] = exhausted_.count(i) ? 0 : kExplore / arms_.size() + (1 - kExplore) * share;
    }
    while (true) {
      double sum = 0;
      for (double w : weight) sum += w;
      if (sum <= 0) return std::nullopt;
      double u = rng().Uniform() * sum;
      size_t pick = 0;
      while (pick + 1 < arms_.size() && (u -= weight[pick]) >= 0) ++pick;
      if (weight[pick] <= 0) continue;
      std::optional<Point> p = arms_[pick]->Next();
      if (p) {
        // The other arms must not propose it while it is pending (a batch).
        for (size_t i = 0; i < arms_.size(); ++i) {
          if (i != pick) arms_[i]->Reserve(*p);
        }
        proposer_[index().ToIndex(*p)] = pick;
        return p;
      }
      exhausted_.insert(pick);
      weight[pick] = 0;
    }
  }

  void Learn(const Evaluation& e, bool own) override {
    for (double& c : credit_) c *= kDecay;
    // The gain: how much this evaluation lowered the best log objective.
    double gain = 0;
    if (e.ok && e.objective > 0) {
      if (best_ > 0 && e.objective < best_) gain = std::log(best_ / e.objective);
      if (best_ <= 0 || e.objective < best_) best_ = e.objective;
    }
    size_t proposer = arms_.size();
    const auto it = proposer_.find(index().ToIndex(e.point));
    if (it != proposer_.end()) {
      proposer = it->second;
      proposer_.erase(it);
    }
    for (size_t i = 0; i < arms_.size(); ++i) {
      if (own && i == proposer) {
        arms_[i]->Tell(e);
        credit_[i] += gain;
      } else {
        arms_[i]->Observe(e);
      }
    }
  }

  void OnReserve(const Point& p) override {
    for (auto& arm : arms_) arm->Reserve(p);
  }

 private:
  // Share of the budget spread evenly whatever the credits.
  static constexpr double kExplore = 0.3;
  // Credit halves in about 14 evaluations: "recent" gains.
  static constexpr double kDecay = 0.95;

  std::vector<std::unique_ptr<EngineStrategy>> arms_;
  std::vector<double> credit_;
  std::unordered_set<size_t> exhausted_;
  // The arm that proposed each pending point, by linear index.
  std::unordered_map<int64_t, size_t> proposer_;
  double best_ = 0;
};

}  // namespace

std::unique_ptr<EngineStrategy> MakeBandit(std::shared_ptr<const SpaceIndex> index,
                                           uint64_t seed) {
  return std::make_unique<Bandit>(std::move(index), seed);
}

}  // namespace strategies
}  // namespace attntune
