#include "tuner/store.h"

#include "build_info.h"

namespace attntune {

TrialStore::TrialStore(Database& db, const DeviceInfo& device, const std::string& args_json)
    : db_(db) {
  device_id_ = db_.PutDevice({0, device.kind, device.name, device.fingerprint_json});
  build_id_ = db_.PutBuild({0, ATTNTUNE_VERSION, ATTNTUNE_KERNEL_HASH});
  run_id_ = db_.BeginRun(args_json, device_id_, UtcNow());
}

void TrialStore::Finish() { db_.FinishRun(run_id_, UtcNow()); }

TrialStore::Trial TrialStore::EvaluateOrReuse(int64_t problem_id, const Variant& variant,
                                              const Implementation& impl, const Params& params,
                                              ProblemContext& context, Timer& timer,
                                              const EvaluateOptions& options,
                                              const std::function<void()>& before_evaluate) {
  const int64_t config_id = db_.PutConfig({0, variant.id, impl.id,
                                           CanonicalVariantParamsJson(variant, params),
                                           CanonicalTunablesJson(impl, params)});
  Trial trial;
  if (auto stored = db_.FindReusable(device_id_, problem_id, config_id, build_id_)) {
    trial.id = stored->id;
    trial.result = stored->result;
    trial.reused = true;
    return trial;
  }
  if (before_evaluate) before_evaluate();
  trial.result = EvaluateCandidate(context, variant, impl, params, timer, options).result;
  trial.id = db_.InsertTrial(run_id_, device_id_, problem_id, config_id, build_id_, trial.result);
  return trial;
}

}  // namespace attntune
