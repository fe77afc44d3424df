#include "cli/replay_command.h"

#include "cli/commands.h"

#include "core/params.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "core/check.h"
#include "core/files.h"
#include "core/json_text.h"
#include "core/shape.h"
#include "reports/replay_report.h"
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
  int batch = 1;
  bool json = false;
  std::string report;
};

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
                              {"p_score", r.p_score},
                              {"wall_ms_per_eval", r.wall_ms_per_eval},
                              {"strategy_ms_per_eval", r.strategy_ms_per_eval}});
  }
  return out;
}

void PrintText(const std::string& strategy, const ReplayArgs& a,
               const std::vector<ReplayResult>& results) {
  std::printf("replay: strategy %s, %d repeats, seed %llu, batch %d\n", strategy.c_str(),
              a.repeats, static_cast<unsigned long long>(a.seed), a.batch);
  std::printf("%-28s %-24s %6s", "file", "device", "size");
  for (const ReplayResult::Budget& b : results.front().budgets) {
    std::printf("  %13s", ("@" + std::to_string(b.evals)).c_str());
  }
  std::printf("  %7s  %9s  %11s\n", "p_score", "wall/eval", "search/eval");
  std::vector<double> mean(results.front().budgets.size(), 0.0);
  double p = 0;
  for (const ReplayResult& r : results) {
    std::printf("%-28s %-24s %6lld", Basename(r.file).c_str(), r.device.substr(0, 24).c_str(),
                static_cast<long long>(r.size));
    for (size_t i = 0; i < r.budgets.size(); ++i) {
      std::printf("  %.3f ± %.3f", r.budgets[i].fraction.mean, r.budgets[i].fraction.std);
      mean[i] += r.budgets[i].fraction.mean / results.size();
    }
    std::printf("  %7.3f  %6.1f ms  %8.2f ms\n", r.p_score, r.wall_ms_per_eval,
                r.strategy_ms_per_eval);
    p += r.p_score / results.size();
  }
  if (results.size() > 1) {
    std::printf("%-28s %-24s %6s", "mean", "", "");
    for (double m : mean) std::printf("  %.3f        ", m);
    std::printf("  %7.3f\n", p);
  }
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
  cmd->add_option("--repeats", args->repeats, "Seeded searches per file")
      ->check(kPositiveInteger)
      ->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed of the first repeat's search")
      ->check(kSeed)
      ->capture_default_str();
  cmd->add_option("--threads", args->threads, "Threads (0: one per hardware thread)")
      ->check(kNonNegativeInteger)
      ->capture_default_str();
  cmd->add_option("--batch", args->batch,
                  "Points asked before any is told, as a tune on this many MPI ranks asks them")
      ->check(kPositiveInteger)
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "One JSON object on stdout");
  cmd->add_option("--report", args->report, "Write an HTML page of best-so-far curves");
  cmd->callback([args, rc] {
    const ReplayArgs& a = *args;
    ReplayOptions options;
    options.budgets.clear();
    for (const std::string& b : SplitList(a.budgets)) options.budgets.push_back(ParsePositiveInt(b, "--budget"));
    if (options.budgets.empty()) throw UserError("--budget: no budget given (e.g. 25,50,100)");
    if (a.repeats < 1) throw UserError("--repeats: must be a positive integer");
    if (a.threads < 0) throw UserError("--threads: must be 0 or a positive integer");
    if (a.threads > kMaxReplayThreads)
      throw UserError("--threads: " + std::to_string(a.threads) + " is more than attntune starts (" +
                      std::to_string(kMaxReplayThreads) + ")");
    const int64_t max_budget = *std::max_element(options.budgets.begin(), options.budgets.end());
    if (static_cast<double>(max_budget) * a.repeats > static_cast<double>(kMaxReplayEvaluations))
      throw UserError("--budget, --repeats: " + std::to_string(max_budget) + " evaluations x " +
                      std::to_string(a.repeats) + " repeats is more than a replay runs (" +
                      std::to_string(kMaxReplayEvaluations) + " in all)");
    if (a.batch < 1) throw UserError("--batch: must be a positive integer");
    options.batch = a.batch;
    options.repeats = a.repeats;
    options.seed = a.seed;
    options.threads = a.threads;
    const std::vector<std::string> strategies = SplitList(a.strategy);
    if (strategies.empty()) throw UserError("--strategy: no strategy given");
    if (!a.report.empty())
      for (const std::string& c : a.caches) RefuseToReplace(a.report, c, "a --cache file");
    std::vector<ReplayCache> caches;
    for (const std::string& path : a.caches) caches.push_back(ReadReplayCache(path));
    // Each repeat also runs to the score's time budget: about its evaluations of median
    // cost at random search's cost per evaluation (1,113 on convolution_A100), which
    // --budget 1 --repeats 10000000 did not bound.
    for (const ReplayCache& cache : caches) {
      const ReplayStatistics st = Statistics(cache);
      const double score_evals =
          st.median_cost > 0 && st.cost_per_eval > 0
              ? static_cast<double>(std::max<int64_t>(1, FevalsToCutoff(st, options.score.cutoff))) *
                    st.median_cost / st.cost_per_eval
              : 1.0;
      const double per_repeat = std::max(static_cast<double>(max_budget), std::ceil(score_evals));
      if (per_repeat * a.repeats > static_cast<double>(kMaxReplayEvaluations))
        throw UserError("--repeats: " + std::to_string(a.repeats) + " repeats of about " +
                        std::to_string(static_cast<int64_t>(per_repeat)) + " evaluations each (" +
                        cache.path + ": the score's time budget) is more than a replay runs (" +
                        std::to_string(kMaxReplayEvaluations) + " in all)");
    }
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
    if (a.json)
      std::printf("%s\n", JsonText(strategies.size() == 1 ? json_out[0] : json_out, 2).c_str());
    if (!a.report.empty()) {
      WriteFileAtomic(a.report, RenderReplayReport(strategies, all, a.repeats, a.seed));
    }
    *rc = 0;
  });
}

}  // namespace attntune
