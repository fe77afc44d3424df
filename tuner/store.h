// The store stage: each candidate of a run evaluated (gate, then measure) unless the
// database holds a reusable trial of it, and stored in a transaction of its own, so that
// a killed run loses at most the candidate in flight (DESIGN.md s4). A candidate being
// measured is claimed in the database, so that two tunes on one file measure it once.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "db/database.h"
#include "profiler/device.h"
#include "tuner/evaluate.h"

namespace attntune {

/// Whether process `pid` of this host is still running: it exists (kill(pid, 0), EPERM
/// included) and is not a zombie, which answers kill(pid, 0) until its parent reaps it
/// but measures nothing (a tune killed under a driver that never waits for it held its
/// claims for an hour).
bool ProcessRunning(int64_t pid);

/// The fingerprint of `fingerprint_json` without `unit_fields` (DeviceInfo::unit_fields):
/// what devices of one model share. Canonical JSON; the text itself when it is not a
/// JSON object.
std::string ModelFingerprint(const std::string& fingerprint_json,
                             const std::vector<std::string>& unit_fields);

/// The rows a run's trials hang off, for one model of device: each unit's device row and
/// run (one unit in a process's own tune; one per MPI rank with such a device), and the
/// build (attntune's version, its kernels' hash and the libraries loaded at run time). A stored trial of any device of the model (equal but for its unit fields) is
/// reused, and a candidate is claimed once for the model.
class TrialStore {
 public:
  /// Stores `device` and this build, and begins a run with `args_json` on the device.
  /// `runtime_libraries` ("cudnn 9.10.2 (frontend 1.12.0)"; "" none) joins the build's
  /// identity: trials measured with another library version are measured again.
  TrialStore(Database& db, const DeviceInfo& device, const std::string& args_json,
             const std::string& runtime_libraries = "");
  /// Another unit of the same model: its device row and run; returns its unit number.
  size_t AddUnit(const DeviceInfo& device);
  /// Marks every unit's run finished.
  void Finish();

  Database& Db() { return db_; }
  /// The first unit's device row.
  int64_t DeviceRowId() const { return units_.front().device_id; }
  /// Every unit's run.
  std::vector<int64_t> RunIds() const;
  /// Every stored device of the model, the units' included (reuse and warm start).
  const std::vector<int64_t>& Peers() const { return peers_; }
  /// The build row its trials are stored under.
  int64_t BuildId() const { return build_id_; }
  /// The gate's tolerance of this run (EvaluateOptions::tolerance): a stored ok or
  /// wrong_result trial is reused only where its check_err gets the same verdict under it
  /// (raised per implementation as the gate raises it); unset, any is reused.
  void SetTolerance(double tolerance) { tolerance_ = tolerance; }
  /// Whether this run flushes the L2 cache before each repetition (`--flush-l2`): a
  /// trial is reused only where its metric `l2_flushed` (absent: 0) says the same, since
  /// a warm-cache time is not a cold-cache one; unset, any is reused.
  void SetFlushL2(bool flush) { flush_l2_ = flush; }

  struct Trial {
    int64_t id = 0;
    TrialResult result;
    bool reused = false;  // answered from the database
  };

  /// What Claim found for a candidate.
  struct Claimed {
    enum class Outcome { kReusable, kClaimed, kHeld };
    Outcome outcome = Outcome::kClaimed;
    TrialKey key;  // the claim's key (the model's first stored device)
    Trial trial;   // kReusable
  };
  /// The candidate (`variant`, `impl`, `params`) on stored problem `problem_id`: its
  /// reusable stored trial; else this process's claim on it (kClaimed: evaluate it, then
  /// Store or Release); else kHeld: another live tune measures it now.
  Claimed Claim(int64_t problem_id, const Variant& variant, const Implementation& impl,
                const Params& params);
  /// Stores the claimed candidate's trial as measured on unit `unit`, dropping the claim.
  int64_t Store(const Claimed& claimed, size_t unit, const TrialResult& result);
  /// Drops the claim of a candidate that will not be stored by this process.
  void Release(const Claimed& claimed);

  /// The trial of (`variant`, `impl`, `params`) on the stored problem `problem_id`: a
  /// reusable stored one, else evaluated now on `context` and stored, under a claim that
  /// makes another tune of the same candidate wait for this trial (a dead claimant's claim
  /// is taken over). `before_evaluate` (may be empty) is called just before a new
  /// evaluation starts.
  Trial EvaluateOrReuse(int64_t problem_id, const Variant& variant, const Implementation& impl,
                        const Params& params, ProblemContext& context, Timer& timer,
                        const EvaluateOptions& options,
                        const std::function<void()>& before_evaluate = nullptr);

 private:
  void FindPeers();

  struct Unit {
    int64_t device_id = 0;
    int64_t run_id = 0;
  };
  Database& db_;
  std::string args_json_;
  std::string model_;  // ModelFingerprint of the first unit
  std::vector<std::string> unit_fields_;
  std::vector<Unit> units_;
  std::vector<int64_t> peers_;
  int64_t build_id_ = 0;
  std::optional<double> tolerance_;
  std::optional<bool> flush_l2_;
};

}  // namespace attntune
