#include "reports/replay_report.h"

#include <nlohmann/json.hpp>
#include <sstream>

#include "reports/html_page.h"

namespace attntune {
namespace {

std::string Basename(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

}  // namespace

std::string RenderReplayReport(const std::vector<std::string>& strategies,
                               const std::vector<std::vector<ReplayResult>>& all, int repeats,
                               uint64_t seed) {
  static const char* kColours[] = {"#1f77b4", "#d62728", "#2ca02c", "#9467bd",
                                   "#ff7f0e", "#8c564b", "#e377c2", "#17becf"};
  nlohmann::json charts = nlohmann::json::array();
  for (size_t f = 0; f < all.front().size(); ++f) {
    const ReplayResult& first = all.front()[f];
    nlohmann::json datasets = nlohmann::json::array();
    for (size_t s = 0; s < strategies.size(); ++s) {
      const ReplayResult& r = all[s][f];
      const std::string colour = kColours[s % 8];
      datasets.push_back({{"label", strategies[s] + " p10"}, {"data", r.curve_p10},
                          {"borderColor", "transparent"}, {"pointRadius", 0}, {"fill", false}});
      datasets.push_back({{"label", strategies[s] + " p90"}, {"data", r.curve_p90},
                          {"borderColor", "transparent"}, {"backgroundColor", colour + "33"},
                          {"pointRadius", 0}, {"fill", "-1"}});
      datasets.push_back({{"label", strategies[s] + " (mean)"}, {"data", r.curve_mean},
                          {"borderColor", colour}, {"pointRadius", 0}, {"fill", false}});
    }
    datasets.push_back({{"label", "random (expected)"}, {"data", first.curve_random},
                        {"borderColor", "#7f7f7f"}, {"borderDash", {6, 4}}, {"pointRadius", 0},
                        {"fill", false}});
    nlohmann::json scores = nlohmann::json::object();
    for (size_t s = 0; s < strategies.size(); ++s) scores[strategies[s]] = all[s][f].p_score;
    charts.push_back({{"title", Basename(first.file) + " — " + first.device + " (" +
                                    std::to_string(first.size) + " configurations)"},
                      {"n", first.curve_mean.size()}, {"datasets", datasets}, {"scores", scores}});
  }
  std::ostringstream body;
  body << "<h1>Replay: best-so-far fraction of optimum</h1>\n<p>" << repeats << " repeats, seed "
       << seed
       << "; bands: 10th to 90th percentile over repeats; dashed: random search's analytic "
          "expectation.</p>\n<div id=\"charts\"></div>\n<script>\nconst charts = "
       << JsonForScript(charts.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
       << ";\n"
       << "for (const c of charts) {\n"
          "  const h = document.createElement('h2'); h.textContent = c.title;\n"
          "  const p = document.createElement('p');\n"
          "  p.textContent = 'p_score: ' + Object.entries(c.scores).map(([k, v]) => k + ' ' + "
          "v.toFixed(3)).join(', ');\n"
          "  const canvas = document.createElement('canvas');\n"
          "  document.getElementById('charts').append(h, p, canvas);\n"
          "  new Chart(canvas, {type: 'line', data: {labels: Array.from({length: c.n}, (_, i) => "
          "i + 1), datasets: c.datasets},\n"
          "    options: {animation: false, scales: {x: {title: {display: true, text: "
          "'evaluations'}}, y: {title: {display: true, text: 'fraction of optimum'}, max: 1}},\n"
          "      plugins: {legend: {labels: {filter: (item) => !/ p[19]0$/.test(item.text)}}}}});\n"
          "}\n</script>\n";
  HtmlPage page;
  page.title = "attntune replay";
  page.style = "body{font-family:sans-serif;max-width:960px;margin:auto}canvas{margin-bottom:2em}";
  page.chartjs = true;
  page.body = body.str();
  return RenderHtmlPage(page);
}

}  // namespace attntune
