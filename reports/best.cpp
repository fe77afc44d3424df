// BestEntries: the fastest ok config per (device, variant, phase, variant params, d, Lk).
#include <algorithm>
#include <map>
#include <tuple>

#include "reports/report_util.h"
#include "reports/reports.h"

namespace attntune {

namespace {

// (device, variant, phase, variant params, d, Lk): prefill and decode winners never mix.
using BucketKey = std::tuple<std::string, std::string, Phase, std::string, int64_t, int64_t>;

struct Candidate {
  const TrialRow* trial;
  std::string variant_params;  // canonical JSON of the variant's own parameters
};

// Faster wins; equal medians go to the older trial, so that the choice is stable.
bool Faster(const TrialRow& a, const TrialRow& b) {
  if (a.result.median_ms != b.result.median_ms) return a.result.median_ms < b.result.median_ms;
  return a.id < b.id;
}

}  // namespace

std::vector<BestEntry> BestEntries(const ReportInput& input) {
  std::map<BucketKey, Candidate> best;
  for (const TrialRow& t : input.trials) {
    if (t.result.status != TrialStatus::kOk) continue;
    std::string variant_params = t.config.params_json;
    const BucketKey key{t.device.name,  t.config.variant,   t.problem.phase,
                        variant_params, t.problem.shape.d, t.problem.shape.Lk};
    auto it = best.find(key);
    if (it == best.end())
      best.emplace(key, Candidate{&t, std::move(variant_params)});
    else if (Faster(t, *it->second.trial))
      it->second.trial = &t;
  }

  std::vector<Candidate> winners;
  winners.reserve(best.size());
  for (auto& [key, candidate] : best) winners.push_back(std::move(candidate));
  std::sort(winners.begin(), winners.end(), [](const Candidate& a, const Candidate& b) {
    const TrialRow& x = *a.trial;
    const TrialRow& y = *b.trial;
    return std::tie(x.device.name, x.config.variant, x.problem.phase, x.problem.shape.d,
                    x.problem.shape.Lk, a.variant_params, x.config.tunables_json) <
           std::tie(y.device.name, y.config.variant, y.problem.phase, y.problem.shape.d,
                    y.problem.shape.Lk, b.variant_params, y.config.tunables_json);
  });

  std::vector<BestEntry> entries;
  entries.reserve(winners.size());
  for (const Candidate& c : winners) {
    const TrialRow& t = *c.trial;
    BestEntry e;
    e.device_name = t.device.name;
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
    entries.push_back(std::move(e));
  }
  return entries;
}

}  // namespace attntune
