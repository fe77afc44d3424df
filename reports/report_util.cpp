#include "reports/report_util.h"

#include <cmath>
#include <cstdio>
#include <utility>

#include "core/check.h"

namespace attntune {
namespace report_util {

namespace {
nlohmann::json ParseObject(const std::string& text) {
  if (text.empty()) return nlohmann::json::object();
  nlohmann::json parsed = nlohmann::json::parse(text, nullptr, false);
  ATTNTUNE_CHECK_MSG(parsed.is_object(), "config params are not a JSON object: " + text);
  return parsed;
}
}  // namespace

SplitParams ParseConfigParams(const std::string& params_json, const std::string& tunables_json) {
  return {ParseObject(params_json), ParseObject(tunables_json)};
}

std::string ParamsText(const nlohmann::json& object) {
  std::string text;
  for (const auto& [key, value] : object.items()) {
    if (!text.empty()) text += ',';
    text += key + '=' + (value.is_string() ? value.get<std::string>() : value.dump());
  }
  return text;
}

double MetricOr(const TrialResult& result, const std::string& key, double fallback) {
  const auto it = result.metrics.find(key);
  return it == result.metrics.end() ? fallback : it->second;
}

std::vector<DeviceRecord> ReportDevices(const ReportInput& input) {
  std::vector<DeviceRecord> devices;
  auto add = [&devices](const DeviceRecord& d) {
    for (const DeviceRecord& seen : devices)
      if (seen.name == d.name && seen.fingerprint_json == d.fingerprint_json) return;
    devices.push_back(d);
  };
  for (const DeviceRecord& d : input.devices) add(d);
  for (const TrialRow& t : input.trials) add(t.device);
  return devices;
}

nlohmann::json FingerprintValue(const std::string& fingerprint_json) {
  if (fingerprint_json.empty()) return nlohmann::json::object();
  nlohmann::json parsed = nlohmann::json::parse(fingerprint_json, nullptr, false);
  if (parsed.is_discarded()) return fingerprint_json;
  return parsed;
}

std::map<int64_t, std::string> NewestFloors(const ReportInput& input) {
  std::map<int64_t, std::pair<int64_t, std::string>> newest;  // problem -> (run, floor)
  for (const RunProblemRecord& r : input.run_problems) {
    auto it = newest.find(r.problem_id);
    if (it == newest.end() || r.run_id > it->second.first) newest[r.problem_id] = {r.run_id, r.floor};
  }
  std::map<int64_t, std::string> floors;
  for (const auto& [problem, run_floor] : newest) floors[problem] = run_floor.second;
  return floors;
}

nlohmann::ordered_json EntryQualityJson(const EntryQuality& q) {
  nlohmann::ordered_json out;
  out["calibration"] = q.calibration.empty()
                           ? nlohmann::ordered_json(nullptr)
                           : nlohmann::ordered_json{{"id", q.calibration}, {"model", q.calibration_model}};
  auto number = [](double x) {
    return std::isnan(x) ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(x);
  };
  out["mass_recall_worst"] = number(q.mass_recall_worst);
  out["rel_err_worst"] = number(q.rel_err_worst);
  out["floor"] = q.floor.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(q.floor);
  if (!q.floor.empty()) out["meets_floor"] = q.meets_floor;
  return out;
}

namespace {
// A JSON number, or null where it is not finite (NaN: unknown).
nlohmann::ordered_json NumberOrNull(double v) {
  return std::isfinite(v) ? nlohmann::ordered_json(v) : nlohmann::ordered_json();
}
}  // namespace

nlohmann::ordered_json EntryComparisonJson(const BestEntry& e) {
  nlohmann::ordered_json out;
  nlohmann::ordered_json impls = nlohmann::ordered_json::object();
  for (const auto& [impl, ms] : e.implementation_ms) impls[impl] = ms;
  out["implementations"] = impls;
  out["next_best"] = nullptr;
  if (!e.next_implementation.empty()) {
    out["next_best"] = {{"implementation", e.next_implementation},
                        {"median_ms", e.next_ms},
                        {"margin", NumberOrNull(e.MarginNext())}};
  }
  out["default"] = nullptr;
  if (!e.default_implementation.empty()) {
    nlohmann::ordered_json tunables = nlohmann::ordered_json::parse(e.default_tunables_json, nullptr, false);
    if (tunables.is_discarded()) tunables = e.default_tunables_json;
    out["default"] = {{"implementation", e.default_implementation},
                      {"tunables", tunables},
                      {"median_ms", NumberOrNull(e.default_ms)},
                      {"margin", NumberOrNull(e.MarginDefault())},
                      {"retimed", e.default_retimed}};
  }
  return out;
}

std::string EntryComparisonText(const BestEntry& e) {
  char text[256];
  std::string out = e.implementation + ": ";
  if (e.next_implementation.empty()) {
    out += "the only implementation measured";
  } else {
    std::snprintf(text, sizeof text, "%.2fx faster than %s (%.4g ms)", e.MarginNext(),
                  e.next_implementation.c_str(), e.next_ms);
    out += text;
  }
  if (e.default_implementation.empty()) return out + "; default not measured";
  const nlohmann::json tunables = nlohmann::json::parse(e.default_tunables_json, nullptr, false);
  const std::string config = e.default_implementation +
                             (tunables.is_object() && !tunables.empty() ? " " + ParamsText(tunables) : "");
  const double margin = e.MarginDefault();
  if (e.default_implementation == e.implementation && e.default_tunables_json == e.tunables_json)
    return out + "; it is the default";
  std::snprintf(text, sizeof text, "; %.2fx faster than the default %s (%s)", margin,
                config.c_str(), e.default_retimed ? "re-timed back to back" : "stored medians");
  return out + text;
}

}  // namespace report_util
}  // namespace attntune
