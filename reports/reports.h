// Reporters are pure functions: plain records in, text out (STYLE.md).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "db/records.h"
#include "reports/allocation.h"

namespace attntune {

struct ReportInput {
  std::string tool_version;  // ATTNTUNE_VERSION
  std::string generated_at;  // ISO-8601 UTC
  std::string db_path;
  std::vector<DeviceRecord> devices;
  std::vector<TrialRow> trials;  // every status; reporters pick what they need
  std::vector<AllocationRecord> allocations;  // FA/SWA allocations (attntune allocate)
  std::vector<CalibrationRecord> calibrations;  // calibration sets problems were measured on
  std::vector<RunProblemRecord> run_problems;   // the floor each run tuned each problem under
  /// Per (layer, head) quality of calibrated trials, by trial id: those of ChosenEntries
  /// at least (tuner/emit loads them), for the report's heatmaps.
  std::map<int64_t, std::vector<QualityCell>> quality_cells;
};

/// The quality side of a tuned entry that calibration and floors added: where quality was
/// measured, its worst (layer, head), and the floor the entry's problem was tuned under.
/// The one place these entry fields live: the header, the JSON and the report render
/// them from here (reports/report_util.h EntryQualityJson, EntryQualityCpp).
struct EntryQuality {
  std::string calibration;  // the calibration set (the first 12 hex digits of its hash); "" Gaussian
  std::string calibration_model;  // the model it was captured from ("" unknown or Gaussian)
  /// At the worst (layer, head); NaN where the trial stored no worst value (older trials).
  double mass_recall_worst = std::numeric_limits<double>::quiet_NaN();
  double rel_err_worst = std::numeric_limits<double>::quiet_NaN();
  std::string floor;         // the newest floor its problem was tuned under ("" none)
  bool meets_floor = false;  // the entry keeps `floor` (meaningful when floor is set)
};

/// One tuned entry: the fastest ok config of a (device, variant, phase, variant params,
/// d, L).
struct BestEntry {
  std::string device_name;
  std::string variant;
  Phase phase = Phase::kPrefill;  // the problem's (decode: Lq = 1, Lk = L)
  std::string implementation;
  std::string params_json = "{}";    // the variant's own parameters (canonical JSON object)
  std::string tunables_json = "{}";  // the implementation's tunables (canonical JSON object)
  int64_t head_dim = 0;
  int64_t seq_len = 0;  // Lk
  double median_ms = 0;
  double rel_err = 0;      // the mean over layers and heads (against dense attention)
  double mass_recall = 1;  // the mean
  EntryQuality quality;
  int64_t trial_id = 0;    // the trial it was read from
  int64_t calib_id = 0;    // its problem's calibration set (0: Gaussian inputs)
};

/// The best entries: the fastest ok config per (device, variant, phase, variant params,
/// d, L, calibration set), sorted by (device, variant, phase (prefill first), head_dim,
/// seq_len, calibration, params).
std::vector<BestEntry> BestEntries(const ReportInput& input);

/// Of `best`, per (device, variant, phase, head_dim, seq_len, calibration set), the entry
/// a lookup under its floor answers: the fastest entry that meets the floor its problem was
/// tuned under, else (no floor, or none meets it) the fastest entry.
std::vector<BestEntry> ChosenEntries(const std::vector<BestEntry>& best);

/// attntune_config.h: self-contained C++17 (standard library only) with provenance,
/// constexpr tables and the lookup (see the header's own comment for the fallback).
std::string RenderConfigHeader(const ReportInput& input);

/// attntune_config.json, {"schema": 1, ...}; each entry carries its EntryQuality.
std::string RenderConfigJson(const ReportInput& input);

/// report.html: one offline file, Chart.js inlined.
std::string RenderHtmlReport(const ReportInput& input);

}  // namespace attntune
