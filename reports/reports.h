// Reporters are pure functions: plain records in, text out (STYLE.md).
#pragma once

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
  double rel_err = 0;
  double mass_recall = 1;
};

/// The best entries, sorted by (device, variant, phase (prefill first), head_dim, seq_len,
/// params).
std::vector<BestEntry> BestEntries(const ReportInput& input);

/// attntune_config.h: self-contained C++17 (standard library only) with provenance,
/// constexpr tables and the lookup (see the header's own comment for the fallback).
std::string RenderConfigHeader(const ReportInput& input);

/// attntune_config.json, {"schema": 1, ...}.
std::string RenderConfigJson(const ReportInput& input);

/// report.html: one offline file, Chart.js inlined.
std::string RenderHtmlReport(const ReportInput& input);

}  // namespace attntune
