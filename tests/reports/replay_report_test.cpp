#include "reports/replay_report.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace attntune {
namespace {

ReplayResult Result(const std::string& file, double p_score) {
  ReplayResult r;
  r.file = "/data/" + file;
  r.device = "GPU X";
  r.size = 12;
  r.p_score = p_score;
  r.curve_mean = {0.5, 0.75, 1.0};
  r.curve_p10 = {0.25, 0.5, 1.0};
  r.curve_p90 = {0.75, 1.0, 1.0};
  r.curve_random = {0.4, 0.6, 0.7};
  return r;
}

// The page's chart data: the JSON after "const charts = ".
nlohmann::json Charts(const std::string& html) {
  const std::string marker = "const charts = ";
  const size_t start = html.find(marker);
  REQUIRE(start != std::string::npos);
  const size_t end = html.find(";\n", start);
  return nlohmann::json::parse(html.substr(start + marker.size(), end - start - marker.size()));
}

TEST_CASE("The replay page has one chart per file with every strategy's curves") {
  const std::vector<std::vector<ReplayResult>> results = {
      {Result("a.json.gz", 0.5), Result("b.json.gz", 0.25)},
      {Result("a.json.gz", -0.1), Result("b.json.gz", 0.0)}};
  const std::string html = RenderReplayReport({"auto", "random"}, results, 7, 3);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("Chart") != std::string::npos);  // Chart.js inlined: works offline
  CHECK(html.find("7 repeats, seed 3") != std::string::npos);
  const nlohmann::json charts = Charts(html);
  REQUIRE(charts.size() == 2);
  CHECK(charts[0]["title"].get<std::string>().find("a.json.gz") == 0);  // the base name
  CHECK(charts[0]["n"] == 3);
  // Per strategy: p10, p90 and mean; then random search's expectation.
  REQUIRE(charts[0]["datasets"].size() == 7);
  CHECK(charts[0]["datasets"][2]["label"] == "auto (mean)");
  CHECK(charts[0]["datasets"][5]["label"] == "random (mean)");
  CHECK(charts[0]["datasets"][6]["label"] == "random (expected)");
  CHECK(charts[1]["scores"]["auto"] == 0.25);
  CHECK(charts[1]["scores"]["random"] == 0.0);
}

}  // namespace
}  // namespace attntune
