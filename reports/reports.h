// Reporters are pure functions: plain records in, text out (STYLE.md).
#pragma once

#include <cstdint>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <tuple>
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

/// What a tuned entry is for beyond its lookup key (variant, phase, d, L): the problem's
/// dtype, batch and heads. A config file answers one lookup per key, so it is rendered
/// from the trials of one geometry (tuner/emit.h); entries of two never merge.
struct EntryGeometry {
  Dtype dtype = Dtype::kF32;
  int64_t batch = 0, q_heads = 0, kv_heads = 0;

  bool operator<(const EntryGeometry& o) const {
    return std::tie(dtype, batch, q_heads, kv_heads) <
           std::tie(o.dtype, o.batch, o.q_heads, o.kv_heads);
  }
  bool operator==(const EntryGeometry& o) const {
    return dtype == o.dtype && batch == o.batch && q_heads == o.q_heads && kv_heads == o.kv_heads;
  }
  /// "fp16 B=1 Hq=16 Hkv=8"
  std::string ToString() const;
};

/// The geometry of a trial's problem.
EntryGeometry GeometryOf(const ProblemRecord& problem);

/// One tuned entry: the fastest ok config of a (device, geometry, variant, phase, variant
/// params, d, L).
struct BestEntry {
  std::string device_name;
  EntryGeometry geometry;
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
  /// Every implementation's best time among the entry's candidates (the same problem and
  /// variant parameters; trials the default re-timed as fast as excluded), by id.
  std::map<std::string, double> implementation_ms;
  std::map<std::string, int64_t> implementation_trial;  // the trial of each best time
  /// The fastest other implementation ("" none) and its best time: margin_next =
  /// next_ms / median_ms.
  std::string next_implementation;
  double next_ms = std::numeric_limits<double>::quiet_NaN();
  /// The untuned default configuration (tuner/confirm.h; "" where the database holds no
  /// trial of it marked so) and its time: where the entry and the default were re-timed
  /// back to back (default_retimed), both re-timed times; else the default's stored median.
  std::string default_implementation;
  std::string default_tunables_json = "{}";
  double default_ms = std::numeric_limits<double>::quiet_NaN();
  bool default_retimed = false;
  double retimed_ms = std::numeric_limits<double>::quiet_NaN();  // the entry's, re-timed

  /// next_ms / median_ms (NaN: no other implementation).
  double MarginNext() const { return next_ms / median_ms; }
  /// The default's time over the entry's (re-timed ones where default_retimed); 1 when
  /// the entry is the default; NaN when unknown.
  double MarginDefault() const {
    return default_ms / (default_retimed ? retimed_ms : median_ms);
  }
};

/// The best entries: the fastest ok config per (device, geometry, variant, phase, variant
/// params, d, L, calibration set), sorted by (device, geometry, variant, phase (prefill
/// first), head_dim, seq_len, calibration, params).
std::vector<BestEntry> BestEntries(const ReportInput& input);

/// Of `best`, per (device, geometry, variant, phase, head_dim, seq_len, calibration set),
/// the entry a lookup under its floor answers: the fastest entry that meets the floor its
/// problem was tuned under, else (no floor, or none meets it) the fastest entry.
std::vector<BestEntry> ChosenEntries(const std::vector<BestEntry>& best);

/// attntune_config.h: self-contained C++17 (standard library only) with provenance,
/// constexpr tables and the lookup (see the header's own comment for the fallback).
std::string RenderConfigHeader(const ReportInput& input);

/// attntune_config.json, {"schema": 1, ...}; each entry carries its EntryQuality.
std::string RenderConfigJson(const ReportInput& input);

/// `attntune db records`: per best entry, each implementation's best trial as the JSON
/// object `bench --json` prints (on one line), the entry's own marked "tuned": true and
/// every one with its "trial_id"; one object per line.
std::string RenderEntryRecords(const ReportInput& input);

/// report.html: one offline file, Chart.js inlined.
std::string RenderHtmlReport(const ReportInput& input);

}  // namespace attntune
