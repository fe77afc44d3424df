// The quality step of an evaluation: how much of dense attention a configuration keeps,
// measured on a quality source: the problem's own seeded Gaussian inputs, or a
// calibration set (a model's captured attention). Quality is kept per (layer, query head)
// and reported as the mean and the worst cell, because one configuration serves every
// layer and head.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "db/records.h"
#include "kernels/variant.h"
#include "tuner/calibration_set.h"
#include "tuner/evaluate.h"

namespace attntune {

struct QualityReport {
  double mass_recall = 1, rel_err = 0;              // means over the cells (see the sources)
  double mass_recall_worst = 1, rel_err_worst = 0;  // the worst cell's
  QualityCell mass_recall_worst_cell, rel_err_worst_cell;  // where (layer, head) they are
  std::vector<QualityCell> cells;                   // a calibration set's, stored with the trial

  /// Writes mass_recall, rel_err, mass_recall_worst and rel_err_worst, and the worst
  /// cells' places (mass_recall_worst_layer, _head; rel_err_worst_layer, _head).
  void Record(std::map<std::string, double>* metrics) const;
};

/// The mean and the worst of `cells` (rel_err: their mean; see GaussianQuality for the
/// Gaussian source's).
QualityReport Summarize(std::vector<QualityCell> cells);

class QualitySource {
 public:
  virtual ~QualitySource() = default;
  /// The quality of (`variant`, its own parameters in `params`) for `problem`, whose
  /// candidate wrote `out` on the problem's inputs and matched the variant's definition.
  virtual QualityReport Measure(const Variant& variant, const Params& params,
                                ProblemContext& problem, const std::vector<float>& out) = 0;
};

/// The problem's own inputs (one "layer", 0): mass_recall of the definition's key sets
/// per query head; rel_err of the candidate's checked output against dense per query head,
/// and as the mean its rel_err over the whole output (the metric as tune has stored it
/// since schema 1).
class GaussianQuality : public QualitySource {
 public:
  QualityReport Measure(const Variant& variant, const Params& params, ProblemContext& problem,
                        const std::vector<float>& out) override;
};

/// A calibration set, cropped to the problem's length (Lk; every row of the crop, in
/// decode too: a decode step's set is the prefill row's at the same position): the
/// definition of (variant, params) against dense on every captured layer and query head,
/// the samples stacked as one batch. The candidate's own output is not used: it matched
/// the definition in the gate, and so the quality of a configuration is that of its
/// variant parameters, computed once per (parameters, length).
class CalibrationQuality : public QualitySource {
 public:
  explicit CalibrationQuality(const CalibrationSet& set) : set_(set) {}  // not owned
  QualityReport Measure(const Variant& variant, const Params& params, ProblemContext& problem,
                        const std::vector<float>& out) override;
  /// The same, for a problem of length `length` (at most the set's tokens).
  const QualityReport& Measure(const Variant& variant, const Params& params, int64_t length);

 private:
  struct Layer {
    Tensors tensors;                 // the samples' first `length` tokens, stacked as batches
    std::vector<double> dense_ref;   // fp64 dense output
    std::vector<double> dense_lse;   // each row's log softmax denominator under dense
  };
  const Layer& LayerAt(size_t index, int64_t length);

  const CalibrationSet& set_;
  std::map<std::pair<size_t, int64_t>, Layer> layers_;  // by (layer index, length)
  std::map<std::string, QualityReport> reports_;        // by "variant|params|length"
};

}  // namespace attntune
