#include "reports/reports.h"

#include <unistd.h>

#include <algorithm>
#include <catch2/catch.hpp>

#include "tests/temp_dir.h"
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>
#include <tuple>

#include "tests/reports/fixture_rows.h"

namespace attntune {
namespace {

namespace fs = std::filesystem;
using test::MakeFixtureInput;
using test::MakeFixtureInputWithDecode;
using test::MakeTrial;


void WriteFile(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary);
  out << text;
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// Runs `command` through the shell, its output into `log`; returns the exit status.
int Run(const std::string& command, const fs::path& log) {
  const int rc = std::system((command + " >'" + log.string() + "' 2>&1").c_str());
  if (rc != 0) UNSCOPED_INFO(command << "\n" << ReadFile(log));
  return rc;
}

const std::string kCxx = ATTNTUNE_TEST_CXX;
const std::string kStrict = " -std=c++17 -Wall -Wextra -Werror";
// What a careful user's build might add; the header must stay warning-free under it.
const std::string kPedantic = kStrict + " -Wpedantic -Wshadow -Wconversion -Wsign-conversion";

TEST_CASE("BestEntries keeps the fastest ok trial per device, variant, params, d and L") {
  const std::vector<BestEntry> best = BestEntries(MakeFixtureInput());
  // dense: d=64 at 3 lengths + d=128; swa: (w=256) x 2 lengths + (w=1024) x 1.
  REQUIRE(best.size() == 7);

  // Sorted by (device, variant, head_dim, seq_len, params).
  REQUIRE(best[0].variant == "dense");
  CHECK(best[0].head_dim == 64);
  CHECK(best[0].seq_len == 512);
  CHECK(best[0].params_json == R"({})");
  CHECK(best[0].tunables_json == R"({"Bc":64,"Br":64})");
  CHECK(best[0].median_ms == 0.25);
  // At L=1024 a wrong_result trial (0.01 ms) is faster than every ok one: ignored.
  CHECK(best[1].seq_len == 1024);
  CHECK(best[1].params_json == R"({})");
  CHECK(best[1].tunables_json == R"({"Bc":64,"Br":32})");
  CHECK(best[1].median_ms == 0.90);
  CHECK(best[2].seq_len == 4096);
  CHECK(best[2].median_ms == 12.0);
  CHECK(best[3].head_dim == 128);

  // swa: the variant params ({"sink":0,"w":256} < {"sink":4,"w":1024}) order one length.
  REQUIRE(best[4].variant == "swa");
  CHECK(best[4].seq_len == 1024);
  CHECK(best[4].params_json == R"({"sink":0,"w":256})");
  CHECK(best[4].tunables_json == R"({"Bc":64,"Br":32})");
  CHECK(best[4].median_ms == 0.40);
  CHECK(best[4].rel_err == Approx(0.1));
  CHECK(best[4].implementation == "kokkos_windowed");
  CHECK(best[4].device_name == "Test CPU");
  for (const BestEntry& e : best) CHECK(e.phase == Phase::kPrefill);
  CHECK(best[5].seq_len == 1024);
  CHECK(best[5].params_json == R"({"sink":4,"w":1024})");
  CHECK(best[5].tunables_json == R"({"Bc":64,"Br":32})");
  CHECK(best[5].mass_recall == 0.99);
  CHECK(best[6].seq_len == 4096);
  CHECK(best[6].median_ms == 1.6);
}

TEST_CASE("BestEntries is empty without ok trials, and ties go to the older trial") {
  ReportInput in;
  in.trials.push_back(MakeTrial(1, "dense", "{\"Br\":16}", 64, 128, 1.0, 1.0, TrialStatus::kTimeout,
                                "over the time cap"));
  CHECK(BestEntries(in).empty());

  in.trials.push_back(MakeTrial(3, "dense", "{\"Br\":32}", 64, 128, 2.0, 1.0));
  in.trials.push_back(MakeTrial(2, "dense", "{\"Br\":64}", 64, 128, 2.0, 1.0));
  const std::vector<BestEntry> best = BestEntries(in);
  REQUIRE(best.size() == 1);
  CHECK(best[0].params_json == R"({})");
  CHECK(best[0].tunables_json == R"({"Br":64})");
}

TEST_CASE("BestEntries takes each configuration's newest verdict and never a time that is not a number") {
  // A tune under a stricter --tolerance stores a wrong_result beside the older ok trial of
  // the same configuration: its outputs still gave the ok one.
  ReportInput in;
  in.trials.push_back(MakeTrial(1, "dense", "{\"Br\":16}", 64, 128, 1.0, 1.0));
  in.trials.push_back(MakeTrial(2, "dense", "{\"Br\":32}", 64, 128, 2.0, 1.0));
  in.trials.push_back(MakeTrial(3, "dense", "{\"Br\":16}", 64, 128, 0.0, 1.0,
                                TrialStatus::kWrongResult, "relative error 2e-6 exceeds 1e-9"));
  std::vector<BestEntry> best = BestEntries(in);
  REQUIRE(best.size() == 1);
  CHECK(best[0].tunables_json == R"({"Br":32})");
  // A later launch failure may be transient (a tune retries it): no verdict, it hides
  // nothing.
  ReportInput transient;
  transient.trials.push_back(MakeTrial(1, "dense", "{\"Br\":16}", 64, 128, 1.0, 1.0));
  transient.trials.push_back(MakeTrial(2, "dense", "{\"Br\":16}", 64, 128, 0.0, 1.0,
                                       TrialStatus::kLaunchFailed, "out of memory"));
  REQUIRE(BestEntries(transient).size() == 1);
  CHECK(BestEntries(transient)[0].trial_id == 1);
  // An ok trial whose median is NaN (a damaged row) beat every other.
  in.trials.push_back(MakeTrial(4, "dense", "{\"Br\":64}", 64, 128,
                                std::numeric_limits<double>::quiet_NaN(), 1.0));
  best = BestEntries(in);
  REQUIRE(best.size() == 1);
  CHECK(best[0].tunables_json == R"({"Br":32})");
}

TEST_CASE("BestEntries keeps the trials of two dtypes or two models apart, each with its own default") {
  ReportInput in;
  // fp32 Hq=16 (the fixture's), its default 2.0 ms and a tuned 1.0 ms.
  in.trials.push_back(MakeTrial(1, "dense", "{\"Br\":16}", 64, 128, 2.0, 1.0));
  in.trials.back().result.metrics[kMetricIsDefault] = 1;
  in.trials.push_back(MakeTrial(2, "dense", "{\"Br\":32}", 64, 128, 1.0, 1.0));
  // The same key for another model (Hq=32) and, apart, another dtype: slower and faster.
  in.trials.push_back(MakeTrial(3, "dense", "{\"Br\":16}", 64, 128, 4.0, 1.0));
  in.trials.back().problem.shape.Hq = 32;
  in.trials.back().result.metrics[kMetricIsDefault] = 1;
  in.trials.push_back(MakeTrial(4, "dense", "{\"Br\":32}", 64, 128, 0.5, 1.0));
  in.trials.back().problem.dtype = Dtype::kF16;
  const std::vector<BestEntry> best = BestEntries(in);
  REQUIRE(best.size() == 3);
  std::map<std::string, const BestEntry*> by;
  for (const BestEntry& e : best) by[e.geometry.ToString()] = &e;
  const EntryGeometry fixture = GeometryOf(in.trials[0].problem);
  REQUIRE(by.count(fixture.ToString()) == 1);
  const BestEntry& own = *by.at(fixture.ToString());
  CHECK(own.median_ms == 1.0);
  CHECK(own.default_ms == 2.0);  // its own default, not the other model's 4.0
  CHECK(own.implementation_ms.size() == 1);
  EntryGeometry other = fixture;
  other.q_heads = 32;
  REQUIRE(by.count(other.ToString()) == 1);
  CHECK(by.at(other.ToString())->median_ms == 4.0);
  CHECK(by.at(other.ToString())->MarginDefault() == 1.0);
  EntryGeometry half = fixture;
  half.dtype = Dtype::kF16;
  REQUIRE(by.count(half.ToString()) == 1);
  CHECK(by.at(half.ToString())->median_ms == 0.5);
  // A lookup answers per geometry too: each keeps its own.
  CHECK(ChosenEntries(best).size() == 3);
}

// The lookup checks run inside a program that includes the generated header; a failed
// check exits with its line number. static_asserts check that Lookup is constexpr.
const char kLookupProgram[] = R"code(
#include "attntune_config.h"
#include "attntune_config.h"  // the include guard holds
#include <cstdio>
#include <cstring>
using attntune_config::Lookup;
#define EXPECT(c) do { if (!(c)) { std::printf("failed line %d: %s\n", __LINE__, #c); return __LINE__; } } while (0)
static_assert(Lookup("dense", 64, 600) != nullptr, "constexpr lookup");
static_assert(Lookup("dense", 32, 600) == nullptr, "unknown head dim");
int main() {
  const attntune_config::Entry* e = Lookup("dense", 64, 512);
  EXPECT(e && e->seq_len == 512 && e->Br == 64 && e->Bc == 64);
  EXPECT(std::strcmp(e->tunables, "Bc=64,Br=64") == 0 && std::strcmp(e->params, "") == 0);
  EXPECT(std::strcmp(e->impl, "kokkos_windowed") == 0 && std::strcmp(e->device, "Test CPU") == 0);
  EXPECT(std::strcmp(e->phase, "prefill") == 0);
  e = Lookup("dense", 64, 1);  // below every tuned length: the shortest
  EXPECT(e && e->seq_len == 512);
  e = Lookup("dense", 64, 600);  // between 512 and 1024: the next longer one
  EXPECT(e && e->seq_len == 1024 && e->Br == 32 && e->median_ms == 0.9);
  e = Lookup("dense", 64, 1025);
  EXPECT(e && e->seq_len == 4096);
  e = Lookup("dense", 64, 1000000);  // beyond the largest
  EXPECT(e && e->seq_len == 4096 && e->Br == 64);
  e = Lookup("dense", 128, 64);
  EXPECT(e && e->head_dim == 128 && e->seq_len == 1024);
  EXPECT(Lookup("dense", 32, 1024) == nullptr);
  EXPECT(Lookup("dense", 96, 1000000) == nullptr);
  EXPECT(Lookup("lsh", 64, 1024) == nullptr);
  // swa at 1024: w=256 is fastest; a recall floor picks w=1024 instead.
  e = Lookup("swa", 64, 1024);
  EXPECT(e && std::strcmp(e->params, "sink=0,w=256") == 0 && e->mass_recall == 0.8);
  // A recall floor is answered from entries measured on a calibration set only: on
  // Gaussian inputs alone there is none (MakeFixtureInputWithCalibration has them).
  EXPECT(Lookup("swa", 64, 1024, 0.95) == nullptr);
  EXPECT(e->calibration[0] == '\0' && e->floor[0] == '\0' && !e->meets_floor);
  EXPECT(e->mass_recall_worst != e->mass_recall_worst);  // NaN: not measured
  e = Lookup("swa", 64, 2048);
  EXPECT(e && e->seq_len == 4096 && e->median_ms == 1.6);
  e = attntune_config::LookupOnDevice("Test CPU", "swa", 64, 4096);
  EXPECT(e && e->seq_len == 4096);
  EXPECT(attntune_config::LookupOnDevice("Other GPU", "swa", 64, 4096) == nullptr);
  EXPECT(attntune_config::kEntries.size() == 7);
  // Only prefill was tuned: a decode lookup finds nothing (no fallback across phases).
  EXPECT(attntune_config::LookupDecode("dense", 64, 512) == nullptr);
  return 0;
}
)code";

TEST_CASE("attntune_config.h compiles warning-free and Lookup follows its fallback rule") {
  TempDir dir;
  const std::string header = RenderConfigHeader(MakeFixtureInput());
  CHECK(header.find("generated at: \"2025-01-02T03:04:05Z\"") != std::string::npos);
  CHECK(header.find("database:     \"/tmp/attntune.db\"") != std::string::npos);
  CHECK(header.find("\"model\":\"Test CPU\"") != std::string::npos);
  CHECK(header.find("trials:       14 (12 ok)") != std::string::npos);
  CHECK(header.find("smallest tuned seq_len >= seq_len") != std::string::npos);
  WriteFile(dir / "attntune_config.h", header);
  WriteFile(dir / "lookup.cpp", kLookupProgram);

  CHECK(Run(kCxx + kStrict + " -fsyntax-only " + (dir / "attntune_config.h").string(),
            dir / "syntax.log") == 0);
  const std::string program = (dir / "lookup").string();
  REQUIRE(Run(kCxx + kPedantic + " -I" + (dir / "").string() + " " + (dir / "lookup.cpp").string() +
                  " -o " + program,
              dir / "build.log") == 0);
  CHECK(Run(program, dir / "run.log") == 0);
}

size_t Count(const std::string& text, const std::string& what);
nlohmann::json ReportData(const std::string& html);

const char kCalibratedProgram[] = R"code(
#include "attntune_config.h"
#include <cstdio>
#include <cstring>
using attntune_config::Lookup;
#define EXPECT(c) do { if (!(c)) { std::printf("failed line %d: %s\n", __LINE__, #c); return __LINE__; } } while (0)
static_assert(Lookup("swa", 64, 1024, 0.95) != nullptr, "constexpr floor lookup");
int main() {
  // No floor: the fastest entry of any source (the calibrated w=256 at 0.30 ms).
  const attntune_config::Entry* e = Lookup("swa", 64, 1024);
  EXPECT(e && e->median_ms == 0.3 && std::strcmp(e->calibration, "c0ffee012345") == 0);
  EXPECT(std::strcmp(e->floor, "mass_recall>=0.95") == 0 && !e->meets_floor);
  // The floor: the calibrated entry whose worst layer and head keeps it.
  e = Lookup("swa", 64, 1024, 0.95);
  EXPECT(e && std::strcmp(e->params, "sink=4,w=1024") == 0 && e->meets_floor);
  EXPECT(e->mass_recall_worst == 0.97 && e->mass_recall == 0.99);
  // Beyond the calibrated length: the largest eligible one.
  e = Lookup("swa", 64, 4096, 0.95);
  EXPECT(e && e->seq_len == 1024 && e->meets_floor);
  EXPECT(Lookup("swa", 64, 1024, 0.98) == nullptr);  // the worst cell, not the mean (0.99)
  EXPECT(Lookup("dense", 64, 1024, 0.5) == nullptr);  // dense was not calibrated here
  return 0;
}
)code";

TEST_CASE("attntune_config.h answers a floor from calibrated entries by their worst cell") {
  TempDir dir;
  const std::string header = RenderConfigHeader(test::MakeFixtureInputWithCalibration());
  CHECK(header.find("// calibration:  \"c0ffee012345\" model \"org/tiny-model\", layers \"0,1\", "
                    "1024 tokens") != std::string::npos);
  WriteFile(dir / "attntune_config.h", header);
  WriteFile(dir / "calibrated.cpp", kCalibratedProgram);
  const std::string program = (dir / "calibrated").string();
  REQUIRE(Run(kCxx + kPedantic + " -I" + (dir / "").string() + " " +
                  (dir / "calibrated.cpp").string() + " -o " + program,
              dir / "build.log") == 0);
  CHECK(Run(program, dir / "run.log") == 0);
}

TEST_CASE("calibrated entries are their own, carry the floor and the worst cell") {
  const ReportInput in = test::MakeFixtureInputWithCalibration();
  const std::vector<BestEntry> best = BestEntries(in);
  REQUIRE(best.size() == 9);  // the 7 Gaussian entries and 2 calibrated ones
  std::vector<const BestEntry*> calibrated;
  for (const BestEntry& e : best)
    if (e.calib_id == 1) calibrated.push_back(&e);
  REQUIRE(calibrated.size() == 2);
  CHECK(calibrated[0]->quality.calibration == "c0ffee012345");
  CHECK(calibrated[0]->quality.floor == "mass_recall>=0.95");
  // Sorted by params text: w=1024 first.
  CHECK(calibrated[0]->params_json == R"({"sink":4,"w":1024})");
  CHECK(calibrated[0]->quality.meets_floor);        // w=1024: worst 0.97
  CHECK_FALSE(calibrated[1]->quality.meets_floor);  // w=256: worst 0.90
  // The entry a lookup under the floor answers: w=1024, not the faster w=256.
  int chosen = 0;
  for (const BestEntry& e : ChosenEntries(best)) {
    if (e.calib_id != 1) continue;
    ++chosen;
    CHECK(e.params_json == R"({"sink":4,"w":1024})");
  }
  CHECK(chosen == 1);

  const nlohmann::json doc = nlohmann::json::parse(RenderConfigJson(in));
  REQUIRE(doc.at("calibrations").size() == 1);
  CHECK(doc.at("calibrations")[0].at("content_hash") == "c0ffee0123456789abcdef");
  CHECK(doc.at("calibrations")[0].at("files") == nlohmann::json({"c.safetensors"}));
  int meets = 0, misses = 0, gaussian = 0;
  for (const nlohmann::json& e : doc.at("entries")) {
    if (e.at("calibration").is_null()) {
      ++gaussian;
      CHECK(e.at("floor").is_null());
      CHECK_FALSE(e.contains("meets_floor"));
      CHECK(e.at("mass_recall_worst").is_null());
      continue;
    }
    CHECK(e.at("calibration") == nlohmann::json({{"id", "c0ffee012345"}, {"model", "org/tiny-model"}}));
    CHECK(e.at("floor") == "mass_recall>=0.95");
    (e.at("meets_floor").get<bool>() ? meets : misses) += 1;
    CHECK(e.at("mass_recall_worst").get<double>() < e.at("mass_recall").get<double>());
  }
  CHECK(std::make_tuple(meets, misses, gaussian) == std::make_tuple(1, 1, 7));

  const std::string html = RenderHtmlReport(in);
  // The heatmap of the chosen calibrated entry: 2 layers x 8 heads, the worst cell shown.
  CHECK(Count(html, "<table class=\"heatmap\"") == 1);
  CHECK(html.find("data-trial=\"16\"") != std::string::npos);
  CHECK(html.find(">0.970</td>") != std::string::npos);
  CHECK(html.find("floor mass_recall&gt;=0.95 met") != std::string::npos);
  const nlohmann::json pareto = ReportData(html)["pareto"];
  REQUIRE(pareto.contains("swa on calibration c0ffee012345"));
  const nlohmann::json& chart = pareto["swa on calibration c0ffee012345"];
  CHECK(chart["metric"] == "mass_recall_worst");
  CHECK(chart["floor"] == 0.95);
  CHECK(chart["groups"][0]["points"].size() == 2);
  CHECK(pareto["swa"]["floor"].is_null());  // the Gaussian trials' own chart, no floor
}

TEST_CASE("attntune_config.h with zero entries compiles and finds nothing") {
  TempDir dir;
  ReportInput in;
  in.tool_version = "0.1.0";
  in.trials.push_back(
      MakeTrial(1, "dense", "{\"Br\":16}", 64, 128, 1.0, 1.0, TrialStatus::kInvalid, "Br > L"));
  const std::string header = RenderConfigHeader(in);
  CHECK(header.find("std::array<Entry, 0>") != std::string::npos);
  WriteFile(dir / "attntune_config.h", header);
  WriteFile(dir / "empty.cpp", R"code(
#include "attntune_config.h"
static_assert(attntune_config::kEntries.size() == 0, "empty table");
static_assert(attntune_config::Lookup("dense", 64, 128) == nullptr, "nothing to find");
int main() { return attntune_config::Lookup("dense", 64, 128) == nullptr ? 0 : 1; }
)code");
  CHECK(Run(kCxx + kStrict + " -fsyntax-only " + (dir / "attntune_config.h").string(),
            dir / "syntax.log") == 0);
  const std::string program = (dir / "empty").string();
  REQUIRE(Run(kCxx + kPedantic + " -I" + (dir / "").string() + " " + (dir / "empty.cpp").string() +
                  " -o " + program,
              dir / "build.log") == 0);
  CHECK(Run(program, dir / "run.log") == 0);
}

TEST_CASE("attntune_config.h keeps awkward strings intact in literals and comments") {
  TempDir dir;
  // Quotes, backslashes (one at the very end, which in a // comment would swallow the
  // next line), a newline, a trigraph, a digit after a control byte, and UTF-8.
  const std::string name =
      "GPU \"x\" ?\?/ \\n\n\x01"
      "7 caf\xc3\xa9 \\";
  ReportInput in = MakeFixtureInput();
  for (TrialRow& t : in.trials) t.device.name = name;
  in.devices.clear();
  in.db_path = "C:\\db\\";
  in.generated_at = "now\n#error injected";
  const std::string header = RenderConfigHeader(in);
  WriteFile(dir / "attntune_config.h", header);
  WriteFile(dir / "names.cpp", R"code(
#include "attntune_config.h"
#include <cstdio>
int main() {
  std::fputs(attntune_config::kEntries[0].device, stdout);
  std::fputs(attntune_config::kGeneratedAt, stderr);
  return attntune_config::Lookup("dense", 64, 512) == nullptr;
}
)code");
  const std::string program = (dir / "names").string();
  REQUIRE(Run(kCxx + kPedantic + " -I" + (dir / "").string() + " " + (dir / "names.cpp").string() +
                  " -o " + program,
              dir / "build.log") == 0);
  REQUIRE(std::system((program + " >'" + (dir / "out.txt").string() + "' 2>'" +
                       (dir / "err.txt").string() + "'")
                          .c_str()) == 0);
  CHECK(ReadFile(dir / "out.txt") == name);
  CHECK(ReadFile(dir / "err.txt") == in.generated_at);
}

TEST_CASE("attntune_config.json has schema 1, the devices and the best entries") {
  const ReportInput in = MakeFixtureInput();
  const nlohmann::json doc = nlohmann::json::parse(RenderConfigJson(in));
  CHECK(doc.at("schema") == 1);
  CHECK(doc.at("tool") == "attntune");
  CHECK(doc.at("tool_version") == "0.1.0");
  CHECK(doc.at("generated_at") == "2025-01-02T03:04:05Z");
  CHECK(doc.at("database") == "/tmp/attntune.db");
  CHECK(doc.at("allocations") == nlohmann::json::array());

  const nlohmann::json& devices = doc.at("devices");
  REQUIRE(devices.size() == 1);
  CHECK(devices[0].at("name") == "Test CPU");
  CHECK(devices[0].at("fingerprint").at("cores") == 8);
  CHECK(devices[0].at("fingerprint").at("isa") == nlohmann::json({"avx2", "fma"}));

  const nlohmann::json& entries = doc.at("entries");
  REQUIRE(entries.size() == BestEntries(in).size());
  const nlohmann::json& swa = entries[4];
  CHECK(swa.at("device") == "Test CPU");
  CHECK(swa.at("variant") == "swa");
  CHECK(swa.at("phase") == "prefill");
  CHECK(swa.at("implementation") == "kokkos_windowed");
  CHECK(swa.at("params") == nlohmann::json({{"sink", 0}, {"w", 256}}));
  CHECK(swa.at("tunables") == nlohmann::json({{"Bc", 64}, {"Br", 32}}));
  CHECK(swa.at("head_dim") == 64);
  CHECK(swa.at("seq_len") == 1024);
  CHECK(swa.at("median_ms") == 0.40);
  CHECK(swa.at("mass_recall") == 0.80);
  CHECK(swa.at("rel_err").get<double>() == Approx(0.1));
  CHECK(entries[0].at("params") == nlohmann::json::object());
}

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) ++n;
  return n;
}

TEST_CASE("BestEntries keeps prefill and decode winners of the same variant, d and L apart") {
  const std::vector<BestEntry> best = BestEntries(MakeFixtureInputWithDecode());
  REQUIRE(best.size() == 9);
  // Prefill first within a variant: dense prefill (4), dense decode (2), swa (3).
  for (size_t i : {0, 1, 2, 3, 6, 7, 8}) CHECK(best[i].phase == Phase::kPrefill);
  REQUIRE(best[4].phase == Phase::kDecode);
  CHECK(best[4].variant == "dense");
  CHECK(best[4].seq_len == 1024);
  CHECK(best[4].params_json == R"({})");
  CHECK(best[4].tunables_json == R"({"Bc":32,"Br":16})");
  CHECK(best[4].median_ms == 0.05);
  CHECK(best[5].phase == Phase::kDecode);
  CHECK(best[5].seq_len == 4096);
  // The prefill winner at the same (dense, d=64, L=1024) is still there.
  CHECK(best[1].seq_len == 1024);
  CHECK(best[1].params_json == R"({})");
  CHECK(best[1].tunables_json == R"({"Bc":64,"Br":32})");
  CHECK(best[1].median_ms == 0.90);
}

const char kPhaseProgram[] = R"code(
#include "attntune_config.h"
#include <cstdio>
#include <cstring>
using attntune_config::Lookup;
using attntune_config::LookupDecode;
#define EXPECT(c) do { if (!(c)) { std::printf("failed line %d: %s\n", __LINE__, #c); return __LINE__; } } while (0)
static_assert(LookupDecode("dense", 64, 1024) != nullptr, "constexpr decode lookup");
static_assert(LookupDecode("dense", 64, 1024) != Lookup("dense", 64, 1024), "kept apart");
int main() {
  // The same (variant, head_dim, seq_len) in both phases: each lookup gets its own.
  const attntune_config::Entry* p = Lookup("dense", 64, 1024);
  EXPECT(p && std::strcmp(p->phase, "prefill") == 0 && p->Br == 32 && p->Bc == 64);
  EXPECT(p->median_ms == 0.9);
  const attntune_config::Entry* d = LookupDecode("dense", 64, 1024);
  EXPECT(d && std::strcmp(d->phase, "decode") == 0 && d->Br == 16 && d->Bc == 32);
  EXPECT(d->seq_len == 1024 && d->median_ms == 0.05);
  // The fallback rule within the decode entries alone.
  d = LookupDecode("dense", 64, 600);
  EXPECT(d && d->seq_len == 1024 && std::strcmp(d->phase, "decode") == 0);
  d = LookupDecode("dense", 64, 2000000);
  EXPECT(d && d->seq_len == 4096 && d->Bc == 128);
  EXPECT(Lookup("dense", 64, 512)->seq_len == 512);  // prefill is unchanged by decode rows
  EXPECT(LookupDecode("dense", 128, 1024) == nullptr);  // only prefill tuned at d=128
  EXPECT(LookupDecode("swa", 64, 1024) == nullptr);
  d = attntune_config::LookupDecodeOnDevice("Test CPU", "dense", 64, 4096);
  EXPECT(d && d->seq_len == 4096);
  EXPECT(attntune_config::LookupDecodeOnDevice("Other GPU", "dense", 64, 4096) == nullptr);
  EXPECT(attntune_config::kEntries.size() == 9);
  return 0;
}
)code";

TEST_CASE("attntune_config.h looks prefill and decode entries of the same shape up apart") {
  TempDir dir;
  const std::string header = RenderConfigHeader(MakeFixtureInputWithDecode());
  CHECK(header.find("a decode entry is never returned for a prefill lookup") != std::string::npos);
  WriteFile(dir / "attntune_config.h", header);
  WriteFile(dir / "phase.cpp", kPhaseProgram);
  const std::string program = (dir / "phase").string();
  REQUIRE(Run(kCxx + kPedantic + " -I" + (dir / "").string() + " " + (dir / "phase.cpp").string() +
                  " -o " + program,
              dir / "build.log") == 0);
  CHECK(Run(program, dir / "run.log") == 0);
}

TEST_CASE("attntune_config.json and report.html carry each entry's phase") {
  const ReportInput in = MakeFixtureInputWithDecode();
  const nlohmann::json doc = nlohmann::json::parse(RenderConfigJson(in));
  CHECK(doc.at("schema") == 1);
  std::map<std::string, int> phases;
  for (const nlohmann::json& e : doc.at("entries")) {
    ++phases[e.at("phase").get<std::string>()];
    if (e.at("variant") == "dense" && e.at("head_dim") == 64 && e.at("seq_len") == 1024) {
      CHECK(e.at("tunables") == (e.at("phase") == "decode"
                                     ? nlohmann::json({{"Bc", 32}, {"Br", 16}})
                                     : nlohmann::json({{"Bc", 64}, {"Br", 32}})));
    }
  }
  CHECK(phases == std::map<std::string, int>{{"decode", 2}, {"prefill", 7}});

  const std::string html = RenderHtmlReport(in);
  CHECK(Count(html, "</td><td>decode</td><td class=\"status-") == 3);
  CHECK(Count(html, "</td><td>prefill</td><td class=\"status-") == 14);
  // The decode series and Pareto groups are their own, not merged into prefill ones.
  CHECK(html.find("\"label\":\"Test CPU decode d=64\"") != std::string::npos);
  CHECK(html.find("\"label\":\"Test CPU d=64\"") != std::string::npos);
  CHECK(html.find("B=1,Hq=8,Hkv=2,Lq=1,Lk=1024,d=64 decode") != std::string::npos);
}

TEST_CASE("report.html is self-contained and escapes what it shows") {
  const std::string html = RenderHtmlReport(MakeFixtureInput());
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CHECK(html.find("Chart.js v3.9.1") != std::string::npos);
  CHECK(html.find("window.onerror") != std::string::npos);
  CHECK(html.find("unhandledrejection") != std::string::npos);
  CHECK(html.find("dataset.renderOk") != std::string::npos);
  CHECK(html.find("<script type=\"application/json\" id=\"attntune-data\">") != std::string::npos);

  // Nothing loaded from elsewhere: no src= or href= pointing to a URL.
  std::string lower = html;
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  CHECK_FALSE(std::regex_search(lower, std::regex(R"((src|href)\s*=\s*["']?\s*(https?:|//))")));
  CHECK(Count(lower, "<script") == Count(lower, "</script"));  // every script ends where meant
  CHECK(Count(lower, "<script") == 4);

  // The failure message "</script><b>x</b><!--<script>" shows as text.
  CHECK(html.find("</script><b>") == std::string::npos);
  CHECK(html.find("<!--") == std::string::npos);
  CHECK(html.find("&lt;/script&gt;&lt;b&gt;x&lt;/b&gt;&lt;!--&lt;script&gt;") != std::string::npos);

  // Environment, summary and the trial table.
  CHECK(html.find("<th>cores</th><td>8</td>") != std::string::npos);
  CHECK(html.find("<th>wrong_result</th>") != std::string::npos);
  CHECK(html.find("max abs error 0.5 &gt; 1e-4") != std::string::npos);
  CHECK(html.find("sink=4,w=1024 | Bc=64,Br=32") != std::string::npos);
  CHECK(Count(html, "<td class=\"status-") == 14);           // one row per trial
  CHECK(Count(html, "<th>shape</th><th>phase</th>") == 1);
  CHECK(Count(html, "</td><td>prefill</td><td class=\"status-") == 14);
  CHECK(html.find("<th>device</th>") == std::string::npos);  // one device: no column

  ReportInput two = MakeFixtureInput();
  two.trials[0].device.name = "Other <GPU>";
  const std::string html2 = RenderHtmlReport(two);
  CHECK(Count(html2, "<tr><td>Test CPU</td>") == 13);
  CHECK(Count(html2, "<tr><td>Other &lt;GPU&gt;</td>") == 1);
  CHECK(html2.find("<h3>Device: Other &lt;GPU&gt;") != std::string::npos);
}

// The JSON data block of a rendered report.
nlohmann::json ReportData(const std::string& html) {
  const std::string open = "<script type=\"application/json\" id=\"attntune-data\">";
  const size_t begin = html.find(open);
  REQUIRE(begin != std::string::npos);
  const size_t end = html.find("</script>", begin);
  return nlohmann::json::parse(html.substr(begin + open.size(), end - begin - open.size()));
}

TEST_CASE("report.html has a roofline point per ok trial, from the model and from counters") {
  ReportInput in = MakeFixtureInput();
  const std::string plain = RenderHtmlReport(in);
  CHECK(plain.find("<th>DRAM GB/s</th>") == std::string::npos);  // no counters: no columns
  const nlohmann::json model = ReportData(plain)["roofline"]["Test CPU"];
  CHECK_FALSE(model.contains("counters"));
  CHECK(model["model"]["dense"].size() == 7);
  CHECK(model["model"]["swa"].size() == 5);
  // dense d=64 L=512, Br=32 (trial 1): 4 d pairs FLOPs over 4*2*(8+2)*L*d bytes.
  const nlohmann::json& first = model["model"]["dense"][0];
  const double pairs = 8.0 * 512 * 513 / 2;
  CHECK(first["x"].get<double>() == Approx(4.0 * 64 * pairs / (80.0 * 512 * 64)));
  CHECK(first["y"].get<double>() == Approx(4.0 * 64 * pairs / 0.30e-3 / 1e9));

  // Trials without FLOP or byte counts give no point, and their device no chart.
  ReportInput bare = in;
  for (TrialRow& t : bare.trials) t.result.metrics.clear();
  CHECK(ReportData(RenderHtmlReport(bare))["roofline"].empty());

  test::AddCounters(&in.trials[1], 2e8, 4e11);  // dense d=64 L=512 Br=64
  const std::string html = RenderHtmlReport(in);
  const nlohmann::json counters = ReportData(html)["roofline"]["Test CPU"]["counters"];
  REQUIRE(counters["dense"].size() == 1);
  CHECK(counters["dense"][0]["x"].get<double>() == Approx(2000.0));  // ops per DRAM byte
  CHECK(counters["dense"][0]["y"].get<double>() == Approx(4e5));     // GOP/s: 4e11 in 1 ms
  CHECK(html.find("<th>DRAM GB/s</th><th>tensor TFLOP/s</th><th>ops per DRAM byte</th>") !=
        std::string::npos);
  CHECK(html.find("<td class=\"num\">200</td><td class=\"num\">400</td><td class=\"num\">2000</td>") !=
        std::string::npos);
}

TEST_CASE("report.html's time-quality front leaves out a point as fast and worse") {
  // Two points at one time: sorted by time alone, the worse one could come first and both
  // entered the front; a trial without the metric's value (NaN) stopped the front.
  for (const bool worse_first : {true, false}) {
    ReportInput in;
    in.tool_version = "0.1.0";
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const int64_t a = worse_first ? 1 : 2, b = worse_first ? 2 : 1;
    in.trials = {test::MakeTrial(a, "swa", R"({"Bc":64,"Br":64,"sink":0,"w":256})", 64, 1024, 1.0, 0.90),
                 test::MakeTrial(b, "swa", R"({"Bc":64,"Br":64,"sink":0,"w":512})", 64, 1024, 1.0, 0.95),
                 test::MakeTrial(3, "swa", R"({"Bc":64,"Br":64,"sink":0,"w":1024})", 64, 1024, 2.0, 0.99),
                 test::MakeTrial(4, "swa", R"({"Bc":32,"Br":64,"sink":0,"w":128})", 64, 1024, 0.5, nan)};
    const nlohmann::json groups = ReportData(RenderHtmlReport(in))["pareto"]["swa"]["groups"];
    REQUIRE(groups.size() == 1);
    std::vector<std::pair<double, double>> front;
    for (const auto& p : groups[0]["front"]) front.emplace_back(p["x"].get<double>(), p["y"].get<double>());
    CHECK(front == std::vector<std::pair<double, double>>{{1.0, 0.95}, {2.0, 0.99}});
  }
}

TEST_CASE("report.html renders without trials") {
  ReportInput in;
  in.tool_version = "0.1.0";
  const std::string html = RenderHtmlReport(in);
  CHECK(html.find("\"scaling\":{}") != std::string::npos);
  CHECK(html.find("</html>") != std::string::npos);
}

}  // namespace
}  // namespace attntune
