// Helpers shared by the reporters; internal to reports/ (not installed, not public).
#pragma once

#include <nlohmann/json.hpp>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "reports/reports.h"

namespace attntune {
namespace report_util {

/// A config's variant parameters and tunables, parsed.
struct SplitParams {
  nlohmann::json variant = nlohmann::json::object();
  nlohmann::json tunables = nlohmann::json::object();
};

/// Parses a config's two objects; CHECKs that each is a JSON object (the database
/// refuses rows where they are not).
SplitParams ParseConfigParams(const std::string& params_json, const std::string& tunables_json);

/// "sink=0,w=256": keys in JSON (sorted) order, strings unquoted, other values as JSON.
std::string ParamsText(const nlohmann::json& object);

/// metrics[key] when present, else `fallback`.
double MetricOr(const TrialResult& result, const std::string& key, double fallback);

/// input.devices, then any device seen only in trials (by name and fingerprint).
std::vector<DeviceRecord> ReportDevices(const ReportInput& input);

/// The fingerprint as a JSON value: the parsed object, or the raw text when it is not
/// JSON (an empty fingerprint is an empty object).
nlohmann::json FingerprintValue(const std::string& fingerprint_json);

/// Per problem id, the floor of the newest run that tuned it ("" none; input.run_problems).
std::map<int64_t, std::string> NewestFloors(const ReportInput& input);

/// An entry's EntryQuality as attntune_config.json's keys: "calibration" (null, or
/// {"id", "model"}), "mass_recall_worst" and "rel_err_worst" (null where not measured),
/// "floor" (null or "mass_recall>=0.95"), and with a floor "meets_floor".
nlohmann::ordered_json EntryQualityJson(const EntryQuality& quality);

/// An entry's comparisons as attntune_config.json's keys: "implementations" {id: best
/// ms}, "next_best" (null, or {"implementation", "median_ms", "margin"}: its time over the
/// entry's) and "default" (null, or {"implementation", "tunables", "median_ms", "margin",
/// "retimed"}).
nlohmann::ordered_json EntryComparisonJson(const BestEntry& e);

/// One line on the same: "cudnn: 3.64x faster than cuda (6.513 ms); default cuda
/// Tile=64x64 3.64x slower (re-timed)", or what is unknown.
std::string EntryComparisonText(const BestEntry& e);

/// One entry of attntune_config.json's "allocations" (reports/allocation.cpp): the
/// allocation in the form transformers configs use, "transformers": {"sliding_window",
/// "layer_types"} (a layer is "sliding_attention" iff all its KV heads are),
/// "kv_head_windows" [layer][head] (0 = full) when any layer is mixed, the per-layer SWA
/// share, costs and the front, and "tuned": {"Br", "Bc", "w", "prefill_ms", ...} (null
/// when tile tuning was skipped).
nlohmann::ordered_json AllocationJson(const AllocationRecord& r);

}  // namespace report_util
}  // namespace attntune
