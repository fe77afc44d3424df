#include "tuner/store.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <ctime>
#include <fstream>
#include <string>
#include <thread>

#include <nlohmann/json.hpp>

#include "build_info.h"
#include "core/check.h"

namespace attntune {

namespace {

// A claim older than this is taken over even if its pid is alive: the pid may have been
// reused by another program after the claimant died. One hour is far above one
// candidate's gate and measurement with any limit the CLI sets.
constexpr int64_t kClaimStaleSeconds = 3600;

// How often a tune waiting on another's claim looks for its trial: a candidate takes tens
// of milliseconds at the least, so this adds little to the wait.
constexpr std::chrono::milliseconds kClaimPoll{20};

// Whether the process that took `claim` may still be measuring (on this host; a database
// shared across hosts would need more than a pid).
bool ClaimLive(const Claim& claim) {
  if (std::time(nullptr) - claim.claimed_at > kClaimStaleSeconds) return false;
  return ProcessRunning(claim.pid);
}

// Drops the claim unless the trial's insert has dropped it: an evaluation that throws
// leaves no claim behind for others to wait on.
class ClaimGuard {
 public:
  ClaimGuard(TrialStore& store, const TrialStore::Claimed& claimed)
      : store_(store), claimed_(claimed) {}
  ~ClaimGuard() {
    if (done_) return;
    try {
      store_.Release(claimed_);
    } catch (...) {  // a dead claimant's claim is taken over anyway
    }
  }
  ClaimGuard(const ClaimGuard&) = delete;
  ClaimGuard& operator=(const ClaimGuard&) = delete;
  void Done() { done_ = true; }

 private:
  TrialStore& store_;
  const TrialStore::Claimed& claimed_;
  bool done_ = false;
};

}  // namespace

bool ProcessRunning(int64_t pid) {
  if (pid <= 0) return false;
  if (kill(static_cast<pid_t>(pid), 0) != 0 && errno != EPERM) return false;
  // /proc/<pid>/stat: "pid (comm) S ...", the state after the last ')' (comm may hold
  // one); none readable (another OS, no /proc): running, as kill says.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return true;
  const size_t close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() || line[close + 2] != 'Z';
}

std::string ModelFingerprint(const std::string& fingerprint_json,
                             const std::vector<std::string>& unit_fields) {
  nlohmann::json parsed = nlohmann::json::parse(fingerprint_json, nullptr, false);
  if (!parsed.is_object()) return fingerprint_json;
  for (const std::string& field : unit_fields) parsed.erase(field);
  return parsed.dump();  // an object's keys are sorted: canonical
}

TrialStore::TrialStore(Database& db, const DeviceInfo& device, const std::string& args_json,
                       const std::string& runtime_libraries)
    : db_(db), args_json_(args_json),
      model_(ModelFingerprint(device.fingerprint_json, device.unit_fields)),
      unit_fields_(device.unit_fields) {
  const std::string hash = std::string(ATTNTUNE_KERNEL_HASH) +
                           (runtime_libraries.empty() ? "" : "+" + runtime_libraries);
  build_id_ = db_.PutBuild({0, ATTNTUNE_VERSION, hash});
  AddUnit(device);
}

size_t TrialStore::AddUnit(const DeviceInfo& device) {
  ATTNTUNE_CHECK_MSG(ModelFingerprint(device.fingerprint_json, unit_fields_) == model_,
                     "a unit of another model of device");
  Unit unit;
  unit.device_id = db_.PutDevice({0, device.kind, device.name, device.fingerprint_json});
  for (size_t i = 0; i < units_.size(); ++i) {
    if (units_[i].device_id == unit.device_id) return i;  // two ranks on one device
  }
  unit.run_id = db_.BeginRun(args_json_, unit.device_id, UtcNow());
  units_.push_back(unit);
  FindPeers();
  return units_.size() - 1;
}

void TrialStore::FindPeers() {
  peers_.clear();
  for (const DeviceRecord& d : db_.Devices()) {
    if (ModelFingerprint(d.fingerprint_json, unit_fields_) == model_) peers_.push_back(d.id);
  }
  ATTNTUNE_CHECK(!peers_.empty());  // the units themselves
}

std::vector<int64_t> TrialStore::RunIds() const {
  std::vector<int64_t> ids;
  for (const Unit& unit : units_) ids.push_back(unit.run_id);
  return ids;
}

void TrialStore::Finish() {
  for (const Unit& unit : units_) db_.FinishRun(unit.run_id, UtcNow());
}

TrialStore::Claimed TrialStore::Claim(int64_t problem_id, const Variant& variant,
                                      const Implementation& impl, const Params& params) {
  const int64_t config_id = db_.PutConfig({0, variant.id, impl.id,
                                           CanonicalVariantParamsJson(variant, params),
                                           CanonicalTunablesJson(impl, params)});
  Claimed claimed;
  // One key per model, so that two tunes of the model on different units claim alike:
  // the model's first stored device (stored devices are never removed).
  claimed.key = {peers_.front(), problem_id, config_id, build_id_};
  // A trial the gate judged under another tolerance: its verdict under this run's.
  std::function<bool(const TrialRow&)> same_verdict;
  if (tolerance_) {
    const double tolerance =
        impl.tolerance ? std::max(*tolerance_, impl.tolerance(params)) : *tolerance_;
    same_verdict = [tolerance](const TrialRow& t) {
      const auto err = t.result.metrics.find("check_err");
      if (err == t.result.metrics.end()) return true;  // no gate read it
      if (t.result.status == TrialStatus::kOk) return err->second <= tolerance;
      if (t.result.status == TrialStatus::kWrongResult) return err->second > tolerance;
      return true;
    };
  }
  if (flush_l2_) {
    const bool flush = *flush_l2_;
    same_verdict = [flush, gate = std::move(same_verdict)](const TrialRow& t) {
      if (gate && !gate(t)) return false;
      if (t.result.status != TrialStatus::kOk) return true;  // a verdict, not a time
      const auto flushed = t.result.metrics.find("l2_flushed");
      const bool was = flushed != t.result.metrics.end() && flushed->second != 0;
      return was == flush;
    };
  }
  const ClaimResult found = db_.ClaimOrReuse(claimed.key, {getpid(), std::time(nullptr)},
                                             ClaimLive, peers_, same_verdict);
  switch (found.outcome) {
    case ClaimResult::Outcome::kReusable:
      claimed.outcome = Claimed::Outcome::kReusable;
      claimed.trial.id = found.trial->id;
      claimed.trial.result = found.trial->result;
      claimed.trial.reused = true;
      break;
    case ClaimResult::Outcome::kClaimed: claimed.outcome = Claimed::Outcome::kClaimed; break;
    case ClaimResult::Outcome::kHeld: claimed.outcome = Claimed::Outcome::kHeld; break;
  }
  return claimed;
}

int64_t TrialStore::Store(const Claimed& claimed, size_t unit, const TrialResult& result) {
  ATTNTUNE_CHECK(claimed.outcome == Claimed::Outcome::kClaimed && unit < units_.size());
  const TrialKey& key = claimed.key;
  return db_.InsertTrial(units_[unit].run_id, units_[unit].device_id, key.problem_id,
                         key.config_id, key.build_id, result, &key);
}

void TrialStore::Release(const Claimed& claimed) {
  if (claimed.outcome == Claimed::Outcome::kClaimed) db_.ReleaseClaim(claimed.key, getpid());
}

TrialStore::Trial TrialStore::EvaluateOrReuse(int64_t problem_id, const Variant& variant,
                                              const Implementation& impl, const Params& params,
                                              ProblemContext& context, Timer& timer,
                                              const EvaluateOptions& options,
                                              const std::function<void()>& before_evaluate) {
  // Another tune measuring this candidate holds its claim: wait for its trial (or for its
  // claim to go, when its outcome is not reusable or it died) rather than measure twice.
  Claimed claimed;
  for (;;) {
    claimed = Claim(problem_id, variant, impl, params);
    if (claimed.outcome == Claimed::Outcome::kReusable) return claimed.trial;
    if (claimed.outcome == Claimed::Outcome::kClaimed) break;
    std::this_thread::sleep_for(kClaimPoll);
  }
  ClaimGuard guard(*this, claimed);
  if (before_evaluate) before_evaluate();
  Trial trial;
  trial.result = EvaluateCandidate(context, variant, impl, params, timer, options).result;
  trial.id = Store(claimed, 0, trial.result);
  guard.Done();
  return trial;
}

}  // namespace attntune
