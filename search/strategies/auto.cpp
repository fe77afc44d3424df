// The default strategy: a Gaussian-process model steers the first evaluations, where
// knowing the whole space pays most; then greedy iterated local search climbs from the
// best points found, at a fraction of the model's cost per step. Both see every
// evaluation. The model sees the ranks of its targets (BoOptions::rank_targets), not
// their log: on spaces whose slow configurations are 30-100x slower than the good ones,
// a fit of log(time) spends itself on telling slow from very slow. Its kernel adds an
// additive value-match term (BoOptions::tune_additive) to the ordered and categorical
// ones, each share chosen by likelihood. Settings were chosen on recorded data and
// checked on spaces and seeds they were not chosen on (docs/search.md).
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
