// BestEntries: the fastest ok config per (device, geometry, variant, phase, variant params,
// d, Lk, calibration set).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <utility>

#include "reports/report_util.h"
#include "reports/reports.h"

namespace attntune {

namespace {

// (device, geometry, variant, phase, variant params, d, Lk, calibration set): prefill and
// decode winners never mix, nor Gaussian and calibrated ones, nor two dtypes or models.
using BucketKey = std::tuple<std::string, EntryGeometry, std::string, Phase, std::string,
                             int64_t, int64_t, int64_t>;

// The other candidates of a set: each implementation's fastest, and the default's trial.
struct Others {
  std::map<std::string, const TrialRow*> by_impl;
  const TrialRow* default_trial = nullptr;
};

struct Candidate {
  const TrialRow* trial;
  std::string variant_params;  // canonical JSON of the variant's own parameters
  const Others* others;
};

// The entry's implementations, the next fastest and the default (BestEntry's fields).
void AddComparisons(const TrialRow& t, const Others& o, BestEntry* e) {
  for (const auto& [impl, row] : o.by_impl) {
    e->implementation_ms[impl] = row->result.median_ms;
    e->implementation_trial[impl] = row->id;
    if (impl != t.config.implementation &&
        (e->next_implementation.empty() || row->result.median_ms < e->next_ms)) {
      e->next_implementation = impl;
      e->next_ms = row->result.median_ms;
    }
  }
  const TrialRow* d = o.default_trial;
  if (d == nullptr) return;
  e->default_implementation = d->config.implementation;
  e->default_tunables_json = d->config.tunables_json;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double retimed_default = report_util::MetricOr(t.result, kMetricConfirmDefaultMs, nan);
  const double default_trial = report_util::MetricOr(t.result, kMetricConfirmDefaultTrial, nan);
  if (d != &t && default_trial == static_cast<double>(d->id) && retimed_default == retimed_default) {
    e->default_retimed = true;
    e->default_ms = retimed_default;
    e->retimed_ms = report_util::MetricOr(t.result, kMetricConfirmMs, nan);
  } else {
    e->default_ms = d->result.median_ms;
  }
}

// Faster wins; equal medians go to the older trial, so that the choice is stable.
bool Faster(const TrialRow& a, const TrialRow& b) {
  if (a.result.median_ms != b.result.median_ms) return a.result.median_ms < b.result.median_ms;
  return a.id < b.id;
}

EntryQuality QualityOf(const TrialRow& t, const std::map<int64_t, std::string>& floors,
                       const std::map<int64_t, const CalibrationRecord*>& calibrations) {
  EntryQuality q;
  if (auto it = calibrations.find(t.problem.calib_id); it != calibrations.end()) {
    q.calibration = it->second->content_hash.substr(0, 12);
    q.calibration_model = it->second->model;
  } else if (t.problem.calib_id != 0) {
    q.calibration = "#" + std::to_string(t.problem.calib_id);  // a row the input lacks
  }
  const double nan = std::numeric_limits<double>::quiet_NaN();
  q.mass_recall_worst = report_util::MetricOr(t.result, "mass_recall_worst", nan);
  q.rel_err_worst = report_util::MetricOr(t.result, "rel_err_worst", nan);
  if (auto it = floors.find(t.problem.id); it != floors.end()) q.floor = it->second;
  if (!q.floor.empty())
    q.meets_floor = ParseQualityFloor(q.floor, "the database's floor").MetBy(t.result.metrics);
  return q;
}

}  // namespace

std::string EntryGeometry::ToString() const {
  return std::string(attntune::ToString(dtype)) + " B=" + std::to_string(batch) +
         " Hq=" + std::to_string(q_heads) + " Hkv=" + std::to_string(kv_heads);
}

EntryGeometry GeometryOf(const ProblemRecord& problem) {
  return EntryGeometry{problem.dtype, problem.shape.B, problem.shape.Hq, problem.shape.Hkv};
}

std::vector<BestEntry> ChosenEntries(const std::vector<BestEntry>& best) {
  using ChoiceKey =
      std::tuple<std::string, EntryGeometry, std::string, Phase, int64_t, int64_t, int64_t>;
  std::map<ChoiceKey, const BestEntry*> chosen;
  auto better = [](const BestEntry& a, const BestEntry& b) {  // a before b
    const bool a_meets = !a.quality.floor.empty() && a.quality.meets_floor;
    const bool b_meets = !b.quality.floor.empty() && b.quality.meets_floor;
    if (a_meets != b_meets) return a_meets;
    return a.median_ms < b.median_ms;
  };
  for (const BestEntry& e : best) {
    const ChoiceKey key{e.device_name, e.geometry, e.variant, e.phase,
                        e.head_dim,    e.seq_len,  e.calib_id};
    auto it = chosen.find(key);
    if (it == chosen.end() || better(e, *it->second)) chosen[key] = &e;
  }
  std::vector<BestEntry> out;
  for (const BestEntry& e : best) {  // in `best`'s order
    const ChoiceKey key{e.device_name, e.geometry, e.variant, e.phase,
                        e.head_dim,    e.seq_len,  e.calib_id};
    if (chosen.at(key) == &e) out.push_back(e);
  }
  return out;
}

std::vector<BestEntry> BestEntries(const ReportInput& input) {
  // The newest verdict on each configuration of a problem, device and build: a trial
  // stored later (another tolerance's wrong_result, say) replaces an older ok one.
  // (Keyed by content: the rows' own numbers are those of one database.)
  auto same_config = [](const TrialRow& t) {
    return std::make_tuple(t.device.name, t.device.fingerprint_json, ToString(t.problem.dtype),
                           t.problem.shape.ToString(), t.problem.phase, t.problem.calib_id,
                           t.config.variant, t.config.implementation, t.config.params_json,
                           t.config.tunables_json, t.build.version, t.build.kernel_hash);
  };
  std::map<decltype(same_config(TrialRow{})), int64_t> newest;
  for (const TrialRow& t : input.trials) {
    // A verdict: a launch failure or timeout may be transient (a tune retries them) and
    // does not hide an ok trial.
    if (t.result.status != TrialStatus::kOk && t.result.status != TrialStatus::kInvalid &&
        t.result.status != TrialStatus::kWrongResult)
      continue;
    int64_t& id = newest[same_config(t)];
    id = std::max(id, t.id);
  }
  std::map<BucketKey, Candidate> best;
  std::map<BucketKey, Others> others;
  for (const TrialRow& t : input.trials) {
    if (t.result.status != TrialStatus::kOk) continue;
    if (newest.at(same_config(t)) != t.id) continue;
    // A time that is not a number (a damaged row) would win every comparison.
    if (!std::isfinite(t.result.median_ms)) continue;
    // Re-timed as no faster than the default: not a candidate (tuner/confirm.h).
    if (report_util::MetricOr(t.result, kMetricLostToDefault, 0.0) != 0) continue;
    std::string variant_params = t.config.params_json;
    const BucketKey key{t.device.name,       GeometryOf(t.problem), t.config.variant,
                        t.problem.phase,     variant_params,        t.problem.shape.d,
                        t.problem.shape.Lk, t.problem.calib_id};
    Others& o = others[key];
    const TrialRow*& fastest = o.by_impl[t.config.implementation];
    if (fastest == nullptr || Faster(t, *fastest)) fastest = &t;
    if (report_util::MetricOr(t.result, kMetricIsDefault, 0.0) != 0) o.default_trial = &t;
    auto it = best.find(key);
    if (it == best.end())
      best.emplace(key, Candidate{&t, std::move(variant_params), &o});
    else if (Faster(t, *it->second.trial))
      it->second.trial = &t;
  }

  std::vector<Candidate> winners;
  winners.reserve(best.size());
  for (auto& [key, candidate] : best) winners.push_back(std::move(candidate));
  std::sort(winners.begin(), winners.end(), [](const Candidate& a, const Candidate& b) {
    const TrialRow& x = *a.trial;
    const TrialRow& y = *b.trial;
    const EntryGeometry gx = GeometryOf(x.problem), gy = GeometryOf(y.problem);
    return std::tie(x.device.name, gx, x.config.variant, x.problem.phase, x.problem.shape.d,
                    x.problem.shape.Lk, x.problem.calib_id, a.variant_params,
                    x.config.tunables_json) <
           std::tie(y.device.name, gy, y.config.variant, y.problem.phase, y.problem.shape.d,
                    y.problem.shape.Lk, y.problem.calib_id, b.variant_params,
                    y.config.tunables_json);
  });
  const std::map<int64_t, std::string> floors = report_util::NewestFloors(input);
  std::map<int64_t, const CalibrationRecord*> calibrations;
  for (const CalibrationRecord& c : input.calibrations) calibrations[c.id] = &c;

  std::vector<BestEntry> entries;
  entries.reserve(winners.size());
  for (const Candidate& c : winners) {
    const TrialRow& t = *c.trial;
    BestEntry e;
    e.device_name = t.device.name;
    e.geometry = GeometryOf(t.problem);
    e.variant = t.config.variant;
    e.phase = t.problem.phase;
    e.implementation = t.config.implementation;
    e.params_json = t.config.params_json;
    e.tunables_json = t.config.tunables_json;
    e.head_dim = t.problem.shape.d;
    e.seq_len = t.problem.shape.Lk;
    e.median_ms = t.result.median_ms;
    e.rel_err = report_util::MetricOr(t.result, "rel_err", 0.0);
    e.mass_recall = report_util::MetricOr(t.result, "mass_recall", 1.0);
    e.trial_id = t.id;
    e.calib_id = t.problem.calib_id;
    e.quality = QualityOf(t, floors, calibrations);
    AddComparisons(t, *c.others, &e);
    entries.push_back(std::move(e));
  }
  return entries;
}

}  // namespace attntune
