// Plain records stored in and read from the database; reports/ renders them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/shape.h"
#include "core/types.h"

namespace attntune {

enum class TrialStatus { kOk, kInvalid, kCompileFailed, kLaunchFailed, kWrongResult, kTimeout };

/// "ok", "invalid", "compile_failed", "launch_failed", "wrong_result", "timeout".
const char* ToString(TrialStatus status);
/// Inverse of ToString; nullopt for any other text.
std::optional<TrialStatus> TrialStatusFromString(const std::string& text);

struct DeviceRecord {
  int64_t id = 0;
  std::string kind;
  std::string name;
  std::string fingerprint_json;
};

struct ProblemRecord {
  int64_t id = 0;
  Shape shape;
  Dtype dtype = Dtype::kF32;
  Phase phase = Phase::kPrefill;
  /// The calibration set its quality is measured on (a CalibrationRecord's id); 0: the
  /// problem's own seeded Gaussian inputs. Part of the problem's key, so that trials of
  /// the two never mix.
  int64_t calib_id = 0;
};

/// A calibration set: captured Q/K/V of a model (tuner/calibration_set.h).
struct CalibrationRecord {
  int64_t id = 0;
  std::string content_hash;  // SHA-256 (hex) of the captured tensors: the set's identity
  std::string model;         // the capture's model id ("" when its files name none)
  std::string layers;        // captured layers, "0,1,5"
  int64_t tokens = 0;        // the shortest captured sequence
  std::string files_json = "[]";  // the paths it was first read from (informative)
};

/// The quality of one (layer, query head) of a calibration set under a configuration.
struct QualityCell {
  int64_t layer = 0;
  int64_t head = 0;
  double mass_recall = 1;
  double rel_err = 0;
};

/// A quality floor (`tune --min-quality mass_recall>=0.95,rel_err<=0.05`): the bounds a
/// configuration keeps on its worst (layer, head). Absent bound: no constraint.
struct QualityFloor {
  std::optional<double> min_mass_recall;
  std::optional<double> max_rel_err;

  bool Empty() const { return !min_mass_recall && !max_rel_err; }
  /// "mass_recall>=0.95,rel_err<=0.05"; "" when empty. ParseQualityFloor reads it back.
  std::string ToString() const;
  /// Whether a trial's metrics meet the floor: mass_recall_worst and rel_err_worst (the
  /// mean where a trial stored no worst value). An empty floor is met by every trial.
  bool MetBy(const std::map<std::string, double>& metrics) const;
};

/// Parses "mass_recall>=X", "rel_err<=Y" or both, comma-separated ("" -> empty floor);
/// UserError "<what>: ..." on anything else.
QualityFloor ParseQualityFloor(const std::string& text, const std::string& what);

struct ConfigRecord {
  int64_t id = 0;
  std::string variant;
  std::string implementation;
  std::string params_json = "{}";    // the variant's own parameters, canonical JSON object
  std::string tunables_json = "{}";  // the implementation's tunables, canonical JSON object
};

struct BuildRecord {
  int64_t id = 0;
  std::string version;
  std::string kernel_hash;
};

/// One measured (or failed) candidate, as the tuner hands it to the database.
struct TrialResult {
  TrialStatus status = TrialStatus::kOk;
  std::string message;      // why it failed; empty when ok
  std::string started_at;   // ISO-8601 UTC
  std::string finished_at;
  double median_ms = 0, p10_ms = 0, p90_ms = 0, cv = 0;  // ok only
  std::vector<double> samples_ms;                       // raw, ok only
  std::map<std::string, double> metrics;  // rel_err, mass_recall, pairs, useful_flops, gflops...
  /// Per (layer, query head) quality on a calibration set (stored with the trial; not
  /// read back with it: Database::QualityCells).
  std::vector<QualityCell> quality_cells;
};

/// Metrics the tune's re-timing stage (tuner/confirm.h) adds to stored trials, read by
/// reports/best.cpp: on a problem's fastest configuration, its time and the untuned
/// default's, both re-timed back to back (ms), and the default's trial id; kLostToDefault
/// 1 when the default was as fast (the entry is not taken from that trial); kIsDefault 1
/// on the default configuration's trial.
constexpr char kMetricConfirmMs[] = "confirm_ms";
constexpr char kMetricConfirmDefaultMs[] = "confirm_default_ms";
constexpr char kMetricConfirmDefaultTrial[] = "confirm_default_trial";
constexpr char kMetricLostToDefault[] = "lost_to_default";
constexpr char kMetricIsDefault[] = "is_default";

/// A stored trial joined with its device, problem, config and build.
struct TrialRow {
  int64_t id = 0;
  int64_t run_id = 0;
  DeviceRecord device;
  ProblemRecord problem;
  ConfigRecord config;
  BuildRecord build;
  TrialResult result;
  int64_t sample_count = 0;
};

/// What a run searched under: the floor of each problem it tuned (run_problem).
struct RunProblemRecord {
  int64_t run_id = 0;
  int64_t problem_id = 0;
  std::string floor;  // QualityFloor::ToString(); "" none
};

struct RunRecord {
  int64_t id = 0;
  std::string started_at;
  std::string finished_at;  // empty: still running or killed
  std::string args_json;
  int64_t device_id = 0;
};

}  // namespace attntune
