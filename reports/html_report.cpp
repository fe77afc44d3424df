// RenderHtmlReport: report.html, one self-contained page (Chart.js inlined, data as JSON).
#include <algorithm>
#include <cmath>
#include <limits>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "reports/html_page.h"
#include "reports/report_util.h"
#include "reports/reports.h"

namespace attntune {

namespace {

using nlohmann::json;

std::string Num(double v, const char* format = "%.4g") {
  char buf[64];
  std::snprintf(buf, sizeof buf, format, v);
  return buf;
}

std::string MetricCell(const TrialResult& r, const std::string& key) {
  const auto it = r.metrics.find(key);
  return it == r.metrics.end() ? "" : Num(it->second);
}

// Useful GFLOP/s: the measured metric, else useful FLOPs over the median time; 0 when
// neither is known.
double UsefulGflops(const TrialResult& r) {
  if (r.metrics.count("gflops")) return r.metrics.at("gflops");
  const auto flops = r.metrics.find("useful_flops");
  if (flops == r.metrics.end() || r.median_ms <= 0) return 0.0;
  return flops->second / (r.median_ms * 1e-3) / 1e9;
}

std::string GflopsCell(const TrialResult& r) {
  if (!r.metrics.count("gflops") && !r.metrics.count("useful_flops")) return "";
  if (!r.metrics.count("gflops") && r.median_ms <= 0) return "";
  return Num(UsefulGflops(r));
}

// "sink=4,w=1024 | Bc=64,Br=32": the variant's parameters, then the tunables.
std::string ConfigText(const ConfigRecord& config) {
  const report_util::SplitParams split =
      report_util::ParseConfigParams(config.params_json, config.tunables_json);
  const std::string variant = report_util::ParamsText(split.variant);
  const std::string tunables = report_util::ParamsText(split.tunables);
  if (variant.empty()) return tunables;
  if (tunables.empty()) return variant;
  return variant + " | " + tunables;
}

// ---- data for the charts ------------------------------------------------------------

// " decode" for a decode problem, "" for prefill (the labels of prefill-only runs stay).
std::string PhaseSuffix(Phase phase) {
  return phase == Phase::kPrefill ? "" : std::string(" ") + ToString(phase);
}

// Per variant: one series per (device, phase, variant params, d) of the best median per Lk.
json ScalingData(const std::vector<BestEntry>& best) {
  std::map<std::string, std::map<std::string, json>> series;  // variant -> label -> points
  for (const BestEntry& e : best) {
    const report_util::SplitParams split = report_util::ParseConfigParams(e.params_json, e.tunables_json);
    std::string label = e.device_name + PhaseSuffix(e.phase) + " d=" + std::to_string(e.head_dim);
    const std::string params = report_util::ParamsText(split.variant);
    if (!params.empty()) label += " " + params;
    series[e.variant][label].push_back(
        {{"x", e.seq_len},
         {"y", e.median_ms},
         {"label", e.implementation + " " + report_util::ParamsText(split.tunables)}});
  }
  json out = json::object();
  for (auto& [variant, by_label] : series) {
    json list = json::array();
    for (auto& [label, points] : by_label) list.push_back({{"label", label}, {"points", points}});
    out[variant] = list;
  }
  return out;
}

// The newest floor each problem was tuned under, parsed (empty: none).
std::map<int64_t, QualityFloor> ProblemFloors(const ReportInput& input) {
  std::map<int64_t, QualityFloor> floors;
  for (const auto& [problem, floor] : report_util::NewestFloors(input))
    floors[problem] = ParseQualityFloor(floor, "the database's floor");
  return floors;
}

// "" for the seeded Gaussian inputs, else " on calibration <hash prefix>".
std::string SourceLabel(int64_t calib_id, const std::vector<CalibrationRecord>& calibrations) {
  if (calib_id == 0) return "";
  for (const CalibrationRecord& c : calibrations)
    if (c.id == calib_id) return " on calibration " + c.content_hash.substr(0, 12);
  return " on calibration #" + std::to_string(calib_id);
}

// The quality metric a chart of `rows` plots: on a calibration set, or under a floor, the
// worst layer and head's (what a floor bounds), mass_recall unless the floor bounds
// rel_err alone; else mass_recall when the trials report it, else rel_err.
std::string ChartMetric(const std::vector<const TrialRow*>& rows, bool calibrated,
                        const QualityFloor& floor) {
  const std::string worst =
      floor.max_rel_err && !floor.min_mass_recall ? "rel_err_worst" : "mass_recall_worst";
  if (calibrated) return worst;
  if (!floor.Empty())  // the floor bounds the worst head: plot what it bounds, when stored
    for (const TrialRow* t : rows)
      if (t->result.metrics.count(worst)) return worst;
  for (const char* m : {"mass_recall", "rel_err"})
    for (const TrialRow* t : rows)
      if (t->result.metrics.count(m)) return m;
  return "";
}

// One chart's groups (one per device and shape): every trial's (median_ms, quality) and
// the Pareto front (faster and better than every other point).
json ParetoGroups(const std::vector<const TrialRow*>& rows, const std::string& metric) {
  const bool higher_better = metric.rfind("mass_recall", 0) == 0;
  std::map<std::string, std::vector<const TrialRow*>> groups;
  for (const TrialRow* t : rows)
    if (t->result.metrics.count(metric))
      groups[t->device.name + " " + t->problem.shape.ToString() + PhaseSuffix(t->problem.phase)]
          .push_back(t);
  json list = json::array();
  for (auto& [label, members] : groups) {
    // By time, and among equal times the better quality first, so that a point another
    // as fast and better dominates never enters the front; then by trial (stable).
    std::sort(members.begin(), members.end(), [&](const TrialRow* a, const TrialRow* b) {
      if (a->result.median_ms != b->result.median_ms) return a->result.median_ms < b->result.median_ms;
      // Goodness: larger is better; no quality (NaN) the worst of all.
      auto good = [&](const TrialRow* t) {
        const double q = t->result.metrics.at(metric);
        if (!std::isfinite(q)) return -std::numeric_limits<double>::infinity();
        return higher_better ? q : -q;
      };
      if (good(a) != good(b)) return good(a) > good(b);
      return a->id < b->id;
    });
    json points = json::array(), front = json::array();
    bool have_front = false;
    double best_quality = 0;
    for (const TrialRow* t : members) {
      const double q = t->result.metrics.at(metric);
      const json point = {{"x", t->result.median_ms},
                          {"y", q},
                          {"label", t->config.implementation + " " + ConfigText(t->config)}};
      points.push_back(point);
      if (!std::isfinite(q)) continue;  // no quality: on no front
      if (!have_front || (higher_better ? q > best_quality : q < best_quality)) {
        front.push_back(point);
        best_quality = q;
        have_front = true;
      }
    }
    list.push_back({{"label", label}, {"points", points}, {"front", front}});
  }
  return list;
}

// Per (variant, quality source): ok trials as (median_ms, quality) per (device, shape),
// with each group's Pareto front and, when its problems were tuned under a floor, the
// floor's bound on the plotted metric.
json ParetoData(const ReportInput& input) {
  const std::map<int64_t, QualityFloor> floors = ProblemFloors(input);
  std::map<std::pair<std::string, int64_t>, std::vector<const TrialRow*>> charts;
  for (const TrialRow& t : input.trials)
    if (t.result.status == TrialStatus::kOk)
      charts[{t.config.variant, t.problem.calib_id}].push_back(&t);
  json out = json::object();
  for (const auto& [key, rows] : charts) {
    QualityFloor floor;
    for (const TrialRow* t : rows)
      if (auto it = floors.find(t->problem.id); it != floors.end() && !it->second.Empty()) floor = it->second;
    const std::string metric = ChartMetric(rows, key.second != 0, floor);
    if (metric.empty()) continue;
    const json groups = ParetoGroups(rows, metric);
    if (groups.empty()) continue;
    json bound = nullptr;
    if (metric.rfind("mass_recall", 0) == 0 && floor.min_mass_recall) bound = *floor.min_mass_recall;
    if (metric.rfind("rel_err", 0) == 0 && floor.max_rel_err) bound = *floor.max_rel_err;
    out[key.first + SourceLabel(key.second, input.calibrations)] = {
        {"metric", metric}, {"floor", bound}, {"floor_text", floor.ToString()}, {"groups", groups}};
  }
  return out;
}

// ---- HTML sections --------------------------------------------------------------------

void WriteEnvironment(std::ostream& out, const ReportInput& input) {
  out << "<section id=\"environment\"><h2>Environment</h2>\n<table class=\"kv\">\n"
      << "<tr><th>tool version</th><td>" << HtmlEscape(input.tool_version) << "</td></tr>\n"
      << "<tr><th>generated at</th><td>" << HtmlEscape(input.generated_at) << "</td></tr>\n"
      << "<tr><th>database</th><td>" << HtmlEscape(input.db_path) << "</td></tr>\n"
      << "<tr><th>trials</th><td>" << input.trials.size() << "</td></tr>\n</table>\n";
  for (const DeviceRecord& d : report_util::ReportDevices(input)) {
    out << "<h3>Device: " << HtmlEscape(d.name) << " <span class=\"muted\">(" << HtmlEscape(d.kind)
        << ")</span></h3>\n<table class=\"kv\">\n";
    const json fingerprint = report_util::FingerprintValue(d.fingerprint_json);
    if (fingerprint.is_object()) {
      for (const auto& [key, value] : fingerprint.items()) {
        const std::string text = value.is_string()
                                     ? value.get<std::string>()
                                     : value.dump(-1, ' ', false, json::error_handler_t::replace);
        out << "<tr><th>" << HtmlEscape(key) << "</th><td>" << HtmlEscape(text) << "</td></tr>\n";
      }
    } else {
      out << "<tr><th>fingerprint</th><td>" << HtmlEscape(d.fingerprint_json) << "</td></tr>\n";
    }
    out << "</table>\n";
  }
  out << "</section>\n";
}

void WriteSummary(std::ostream& out, const std::vector<TrialRow>& trials) {
  std::map<TrialStatus, int64_t> totals;
  std::map<std::string, std::map<TrialStatus, int64_t>> by_variant;
  for (const TrialRow& t : trials) {
    ++totals[t.result.status];
    ++by_variant[t.config.variant][t.result.status];
  }
  out << "<section id=\"summary\"><h2>Trials by status</h2>\n<table class=\"grid\">\n"
      << "<tr><th>variant</th>";
  for (const auto& [status, n] : totals) out << "<th>" << ToString(status) << "</th>";
  out << "<th>total</th></tr>\n";
  auto row = [&](const std::string& name, const std::map<TrialStatus, int64_t>& counts) {
    int64_t sum = 0;
    out << "<tr><td>" << HtmlEscape(name) << "</td>";
    for (const auto& [status, n] : totals) {
      const auto it = counts.find(status);
      const int64_t c = it == counts.end() ? 0 : it->second;
      sum += c;
      out << "<td class=\"num status-" << ToString(status) << "\">" << c << "</td>";
    }
    out << "<td class=\"num\">" << sum << "</td></tr>\n";
  };
  for (const auto& [variant, counts] : by_variant) row(variant, counts);
  row("all", totals);
  out << "</table>\n</section>\n";
}

// A heatmap cell's background: red through yellow to green over [lo, 1], where `lo` is
// the map's lowest value or 0.9, whichever is lower (differences near 1 show, and a map
// whose cells all keep 0.9999 is not painted red).
std::string CellColour(double x, double lo) {
  const double t = lo < 1.0 ? std::min(1.0, std::max(0.0, (x - lo) / (1.0 - lo))) : 1.0;
  const int hue = static_cast<int>(120.0 * t);  // HSL: 0 red, 60 yellow, 120 green
  return "hsl(" + std::to_string(hue) + ",70%,80%)";
}

// Per chosen calibrated entry (ChosenEntries): its mass_recall per layer (rows) and query
// head (columns), from input.quality_cells.
void WriteHeatmaps(std::ostream& out, const ReportInput& input,
                   const std::vector<BestEntry>& chosen) {
  out << "<section id=\"heatmaps\"><h2>Quality per layer and head</h2>\n"
      << "<p class=\"muted\">Per entry a lookup answers with on a calibration set (the fastest "
      << "that keeps the floor it was tuned under, else the fastest): mass_recall of every "
      << "captured layer (rows) and query head (columns).</p>\n";
  int64_t maps = 0;
  for (const BestEntry& e : chosen) {
    auto it = input.quality_cells.find(e.trial_id);
    if (e.calib_id == 0 || it == input.quality_cells.end() || it->second.empty()) continue;
    const std::vector<QualityCell>& cells = it->second;
    std::map<int64_t, std::map<int64_t, double>> grid;
    double lo = 0.9;
    int64_t heads = 0;
    for (const QualityCell& c : cells) {
      grid[c.layer][c.head] = c.mass_recall;
      lo = std::min(lo, c.mass_recall);
      heads = std::max(heads, c.head + 1);
    }
    const report_util::SplitParams split = report_util::ParseConfigParams(e.params_json, e.tunables_json);
    out << "<h3>" << HtmlEscape(e.variant + PhaseSuffix(e.phase) + " L=" + std::to_string(e.seq_len) +
                                " " + report_util::ParamsText(split.variant) + " on calibration " +
                                e.quality.calibration)
        << " <span class=\"muted\">" << HtmlEscape(e.device_name) << "; worst "
        << Num(e.quality.mass_recall_worst) << ", mean " << Num(e.mass_recall);
    if (!e.quality.floor.empty())
      out << "; floor " << HtmlEscape(e.quality.floor) << (e.quality.meets_floor ? " met" : " not met");
    out << "</span></h3>\n<table class=\"heatmap\" data-trial=\"" << e.trial_id
        << "\">\n<tr><th>layer \\ head</th>";
    for (int64_t h = 0; h < heads; ++h) out << "<th>" << h << "</th>";
    out << "</tr>\n";
    for (const auto& [layer, row] : grid) {
      out << "<tr><th>" << layer << "</th>";
      for (int64_t h = 0; h < heads; ++h) {
        auto cell = row.find(h);
        if (cell == row.end()) {
          out << "<td></td>";
          continue;
        }
        out << "<td class=\"num\" style=\"background:" << CellColour(cell->second, lo) << "\">"
            << Num(cell->second, "%.3f") << "</td>";
      }
      out << "</tr>\n";
    }
    out << "</table>\n";
    ++maps;
  }
  if (maps == 0) out << "<p>No entry was measured on a calibration set.</p>\n";
  out << "</section>\n";
}

// Sort key of the trial table: by variant and problem; ok trials first, fastest first.
// Per device: a roofline point per ok trial, grouped by variant. "model": useful FLOPs per
// compulsory byte (useful_flops / io_bytes) against useful GFLOP/s, from every trial;
// "counters": tensor-pipe ops per DRAM byte against tensor-pipe GOP/s, from the trials
// whose hardware counters were read (tune --metrics on a GPU). No roof is drawn: attntune
// does not measure a device's peak rates.
json RooflineData(const std::vector<TrialRow>& trials) {
  json out = json::object();
  for (const TrialRow& t : trials) {
    const TrialResult& r = t.result;
    if (r.status != TrialStatus::kOk) continue;
    const std::string label = t.problem.shape.ToString() + " " + t.config.implementation + " " +
                              ConfigText(t.config);
    auto at = [&](const char* key) {
      const auto it = r.metrics.find(key);
      return it == r.metrics.end() ? 0.0 : it->second;
    };
    // A device gets a chart only once it has a point.
    if (at("useful_flops") > 0 && at("io_bytes") > 0 && UsefulGflops(r) > 0) {
      out[t.device.name]["model"][t.config.variant].push_back(
          {{"x", at("useful_flops") / at("io_bytes")}, {"y", UsefulGflops(r)}, {"label", label}});
    }
    if (at("hw_ops_per_dram_byte") > 0 && at("hw_tensor_tflops") > 0) {
      out[t.device.name]["counters"][t.config.variant].push_back(
          {{"x", at("hw_ops_per_dram_byte")}, {"y", at("hw_tensor_tflops") * 1e3}, {"label", label}});
    }
  }
  return out;
}

// Whether any trial holds hardware counters (the trial table then shows them).
bool AnyCounters(const std::vector<TrialRow>& trials) {
  for (const TrialRow& t : trials)
    if (t.result.metrics.count("hw_passes")) return true;
  return false;
}

auto TrialOrder(const TrialRow& t) {
  const Shape& s = t.problem.shape;
  return std::make_tuple(t.config.variant, t.device.name, s.d, s.Lk, s.Lq,
                         std::string(ToString(t.problem.phase)), s.Hq, s.Hkv, s.B,
                         t.result.status != TrialStatus::kOk, t.result.median_ms);
}

void WriteTrialTable(std::ostream& out, const std::vector<TrialRow>& trials) {
  std::vector<const TrialRow*> rows;
  bool many_devices = false;  // one device: its name is in the environment section
  const bool counters = AnyCounters(trials);  // columns of the hardware counters
  for (const TrialRow& t : trials) {
    rows.push_back(&t);
    many_devices = many_devices || t.device.name != trials.front().device.name;
  }
  std::stable_sort(rows.begin(), rows.end(), [](const TrialRow* a, const TrialRow* b) {
    return TrialOrder(*a) < TrialOrder(*b);
  });
  out << "<section id=\"trials\"><h2>All trials</h2>\n<div class=\"wide\">"
      << "<table class=\"grid\" id=\"trial-table\">\n<tr>"
      << (many_devices ? "<th>device</th>" : "")
      << "<th>variant</th><th>impl</th><th>params</th><th>shape</th><th>phase</th>"
      << "<th>status</th><th>message</th><th>median ms</th><th>p10 ms</th><th>p90 ms</th>"
      << "<th>cv</th><th>samples</th><th>GFLOP/s</th><th>rel_err</th><th>mass_recall</th>"
      << (counters ? "<th>DRAM GB/s</th><th>tensor TFLOP/s</th><th>ops per DRAM byte</th>" : "")
      << "</tr>\n";
  for (const TrialRow* t : rows) {
    const TrialResult& r = t->result;
    const bool ok = r.status == TrialStatus::kOk;
    out << "<tr>";
    if (many_devices) out << "<td>" << HtmlEscape(t->device.name) << "</td>";
    out << "<td>" << HtmlEscape(t->config.variant) << "</td><td>"
        << HtmlEscape(t->config.implementation) << "</td><td>"
        << HtmlEscape(ConfigText(t->config)) << "</td><td>"
        << HtmlEscape(t->problem.shape.ToString()) << "</td><td>"
        << ToString(t->problem.phase) << "</td><td class=\"status-"
        << ToString(r.status) << "\">" << ToString(r.status) << "</td><td>" << HtmlEscape(r.message)
        << "</td>";
    for (const double v : {r.median_ms, r.p10_ms, r.p90_ms})
      out << "<td class=\"num\">" << (ok ? Num(v) : "") << "</td>";
    out << "<td class=\"num\">" << (ok ? Num(r.cv, "%.3f") : "") << "</td><td class=\"num\">"
        << t->sample_count << "</td><td class=\"num\">" << GflopsCell(r)
        << "</td><td class=\"num\">" << MetricCell(r, "rel_err") << "</td><td class=\"num\">"
        << MetricCell(r, "mass_recall") << "</td>";
    if (counters) {
      for (const char* key : {"hw_dram_gb_per_s", "hw_tensor_tflops", "hw_ops_per_dram_byte"})
        out << "<td class=\"num\">" << MetricCell(r, key) << "</td>";
    }
    out << "</tr>\n";
  }
  out << "</table></div>\n</section>\n";
}

constexpr const char kStyle[] = R"css(
body { font-family: system-ui, sans-serif; margin: 2em; color: #222; }
h1 { margin-bottom: 0.2em; }
.muted { color: #777; font-weight: normal; }
table { border-collapse: collapse; margin: 0.5em 0 1em; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f3f3f3; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.status-ok { color: #1a7f37; }
td.status-invalid, td.status-compile_failed, td.status-launch_failed,
td.status-wrong_result, td.status-timeout { color: #b42318; }
.wide { overflow-x: auto; }
.charts { display: flex; flex-wrap: wrap; gap: 1.5em; }
.chart { width: 640px; height: 400px; }
table.heatmap td { min-width: 3em; }
#js-errors { display: none; background: #fde8e8; border: 1px solid #b42318; padding: 0.5em; }
)css";

// Registered first, so that an error anywhere (Chart.js included) is recorded and shown.
constexpr const char kErrorHandlers[] = R"js(
window.attntuneErrors = [];
function attntuneRecordError(message) {
  window.attntuneErrors.push(String(message));
  var body = document.body;
  if (!body) return;
  body.dataset.jsErrors = String(window.attntuneErrors.length);
  delete body.dataset.renderOk;
  var box = document.getElementById('js-errors');
  if (box) {
    box.style.display = 'block';
    box.textContent = 'Script errors: ' + window.attntuneErrors.join('; ');
  }
}
window.onerror = function (message, source, line, column) {
  attntuneRecordError(message + ' (' + source + ':' + line + ':' + column + ')');
};
window.addEventListener('unhandledrejection', function (event) {
  attntuneRecordError('unhandled rejection: ' + event.reason);
});
)js";

constexpr const char kChartCode[] = R"js(
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('attntune-data').textContent);
  var palette = ['#1f77b4', '#ff7f0e', '#2ca02c', '#d62728', '#9467bd', '#8c564b',
                 '#e377c2', '#7f7f7f', '#bcbd22', '#17becf'];
  var charts = 0;
  Chart.defaults.animation = false;

  function addChart(containerId, title, config) {
    var box = document.createElement('div');
    box.className = 'chart';
    var canvas = document.createElement('canvas');
    box.appendChild(canvas);
    document.getElementById(containerId).appendChild(box);
    config.options.responsive = true;
    config.options.maintainAspectRatio = false;
    config.options.plugins = config.options.plugins || {};
    config.options.plugins.title = {display: true, text: title};
    new Chart(canvas, config);
    charts += 1;
  }
  function axis(type, text) {
    return {type: type, title: {display: true, text: text}};
  }
  function pointLabel(ctx) {
    return ctx.dataset.label + ': (' + ctx.raw.x + ', ' + ctx.raw.y + ') ' + ctx.raw.label;
  }

  Object.keys(data.scaling).forEach(function (variant) {
    var datasets = data.scaling[variant].map(function (series, i) {
      var color = palette[i % palette.length];
      return {label: series.label, data: series.points, showLine: true,
              borderColor: color, backgroundColor: color};
    });
    addChart('scaling-charts', variant + ': median time of the best config vs sequence length', {
      type: 'scatter', data: {datasets: datasets},
      options: {scales: {x: axis('logarithmic', 'sequence length Lk'),
                         y: axis('logarithmic', 'median time (ms)')},
                plugins: {tooltip: {callbacks: {label: pointLabel}}}}});
  });

  Object.keys(data.pareto).forEach(function (variant) {
    var entry = data.pareto[variant];
    var datasets = [];
    entry.groups.forEach(function (group, i) {
      var color = palette[i % palette.length];
      datasets.push({label: group.label, data: group.points,
                     borderColor: color, backgroundColor: color + '80'});
      datasets.push({label: group.label + ' (front)', data: group.front, showLine: true,
                     pointRadius: 0, borderColor: color, backgroundColor: color});
    });
    if (entry.floor !== null) {  // the floor: a dashed line across every point's time
      var xs = [];
      entry.groups.forEach(function (group) {
        group.points.forEach(function (p) { xs.push(p.x); });
      });
      var lo = Math.min.apply(null, xs), hi = Math.max.apply(null, xs);
      datasets.push({label: 'floor ' + entry.floor_text, showLine: true, pointRadius: 0,
                     borderDash: [6, 4], borderColor: '#b42318', backgroundColor: '#b42318',
                     data: [{x: lo, y: entry.floor, label: 'floor'},
                            {x: hi, y: entry.floor, label: 'floor'}]});
    }
    var y = axis('linear', entry.metric);
    if (/^mass_recall/.test(entry.metric)) y.max = 1;  // a share: dense sits on the top edge
    addChart('pareto-charts', variant + ': time vs ' + entry.metric + ' (ok trials)', {
      type: 'scatter', data: {datasets: datasets},
      options: {scales: {x: axis('logarithmic', 'median time (ms)'), y: y},
                plugins: {tooltip: {callbacks: {label: pointLabel}},
                          legend: {labels: {filter: function (item) {
                            return !/ \(front\)$/.test(item.text);
                          }}}}}});
  });

  Object.keys(data.roofline).forEach(function (device) {
    var entry = data.roofline[device];
    var datasets = [];
    var i = 0;
    ['model', 'counters'].forEach(function (kind) {
      Object.keys(entry[kind] || {}).forEach(function (variant) {
        var color = palette[i++ % palette.length];
        datasets.push({label: variant + (kind === 'model' ? ' (model)' : ' (counters)'),
                       data: entry[kind][variant], borderColor: color,
                       backgroundColor: color + '80',
                       pointStyle: kind === 'model' ? 'circle' : 'triangle', pointRadius: 4});
      });
    });
    addChart('roofline-charts', device + ': FLOP rate vs arithmetic intensity (ok trials)', {
      type: 'scatter', data: {datasets: datasets},
      options: {scales: {x: axis('logarithmic', 'FLOP per byte'),
                         y: axis('logarithmic', 'GFLOP/s')},
                plugins: {tooltip: {callbacks: {label: pointLabel}}}}});
  });

  document.body.dataset.charts = String(charts);
  if (window.attntuneErrors.length === 0) document.body.dataset.renderOk = '1';
})();
)js";


// Per tuned entry: every implementation's best time, the winner, its margin over the next
// implementation and over the untuned default (tuner/confirm.h).
void WriteImplementations(std::ostream& out, const std::vector<BestEntry>& best) {
  std::vector<std::string> impls;  // every implementation of any entry, in name order
  for (const BestEntry& e : best)
    for (const auto& [impl, ms] : e.implementation_ms)
      if (std::find(impls.begin(), impls.end(), impl) == impls.end()) impls.push_back(impl);
  std::sort(impls.begin(), impls.end());
  std::set<std::string> devices;
  for (const BestEntry& e : best) devices.insert(e.device_name);
  const bool several = devices.size() > 1;  // one device: no column, as the trial table
  out << "<section id=\"implementations\"><h2>Implementations</h2>\n"
      << "<p class=\"muted\">Per entry (device, variant, phase, variant parameters, head "
      << "dim, length): each implementation's best time (ms), the winner, how much faster "
      << "it is than the next implementation, and than the untuned default (the backend's "
      << "first implementation with its default tunables). \"re-timed\": the winner and the "
      << "default were timed again back to back after the search; a configuration the "
      << "default matched there is not an entry.</p>\n<div class=\"wide\"><table class=\"grid\">\n"
      << "<tr>" << (several ? "<th>device</th>" : "")
      << "<th>variant</th><th>phase</th><th>params</th><th>d</th><th>L</th>";
  for (const std::string& impl : impls) out << "<th>" << HtmlEscape(impl) << "</th>";
  out << "<th>winner</th><th>over next</th><th>over default</th></tr>\n";
  for (const BestEntry& e : best) {
    out << "<tr class=\"entry\">"
        << (several ? "<td>" + HtmlEscape(e.device_name) + "</td>" : "") << "<td>" << HtmlEscape(e.variant)
        << "</td><td>" << ToString(e.phase) << "</td><td>" << HtmlEscape(e.params_json)
        << "</td><td class=\"num\">" << e.head_dim << "</td><td class=\"num\">" << e.seq_len
        << "</td>";
    for (const std::string& impl : impls) {
      const auto it = e.implementation_ms.find(impl);
      out << "<td class=\"num\">" << (it == e.implementation_ms.end() ? "" : Num(it->second))
          << "</td>";
    }
    const double next = e.MarginNext(), def = e.MarginDefault();
    out << "<td>" << HtmlEscape(e.implementation) << "</td><td class=\"num\">"
        << (std::isfinite(next) ? Num(next, "%.2fx") : "") << "</td><td class=\"num\">"
        << (std::isfinite(def) ? Num(def, "%.2fx") + (e.default_retimed ? " re-timed" : "") : "")
        << "</td></tr>\n";
  }
  out << "</table></div>\n</section>\n";
}

}  // namespace

std::string RenderHtmlReport(const ReportInput& input) {
  const std::vector<BestEntry> best = BestEntries(input);
  const json data = {{"scaling", ScalingData(best)},
                     {"pareto", ParetoData(input)},
                     {"roofline", RooflineData(input.trials)}};

  std::ostringstream out;
  out << "<h1>attntune performance report</h1>\n"
      << "<p class=\"muted\">attntune " << HtmlEscape(input.tool_version) << ", generated "
      << HtmlEscape(input.generated_at) << ". Times hold only for the device that measured "
      << "them.</p>\n<div id=\"js-errors\"></div>\n";
  WriteEnvironment(out, input);
  WriteSummary(out, input.trials);
  WriteImplementations(out, best);
  out << "<section id=\"scaling\"><h2>Scaling with sequence length</h2>\n"
      << "<p class=\"muted\">Per variant: the fastest ok config at each sequence length, one "
      << "line per device, head dim, variant parameters and phase (decode lines are "
      << "marked \"decode\": one step against Lk cached keys).</p>\n"
      << "<div class=\"charts\" id=\"scaling-charts\"></div></section>\n"
      << "<section id=\"pareto\"><h2>Time vs quality</h2>\n"
      << "<p class=\"muted\">Per variant and quality source (Gaussian inputs, or a "
      << "calibration set: a model's captured attention, plotted at its worst layer and "
      << "head): every ok trial, one colour per device and shape; the line is the Pareto "
      << "front (no other trial is both faster and better); the dashed line is the floor "
      << "the problems were tuned under.</p>\n"
      << "<div class=\"charts\" id=\"pareto-charts\"></div></section>\n";
  WriteHeatmaps(out, input, ChosenEntries(best));
  out
      << "<section id=\"roofline\"><h2>Roofline points</h2>\n"
      << "<p class=\"muted\">Per device: every ok trial as a point of FLOP rate against "
      << "arithmetic intensity. Circles (model): useful FLOPs per compulsory byte of Q, K, V "
      << "and O, against useful GFLOP/s. Triangles (counters, <code>tune --metrics</code> on "
      << "a GPU): tensor-pipe ops per DRAM byte, against tensor-pipe GOP/s, read by CUPTI's "
      << "range profiler in passes separate from the timing. No roof is drawn: attntune does "
      << "not measure a device's peak rates.</p>\n"
      << "<div class=\"charts\" id=\"roofline-charts\"></div></section>\n";
  WriteTrialTable(out, input.trials);
  out << "<script type=\"application/json\" id=\"attntune-data\">"
      << JsonForScript(data.dump(-1, ' ', false, json::error_handler_t::replace))
      << "</script>\n<script>" << kChartCode << "</script>\n";
  HtmlPage page;
  page.title = "attntune report " + input.generated_at;
  page.style = kStyle;
  page.head_script = kErrorHandlers;
  page.chartjs = true;
  page.body = out.str();
  return RenderHtmlPage(page);
}

}  // namespace attntune
