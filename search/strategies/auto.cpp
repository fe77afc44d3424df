// The default strategy: a Gaussian-process model steers the first evaluations, where
// knowing the whole space pays most; then greedy iterated local search climbs from the
// best points found, at a fraction of the model's cost per step. Both see every
// evaluation. The model sees the targets two ways (BoOptions::capped_every, both_views):
// plain, and capped at their median; on spaces whose slow configurations are many times
// slower than the good ones, the plain model spends itself on the slow half, while the
// capped one cannot tell middling points apart. Each step sums both views' expected
// improvements; the lengthscales are re-tuned on the two views in turn. Settings were chosen on recorded data (docs/search.md) and checked on
// spaces they were not chosen on.
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
    options.capped_every = 2;  // every other step: targets capped at their median
    options.cap_quantile = 0.5;
    options.both_views = true;  // and every step scores candidates by both views
    model_ = MakeBoWith(index, seed ^ 0x9e3779b97f4a7c15ULL, options);
    climb_ = MakeIls(index, seed ^ 0xbf58476d1ce4e5b9ULL);
  }
  std::string Name() const override { return "auto"; }

 protected:
  std::optional<Point> Propose() override {
    EngineStrategy* first = AskedCount() < kModelEvaluations ? model_.get() : climb_.get();
    EngineStrategy* second = first == model_.get() ? climb_.get() : model_.get();
    chosen_ = first;
    if (std::optional<Point> p = first->Next()) return p;
    chosen_ = second;
    return second->Next();
  }

  void Learn(const Evaluation& e, bool own) override {
    for (EngineStrategy* s : {model_.get(), climb_.get()}) {
      if (own && s == chosen_) {
        s->Tell(e);
      } else {
        s->Observe(e);
      }
    }
  }

 private:

  // Evaluations steered by the model before local search takes over.
  static constexpr int64_t kModelEvaluations = 100;

  std::unique_ptr<EngineStrategy> model_, climb_;
  EngineStrategy* chosen_ = nullptr;
};

}  // namespace

std::unique_ptr<EngineStrategy> MakeAuto(std::shared_ptr<const SpaceIndex> index, uint64_t seed) {
  return std::make_unique<Auto>(std::move(index), seed);
}

}  // namespace strategies
}  // namespace attntune
