#include "tuner/store.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <ctime>
#include <thread>

#include "build_info.h"

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
  if (claim.pid <= 0) return false;
  return kill(static_cast<pid_t>(claim.pid), 0) == 0 || errno == EPERM;
}

// Drops the claim unless the trial's insert has dropped it: an evaluation that throws
// leaves no claim behind for others to wait on.
class ClaimGuard {
 public:
  ClaimGuard(Database& db, const TrialKey& key, int64_t pid) : db_(db), key_(key), pid_(pid) {}
  ~ClaimGuard() {
    if (done_) return;
    try {
      db_.ReleaseClaim(key_, pid_);
    } catch (...) {  // a dead claimant's claim is taken over anyway
    }
  }
  ClaimGuard(const ClaimGuard&) = delete;
  ClaimGuard& operator=(const ClaimGuard&) = delete;
  void Done() { done_ = true; }

 private:
  Database& db_;
  TrialKey key_;
  int64_t pid_;
  bool done_ = false;
};

}  // namespace

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
  const TrialKey key{device_id_, problem_id, config_id, build_id_};
  const int64_t pid = getpid();
  Trial trial;
  // Another tune measuring this candidate holds its claim: wait for its trial (or for its
  // claim to go, when its outcome is not reusable or it died) rather than measure twice.
  for (;;) {
    ClaimResult found = db_.ClaimOrReuse(key, {pid, std::time(nullptr)}, ClaimLive);
    if (found.outcome == ClaimResult::Outcome::kReusable) {
      trial.id = found.trial->id;
      trial.result = found.trial->result;
      trial.reused = true;
      return trial;
    }
    if (found.outcome == ClaimResult::Outcome::kClaimed) break;
    std::this_thread::sleep_for(kClaimPoll);
  }
  ClaimGuard claim(db_, key, pid);
  if (before_evaluate) before_evaluate();
  trial.result = EvaluateCandidate(context, variant, impl, params, timer, options).result;
  trial.id = db_.InsertTrial(run_id_, device_id_, problem_id, config_id, build_id_, trial.result);
  claim.Done();
  return trial;
}

}  // namespace attntune
