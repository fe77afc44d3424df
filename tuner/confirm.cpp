#include "tuner/confirm.h"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "profiler/nvtx.h"

namespace attntune {

namespace {

// A canonical JSON object of parameters ({"Tile":"64x64","w":1024}) as Params.
Params ParamsFromJson(const std::string& text) {
  Params params;
  const nlohmann::json j = nlohmann::json::parse(text, nullptr, false);
  if (!j.is_object()) return params;
  for (const auto& [name, value] : j.items())
    params[name] = value.is_string() ? value.get<std::string>() : value.dump();
  return params;
}

bool Flag(const TrialRow& row, const char* metric) {
  const auto it = row.result.metrics.find(metric);
  return it != row.result.metrics.end() && it->second != 0;
}

// One task on the context's slot, waited for; nullopt when the slot is lost.
std::optional<TrialResult> RunOnSlot(const ConfirmContext& ctx, CandidateTask task) {
  static int64_t ticket = int64_t{1} << 40;  // apart from the run loop's tickets
  task.ticket = ++ticket;
  ctx.pool.Submit(ctx.slot, task);
  for (;;) {
    std::optional<PoolEvent> event = ctx.pool.Wait(1.0);
    if (!event) continue;
    if (event->kind == PoolEvent::Kind::kLost && ctx.lost != nullptr &&
        event->slot >= 0 && static_cast<size_t>(event->slot) < ctx.lost->size())
      (*ctx.lost)[static_cast<size_t>(event->slot)] = true;
    if (event->slot != ctx.slot) continue;
    if (event->kind == PoolEvent::Kind::kLost) return std::nullopt;
    if (event->ticket == task.ticket) return std::move(event->result);
  }
}

struct Problem {
  const ConfirmContext& ctx;
  size_t index;
  const TuneProblem& tune;
  const Variant& variant;
  const Implementation& default_impl;
  int64_t id;
};

// The default configuration's stored trial for the variant parameters `variant_params`:
// reused, or evaluated now (checked) and stored. Empty when another tune holds it or its
// parameters are invalid.
std::optional<TrialStore::Trial> DefaultTrial(const Problem& p, const Params& variant_params,
                                              Params* params, TuneSummary* summary, bool* lost) {
  if (!CheckParams(p.variant, p.default_impl, p.tune.shape, variant_params).empty()) {
    return std::nullopt;  // not even the default's tunables complete them
  }
  *params = ResolveParams(p.variant, &p.default_impl, p.tune.shape, variant_params, "default");
  TrialStore::Claimed claimed = p.ctx.store.Claim(p.id, p.variant, p.default_impl, *params);
  if (claimed.outcome == TrialStore::Claimed::Outcome::kHeld) return std::nullopt;
  ++summary->evaluations;  // counted as the searches' are
  if (claimed.outcome == TrialStore::Claimed::Outcome::kReusable) {
    ++summary->reused;
    return claimed.trial;
  }
  CandidateTask task;
  task.problem = static_cast<int64_t>(p.index);
  task.impl = p.default_impl.id;
  task.params = *params;
  task.first_open_problem = static_cast<int64_t>(p.index);
  std::optional<TrialResult> result = RunOnSlot(p.ctx, task);
  if (!result) {  // the slot is gone: nothing is stored
    p.ctx.store.Release(claimed);
    *lost = true;
    return std::nullopt;
  }
  TrialStore::Trial trial;
  trial.result = std::move(*result);
  trial.id = p.ctx.store.Store(claimed, p.ctx.unit, trial.result);
  ++summary->measured;
  if (trial.result.status != TrialStatus::kOk) ++summary->failed;
  return trial;
}

// The mean of two re-timings of each, A B B A; a failed re-timing counts as never faster.
// nullopt when the slot is lost.
std::optional<std::pair<double, double>> Retime(const Problem& p, const TrialRow& challenger,
                                 const Params& default_params) {
  CandidateTask a;
  a.problem = static_cast<int64_t>(p.index);
  a.impl = challenger.config.implementation;
  a.params = ParamsFromJson(challenger.config.params_json);
  for (const auto& [name, value] : ParamsFromJson(challenger.config.tunables_json))
    a.params[name] = value;
  a.first_open_problem = a.problem;
  a.retime = true;
  CandidateTask b = a;
  b.impl = p.default_impl.id;
  b.params = default_params;
  double sums[2] = {0, 0};
  bool failed[2] = {false, false};
  for (const int which : {0, 1, 1, 0}) {
    const std::optional<TrialResult> r = RunOnSlot(p.ctx, which == 0 ? a : b);
    if (!r) return std::nullopt;
    if (r->status != TrialStatus::kOk) failed[which] = true;
    sums[which] += r->median_ms / 2;
  }
  const double inf = std::numeric_limits<double>::infinity();
  return std::make_pair(failed[0] ? inf : sums[0], failed[1] ? inf : sums[1]);
}

void Report(const Problem& p, const TrialRow& row, const std::string& status,
            const std::string& message, double ms) {
  if (!p.ctx.progress) return;
  ProgressEvent ev;
  ev.problem_index = static_cast<int64_t>(p.index) + 1;
  ev.problem_count = static_cast<int64_t>(p.ctx.problems.size());
  ev.problem = p.tune.name;
  Params params = ParamsFromJson(row.config.params_json);
  for (const auto& [name, value] : ParamsFromJson(row.config.tunables_json)) params[name] = value;
  ev.config = row.config.implementation + " " + ParamsToString(params);
  ev.status = status;
  ev.message = message;
  ev.median_ms = ms;
  p.ctx.progress(ev);
}

// One variant-parameter set of a problem: its ok trials, the fastest first. False when the
// slot is lost.
bool ConfirmSet(const Problem& p, std::vector<TrialRow> rows, TuneSummary* summary) {
  std::stable_sort(rows.begin(), rows.end(), [](const TrialRow& x, const TrialRow& y) {
    return x.result.median_ms < y.result.median_ms;
  });
  Params default_params;
  bool lost = false;
  const std::optional<TrialStore::Trial> def = DefaultTrial(
      p, ParamsFromJson(rows.front().config.params_json), &default_params, summary, &lost);
  if (!def || def->result.status != TrialStatus::kOk) return !lost;  // nothing to measure against
  if (p.ctx.defaults != nullptr) {
    p.ctx.defaults->push_back(
        {def->id, p.index, &p.default_impl, default_params, def->result.metrics});
  }
  Database& db = p.ctx.store.Db();
  db.AddMetrics(def->id, {{kMetricIsDefault, 1}});
  const std::string default_tunables = CanonicalTunablesJson(p.default_impl, default_params);
  int challengers = 0;
  for (const TrialRow& row : rows) {
    if (Flag(row, kMetricLostToDefault)) continue;
    if (row.result.median_ms > def->result.median_ms) return true;  // the default is the fastest
    if (row.id == def->id || (row.config.implementation == p.default_impl.id &&
                              row.config.tunables_json == default_tunables))
      return true;
    if (challengers >= kMaxChallengers) {  // the default stands: mark what is left
      db.AddMetrics(row.id, {{kMetricLostToDefault, 1}});
      continue;
    }
    ++challengers;
    // Re-timed against this default before (a re-run): its verdict stands.
    const auto same = row.result.metrics.find(kMetricConfirmDefaultTrial);
    if (same != row.result.metrics.end() && same->second == static_cast<double>(def->id))
      return true;
    const auto retimed = Retime(p, row, default_params);
    if (!retimed) return false;  // the slot is gone
    const auto [mine, theirs] = *retimed;
    ++summary->retimed;
    const bool kept = mine < theirs;
    db.AddMetrics(row.id, {{kMetricConfirmMs, mine},
                           {kMetricConfirmDefaultMs, theirs},
                           {kMetricConfirmDefaultTrial, static_cast<double>(def->id)},
                           {kMetricLostToDefault, kept ? 0.0 : 1.0}});
    char text[160];
    std::snprintf(text, sizeof text, "%.4f ms against the default's %.4f ms (%s)", mine, theirs,
                  kept ? "kept" : "the default is as fast: not an entry");
    Report(p, row, "re-timed", text, mine);
    if (kept) return true;
    ++summary->lost_to_default;
  }
  return true;
}

}  // namespace

void ConfirmAgainstDefault(const ConfirmContext& ctx, TuneSummary* summary) {
  ATTNTUNE_CHECK(ctx.slot >= 0 && ctx.slot < ctx.pool.Slots());
  Database& db = ctx.store.Db();
  const TuneOptions& options = ctx.plan.options;
  const std::vector<int64_t>& peers = ctx.store.Peers();
  for (size_t i = 0; i < ctx.problems.size(); ++i) {
    const TuneProblem& tune = ctx.problems[i];
    const Variant& variant = *ctx.plan.variants[tune.variant];
    const std::vector<const Implementation*>& impls = ctx.plan.impls[tune.variant];
    const int64_t id =
        db.PutProblem({0, tune.shape, options.dtype, options.phase, ctx.plan.calib_id});
    const Problem p{ctx, i, tune, variant, *impls.front(), id};
    TrialFilter filter;
    filter.variant = variant.id;
    filter.ok_only = true;
    std::map<std::string, std::vector<TrialRow>> sets;  // by the variant's parameters
    for (TrialRow& row : db.Trials(filter)) {
      // This build's trials only (another attntune's times are not this binary's).
      if (row.problem.id != id || row.build.id != ctx.store.BuildId() ||
          std::find(peers.begin(), peers.end(), row.device.id) == peers.end())
        continue;
      const bool searched = std::any_of(impls.begin(), impls.end(), [&](const Implementation* m) {
        return m->id == row.config.implementation;
      });
      if (searched) sets[row.config.params_json].push_back(std::move(row));
    }
    NvtxRange range("re-time " + tune.name);
    for (auto& [params_json, rows] : sets) {
      if (!ConfirmSet(p, std::move(rows), summary)) return;  // the slot is gone
    }
  }
}

}  // namespace attntune
