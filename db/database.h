// The SQLite store (DESIGN.md s4): schema with migrations, WAL, one transaction per
// trial, so that a killed run loses at most the trial in flight.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "db/records.h"

struct sqlite3;

namespace attntune {

/// The schema version this build writes (migrations bring older files up to it).
constexpr int kSchemaVersion = 4;

/// The oldest schema a read-only connection reads in place; an older file is read through
/// an in-memory copy brought up to kSchemaVersion by the migrations.
constexpr int kReadableSchemaVersion = 4;

struct DbInfo {
  std::string path;
  int schema_version = 0;
  int64_t devices = 0, problems = 0, configs = 0, builds = 0, runs = 0, trials = 0, samples = 0,
          metrics = 0, calibrations = 0;
  std::vector<std::pair<std::string, int64_t>> trials_by_status;  // ("ok", 12), ...
};

/// What identifies a candidate's trials: the unit a re-run reuses and a tune claims.
struct TrialKey {
  int64_t device_id = 0, problem_id = 0, config_id = 0, build_id = 0;
};

/// A process's claim on a candidate it is measuring; `claimed_at` in seconds since the epoch.
struct Claim {
  int64_t pid = 0;
  int64_t claimed_at = 0;
};

/// What ClaimOrReuse found: a reusable stored trial, the claim taken, or another live claim.
struct ClaimResult {
  enum class Outcome { kReusable, kClaimed, kHeld } outcome = Outcome::kClaimed;
  std::optional<TrialRow> trial;  // kReusable
  Claim holder;                   // kHeld
};

struct TrialFilter {
  std::optional<int64_t> device_id;
  std::optional<std::string> variant;
  bool ok_only = false;
};

struct MergeCounts;

class Database {
 public:
  /// Opens (creating if absent) and migrates `path` (":memory:" for tests). A file that
  /// is not a SQLite database, is damaged, or has a newer schema -> UserError naming the path.
  static std::unique_ptr<Database> Open(const std::string& path);
  /// Opens an existing attntune database for reading only: nothing is written to the file
  /// or beside it unless SQLite's WAL needs it. An empty, foreign, damaged (PRAGMA
  /// quick_check) or newer file -> UserError naming the path; a file older than
  /// kReadableSchemaVersion (`current`: older than kSchemaVersion, so that it reads with
  /// every table and column of this build's schema) is read through a migrated in-memory
  /// copy.
  static std::unique_ptr<Database> OpenReadOnly(const std::string& path, bool current = false);
  ~Database();

  const std::string& Path() const { return path_; }

  // Upserts return the row id of the existing or new row (unique keys per table).
  int64_t PutDevice(const DeviceRecord& device);    // key: fingerprint_json
  int64_t PutProblem(const ProblemRecord& problem);  // key: every field
  int64_t PutConfig(const ConfigRecord& config);    // key: every field but the id
  int64_t PutBuild(const BuildRecord& build);       // key: version, kernel_hash
  int64_t PutCalibration(const CalibrationRecord& calibration);  // key: content_hash
  std::vector<CalibrationRecord> Calibrations() const;

  /// Records that `record.run_id` searched `record.problem_id` under `record.floor`.
  void PutRunProblem(const RunProblemRecord& record);
  std::vector<RunProblemRecord> RunProblems() const;
  /// The per (layer, head) quality stored with a calibrated trial, by layer then head.
  std::vector<QualityCell> QualityCells(int64_t trial_id) const;

  int64_t BeginRun(const std::string& args_json, int64_t device_id, const std::string& now);
  void FinishRun(int64_t run_id, const std::string& now);

  /// A stored trial for (device, problem, config, build) that a re-run may reuse: status
  /// ok, invalid or wrong_result (deterministic outcomes); launch_failed and timeout are
  /// retried. Returns the newest such trial.
  std::optional<TrialRow> FindReusable(int64_t device_id, int64_t problem_id, int64_t config_id,
                                       int64_t build_id);

  /// In one write transaction: the reusable trial of `key` (as FindReusable; the newest
  /// of `key`'s device and the `peers`, other devices of the same model) if one is
  /// stored; else the claim on `key` for `claimant`, unless another claim is held and
  /// `holder_live(holder)`; a claim not live is taken over. With `reusable`, the newest
  /// stored trial is reused only where it says so (a gate of another tolerance judged it),
  /// else the candidate is claimed to be measured again.
  ClaimResult ClaimOrReuse(const TrialKey& key, const Claim& claimant,
                           const std::function<bool(const Claim&)>& holder_live,
                           const std::vector<int64_t>& peers = {},
                           const std::function<bool(const TrialRow&)>& reusable = {});
  /// Drops `pid`'s claim on `key`, if it still holds one.
  void ReleaseClaim(const TrialKey& key, int64_t pid);

  /// Stores a trial with its samples, metrics and quality cells in one transaction,
  /// dropping any claim on its key and on `claim` (when given: a claim taken under another
  /// device of the same model); returns its id.
  int64_t InsertTrial(int64_t run_id, int64_t device_id, int64_t problem_id, int64_t config_id,
                      int64_t build_id, const TrialResult& result,
                      const TrialKey* claim = nullptr);

  /// Adds (or replaces) metrics of a stored trial in one transaction: readings taken after
  /// the trial, such as hardware counters from passes of their own.
  void AddMetrics(int64_t trial_id, const std::map<std::string, double>& metrics);

  std::vector<TrialRow> Trials(const TrialFilter& filter) const;
  std::vector<double> Samples(int64_t trial_id) const;
  std::vector<DeviceRecord> Devices() const;
  std::vector<RunRecord> Runs() const;
  DbInfo Info() const;

 private:
  friend MergeCounts MergeDatabase(Database& into, const Database& from,
                                   const std::function<void(const std::string&)>& after_table);
  Database(std::string path, sqlite3* db);
  std::string path_;
  sqlite3* db_;
  int file_schema_version_ = kSchemaVersion;  // the file's, when read through a copy
};

}  // namespace attntune
