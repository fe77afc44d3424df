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
};

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
};

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

struct RunRecord {
  int64_t id = 0;
  std::string started_at;
  std::string finished_at;  // empty: still running or killed
  std::string args_json;
  int64_t device_id = 0;
};

}  // namespace attntune
