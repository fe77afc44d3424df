#include "core/check.h"
#undef CHECK

#include <zlib.h>

#include <catch2/catch.hpp>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "search/replay.h"

namespace attntune {
namespace {

// Two parameters (a: 1,2,4; b: 0,1); 5 of 6 configurations recorded, one failed.
const char* kCache = R"({
  "device_name": "Test GPU", "kernel_name": "k", "objective": "time",
  "tune_params_keys": ["a", "b"], "tune_params": {"a": [1, 2, 4], "b": [0, 1]},
  "cache": {
    "1,0": {"a": 1, "b": 0, "time": 4.0, "compile_time": 100, "benchmark_time": 10, "framework_time": 1},
    "1,1": {"a": 1, "b": 1, "time": 2.0, "compile_time": 100, "benchmark_time": 10, "framework_time": 1},
    "2,0": {"a": 2, "b": 0, "time": "CompilationFailedConfig", "compile_time": 50},
    "2,1": {"a": 2, "b": 1, "time": 1.0, "compile_time": 100, "benchmark_time": 10, "framework_time": 1},
    "4,1": {"a": 4, "b": 1, "time": 3.0, "compile_time": 100, "benchmark_time": 10, "framework_time": 1}
  }})";

std::string TempPath(const std::string& name) {
  return "/tmp/attntune_replay_test_" + std::to_string(::getpid()) + "_" + name;
}

void WriteGzip(const std::string& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  REQUIRE(gzwrite(f, text.data(), static_cast<unsigned>(text.size())) == static_cast<int>(text.size()));
  gzclose(f);
}

std::string ReadBytes(const std::string& path) {
  std::string bytes;
  FILE* f = std::fopen(path.c_str(), "rb");
  REQUIRE(f != nullptr);
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof buffer, f)) > 0) bytes.append(buffer, n);
  std::fclose(f);
  return bytes;
}

void WriteBytes(const std::string& path, const std::string& bytes) {
  FILE* f = std::fopen(path.c_str(), "wb");
  REQUIRE(f != nullptr);
  std::fwrite(bytes.data(), 1, bytes.size(), f);
  std::fclose(f);
}

TEST_CASE("a Kernel Tuner cache becomes a constrained space", "[search][replay]") {
  const ReplayCache c = ParseReplayCache(kCache, "mem.json");
  CHECK(c.device == "Test GPU");
  CHECK(c.space.Size() == 6);
  CHECK(c.entries.size() == 5);
  CHECK(c.Optimum() == 1.0);
  CHECK(c.space.Violation({2, 0}) == "not recorded");  // a=4, b=0 is not in the file
  CHECK(c.space.Violation({2, 1}).empty());
  CHECK(!c.At({1, 0}).ok);
  CHECK(c.At({1, 0}).cost == 50.0);
  CHECK(c.At({1, 1}).value == 1.0);
  CHECK(c.At({1, 1}).cost == 111.0);
}

TEST_CASE("gzip files read, truncated and malformed ones fail clearly", "[search][replay]") {
  const std::string gz = TempPath("cache.json.gz");
  WriteGzip(gz, kCache);
  CHECK(ReadReplayCache(gz).entries.size() == 5);

  const std::string bytes = ReadBytes(gz);
  const std::string cut = TempPath("cut.json.gz");
  WriteBytes(cut, bytes.substr(0, bytes.size() / 2));
  CHECK_THROWS_WITH(ReadReplayCache(cut), cut + ": not a Kernel Tuner cache file (truncated gzip data)");

  const std::string plain = TempPath("cut.json");
  WriteBytes(plain, std::string(kCache).substr(0, 100));
  CHECK_THROWS_WITH(ReadReplayCache(plain),
                    plain + ": not a Kernel Tuner cache file (invalid JSON at byte 101)");

  CHECK_THROWS_WITH(ParseReplayCache(R"({"results_of": 1})", "x.json"),
                    "x.json: not a Kernel Tuner cache file (no 'cache' object)");
  CHECK_THROWS_WITH(ParseReplayCache("", "e.json"),
                    "e.json: not a Kernel Tuner cache file (empty file)");
  CHECK_THROWS_WITH(ParseReplayCache(R"({"tune_params": {"a": [1]}, "cache": {"1": {"a": 3, "time": 1}}})", "v.json"),
                    "v.json: not a Kernel Tuner cache file (entry '1': a=3 is not in tune_params)");
  CHECK_THROWS_WITH(ParseReplayCache(R"({"tune_params": {"a": [1]}, "cache": {"1": {"a": 1, "time": "RuntimeFailedConfig"}}})", "f.json"),
                    "f.json: not a Kernel Tuner cache file (no valid configuration)");
  CHECK_THROWS_WITH(ReadReplayCache(TempPath("missing.json")),
                    TempPath("missing.json") + ": cannot read (No such file or directory)");
  std::remove(gz.c_str());
  std::remove(cut.c_str());
  std::remove(plain.c_str());
}

TEST_CASE("inputs the fuzzer found are refused in one line (fuzz/replay_fuzz)", "[search][replay]") {
  // kernel_name holds an object where a string belongs.
  CHECK_THROWS_WITH(
      ParseReplayCache(R"({"kernel_name": {"a": [1]}, "cache": {"1": {"a": 1, "time": 4.0}}})", "x.json"),
      Catch::StartsWith("x.json: not a Kernel Tuner cache file (unexpected structure: "));
  // A number beyond double's range.
  CHECK_THROWS_WITH(ParseReplayCache(R"({"cache": {"1": {"a": 1, "time": 4E6000}}})", "x.json"),
                    Catch::StartsWith("x.json: not a Kernel Tuner cache file (invalid JSON: "));
}

TEST_CASE("entries with their values only in the key read as Kernel Tuner reads them",
          "[search][replay]") {
  // The published caches' form: entries carry time/times, the key the values in
  // tune_params_keys order (Python's str() of each, joined by commas).
  const char* keyed = R"({"objective": "time", "tune_params_keys": ["b", "a", "f", "s", "t"],
    "tune_params": {"a": [1, 2, 4], "b": [0, 1], "f": [0.5, 1.0], "s": ["x", "y"], "t": [true, false]},
    "cache": {
      "0,1,0.5,x,True": {"time": 4.0, "times": [4.0, 4.0], "compile_time": 100},
      "1,2,1.0,y,False": {"time": 1.0, "times": [1.0], "compile_time": 100},
      "1,4,1,x,True": {"time": "RuntimeFailedConfig", "compile_time": 7}}})";
  const ReplayCache c = ParseReplayCache(keyed, "k.json");
  REQUIRE(c.space.Dimensions().size() == 5);
  CHECK(c.space.Dimensions()[0].name == "b");
  CHECK(c.space.Dimensions()[2].values == std::vector<std::string>{"0.5", "1.0"});
  CHECK(c.entries.size() == 3);
  CHECK(c.Optimum() == 1.0);
  CHECK(c.At({0, 0, 0, 0, 0}).value == 4.0);
  CHECK(c.At({1, 1, 1, 1, 1}).value == 1.0);
  CHECK(c.At({1, 1, 1, 1, 1}).cost == 100.0);
  CHECK(!c.At({1, 2, 1, 0, 0}).ok);  // "1" for the float 1.0: the same number
  CHECK(c.At({1, 2, 1, 0, 0}).cost == 7.0);
  // Entries that kept only their runs' times cost those runs (every cost 0 emptied the
  // score's time window: random search scored 0.92 on such a copy of a published cache).
  const ReplayCache times_only = ParseReplayCache(
      R"({"tune_params_keys": ["a"], "tune_params": {"a": [1, 2, 3]}, "cache": {
        "1": {"time": 4.0, "times": [4.0, 4.5]}, "2": {"time": 2.0},
        "3": {"time": "RuntimeFailedConfig"}}})", "t.json");
  CHECK(times_only.At({0}).cost == 8.5);
  CHECK(times_only.At({1}).cost == 2.0);
  CHECK(times_only.At({2}).cost == 0.0);

  // A key whose value count or values do not match tune_params is refused.
  const std::string head =
      R"({"tune_params_keys": ["x", "y"], "tune_params": {"x": [16, 32], "y": [1, 2]}, "cache": )";
  CHECK_THROWS_WITH(
      ParseReplayCache(head + R"({"16": {"time": 1.0}}})", "n.json"),
      "n.json: not a Kernel Tuner cache file (entry '16' has no 'x', and its key holds 1 value "
      "where tune_params_keys names 2)");
  CHECK_THROWS_WITH(
      ParseReplayCache(head + R"({"16,1,2": {"time": 1.0}}})", "n.json"),
      "n.json: not a Kernel Tuner cache file (entry '16,1,2' has no 'x', and its key holds 3 "
      "values where tune_params_keys names 2)");
  CHECK_THROWS_WITH(
      ParseReplayCache(head + R"({"16,3": {"time": 1.0}}})", "n.json"),
      "n.json: not a Kernel Tuner cache file (entry '16,3': y=3 (from its key) is not in "
      "tune_params)");
  CHECK_THROWS_WITH(
      ParseReplayCache(head + R"({"16,1x": {"time": 1.0}}})", "n.json"),
      "n.json: not a Kernel Tuner cache file (entry '16,1x': y=1x (from its key) is not in "
      "tune_params)");
  // Without tune_params_keys the key's order is unknown.
  CHECK_THROWS_WITH(
      ParseReplayCache(R"({"tune_params": {"x": [16]}, "cache": {"16": {"time": 1.0}}})", "o.json"),
      "o.json: not a Kernel Tuner cache file (entry '16' has no 'x', and without "
      "'tune_params_keys' its key cannot be read)");
}

TEST_CASE("a cache past the bound of JSON text, a device or a folder is refused in one line",
          "[search][replay]") {
  // A gzip bomb: 2 MiB of text in a few KiB, refused at the bound (1 MiB here, 1 GiB by
  // default) instead of read whole.
  const std::string bomb = TempPath("bomb.json.gz");
  WriteGzip(bomb, std::string(kCache) + std::string(2 << 20, ' '));
  CHECK(ReadBytes(bomb).size() < 65536);
  CHECK_THROWS_WITH(ReadReplayCache(bomb, 1 << 20),
                    bomb + ": holds more than attntune reads as a Kernel Tuner cache or T4 file "
                           "(1 MiB of JSON)");
  CHECK(ReadReplayCache(bomb, 3 << 20).entries.size() == 5);
  CHECK_THROWS_WITH(ReadReplayCache("/dev/zero", 1 << 20),
                    "/dev/zero: holds more than attntune reads as a Kernel Tuner cache or T4 "
                    "file (1 MiB of JSON)");
  CHECK_THROWS_WITH(ReadReplayCache("/tmp"),
                    "/tmp: is a folder, not a Kernel Tuner cache or T4 file");
  std::remove(bomb.c_str());
}

TEST_CASE("a parameter named twice, or a space past 2^31 configurations, is refused in one line",
          "[search][replay]") {
  // Each ended in an internal check (exit 134).
  CHECK_THROWS_WITH(
      ParseReplayCache(R"({"tune_params_keys": ["a", "a"], "tune_params": {"a": [1, 2]},
                          "cache": {"1,1": {"a": 1, "time": 1.0}}})", "d.json"),
      "d.json: not a Kernel Tuner cache file (parameter 'a' named twice)");
  // Six parameters of 100 values: 10^12 configurations.
  std::string params, entry;
  for (int p = 0; p < 6; ++p) {
    std::string values;
    for (int v = 0; v < 100; ++v) values += (v ? "," : "") + std::to_string(v);
    params += std::string(p ? ", " : "") + "\"p" + std::to_string(p) + "\": [" + values + "]";
    entry += std::string(p ? ", " : "") + "\"p" + std::to_string(p) + "\": 0";
  }
  const std::string huge = "{\"tune_params\": {" + params + "}, \"cache\": {\"0,0,0,0,0,0\": {" +
                           entry + ", \"time\": 1.0}}}";
  const std::string too_many =
      "h.json: not a Kernel Tuner cache file (its parameters' values make more than 2^31 "
      "configurations)";
  CHECK_THROWS_WITH(ParseReplayCache(huge, "h.json"), too_many);
  // T4: 45 parameters of 3 values, 3^45 configurations (past int64 too).
  std::string results;
  for (int r = 0; r < 3; ++r) {
    std::string config;
    for (int p = 0; p < 45; ++p) config += std::string(p ? ", " : "") + "\"p" + std::to_string(p) + "\": " + std::to_string(r);
    results += std::string(r ? ", " : "") + "{\"configuration\": {" + config +
               "}, \"measurements\": [{\"name\": \"time\", \"value\": 1.0}]}";
  }
  CHECK_THROWS_WITH(
      ParseReplayCache("{\"schema_version\": \"1.0.0\", \"results\": [" + results + "]}", "h.json"),
      too_many);
}

TEST_CASE("a time of 0 or below is no measurement: the entry is a failed one", "[search][replay]") {
  // As the optimum, a 0 made every fraction of it NaN; a negative one, fractions above 1.
  const ReplayCache c = ParseReplayCache(
      R"({"tune_params": {"a": [1, 2, 3]}, "cache": {"1": {"a": 1, "time": 0.0},
          "2": {"a": 2, "time": -3.0}, "3": {"a": 3, "time": 2.5}}})", "z.json");
  CHECK(c.entries.size() == 3);
  CHECK(!c.At({0}).ok);
  CHECK(!c.At({1}).ok);
  CHECK(c.Optimum() == 2.5);
  CHECK_THROWS_WITH(ParseReplayCache(R"({"tune_params": {"a": [1]}, "cache": {"1": {"a": 1, "time": 0}}})",
                                     "z.json"),
                    "z.json: not a Kernel Tuner cache file (no valid configuration)");
  const ReplayCache t4 = ParseReplayCache(R"({"schema_version": "1.0.0", "results": [
    {"configuration": {"a": 1}, "measurements": [{"name": "time", "value": 0.0}]},
    {"configuration": {"a": 2}, "measurements": [{"name": "time", "value": 4.0}]}]})", "t4.json");
  CHECK(!t4.At({0}).ok);
  CHECK(t4.Optimum() == 4.0);
}

TEST_CASE("the T4 format reads too", "[search][replay]") {
  const char* t4 = R"({"schema_version": "1.0.0", "results": [
    {"configuration": {"a": 2, "s": "x"}, "invalidity": "correct", "objectives": ["time"],
     "measurements": [{"name": "time", "value": 5.0, "unit": "ms"}],
     "times": {"compilation_time": 10, "framework": 1, "search_algorithm": 0, "validation": 0, "runtimes": [1, 2]}},
    {"configuration": {"a": 1, "s": "y"}, "invalidity": "compile", "objectives": ["time"],
     "measurements": [], "times": {"compilation_time": 7}},
    {"configuration": {"a": 10, "s": "x"}, "invalidity": "correct", "objectives": ["time"],
     "measurements": [{"name": "time", "value": 2.5, "unit": "ms"}], "times": {"compilation_time": 1}},
    {"configuration": {"a": 10, "s": "y"}, "invalidity": "correct", "objectives": ["time"],
     "measurements": [{"name": "time", "value": 3.0, "unit": "ms"}],
     "times": {"compilation": 20, "framework": 2, "runtimes": [3, 3]}}]})";
  const ReplayCache c = ParseReplayCache(t4, "t4.json");
  REQUIRE(c.space.Dimensions().size() == 2);
  CHECK(c.space.Dimensions()[0].values == std::vector<std::string>{"1", "2", "10"});
  CHECK(c.entries.size() == 4);
  CHECK(c.Optimum() == 2.5);
  CHECK(c.At({1, 0}).cost == 14.0);
  // Kernel Tuner writes the compile time as "compilation", the schema as "compilation_time".
  CHECK(c.At({2, 1}).cost == 28.0);
  CHECK(!c.At({0, 1}).ok);
}

TEST_CASE("T4 configurations name the first one's parameters, each of them (fuzzer finding)", "[search][replay]") {
  // The first configuration names no parameter, the second names two: the second pass
  // read a missing key of a const object (heap-use-after-free under ASan).
  const char* empty_first = R"({"schema_version": "1.0.0", "results": [
    {"configuration": {}, "invalidity": "correct", "measurements": [{"name": "time", "value": 1.5}]},
    {"configuration": {"a": 12, "s": "y"}, "invalidity": "correct", "measurements": [{"name": "time", "value": 2.0}]}]})";
  CHECK_THROWS_WITH(ParseReplayCache(empty_first, "t4.json"),
                    "t4.json: not a Kernel Tuner cache file (T4 configuration without parameters)");
  const char* fewer_later = R"({"schema_version": "1.0.0", "results": [
    {"configuration": {"a": 1, "s": "x"}, "measurements": [{"name": "time", "value": 1.5}]},
    {"configuration": {"a": 12}, "measurements": [{"name": "time", "value": 2.0}]}]})";
  CHECK_THROWS_WITH(ParseReplayCache(fewer_later, "t4.json"),
                    "t4.json: not a Kernel Tuner cache file (T4 configuration without 's')");
  // 4 and 4.0 are equal as JSON numbers: the values were deduplicated as JSON and looked up
  // by their text, and 4.0 was not found (std::out_of_range out of the reader).
  const char* four_twice = R"({"schema_version": "1.0.0", "results": [
    {"configuration": {"a": 4, "s": "x"}, "measurements": [{"name": "time", "value": 1.5}]},
    {"configuration": {"a": 4.0, "s": "y"}, "measurements": [{"name": "time", "value": 2.0}]}]})";
  const ReplayCache c = ParseReplayCache(four_twice, "t4.json");
  REQUIRE(c.space.Dimensions().size() == 2);
  CHECK(c.space.Dimensions()[0].values.size() == 2);
  CHECK(c.entries.size() == 2);
}

TEST_CASE("random search's analytic expectation", "[search][replay]") {
  ReplayStatistics s;
  s.values = {1, 2, 3};
  CHECK(ExpectedRandomBest(s, 1) == Approx(2.0));
  CHECK(ExpectedRandomBest(s, 2) == Approx(2.0 / 3 * 1 + 1.0 / 3 * 2));
  CHECK(ExpectedRandomBest(s, 3) == Approx(1.0));
  CHECK(ExpectedRandomBest(s, 1.5) == Approx(0.5 * 2.0 + 0.5 * 4.0 / 3));
  // One failed entry among four: a single draw fails with chance 1/4 (counted as worst).
  s.invalid = 1;
  CHECK(ExpectedRandomBest(s, 1) == Approx((1 + 2 + 3) / 4.0 + 3 / 4.0));
  // Two draws of four: best rank 1 w.p. 1/2, rank 2 w.p. 1/3, rank 3 w.p. 1/6.
  CHECK(ExpectedRandomBest(s, 2) == Approx(0.5 * 1 + 2.0 / 6 * 2 + 1.0 / 6 * 3));
}

TEST_CASE("the methodology's cutoff and score", "[search][replay]") {
  ReplayStatistics s;
  for (int i = 1; i <= 10; ++i) s.values.push_back(i);
  // Median 5.5: half way is 3.25, seven values are worse: ceil(7 / 4) = 2.
  CHECK(FevalsToCutoff(s, 0.5) == 2);
  // 95% of the way is 1.225: nine values are worse: ceil(9 / 2) = 5.
  CHECK(FevalsToCutoff(s, 0.95) == 5);
  s.median_cost = 10;
  s.cost_per_eval = 10;
  ScoreSettings settings;
  // An oracle that finds the optimum at once scores 1.
  Trace oracle{{10, 10, 10, 10, 10, 10}, {1, 1, 1, 1, 1, 1}};
  CHECK(PerformanceScore(s, {oracle}, settings) == Approx(1.0));
  // A search stuck at the expected value of random search's first draw: at t = 20
  // (two draws) P = (5.5 - E2) / (1 - E2) with E2 = 11/3 + ... computed below.
  settings.resolution = 2;
  settings.start = settings.cutoff = 0.5;  // one time point: t = 2 evaluations
  const double e2 = ExpectedRandomBest(s, 2);
  Trace flat{{10, 10}, {5.5, 5.5}};
  CHECK(PerformanceScore(s, {flat}, settings) == Approx((5.5 - e2) / (1 - e2)));
}

TEST_CASE("replay is deterministic and exhaustive search finds the optimum", "[search][replay]") {
  const ReplayCache c = ParseReplayCache(kCache, "mem.json");
  ReplayOptions o;
  o.strategy = "exhaustive";
  o.budgets = {1, 2, 5};
  o.repeats = 3;
  const ReplayResult r = Replay(c, o);
  REQUIRE(r.budgets.size() == 3);
  // Row-major order: (1,0)=4, (1,1)=2, (2,0) failed, (2,1)=1, (4,1)=3.
  CHECK(r.budgets[0].fraction.mean == Approx(0.25));
  CHECK(r.budgets[1].fraction.mean == Approx(0.5));
  CHECK(r.budgets[2].fraction.mean == Approx(1.0));
  CHECK(r.budgets[2].fraction.std == 0.0);
  o.strategy = "auto";
  o.repeats = 4;
  const ReplayResult a = Replay(c, o), b = Replay(c, o);
  CHECK(a.curve_mean == b.curve_mean);
  CHECK(a.p_score == b.p_score);
  CHECK(a.budgets[2].fraction.mean == Approx(1.0));
  o.strategy = "nope";
  CHECK_THROWS_WITH(Replay(c, o), Catch::Contains("--strategy: unknown strategy 'nope'"));
}

TEST_CASE("random and exhaustive replay a sparse recording of a large space", "[search][replay]") {
  // 8 parameters of 14 values (1.5e9 configurations), 20 recorded: random sampled the
  // product, gave up after 65536 misses and found nothing; exhaustive walked the product.
  std::string params, keys, cache;
  for (int d = 0; d < 8; ++d) {
    params += std::string(d ? ", " : "") + "\"p" + std::to_string(d) + "\": [0,1,2,3,4,5,6,7,8,9,10,11,12,13]";
    keys += std::string(d ? ", " : "") + "\"p" + std::to_string(d) + "\"";
  }
  for (int e = 0; e < 20; ++e) {
    std::string key;
    for (int d = 0; d < 8; ++d)
      key += (d ? "," : "") + std::to_string(d == 0 ? e % 14 : d == 1 ? e / 14 : (e * (d + 3)) % 14);
    cache += std::string(e ? ", " : "") + "\"" + key + "\": {\"time\": " + std::to_string(1.0 + e) +
             ", \"compile_time\": 10.0}";
  }
  const std::string doc = "{\"tune_params_keys\": [" + keys + "], \"tune_params\": {" + params +
                          "}, \"cache\": {" + cache + "}}";
  const ReplayCache c = ParseReplayCache(doc, "sparse.json");
  REQUIRE(c.entries.size() == 20);
  ReplayOptions o;
  o.budgets = {20};
  o.repeats = 3;
  for (const char* strategy : {"random", "exhaustive"}) {
    o.strategy = strategy;
    const ReplayResult r = Replay(c, o);
    CHECK(r.budgets[0].fraction.mean == 1.0);  // every recorded configuration asked
  }
}

TEST_CASE("replay in batches: the same points for exhaustive, each batch taking its slowest cost", "[search][replay]") {
  const ReplayCache c = ParseReplayCache(kCache, "mem.json");
  ReplayOptions o;
  o.strategy = "exhaustive";
  o.budgets = {1, 2, 5};
  o.repeats = 2;
  const ReplayResult one = Replay(c, o);
  o.batch = 2;
  const ReplayResult two = Replay(c, o);
  for (size_t i = 0; i < one.budgets.size(); ++i)
    CHECK(two.budgets[i].fraction.mean == one.budgets[i].fraction.mean);
  CHECK(two.p_score == one.p_score);  // the score counts each evaluation's own cost
  // Costs 111 ms (ok) and 50 ms (the failed one, third in row-major order). One at a time:
  // 4 x 111 + 50 over 5; in pairs: max(111, 111) + max(50, 111) + 111 over 5.
  CHECK(one.wall_ms_per_eval == Approx((4 * 111.0 + 50) / 5));
  CHECK(two.wall_ms_per_eval == Approx(3 * 111.0 / 5));
  CHECK(one.strategy_ms_per_eval >= 0);
}

}  // namespace
}  // namespace attntune
