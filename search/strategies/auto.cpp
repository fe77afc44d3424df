// The default strategy: a Gaussian-process model steers the first evaluations, where
// knowing the whole space pays most; then greedy iterated local search climbs from the
// best points found, at a fraction of the model's cost per step. Both see every
// evaluation. The model sees the ranks of its targets (BoOptions::rank_targets), not
// their log: on spaces whose slow configurations are 30-100x slower than the good ones,
// a fit of log(time) spends itself on telling slow from very slow. Its kernel adds an
// additive value-match term (BoOptions::tune_additive) to the ordered and categorical
// ones, each share chosen by likelihood. Settings were chosen on recorded data and
// checked on spaces and seeds they were not chosen on (docs/search.md).
#include <unordered_map>
#include <utility>

#include "search/strategies/bo.h"

namespace attntune {
namespace strategies {
namespace {

class Auto : public EngineStrategy {
 public:
  Auto(std::shared_ptr<const SpaceIndex> index, uint64_t seed) : EngineStrategy(index, seed) {
    BoOptions options;
    options.name = "auto.bo";
    options.rank_targets = true;
    options.tune_additive = true;
    model_ = MakeBoWith(index, seed ^ 0x9e3779b97f4a7c15ULL, options);
    climb_ = MakeIls(index, seed ^ 0xbf58476d1ce4e5b9ULL);
  }
  std::string Name() const override { return "auto"; }

 protected:
  std::optional<Point> Propose() override {
    EngineStrategy* first = AskedCount() < kModelEvaluations ? model_.get() : climb_.get();
    EngineStrategy* second = first == model_.get() ? climb_.get() : model_.get();
    for (EngineStrategy* s : {first, second}) {
      std::optional<Point> p = s->Next();
      if (!p) continue;
      // The other part must not propose it while it is pending (a batch).
      (s == first ? second : first)->Reserve(*p);
      proposer_[index().ToIndex(*p)] = s;
      return p;
    }
    return std::nullopt;
  }

  void Learn(const Evaluation& e, bool own) override {
    EngineStrategy* proposer = nullptr;
    const auto it = proposer_.find(index().ToIndex(e.point));
    if (it != proposer_.end()) {
      proposer = it->second;
      proposer_.erase(it);
    }
    for (EngineStrategy* s : {model_.get(), climb_.get()}) {
      if (own && s == proposer) {
        s->Tell(e);
      } else {
        s->Observe(e);
      }
    }
  }

  void OnReserve(const Point& p) override {
    model_->Reserve(p);
    climb_->Reserve(p);
  }

 private:

  // Evaluations steered by the model before local search takes over.
  static constexpr int64_t kModelEvaluations = 100;

  std::unique_ptr<EngineStrategy> model_, climb_;
  // The part that proposed each pending point, by linear index.
  std::unordered_map<int64_t, EngineStrategy*> proposer_;
};

}  // namespace

std::unique_ptr<EngineStrategy> MakeAuto(std::shared_ptr<const SpaceIndex> index, uint64_t seed) {
  return std::make_unique<Auto>(std::move(index), seed);
}

}  // namespace strategies
}  // namespace attntune
