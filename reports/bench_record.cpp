#include "reports/bench_record.h"

#include <cstdarg>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>

#include "core/check.h"
#include "reports/report_util.h"
#include "reports/reports.h"

namespace attntune {

namespace {

// Bumped whenever a key changes meaning or goes away; new keys keep the version.
constexpr int kBenchJsonSchema = 1;

// The variant's parameters and the tunables in one object (keys sorted).
nlohmann::json MergedParams(const BenchRecord& r) {
  nlohmann::json params = nlohmann::json::parse(r.params_json, nullptr, false);
  const nlohmann::json tunables = nlohmann::json::parse(r.tunables_json, nullptr, false);
  ATTNTUNE_CHECK_MSG(params.is_object() && tunables.is_object(),
                     "bench params are not JSON objects: " + r.params_json + " " + r.tunables_json);
  params.update(tunables);
  return params;
}

nlohmann::json HardwareJson(const BenchHardware& hw) {
  nlohmann::json j;
  if (!hw.error.empty()) {
    j["error"] = hw.error;
    return j;
  }
  j["chip"] = hw.chip;
  for (const auto& [name, value] : hw.counters)  // shown without the metric's "hw_"
    j[name.rfind("hw_", 0) == 0 ? name.substr(3) : name] = value;
  return j;
}

double Metric(const BenchRecord& r, const char* name) {
  const auto it = r.metrics.find(name);
  return it == r.metrics.end() ? std::numeric_limits<double>::quiet_NaN() : it->second;
}

void Append(std::string* out, const char* format, ...) __attribute__((format(printf, 2, 3)));
void Append(std::string* out, const char* format, ...) {
  va_list args, copy;
  va_start(args, format);
  va_copy(copy, args);
  const int n = std::vsnprintf(nullptr, 0, format, copy);
  va_end(copy);
  const size_t at = out->size();
  out->resize(at + static_cast<size_t>(n) + 1);
  std::vsnprintf(out->data() + at, static_cast<size_t>(n) + 1, format, args);
  out->resize(at + static_cast<size_t>(n));
  va_end(args);
}

}  // namespace

double SelectPhaseMs(const std::vector<BenchKernel>& kernels) {
  double ms = 0.0;
  for (const BenchKernel& k : kernels)
    if (k.name.rfind(kSelectPhasePrefix, 0) == 0) ms += k.ms;
  return ms;
}

std::string RenderBenchRecordJson(const BenchRecord& r) {
  nlohmann::json j;
  j["schema"] = kBenchJsonSchema;
  j["variant"] = r.variant;
  j["implementation"] = r.implementation;
  j["params"] = MergedParams(r);
  j["shape"] = r.shape.ToString();
  j["device"] = r.device;
  j["dtype"] = ToString(r.dtype);
  j["timer"] = r.timer;
  j["status"] = ToString(r.status);
  if (!r.message.empty()) j["message"] = r.message;
  for (const auto& [name, value] : r.metrics) j[name] = value;
  if (r.status == TrialStatus::kOk) {
    j["median_ms"] = r.median_ms;
    j["p10_ms"] = r.p10_ms;
    j["p90_ms"] = r.p90_ms;
    j["cv"] = r.cv;
    j["samples"] = r.samples;
  }
  nlohmann::json kernels = nlohmann::json::array();
  for (const BenchKernel& k : r.kernels)
    kernels.push_back({{"name", k.name}, {"kind", k.kind}, {"ms", k.ms}});
  j["kernels"] = kernels;
  j["inputs"] = r.inputs;
  if (!r.calibration.empty()) j["calibration"] = r.calibration;
  // The median of the timed repetitions' selection times where the timer gave them (a
  // metric), else the checked run's.
  if (!r.metrics.count("select_ms")) j["select_ms"] = SelectPhaseMs(r.kernels);
  j["select_from"] = r.metrics.count("select_ms") ? "timed median" : "checked run";
  if (r.hardware) j["hardware"] = HardwareJson(*r.hardware);
  j["peak_rss_bytes"] = r.peak_rss_bytes;
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
}

std::string RenderBenchRecordText(const BenchRecord& r) {
  std::string out;
  Append(&out, "%s %s %s on %s: %s\n", r.variant.c_str(), r.implementation.c_str(),
         report_util::ParamsText(MergedParams(r)).c_str(), r.shape.ToString().c_str(),
         ToString(r.status));
  if (r.status == TrialStatus::kOk) {
    Append(&out, "  median %.3f ms (p10 %.3f, p90 %.3f, cv %.3f, %lld samples)\n", r.median_ms,
           r.p10_ms, r.p90_ms, r.cv, static_cast<long long>(r.samples));
    if (r.metrics.count("span_ms"))
      Append(&out, "  kernels' span %.3f ms (median, first start to last end: the gaps between "
             "launches included)\n", Metric(r, "span_ms"));
    Append(&out, "  %.2f GFLOP/s useful, %.0f pairs (%.4f of dense)", Metric(r, "gflops"),
           Metric(r, "pairs"), Metric(r, "pair_ratio"));
    if (r.metrics.count("rel_err")) {
      Append(&out, ", rel_err %.3g, mass_recall %.4f\n", Metric(r, "rel_err"),
             Metric(r, "mass_recall"));
      if (!r.calibration.empty())
        Append(&out, "  on calibration %s: mass_recall worst %.4f (layer %.0f, head %.0f), "
               "rel_err worst %.3g (layer %.0f, head %.0f)\n", r.calibration.c_str(),
               Metric(r, "mass_recall_worst"), Metric(r, "mass_recall_worst_layer"),
               Metric(r, "mass_recall_worst_head"), Metric(r, "rel_err_worst"),
               Metric(r, "rel_err_worst_layer"), Metric(r, "rel_err_worst_head"));
    } else {
      Append(&out, ", unchecked: no reference, no quality\n");
    }
  } else {
    Append(&out, "  %s\n", r.message.c_str());
  }
  if (r.metrics.count("select_ms")) {
    Append(&out, "  selection phase %.3f ms (median of the timed repetitions)\n",
           Metric(r, "select_ms"));
  } else if (!r.kernels.empty()) {
    Append(&out, "  selection phase %.3f ms (of the checked run)\n", SelectPhaseMs(r.kernels));
  }
  for (const BenchKernel& k : r.kernels)
    Append(&out, "  kernel %s (%s) %.3f ms\n", k.name.c_str(), k.kind.c_str(), k.ms);
  if (r.hardware)
    Append(&out, "  hardware counters: %s\n",
           HardwareJson(*r.hardware)
               .dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)
               .c_str());
  return out;
}

std::string RenderEntryRecords(const ReportInput& input) {
  std::map<int64_t, const TrialRow*> by_id;
  for (const TrialRow& t : input.trials) by_id[t.id] = &t;
  std::string out;
  for (const BestEntry& e : BestEntries(input)) {
    for (const auto& [impl, id] : e.implementation_trial) {
      const TrialRow& t = *by_id.at(id);
      BenchRecord r;
      r.variant = t.config.variant;
      r.implementation = t.config.implementation;
      r.params_json = t.config.params_json;
      r.tunables_json = t.config.tunables_json;
      r.shape = t.problem.shape;
      r.device = t.device.name;
      r.dtype = t.problem.dtype;
      r.timer = "stored trial";
      // As bench --json has them: the timing's inputs (a tune times on Gaussian inputs),
      // and the calibration set its quality was measured on, apart.
      r.inputs = "gaussian";
      if (t.problem.calib_id != 0) {
        r.calibration = "#" + std::to_string(t.problem.calib_id);
        for (const CalibrationRecord& c : input.calibrations)
          if (c.id == t.problem.calib_id)
            r.calibration = c.content_hash.substr(0, 12) + " (" +
                            (c.model.empty() ? std::string("model not named") : c.model) +
                            ", layers " + c.layers + ", " + std::to_string(c.tokens) + " tokens)";
      }
      r.status = t.result.status;
      r.message = t.result.message;
      r.metrics = t.result.metrics;
      r.median_ms = t.result.median_ms;
      r.p10_ms = t.result.p10_ms;
      r.p90_ms = t.result.p90_ms;
      r.cv = t.result.cv;
      r.samples = t.sample_count;
      nlohmann::json j = nlohmann::json::parse(RenderBenchRecordJson(r));
      // What a stored trial does not keep is left out rather than written as 0: its
      // kernels, its peak memory, and its selection time where no metric holds it.
      j.erase("kernels");
      j.erase("peak_rss_bytes");
      if (!t.result.metrics.count("select_ms")) {
        j.erase("select_ms");
        j.erase("select_from");
      }
      j["phase"] = ToString(t.problem.phase);
      j["trial_id"] = t.id;
      j["tuned"] = id == e.trial_id;
      out += j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    }
  }
  return out;
}

}  // namespace attntune
