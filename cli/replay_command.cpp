#include "cli/replay_command.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "kernels/spec/check.h"
#include "kernels/spec/shape.h"
#include "reports/assets.h"
#include "search/replay.h"

namespace attntune {
namespace {

struct ReplayArgs {
  std::vector<std::string> caches;
  std::string strategy = "auto";
  std::string budgets = "25,50,100,200,400";
  int repeats = 100;
  uint64_t seed = 1;
  int threads = 0;
  bool json = false;
  std::string report;
};

std::vector<std::string> Split(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) items.push_back(item);
  return items;
}

std::string Basename(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

nlohmann::ordered_json ResultJson(const std::string& strategy, const std::vector<ReplayResult>& results) {
  nlohmann::ordered_json out = {{"schema", 1}, {"strategy", strategy}, {"results", nlohmann::ordered_json::array()}};
  for (const ReplayResult& r : results) {
    nlohmann::ordered_json budgets = nlohmann::ordered_json::array();
    for (const ReplayResult::Budget& b : r.budgets) {
      budgets.push_back({{"evals", b.evals},
                         {"fraction_of_optimum", {{"mean", b.fraction.mean}, {"std", b.fraction.std}}}});
    }
    out["results"].push_back({{"file", r.file},
                              {"device", r.device},
                              {"size", r.size},
                              {"budgets", budgets},
                              {"p_score", r.p_score}});
  }
  return out;
}

void PrintText(const std::string& strategy, const ReplayArgs& a,
               const std::vector<ReplayResult>& results) {
  std::printf("replay: strategy %s, %d repeats, seed %llu\n", strategy.c_str(), a.repeats,
              static_cast<unsigned long long>(a.seed));
  std::printf("%-28s %-24s %6s", "file", "device", "size");
  for (const ReplayResult::Budget& b : results.front().budgets) {
    std::printf("  %13s", ("@" + std::to_string(b.evals)).c_str());
  }
  std::printf("  %7s\n", "p_score");
  std::vector<double> mean(results.front().budgets.size(), 0.0);
  double p = 0;
  for (const ReplayResult& r : results) {
    std::printf("%-28s %-24s %6lld", Basename(r.file).c_str(), r.device.substr(0, 24).c_str(),
                static_cast<long long>(r.size));
    for (size_t i = 0; i < r.budgets.size(); ++i) {
      std::printf("  %.3f ± %.3f", r.budgets[i].fraction.mean, r.budgets[i].fraction.std);
      mean[i] += r.budgets[i].fraction.mean / results.size();
    }
    std::printf("  %7.3f\n", r.p_score);
    p += r.p_score / results.size();
  }
  if (results.size() > 1) {
    std::printf("%-28s %-24s %6s", "mean", "", "");
    for (double m : mean) std::printf("  %.3f        ", m);
    std::printf("  %7.3f\n", p);
  }
}

// One chart per file: each strategy's mean best-so-far fraction of optimum with its
// 10th-90th percentile band, and random search's analytic expectation.
std::string RenderReport(const std::vector<std::string>& strategies,
                         const std::vector<std::vector<ReplayResult>>& all, const ReplayArgs& a) {
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
  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>attntune replay</title>\n"
       << "<style>body{font-family:sans-serif;max-width:960px;margin:auto}"
          "canvas{margin-bottom:2em}</style>\n<script>"
       << reinterpret_cast<const char*>(report_assets::kChartJs) << "</script></head><body>\n"
       << "<h1>Replay: best-so-far fraction of optimum</h1>\n<p>" << a.repeats
       << " repeats, seed " << a.seed
       << "; bands: 10th to 90th percentile over repeats; dashed: random search's analytic "
          "expectation.</p>\n<div id=\"charts\"></div>\n<script>\nconst charts = "
       << charts.dump() << ";\n"
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
          "}\n</script></body></html>\n";
  return html.str();
}

}  // namespace

void RegisterReplay(CLI::App& app, int* rc) {
  auto args = std::make_shared<ReplayArgs>();
  auto* cmd = app.add_subcommand(
      "replay", "Judge a search strategy on recorded tuning data (Kernel Tuner cache files)");
  cmd->add_option("--cache", args->caches, "Kernel Tuner cache file (.json, .json.gz, T4); repeatable")
      ->required();
  cmd->add_option("--strategy", args->strategy, "Strategy, or a comma-separated list")
      ->capture_default_str();
  cmd->add_option("--budget", args->budgets, "Evaluation budgets N[,N...]")->capture_default_str();
  cmd->add_option("--repeats", args->repeats, "Seeded searches per file")->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed of the first repeat's search")->capture_default_str();
  cmd->add_option("--threads", args->threads, "Threads (0: one per hardware thread)")
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "One JSON object on stdout");
  cmd->add_option("--report", args->report, "Write an HTML page of best-so-far curves");
  cmd->callback([args, rc] {
    const ReplayArgs& a = *args;
    ReplayOptions options;
    options.budgets.clear();
    for (const std::string& b : Split(a.budgets)) options.budgets.push_back(ParsePositiveInt(b, "--budget"));
    if (options.budgets.empty()) throw UserError("--budget: no budget given (e.g. 25,50,100)");
    if (a.repeats < 1) throw UserError("--repeats: must be a positive integer");
    if (a.threads < 0) throw UserError("--threads: must be 0 or a positive integer");
    options.repeats = a.repeats;
    options.seed = a.seed;
    options.threads = a.threads;
    const std::vector<std::string> strategies = Split(a.strategy);
    if (strategies.empty()) throw UserError("--strategy: no strategy given");
    std::vector<ReplayCache> caches;
    for (const std::string& path : a.caches) caches.push_back(ReadReplayCache(path));
    std::vector<std::vector<ReplayResult>> all;
    nlohmann::ordered_json json_out = nlohmann::ordered_json::array();
    for (const std::string& strategy : strategies) {
      options.strategy = strategy;
      std::vector<ReplayResult> results;
      for (const ReplayCache& cache : caches) results.push_back(Replay(cache, options));
      if (a.json) {
        json_out.push_back(ResultJson(strategy, results));
      } else {
        PrintText(strategy, a, results);
      }
      all.push_back(std::move(results));
    }
    if (a.json) std::printf("%s\n", (strategies.size() == 1 ? json_out[0] : json_out).dump(2).c_str());
    if (!a.report.empty()) {
      std::ofstream out(a.report);
      if (!out) throw UserError("--report: cannot write '" + a.report + "'");
      out << RenderReport(strategies, all, a);
      if (!out) throw UserError("--report: cannot write '" + a.report + "'");
    }
    *rc = 0;
  });
}

}  // namespace attntune
