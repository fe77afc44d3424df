#include "tuner/quality.h"

#include <algorithm>

#include "core/check.h"
#include "kernels/reference/reference.h"
#include "profiler/nvtx.h"

namespace attntune {

void QualityReport::Record(std::map<std::string, double>* metrics) const {
  (*metrics)["mass_recall"] = mass_recall;
  (*metrics)["rel_err"] = rel_err;
  (*metrics)["mass_recall_worst"] = mass_recall_worst;
  (*metrics)["rel_err_worst"] = rel_err_worst;
  (*metrics)["mass_recall_worst_layer"] = static_cast<double>(mass_recall_worst_cell.layer);
  (*metrics)["mass_recall_worst_head"] = static_cast<double>(mass_recall_worst_cell.head);
  (*metrics)["rel_err_worst_layer"] = static_cast<double>(rel_err_worst_cell.layer);
  (*metrics)["rel_err_worst_head"] = static_cast<double>(rel_err_worst_cell.head);
}

QualityReport Summarize(std::vector<QualityCell> cells) {
  QualityReport report;
  if (cells.empty()) return report;
  double recall = 0, err = 0;
  report.mass_recall_worst_cell = report.rel_err_worst_cell = cells.front();
  for (const QualityCell& c : cells) {  // the first of equal cells is the worst
    recall += c.mass_recall;
    err += c.rel_err;
    if (c.mass_recall < report.mass_recall_worst_cell.mass_recall) report.mass_recall_worst_cell = c;
    if (c.rel_err > report.rel_err_worst_cell.rel_err) report.rel_err_worst_cell = c;
  }
  report.mass_recall_worst = report.mass_recall_worst_cell.mass_recall;
  report.rel_err_worst = report.rel_err_worst_cell.rel_err;
  report.mass_recall = recall / static_cast<double>(cells.size());
  report.rel_err = err / static_cast<double>(cells.size());
  report.cells = std::move(cells);
  return report;
}

QualityReport GaussianQuality::Measure(const Variant& variant, const Params& params,
                                       ProblemContext& problem, const std::vector<float>& out) {
  const ProblemContext::Truth& truth = problem.TruthOf(variant, params);
  const ProblemContext::Truth& dense = problem.Dense();
  const std::vector<double> errs = RelErrByHead(problem.GetShape(), out.data(), dense.reference);
  std::vector<QualityCell> cells;
  for (size_t h = 0; h < errs.size(); ++h)
    cells.push_back({0, static_cast<int64_t>(h), truth.head_mass_recall[h], errs[h]});
  QualityReport report = Summarize(std::move(cells));
  report.rel_err = RelErr(out.data(), dense.reference);
  report.cells.clear();  // the problem's own inputs: nothing worth storing per head
  return report;
}

const CalibrationQuality::Layer& CalibrationQuality::LayerAt(size_t index, int64_t length) {
  const auto key = std::make_pair(index, length);
  auto it = layers_.find(key);
  if (it != layers_.end()) return it->second;
  NvtxRange range("calibration dense layer " + std::to_string(set_.layers[index]));
  Layer layer;
  Tensors& t = layer.tensors;
  std::vector<float> q, k, v;
  for (const CalibrationSample& sample : set_.samples) {
    const Tensors crop = CropTokens(sample.layers[index], length);
    if (q.empty()) {
      t.shape = crop.shape;
      t.shape.B = 0;
    }
    t.shape.B += crop.shape.B;  // the samples' sequences as one batch
    q.insert(q.end(), crop.q.begin(), crop.q.end());
    k.insert(k.end(), crop.k.begin(), crop.k.end());
    v.insert(v.end(), crop.v.begin(), crop.v.end());
  }
  t.q = std::move(q);
  t.k = std::move(k);
  t.v = std::move(v);
  const Variant& dense = FindVariant("dense", "internal");
  layer.dense_ref = ReferenceAttention(t, *dense.key_sets(t, {}), &layer.dense_lse);
  return layers_.emplace(key, std::move(layer)).first->second;
}

const QualityReport& CalibrationQuality::Measure(const Variant& variant, const Params& params,
                                                 int64_t length) {
  ATTNTUNE_CHECK(length >= 1 && length <= set_.tokens);
  const Params own = VariantParams(variant, params);
  const std::string key = variant.id + "|" + ParamsToString(own) + "|" + std::to_string(length);
  auto it = reports_.find(key);
  if (it != reports_.end()) return it->second;
  NvtxRange range("calibration quality " + key);
  std::vector<QualityCell> cells;
  for (size_t n = 0; n < set_.layers.size(); ++n) {
    const Layer& layer = LayerAt(n, length);
    const Tensors& t = layer.tensors;
    std::vector<double> recall(static_cast<size_t>(t.shape.Hq), 1.0);
    std::vector<double> err(static_cast<size_t>(t.shape.Hq), 0.0);
    if (variant.id != "dense") {  // dense keeps all of its own mass, exactly
      const auto sets = variant.key_sets(t, own);
      recall = MassRecallByHead(t, *sets, layer.dense_lse);
      err = RelErrByHead(t.shape, ReferenceAttention(t, *sets), layer.dense_ref);
    }
    for (size_t h = 0; h < recall.size(); ++h)
      cells.push_back({set_.layers[n], static_cast<int64_t>(h), recall[h], err[h]});
  }
  return reports_.emplace(key, Summarize(std::move(cells))).first->second;
}

QualityReport CalibrationQuality::Measure(const Variant& variant, const Params& params,
                                          ProblemContext& problem, const std::vector<float>&) {
  return Measure(variant, params, problem.GetShape().Lk);
}

}  // namespace attntune
