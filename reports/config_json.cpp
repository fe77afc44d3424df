// RenderConfigJson: attntune_config.json, the content of attntune_config.h as JSON.
#include "core/config_schema.h"
#include "reports/report_util.h"
#include "reports/reports.h"

namespace attntune {

std::string RenderConfigJson(const ReportInput& input) {
  nlohmann::ordered_json devices = nlohmann::ordered_json::array();
  for (const DeviceRecord& d : report_util::ReportDevices(input)) {
    devices.push_back({{"name", d.name},
                       {"kind", d.kind},
                       {"fingerprint", report_util::FingerprintValue(d.fingerprint_json)}});
  }
  nlohmann::ordered_json entries = nlohmann::ordered_json::array();
  for (const BestEntry& e : BestEntries(input)) {
    const report_util::SplitParams split = report_util::ParseConfigParams(e.params_json, e.tunables_json);
    nlohmann::ordered_json entry = {{"device", e.device_name},
                       {"variant", e.variant},
                       {"phase", ToString(e.phase)},
                       {"implementation", e.implementation},
                       {"params", split.variant},
                       {"tunables", split.tunables},
                       {"head_dim", e.head_dim},
                       {"seq_len", e.seq_len},
                       {"median_ms", e.median_ms},
                       {"rel_err", e.rel_err},
                       {"mass_recall", e.mass_recall}};
    const nlohmann::ordered_json quality = report_util::EntryQualityJson(e.quality);
    for (const auto& [key, value] : quality.items()) entry[key] = value;
    const nlohmann::ordered_json comparison = report_util::EntryComparisonJson(e);
    for (const auto& [key, value] : comparison.items()) entry[key] = value;
    entries.push_back(std::move(entry));
  }
  nlohmann::ordered_json doc;
  doc["schema"] = kConfigSchema;
  doc["tool"] = "attntune";
  doc["tool_version"] = input.tool_version;
  doc["generated_at"] = input.generated_at;
  doc["database"] = input.db_path;
  doc["trials"] = input.trials.size();
  doc["devices"] = devices;
  doc["entries"] = entries;
  nlohmann::ordered_json calibrations = nlohmann::ordered_json::array();
  for (const CalibrationRecord& c : input.calibrations) {
    nlohmann::ordered_json files = nlohmann::ordered_json::parse(c.files_json, nullptr, false);
    if (files.is_discarded()) files = c.files_json;
    calibrations.push_back({{"id", c.content_hash.substr(0, 12)},
                            {"content_hash", c.content_hash},
                            {"model", c.model},
                            {"layers", c.layers},
                            {"tokens", c.tokens},
                            {"files", files}});
  }
  doc["calibrations"] = calibrations;
  nlohmann::ordered_json allocations = nlohmann::ordered_json::array();
  for (const AllocationRecord& a : input.allocations)
    allocations.push_back(report_util::AllocationJson(a));
  doc["allocations"] = allocations;
  // Invalid UTF-8 (a device name, say) becomes U+FFFD instead of throwing.
  return doc.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

}  // namespace attntune
