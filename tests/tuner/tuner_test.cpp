#include <catch2/catch.hpp>

#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <stdexcept>

#include "kernels/spec/error.h"
#include "profiler/timer.h"
#include "tuner/evaluate.h"
#include "tuner/model.h"
#include "tuner/session.h"

using namespace attntune;

namespace {

// A timer that only counts calls, so the tests do not depend on the clock.
class CountingTimer : public Timer {
 public:
  std::string Name() const override { return "counting"; }
  double TimeMs(const std::function<void()>& fn) override {
    fn();
    ++calls;
    return 1.0;
  }
  int calls = 0;
};

Shape SmallShape() {
  Shape s;
  s.B = 1;
  s.Hq = 4;
  s.Hkv = 2;
  s.Lq = s.Lk = 45;
  s.d = 64;
  return s;
}

// The real dense implementation with its output damaged after the fact.
Implementation Damaged(std::function<void(const Shape&, float*)> damage) {
  Implementation impl = FindVariant("dense", "test").implementations.front();
  auto real = impl.run;
  impl.run = [real, damage](const Tensors& t, const Params& p, float* out) {
    real(t, p, out);
    damage(t.shape, out);
  };
  return impl;
}

}  // namespace

TEST_CASE("ParseHfConfig reads the geometry of published configs") {
  // Llama 3.1 8B: head_dim from hidden_size / heads.
  auto llama = ParseHfConfig(
      R"({"hidden_size":4096,"num_hidden_layers":32,"num_attention_heads":32,"num_key_value_heads":8})",
      "llama.json");
  CHECK(llama.layers == 32);
  CHECK(llama.q_heads == 32);
  CHECK(llama.kv_heads == 8);
  CHECK(llama.head_dim == 128);
  // Qwen3 1.7B: explicit head_dim.
  auto qwen = ParseHfConfig(
      R"({"hidden_size":2048,"head_dim":128,"num_hidden_layers":28,"num_attention_heads":16,"num_key_value_heads":8})",
      "qwen.json");
  CHECK(qwen.head_dim == 128);
  CHECK(qwen.kv_heads == 8);
  // Gemma 3: the language model under text_config.
  auto gemma = ParseHfConfig(
      R"({"text_config":{"head_dim":256,"num_hidden_layers":34,"num_attention_heads":8,"num_key_value_heads":4}})",
      "gemma.json");
  CHECK(gemma.layers == 34);
  CHECK(gemma.head_dim == 256);
  // No num_key_value_heads: multi-head attention.
  auto mha = ParseHfConfig(R"({"hidden_size":768,"num_hidden_layers":12,"num_attention_heads":12})",
                           "mha.json");
  CHECK(mha.kv_heads == 12);
  CHECK(mha.head_dim == 64);
}

TEST_CASE("ParseHfConfig rejects configs it cannot read") {
  CHECK_THROWS_WITH(ParseHfConfig("{", "c.json"), "c.json: not valid JSON (byte 2)");
  CHECK_THROWS_WITH(ParseHfConfig(R"({"num_hidden_layers":2})", "c.json"),
                    "c.json: missing 'num_attention_heads'");
  CHECK_THROWS_WITH(
      ParseHfConfig(R"({"num_hidden_layers":2,"num_attention_heads":"8","head_dim":64})", "c.json"),
      "c.json: 'num_attention_heads' must be a positive integer, got \"8\"");
  CHECK_THROWS_WITH(
      ParseHfConfig(R"({"num_hidden_layers":2,"num_attention_heads":6,"num_key_value_heads":4,"head_dim":64})",
                    "c.json"),
      "c.json: num_attention_heads 6 is not divisible by num_key_value_heads 4");
  CHECK_THROWS_AS(LoadModel("no-such-model", "--model"), UserError);
  CHECK(LoadModel("qwen3-1.7b", "--model").q_heads == 16);
}

TEST_CASE("EvaluateCandidate measures a correct candidate") {
  ProblemContext problem(SmallShape(), 7);
  const Variant& swa = FindVariant("swa", "test");
  const Implementation& impl = swa.implementations.front();
  Params params = ResolveParams(swa, &impl, SmallShape(), {{"w", "8"}, {"sink", "2"}}, "test");
  CountingTimer timer;
  EvaluateOptions options;
  options.policy.min_reps = 3;
  const Evaluated ev = EvaluateCandidate(problem, swa, impl, params, timer, options);
  REQUIRE(ev.result.status == TrialStatus::kOk);
  CHECK(ev.result.samples_ms.size() >= 3);
  CHECK(ev.result.metrics.at("check_err") < 1e-5);
  // A window of 8 of 45 keys keeps less than all of dense's mass and differs from it.
  CHECK(ev.result.metrics.at("mass_recall") < 1.0);
  CHECK(ev.result.metrics.at("mass_recall") > 0.0);
  CHECK(ev.result.metrics.at("rel_err") > 1e-3);
  CHECK(ev.result.metrics.at("pair_ratio") < 1.0);
  CHECK(ev.kernels.size() >= 1);
}

TEST_CASE("EvaluateCandidate stores a wrong result as wrong_result, never as a time") {
  const Variant& dense = FindVariant("dense", "test");
  CountingTimer timer;
  EvaluateOptions options;
  SECTION("a row left unwritten") {
    ProblemContext problem(SmallShape(), 7);
    // Skip the last row of the last head: NaN poison stays there.
    Implementation impl = dense.implementations.front();
    auto real = impl.run;
    impl.run = [real](const Tensors& t, const Params& p, float* out) {
      std::vector<float> full(static_cast<size_t>(t.shape.QElems()));
      real(t, p, full.data());
      const int64_t row = t.shape.QElems() - t.shape.d;
      std::copy(full.begin(), full.begin() + row, out);
    };
    const Params params = ResolveParams(dense, &impl, SmallShape(), {}, "test");
    const Evaluated ev = EvaluateCandidate(problem, dense, impl, params, timer, options);
    CHECK(ev.result.status == TrialStatus::kWrongResult);
    CHECK(ev.result.samples_ms.empty());
    CHECK(timer.calls == 0);
  }
  SECTION("one element slightly off") {
    ProblemContext problem(SmallShape(), 7);
    Implementation impl = Damaged([](const Shape&, float* out) { out[17] += 0.01f; });
    const Params params = ResolveParams(dense, &impl, SmallShape(), {}, "test");
    const Evaluated ev = EvaluateCandidate(problem, dense, impl, params, timer, options);
    CHECK(ev.result.status == TrialStatus::kWrongResult);
    CHECK(ev.result.message.find("exceeds") != std::string::npos);
  }
  SECTION("a kernel that throws is launch_failed") {
    ProblemContext problem(SmallShape(), 7);
    Implementation impl = dense.implementations.front();
    impl.run = [](const Tensors&, const Params&, float*) { throw std::runtime_error("boom"); };
    const Params params = ResolveParams(dense, &impl, SmallShape(), {}, "test");
    const Evaluated ev = EvaluateCandidate(problem, dense, impl, params, timer, options);
    CHECK(ev.result.status == TrialStatus::kLaunchFailed);
    CHECK(ev.result.message == "boom");
  }
}

TEST_CASE("ProblemContext builds inputs and references once") {
  ProblemContext problem(SmallShape(), 7);
  const auto* first = &problem.Dense();
  const auto* again = &problem.TruthOf(FindVariant("dense", "test"), {{"Br", "16"}});
  CHECK(first == again);  // tunables do not change the truth
  CHECK(problem.Dense().pairs == 4 * 45 * 46 / 2);
}

namespace {

// A timer whose every call is faster than the last: later candidates measure faster.
class FasterTimer : public Timer {
 public:
  std::string Name() const override { return "faster"; }
  double TimeMs(const std::function<void()>& fn) override {
    fn();
    return 1000.0 - ++calls;
  }
  int calls = 0;
};

// A fresh directory per test case, removed at the end.
struct TempDir {
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "attntune_tuner_XXXXXX").string();
    REQUIRE(mkdtemp(pattern.data()) != nullptr);
    path = pattern;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string path;
};

TuneOptions TinyTune(const std::string& dir, std::vector<int64_t> seq_lens, int64_t budget) {
  TuneOptions o;
  o.model = std::string(ATTNTUNE_FIXTURES_DIR) + "/models/tiny/config.json";
  o.variants = {"dense"};
  o.seq_lens = std::move(seq_lens);
  o.budget = budget;
  o.out_dir = dir + "/out";
  o.db_path = dir + "/attntune.db";
  o.evaluate.policy.min_reps = 1;
  o.evaluate.policy.max_reps = 1;
  o.evaluate.policy.warmup = 0;
  return o;
}

}  // namespace

TEST_CASE("The default strategy is auto with warm start on") {
  TuneOptions o;
  CHECK(o.strategy == "auto");
  CHECK(o.warm_start);
}

// The evaluations a tune reports, as (problem, config, status, median_ms).
struct Seen {
  std::vector<ProgressEvent> events;
  ProgressFn Fn() {
    return [this](const ProgressEvent& ev) {
      if (ev.status != "running") events.push_back(ev);
    };
  }
  // The config of the fastest ok evaluation of `problem` ("dense L=64").
  std::string Best(const std::string& problem) const {
    std::string best;
    double best_ms = 1e300;
    for (const ProgressEvent& ev : events) {
      if (ev.problem == problem && ev.status == "ok" && ev.median_ms < best_ms) {
        best_ms = ev.median_ms;
        best = ev.config;
      }
    }
    return best;
  }
  std::string First(const std::string& problem) const {
    for (const ProgressEvent& ev : events) {
      if (ev.problem == problem) return ev.config;
    }
    return "";
  }
};

TEST_CASE("A warm-started tune asks the best stored configuration of the nearest length first") {
  TempDir dir;
  FasterTimer timer;
  const DeviceInfo device{"cpu", "test cpu", "{\"test\":1}"};
  Seen seen;
  {
    // Four candidates at L=64 and at L=128; the last ok one measured is each one's best.
    TunePlan plan = PlanTune(TinyTune(dir.path, {64, 128}, 4));
    RunTune(plan, device, timer, seen.Fn());
  }
  REQUIRE_FALSE(seen.Best("dense L=64").empty());
  REQUIRE_FALSE(seen.Best("dense L=128").empty());
  for (int64_t L : {80, 112}) {
    // One evaluation: with warm start it is the nearest length's best.
    TunePlan plan = PlanTune(TinyTune(dir.path, {L}, 1));
    RunTune(plan, device, timer, seen.Fn());
    const std::string nearest = L == 80 ? "dense L=64" : "dense L=128";
    CHECK(seen.First("dense L=" + std::to_string(L)) == seen.Best(nearest));
  }
  {
    // Without warm start the first evaluation is the strategy's own pick: over several
    // seeds it is not always the neighbour's best (16 configurations).
    int same = 0;
    for (uint64_t seed = 1; seed <= 6; ++seed) {
      TuneOptions o = TinyTune(dir.path, {72}, 1);
      o.warm_start = false;
      o.seed = seed;
      TunePlan plan = PlanTune(o);
      Seen off;
      RunTune(plan, device, timer, off.Fn());
      same += off.First("dense L=72") == seen.Best("dense L=64") ? 1 : 0;
    }
    CHECK(same < 6);
  }
  SECTION("WarmStartPoints: best first, distinct, nearest length by ratio, same device only") {
    TunePlan plan = PlanTune(TinyTune(dir.path, {96}, 1));
    const Variant& dense = FindVariant("dense", "test");
    const Implementation& impl = dense.implementations.front();
    Space space;
    for (const auto& decl : dense.params) {
      space.AddDimension(decl.name, decl.grid.empty() ? std::vector<std::string>{decl.default_value} : decl.grid);
    }
    for (const auto& decl : impl.tunables) {
      space.AddDimension(decl.name, decl.grid.empty() ? std::vector<std::string>{decl.default_value} : decl.grid);
    }
    const int64_t device_id = plan.db->PutDevice({0, device.kind, device.name, device.fingerprint_json});
    ProblemRecord problem;
    problem.shape = plan.db->Trials(TrialFilter{}).front().problem.shape;
    problem.shape.Lq = problem.shape.Lk = 125;  // nearest stored: 128 (then 112, 80, 64)
    const std::vector<Point> points = WarmStartPoints(*plan.db, device_id, dense, impl, space, problem, 3);
    REQUIRE(points.size() >= 2);
    CHECK(ParamsToString(space.Values(points[0])) == seen.Best("dense L=128"));
    CHECK(points[0] != points[1]);
    const int64_t other = plan.db->PutDevice({0, "cpu", "other cpu", "{\"test\":2}"});
    CHECK(WarmStartPoints(*plan.db, other, dense, impl, space, problem, 3).empty());
  }
}

TEST_CASE("tune's counter passes come after every timing and give each ok trial its counters once") {
  TempDir dir;
  CountingTimer timer;
  const DeviceInfo device{"cpu", "test cpu", "{\"test\":1}"};
  int calls = 0;
  int timings_at_first_pass = -1;
  int fail_call = 0;  // 1-based call that throws, 0 none
  TuneOptions o = TinyTune(dir.path, {48, 64}, 3);
  o.counters = [&](const std::function<void()>& launch) {
    if (calls == 0) timings_at_first_pass = timer.calls;
    ++calls;
    launch();  // runs the candidate (on the CPU: into a scratch buffer)
    if (calls == fail_call) throw std::runtime_error("cuptiRangeProfilerStart: no permission");
    return std::map<std::string, double>{{"hw_passes", 3}, {"hw_dram_bytes", 1000.0 * calls}};
  };
  auto counted = [](const Database& db) {
    int with = 0, without = 0;
    for (const TrialRow& t : db.Trials(TrialFilter{})) {
      if (t.result.status != TrialStatus::kOk) {
        CHECK_FALSE(t.result.metrics.count("hw_passes"));
        continue;
      }
      if (t.result.metrics.count("hw_passes")) {
        CHECK(t.result.metrics.at("hw_passes") == 3);
        CHECK(t.result.metrics.at("hw_dram_bytes") >= 1000);
        CHECK(t.result.metrics.count("gflops"));  // the timed metrics are kept
        ++with;
      } else {
        ++without;
      }
    }
    return std::make_pair(with, without);
  };

  SECTION("all succeed; a re-run reads nothing again") {
    TunePlan plan = PlanTune(o);
    const TuneSummary s = RunTune(plan, device, timer, nullptr);
    REQUIRE(s.measured > 0);
    CHECK(s.counted == s.evaluations - s.failed);
    CHECK(s.counter_failures == 0);
    CHECK(calls == s.counted);
    CHECK(timings_at_first_pass == timer.calls);  // no timed run after the first pass
    const auto [with, without] = counted(*plan.db);
    CHECK(with == s.counted);
    CHECK(without == 0);

    TunePlan again = PlanTune(o);
    const TuneSummary r = RunTune(again, device, timer, nullptr);
    CHECK(r.reused == r.evaluations);
    CHECK(r.counted == 0);
    CHECK(calls == s.counted);
  }
  SECTION("a failure is counted, stores nothing, and the passes go on; a re-run reads it") {
    fail_call = 2;
    Seen seen;
    TunePlan plan = PlanTune(o);
    const TuneSummary s = RunTune(plan, device, timer, seen.Fn());
    CHECK(s.counter_failures == 1);
    CHECK(s.counted == s.evaluations - s.failed - 1);
    int failed_events = 0;
    for (const ProgressEvent& ev : seen.events) {
      if (ev.status == "counters failed") {
        ++failed_events;
        CHECK(ev.message == "cuptiRangeProfilerStart: no permission");
      }
    }
    CHECK(failed_events == 1);
    CHECK(counted(*plan.db) == std::make_pair(static_cast<int>(s.counted), 1));

    fail_call = 0;
    const int before = calls;
    TunePlan again = PlanTune(o);
    const TuneSummary r = RunTune(again, device, timer, nullptr);
    CHECK(r.counted == 1);
    CHECK(calls == before + 1);
    CHECK(counted(*again.db) == std::make_pair(static_cast<int>(s.counted) + 1, 0));
  }
}
