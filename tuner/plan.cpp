#include "tuner/plan.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "core/error.h"
#include "core/files.h"
#include "search/strategies/registry.h"
#include "tuner/emit.h"

namespace attntune {

namespace {

// "" when some point of the grid of `variant`'s own parameters passes its constraint on
// `shape`, else the first point's reason: a variant that cannot run the shape at all.
std::string RejectsShape(const Variant& variant, const Shape& shape) {
  if (!variant.check) return "";
  Space grid;
  for (const ParamDecl& decl : variant.params) grid.AddDimension(decl.name, DeclaredValues(decl));
  std::string first;
  for (int64_t i = 0; i < grid.Size(); ++i) {
    const std::string reason = variant.check(shape, grid.Values(grid.FromIndex(i)));
    if (reason.empty()) return "";
    if (first.empty()) first = reason;
  }
  return first;
}


// Reads options.calib into `plan` and fills the lengths it implies: none given, the set's
// length; each given one at most that (quality is measured on the first L tokens).
void PlanCalibration(TunePlan& plan) {
  TuneOptions& options = plan.options;
  if (options.calib.empty()) return;
  plan.calibration = std::make_unique<CalibrationSet>(
      ReadCalibrationSet(options.calib, plan.model, "--calib"));
  const int64_t tokens = plan.calibration->tokens;
  if (options.seq_lens.empty()) options.seq_lens = {tokens};
  for (int64_t L : options.seq_lens) {
    if (L > tokens)
      throw UserError("--seq-lens: " + std::to_string(L) + " is longer than the calibration "
                      "set's " + std::to_string(tokens) + " tokens (quality is measured on the "
                      "first L captured tokens: tune at most " + std::to_string(tokens) +
                      ", or capture a longer text)");
  }
  plan.quality = std::make_unique<CalibrationQuality>(*plan.calibration);
  options.evaluate.quality = plan.quality.get();
}

}  // namespace

ProblemKind TunePlan::Kind() const { return {options.phase, options.dtype, model.head_dim}; }

Shape TuneShape(const TuneOptions& options, const ModelGeometry& model, const Variant& variant,
                int64_t L) {
  Shape shape;
  shape.B = options.batch;
  shape.Hq = model.q_heads;
  shape.Hkv = model.kv_heads;
  shape.Lk = L;
  shape.Lq = options.phase == Phase::kDecode && !variant.token_by_token ? 1 : L;
  shape.d = model.head_dim;
  ValidateShape(shape, "--model");
  return shape;
}


namespace {

// `--params`: every name a parameter of some planned variant, every value valid for each
// variant that declares it (stored canonical: "w=01024" searches 1024).
void CheckVariantGrid(TunePlan* plan) {
  for (auto& [name, values] : plan->options.variant_grid) {
    bool declared = false;
    std::string known;
    for (const Variant* variant : plan->variants) {
      for (const ParamDecl& decl : variant->params) {
        known += (known.empty() ? "" : ", ") + variant->id + "." + decl.name;
        if (decl.name != name) continue;
        declared = true;
        for (std::string& value : values) {
          std::string canonical;
          const std::string reason = CheckParamValue(decl, value, &canonical);
          if (!reason.empty()) throw UserError("--params: " + variant->id + ": " + reason);
          value = canonical;
        }
      }
    }
    if (!declared) {
      throw UserError("--params: '" + name + "' is not a parameter of the variants tuned (" +
                      (known.empty() ? "they take none" : known) + ")");
    }
    std::vector<std::string> distinct;  // in the order given
    for (const std::string& v : values)
      if (std::find(distinct.begin(), distinct.end(), v) == distinct.end()) distinct.push_back(v);
    values = distinct;
  }
}

}  // namespace

TunePlan PlanTune(const TuneOptions& options, Backend& backend, bool open_store) {
  TunePlan plan;
  plan.options = options;
  plan.backend = &backend;
  plan.model = LoadModel(options.model, "--model");
  for (const auto& id : options.variants) plan.variants.push_back(&FindVariant(id, "--variants"));
  if (plan.variants.empty()) throw UserError("--variants: no variant given");
  (void)ResolveDtype(backend, ToString(options.dtype), "--dtype");
  for (const Variant* variant : plan.variants) {
    std::vector<const Implementation*> impls =
        RequireImplementations(backend, *variant, plan.Kind(), "--variants");
    if (!options.generic && impls.size() > 1) {
      impls.erase(std::remove_if(impls.begin(), impls.end(),
                                 [](const Implementation* impl) {
                                   return impl->id == kGenericImplementation;
                                 }),
                  impls.end());
    }
    plan.impls.push_back(std::move(impls));
  }
  CheckVariantGrid(&plan);
  PlanCalibration(plan);
  if (plan.options.seq_lens.empty()) throw UserError("--seq-lens: no sequence length given");
  for (int64_t L : plan.options.seq_lens) {  // before anything is stored
    for (const Variant* variant : plan.variants) {
      const Shape shape = TuneShape(options, plan.model, *variant, L);
      CheckProblemFitsHost(shape, true, "--seq-lens");
      const std::string reason = RejectsShape(*variant, shape);
      if (!reason.empty()) {
        throw UserError("--variants: " + variant->id + " cannot run the " +
                        ToString(options.phase) + " problem " + shape.ToString() + ": " + reason);
      }
    }
  }
  if (!std::isfinite(options.time_budget_s) || options.time_budget_s < 0) {
    throw UserError("--time-budget: must be a positive duration");
  }
  if (options.budget < 0 || (options.budget == 0 && options.time_budget_s <= 0)) {
    throw UserError("--budget: must be a positive integer");
  }
  {
    Space probe;  // validates the strategy name before anything is stored
    probe.AddDimension("x", {"0"});
    (void)MakeStrategy(options.strategy, probe, options.seed, "--strategy");
  }
  // The backend's hooks around each measurement (UserError for --flush-l2 it cannot do),
  // the counter source, and the element size of the dtype.
  const MeasureHooks hooks = backend.Hooks(options.flush_l2);
  if (hooks.before_each) plan.options.evaluate.policy.before_each = hooks.before_each;
  if (hooks.after_measure) plan.options.evaluate.after_measure = hooks.after_measure;
  if (hooks.record_launches) plan.options.evaluate.record_launches = hooks.record_launches;
  plan.options.evaluate.element_bytes = ElementBytes(options.dtype);
  if (options.metrics) {
    std::string why;
    plan.counters = backend.MakeCounters(options.dtype, &why);
    if (!plan.counters) throw UserError("--metrics: " + why);
  }
  if (!open_store) return plan;
  CreateOutputFolder(options.out_dir);
  plan.db_path = options.db_path.empty()
                     ? (std::filesystem::path(options.out_dir) / "attntune.db").string()
                     : options.db_path;
  plan.db = Database::Open(plan.db_path);
  RefuseEmitOverDatabase(options.out_dir, plan.db_path);
  if (plan.calibration) plan.calib_id = plan.db->PutCalibration(plan.calibration->Record());
  return plan;
}

}  // namespace attntune
