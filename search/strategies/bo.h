// Model-based search: a Gaussian-process surrogate of log(objective) (or of its ranks)
// over the ordered value positions and the values as categories (a sum of kernels),
// expected improvement weighted by a kernel model of failure.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "search/strategies/common.h"

namespace attntune {
namespace strategies {

/// What the model is told about a point still being evaluated when it proposes another
/// (a batch): the pending point enters the fit with this target, so that the next
/// proposal looks elsewhere: the least, mean or greatest target so far (constant liar,
/// Ginsbourger et al. 2010) or the model's own prediction (Kriging believer). Chosen on
/// the recorded spaces at batch 4 (docs/search.md): the believer keeps auto's fraction of
/// optimum within 0.01 of the sequential search's at 25 to 400 evaluations (mean of the
/// five spaces); the least target falls 0.024 behind at 100.
enum class BatchLie { kMin, kMean, kMax, kBeliever };

struct BoOptions {
  std::string name = "bo";
  int initial = 10;           // random points before the model steers
  int random_candidates = 192;  // random unasked points scored per step
  int parents = 5;            // best points whose neighbours are scored per step
  int max_train = 100;        // the model sees at most this many points
  double xi = 0.0;            // EI's margin, in standard deviations of log(objective)
  double categorical = 0.5;   // share of the value-match kernel (the start when tuned)
  bool tune_categorical = true;  // choose the share by likelihood with the lengthscales
  // Model the normal scores of the targets' ranks (a Gaussian copula) instead of the
  // standardised log(objective): the model sees only the order of the points, so
  // neither a slow tail nor one outstanding point dominates its fit.
  bool rank_targets = false;
  // Share of an additive value-match kernel (the weighted fraction of dimensions whose
  // values agree): a model of per-value main effects that generalises from few points
  // in many dimensions. The start value when tuned by likelihood with the lengthscales.
  double additive = 0;
  bool tune_additive = false;
  BatchLie lie = BatchLie::kBeliever;
};

std::unique_ptr<EngineStrategy> MakeBoWith(std::shared_ptr<const SpaceIndex> index, uint64_t seed,
                                           const BoOptions& options);

}  // namespace strategies
}  // namespace attntune
