#include <catch2/catch.hpp>

#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>

#include "backends/backend.h"
#include "kernels/cuda/cuda_implementations.h"
#include "core/error.h"
#include "profiler/kokkos_hooks.h"
#include "profiler/timer.h"
#include "tuner/evaluate.h"
#include "tuner/model.h"
#include "tuner/bench.h"
#include "tuner/emit.h"
#include "tuner/session.h"
#include "tuner/space.h"
#include "tuner/store.h"

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

// A CountingTimer whose times are kernels summed over a span, as CUPTI's are: 1 ms of
// kernels spread over calls + 1 ms.
class SpanningTimer : public CountingTimer {
 public:
  std::optional<double> LastSpanMs() const override { return 1.0 + calls; }
  std::optional<double> LastSelectMs() const override { return 0.1 * calls; }
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

// A backend with a fixed fingerprint that runs the table's implementations of one
// platform (ninja's FakeCommandRunner style): planning and the run loop see only the
// Backend interface, and tests choose what it pretends to be.
class FakeBackend : public Backend {
 public:
  FakeBackend(std::string platform, std::vector<Dtype> dtypes)
      : platform_(std::move(platform)), dtypes_(std::move(dtypes)) {}
  DeviceId Id() const override { return {platform_ == kKokkosPlatform ? "cpu" : "cuda", 0}; }
  std::string Platform() const override { return platform_; }
  DeviceInfo Device() const override { return {"cpu", "test cpu", "{\"test\":1}"}; }
  std::vector<Dtype> Dtypes() const override { return dtypes_; }
  std::unique_ptr<Timer> MakeTimer(std::string* note) override {
    if (note) *note = "counting";
    return std::make_unique<CountingTimer>();
  }
  MeasureHooks Hooks(bool flush_l2) const override {
    MeasureHooks hooks;  // it runs the table's Kokkos kernels: their launches are recorded
    hooks.record_launches = [] { return std::make_unique<KernelCapture>(); };
    if (records_l2)  // as the CUDA backend records --flush-l2 with every timing
      hooks.after_measure = [flush_l2](std::map<std::string, double>* metrics) {
        (*metrics)["l2_flushed"] = flush_l2 ? 1 : 0;
      };
    return hooks;
  }
  bool records_l2 = false;
  std::unique_ptr<CounterSource> MakeCounters(Dtype, std::string* why_not) override {
    if (!counters) {
      *why_not = "the fake backend was given no counters";
      return nullptr;
    }
    struct Source : CounterSource {
      std::function<std::map<std::string, double>(const std::function<void()>&)> read;
      std::map<std::string, double> Read(const std::function<void()>& launch,
                                         std::string*) override {
        return read(launch);
      }
    };
    auto source = std::make_unique<Source>();
    source->read = counters;
    return source;
  }
  /// What the counter source reads (empty: the backend has none).
  std::function<std::map<std::string, double>(const std::function<void()>&)> counters;

 private:
  std::string platform_;
  std::vector<Dtype> dtypes_;
};

// The CPU the tests tune on: the Kokkos implementations, fp32.
FakeBackend& TestCpu() {
  static FakeBackend cpu(kKokkosPlatform, {Dtype::kF32});
  return cpu;
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

TEST_CASE("ParseHfConfig bounds the geometry: no model is that large, nothing is sized by it") {
  auto parse = [](const std::string& text) { return ParseHfConfig(text, "c.json"); };
  CHECK_THROWS_WITH(
      parse(R"({"num_hidden_layers":1000000000000,"num_attention_heads":8,"head_dim":64})"),
      "c.json: 'num_hidden_layers' is 1000000000000, more than attntune takes (1024)");
  CHECK_THROWS_WITH(
      parse(R"({"num_hidden_layers":2,"num_attention_heads":8,"hidden_size":4611686018427387904,"head_dim":null})"),
      "c.json: 'hidden_size' is 4611686018427387904, more than attntune takes (1048576)");
  CHECK_THROWS_WITH(
      parse(R"({"num_hidden_layers":2,"num_attention_heads":8,"head_dim":2305843009213693952})"),
      "c.json: 'head_dim' is 2305843009213693952, more than attntune takes (1024)");
  CHECK_THROWS_WITH(parse(R"({"num_hidden_layers":2,"num_attention_heads":1,"hidden_size":1048576})"),
                    "c.json: head dim hidden_size / num_attention_heads = 1048576, more than "
                    "attntune takes (1024)");
  CHECK_THROWS_WITH(
      parse(R"({"num_hidden_layers":2,"num_attention_heads":8,"head_dim":64,"num_key_value_heads":18446744073709551615})"),
      "c.json: 'num_key_value_heads' is 18446744073709551615, more than attntune takes (1024)");
  CHECK(parse(R"({"num_hidden_layers":1024,"num_attention_heads":1024,"head_dim":1024})").layers == 1024);
}

TEST_CASE("ParseHfConfig: inputs the fuzzer found refused in one line (fuzz/hf_config_fuzz)") {
  auto parse = [](const std::string& text) { return ParseHfConfig(text, "c.json"); };
  // A number beyond double's range (nlohmann's out_of_range, not a parse error).
  CHECK_THROWS_AS(parse(R"({"num_hidden_layers":26,"num_attention_heads":8,"vocab_size":25E6000})"),
                  UserError);
  CHECK_THROWS_WITH(parse(R"({"num_hidden_layers":26,"num_attention_heads":8,"vocab_size":25E6000})"),
                    Catch::StartsWith("c.json: not valid JSON ("));
  // A field of the wrong JSON type where the reader expected a string.
  CHECK_THROWS_AS(parse(R"({"num_hidden_layers":2,"num_attention_heads":8,"head_dim":64,
                            "sliding_window":8,"layer_types":["full_attention",{"x":1}]})"),
                  UserError);
}

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

TEST_CASE("LoadModel reads at most 16 MiB of config.json (a device never ended)") {
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("attntune_big_config_" + std::to_string(::getpid()) + ".json"))
                               .string();
  {
    std::ofstream out(path);
    out << R"({"num_hidden_layers":2,"num_attention_heads":8,"head_dim":64})"
        << std::string(kMaxConfigBytes, ' ');
  }
  CHECK_THROWS_WITH(LoadModel(path, "--model"),
                    path + ": holds more than attntune reads as a config.json (16 MiB)");
  std::filesystem::resize_file(path, 61);
  CHECK(LoadModel(path, "--model").layers == 2);
  std::filesystem::remove(path);
  CHECK_THROWS_WITH(LoadModel("/dev/zero", "--model"),
                    "/dev/zero: holds more than attntune reads as a config.json (16 MiB)");
}

TEST_CASE("EvaluateCandidate measures a correct candidate") {
  ProblemContext problem(SmallShape(), 7, Dtype::kF32);
  const Variant& swa = FindVariant("swa", "test");
  const Implementation& impl = swa.implementations.front();
  Params params = ResolveParams(swa, &impl, SmallShape(), {{"w", "8"}, {"sink", "2"}}, "test");
  CountingTimer timer;
  EvaluateOptions options;
  options.policy.min_reps = 3;
  options.record_launches = [] { return std::make_unique<KernelCapture>(); };
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
  CHECK(ev.result.metrics.count("span_ms") == 0);  // a host timer: no kernels' span
  CHECK(ev.result.metrics.count("select_ms") == 0);  // nor a selection part

  // A device timer's spans: their median beside the summed time. The warm-up is call 1
  // (the gate run is not timed), so the 3 timed repetitions' spans are 3, 4 and 5.
  SpanningTimer spanning;
  const Evaluated spanned = EvaluateCandidate(problem, swa, impl, params, spanning, options);
  REQUIRE(spanned.result.status == TrialStatus::kOk);
  REQUIRE(spanned.result.samples_ms.size() == 3);
  CHECK(spanned.result.median_ms == 1.0);
  CHECK(spanned.result.metrics.at("span_ms") == 4.0);
  // And its selection parts (0.2, 0.3, 0.4 ms): bench's select_ms from the repetitions.
  CHECK(spanned.result.metrics.at("select_ms") == Approx(0.3));
}

TEST_CASE("EvaluateCandidate stores a wrong result as wrong_result, never as a time") {
  const Variant& dense = FindVariant("dense", "test");
  CountingTimer timer;
  EvaluateOptions options;
  SECTION("a row left unwritten") {
    ProblemContext problem(SmallShape(), 7, Dtype::kF32);
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
    ProblemContext problem(SmallShape(), 7, Dtype::kF32);
    Implementation impl = Damaged([](const Shape&, float* out) { out[17] += 0.01f; });
    const Params params = ResolveParams(dense, &impl, SmallShape(), {}, "test");
    const Evaluated ev = EvaluateCandidate(problem, dense, impl, params, timer, options);
    CHECK(ev.result.status == TrialStatus::kWrongResult);
    CHECK(ev.result.message.find("exceeds") != std::string::npos);
  }
  SECTION("a kernel that throws is launch_failed") {
    ProblemContext problem(SmallShape(), 7, Dtype::kF32);
    Implementation impl = dense.implementations.front();
    impl.run = [](const Tensors&, const Params&, float*) { throw std::runtime_error("boom"); };
    const Params params = ResolveParams(dense, &impl, SmallShape(), {}, "test");
    const Evaluated ev = EvaluateCandidate(problem, dense, impl, params, timer, options);
    CHECK(ev.result.status == TrialStatus::kLaunchFailed);
    CHECK(ev.result.message == "boom");
  }
  SECTION("a failure on a timed repetition is launch_failed, not an end of the tune") {
    // The checked run passes; the third call (a timed repetition) throws, as a launch that
    // fails later or the CUPTI timer's lost records do. It escaped EvaluateCandidate.
    ProblemContext problem(SmallShape(), 7, Dtype::kF32);
    Implementation impl = dense.implementations.front();
    auto real = impl.run;
    auto calls = std::make_shared<int>(0);
    impl.run = [real, calls](const Tensors& t, const Params& p, float* out) {
      if (++*calls == 3) throw std::runtime_error("lost records");
      real(t, p, out);
    };
    const Params params = ResolveParams(dense, &impl, SmallShape(), {}, "test");
    Evaluated ev;
    REQUIRE_NOTHROW(ev = EvaluateCandidate(problem, dense, impl, params, timer, options));
    CHECK(ev.result.status == TrialStatus::kLaunchFailed);
    CHECK(ev.result.message == "timed repetitions: lost records");
    CHECK(ev.result.samples_ms.empty());
  }
}

TEST_CASE("ProblemContext builds inputs and references once") {
  ProblemContext problem(SmallShape(), 7, Dtype::kF32);
  const auto* first = &problem.Dense();
  const auto* again = &problem.TruthOf(FindVariant("dense", "test"), {{"Br", "16"}});
  CHECK(first == again);  // tunables do not change the truth
  CHECK(problem.Dense().pairs == 4 * 45 * 46 / 2);
}

TEST_CASE("ProblemContext's inputs are its dtype's values, and its references are of them") {
  ProblemContext wide(SmallShape(), 7, Dtype::kF32);
  for (const Dtype dtype : {Dtype::kF16, Dtype::kBf16}) {
    INFO(ToString(dtype));
    ProblemContext narrow(SmallShape(), 7, dtype);
    Tensors given = GaussianTensors(SmallShape(), 7);
    ProblemContext wrapped(std::move(given), dtype);
    Tensors rounded = wide.Inputs();
    RoundInputs(&rounded, dtype);
    CHECK(narrow.Inputs().q == rounded.q);
    CHECK(narrow.Inputs().k == rounded.k);
    CHECK(narrow.Inputs().v == rounded.v);
    CHECK(wrapped.Inputs().v == rounded.v);
    CHECK(narrow.Inputs().v != wide.Inputs().v);
    const auto sets = FindVariant("dense", "test").key_sets(rounded, {});
    CHECK(narrow.Dense().reference == ReferenceAttention(rounded, *sets));
  }
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
  o.retime = false;  // the re-timing stage has tests of its own (pool_test)
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
    TunePlan plan = PlanTune(TinyTune(dir.path, {64, 128}, 4), TestCpu());
    RunTune(plan, timer, seen.Fn());
  }
  REQUIRE_FALSE(seen.Best("dense L=64").empty());
  REQUIRE_FALSE(seen.Best("dense L=128").empty());
  for (int64_t L : {80, 112}) {
    // One evaluation: with warm start it is the nearest length's best.
    TunePlan plan = PlanTune(TinyTune(dir.path, {L}, 1), TestCpu());
    RunTune(plan, timer, seen.Fn());
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
      TunePlan plan = PlanTune(o, TestCpu());
      Seen off;
      RunTune(plan, timer, off.Fn());
      same += off.First("dense L=72") == seen.Best("dense L=64") ? 1 : 0;
    }
    CHECK(same < 6);
  }
  SECTION("WarmStartPoints: best first, distinct, nearest length by ratio, same device only") {
    TunePlan plan = PlanTune(TinyTune(dir.path, {96}, 1), TestCpu());
    const Variant& dense = FindVariant("dense", "test");
    const int64_t device_id = plan.db->PutDevice({0, device.kind, device.name, device.fingerprint_json});
    ProblemRecord problem;
    problem.shape = plan.db->Trials(TrialFilter{}).front().problem.shape;
    problem.shape.Lq = problem.shape.Lk = 125;  // nearest stored: 128 (then 112, 80, 64)
    const SearchSpace search = BuildSearchSpace(
        dense, {&dense.implementations[0], &dense.implementations[1]}, problem.shape);
    const std::vector<Point> points = WarmStartPoints(*plan.db, device_id, dense, search, problem, 3);
    REQUIRE(points.size() >= 2);
    CHECK(search.Describe(points[0]) == seen.Best("dense L=128"));
    CHECK(points[0] != points[1]);
    const int64_t other = plan.db->PutDevice({0, "cpu", "other cpu", "{\"test\":2}"});
    CHECK(WarmStartPoints(*plan.db, other, dense, search, problem, 3).empty());
  }
}

TEST_CASE("A time budget shares the time left equally among the problems still to come") {
  TempDir dir;
  CountingTimer timer;
  const DeviceInfo device{"cpu", "test cpu", "{\"test\":1}"};
  // A fake clock that advances 1 s per reading: RunTune reads it once at the start and
  // once per problem, RunSearch once at its start and once before each evaluation after
  // the first.
  double now = 0;
  TuneOptions o = TinyTune(dir.path, {48, 64}, 0);  // no limit on the evaluations
  o.time_budget_s = 10;
  o.clock = [&now] { return now += 1; };
  Seen seen;
  TunePlan plan = PlanTune(o, TestCpu());
  const TuneSummary s = RunTune(plan, timer, seen.Fn());
  // L=48: 9 s left at its start, half of them its share (4.5 s). Its search starts at
  // 3 s and evaluates before the readings 4, 5, 6, 7 (1-4 s in) and at the start: 5.
  // L=64: 10 - 8 = 2 s left, all of them its share; it starts at 10 s: evaluations at
  // the start and before 11 (1 s in); at 12 the 2 s are spent.
  std::map<std::string, int> per_problem;
  for (const ProgressEvent& ev : seen.events) {
    ++per_problem[ev.problem];
    CHECK(ev.budget == 0);  // the progress line shows no count to reach
  }
  CHECK(per_problem["dense L=48"] == 5);
  CHECK(per_problem["dense L=64"] == 2);
  CHECK(s.evaluations == 7);
  // With the time spent before a problem starts, it still gets its one evaluation.
  {
    TempDir late;
    double t = 0;
    TuneOptions q = TinyTune(late.path, {48, 64}, 0);
    q.time_budget_s = 1;
    q.clock = [&t] { return t += 5; };
    TunePlan p = PlanTune(q, TestCpu());
    CHECK(RunTune(p, timer, nullptr).evaluations == 2);
  }
  // Both limits: whichever comes first.
  {
    TempDir both;
    double t = 0;
    TuneOptions q = TinyTune(both.path, {48}, 2);
    q.time_budget_s = 100;
    q.clock = [&t] { return t += 1; };
    TunePlan p = PlanTune(q, TestCpu());
    CHECK(RunTune(p, timer, nullptr).evaluations == 2);
  }
  // Neither: refused before anything is stored.
  TuneOptions none = TinyTune(dir.path + "/none", {48}, 0);
  CHECK_THROWS_WITH(PlanTune(none, TestCpu()), "--budget: must be a positive integer");
  CHECK(!std::filesystem::exists(dir.path + "/none"));
  TuneOptions negative = TinyTune(dir.path + "/neg", {48}, 1);
  negative.time_budget_s = -1;
  CHECK_THROWS_WITH(PlanTune(negative, TestCpu()), "--time-budget: must be a positive duration");
}

TEST_CASE("tune's counter passes come after every timing and give each ok trial its counters once") {
  TempDir dir;
  CountingTimer timer;
  const DeviceInfo device{"cpu", "test cpu", "{\"test\":1}"};
  int calls = 0;
  int timings_at_first_pass = -1;
  int fail_call = 0;  // 1-based call that throws, 0 none
  TuneOptions o = TinyTune(dir.path, {48, 64}, 3);
  o.metrics = true;
  FakeBackend cpu(kKokkosPlatform, {Dtype::kF32});
  cpu.counters = [&](const std::function<void()>& launch) {
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
    TunePlan plan = PlanTune(o, cpu);
    const TuneSummary s = RunTune(plan, timer, nullptr);
    REQUIRE(s.measured > 0);
    CHECK(s.counted == s.evaluations - s.failed);
    CHECK(s.counter_failures == 0);
    CHECK(calls == s.counted);
    CHECK(timings_at_first_pass == timer.calls);  // no timed run after the first pass
    const auto [with, without] = counted(*plan.db);
    CHECK(with == s.counted);
    CHECK(without == 0);

    TunePlan again = PlanTune(o, cpu);
    const TuneSummary r = RunTune(again, timer, nullptr);
    CHECK(r.reused == r.evaluations);
    CHECK(r.counted == 0);
    CHECK(calls == s.counted);
  }
  SECTION("with the re-timing against the default on (tune's default), after it too") {
    // On CUDA the first counter reading stops CUPTI's activity tracing, so a timing after
    // it finds no kernel: the re-timing stage has to come before the passes.
    o.retime = true;
    TunePlan plan = PlanTune(o, cpu);
    const TuneSummary s = RunTune(plan, timer, nullptr);
    REQUIRE(s.retimed > 0);
    CHECK(s.counted == s.evaluations - s.failed);
    CHECK(timings_at_first_pass == timer.calls);
  }
  SECTION("a failure is counted, stores nothing, and the passes go on; a re-run reads it") {
    fail_call = 2;
    Seen seen;
    TunePlan plan = PlanTune(o, cpu);
    const TuneSummary s = RunTune(plan, timer, seen.Fn());
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
    TunePlan again = PlanTune(o, cpu);
    const TuneSummary r = RunTune(again, timer, nullptr);
    CHECK(r.counted == 1);
    CHECK(calls == before + 1);
    CHECK(counted(*again.db) == std::make_pair(static_cast<int>(s.counted) + 1, 0));
  }
}

TEST_CASE("A tune's checks, timings and counter passes run on inputs of its dtype") {
  // The table's Kokkos kernels take fp32 only, so the plan is made for fp32 and then
  // given fp16 with a probe in place of each implementation: the probe records whether
  // every q, k and v element it is handed is a value of fp16 (RoundInputs did it) and
  // runs the real kernel. Every run through it must see them: the check, each timing and
  // each counter pass (the last builds its own problem contexts).
  TempDir dir;
  CountingTimer timer;
  TuneOptions o = TinyTune(dir.path, {48, 64}, 2);
  o.metrics = true;
  FakeBackend cpu(kKokkosPlatform, {Dtype::kF32});
  int passes = 0;
  cpu.counters = [&](const std::function<void()>& launch) {
    ++passes;
    launch();
    return std::map<std::string, double>{{"hw_passes", 1}};
  };
  TunePlan plan = PlanTune(o, cpu);
  REQUIRE(plan.impls.size() == 1);
  plan.options.dtype = Dtype::kF16;
  int rounded = 0, wide = 0;
  auto of_dtype = [](const TensorData<float>& x) {
    for (const float e : x) {
      if (RoundToDtype(e, Dtype::kF16) != e) return false;
    }
    return true;
  };
  std::vector<Implementation> probes;
  probes.reserve(plan.impls[0].size());
  for (const Implementation* impl : plan.impls[0]) {
    Implementation probe = *impl;
    probe.dtypes = {Dtype::kF16};
    auto real = impl->run;
    probe.run = [&, real](const Tensors& t, const Params& p, float* out) {
      (of_dtype(t.q) && of_dtype(t.k) && of_dtype(t.v) ? rounded : wide) += 1;
      real(t, p, out);
    };
    probe.launch = nullptr;
    probes.push_back(std::move(probe));
  }
  plan.impls[0].clear();
  for (const Implementation& probe : probes) plan.impls[0].push_back(&probe);

  const TuneSummary s = RunTune(plan, timer, nullptr);
  REQUIRE(s.measured > 0);
  REQUIRE(s.counted > 0);
  CHECK(passes == s.counted);
  CHECK(wide == 0);
  // At least a check, a timing and a counter pass per measured trial.
  CHECK(rounded >= 2 * s.measured + s.counted);
  for (const TrialRow& t : plan.db->Trials(TrialFilter{})) {
    CHECK(t.problem.dtype == Dtype::kF16);
    CHECK(t.result.status == TrialStatus::kOk);
  }
}

namespace {

// The trials of `db` by variant, each with its problem.
std::map<std::string, std::vector<TrialRow>> TrialsByVariant(const Database& db) {
  std::map<std::string, std::vector<TrialRow>> out;
  for (TrialRow& row : db.Trials(TrialFilter{})) out[row.config.variant].push_back(std::move(row));
  return out;
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("A decode tune stores one query row per head (dma_decode: every step) for every variant") {
  TempDir dir;
  CountingTimer timer;
  const DeviceInfo device{"cpu", "test cpu", "{\"test\":1}"};
  std::vector<std::string> all;
  for (const Variant& v : Variants()) all.push_back(v.id);
  TuneOptions o = TinyTune(dir.path, {40, 72}, 2);
  o.phase = Phase::kDecode;
  o.variants = all;
  o.strategy = "random";
  TunePlan plan = PlanTune(o, TestCpu());
  Seen seen;
  const TuneSummary summary = RunTune(plan, timer, seen.Fn());
  CHECK(summary.evaluations == static_cast<int64_t>(2 * 2 * all.size()));
  CHECK(seen.First("dense decode L=40") != "");

  const auto by_variant = TrialsByVariant(*plan.db);
  CHECK(by_variant.size() == all.size());
  for (const auto& [variant, rows] : by_variant) {
    for (const TrialRow& row : rows) {
      INFO(variant << " " << row.problem.shape.ToString() << ": " << row.result.message);
      // Every variant runs a decode step correctly: no wrong_result, no invalid.
      CHECK(row.result.status == TrialStatus::kOk);
      CHECK(row.problem.phase == Phase::kDecode);
      CHECK(row.problem.shape.Lq == (variant == "dma_decode" ? row.problem.shape.Lk : 1));
      CHECK((row.problem.shape.Lk == 40 || row.problem.shape.Lk == 72));
    }
  }
  // The outputs name the phase of each entry.
  const nlohmann::json config = nlohmann::json::parse(ReadText(summary.outputs.json));
  REQUIRE(config.at("entries").size() >= 2 * all.size());
  for (const auto& e : config.at("entries")) CHECK(e.at("phase") == "decode");
  CHECK(ReadText(summary.outputs.header).find("\"dense\", \"decode\"") != std::string::npos);
  CHECK(ReadText(summary.outputs.report).find("<td>decode</td>") != std::string::npos);
}

TEST_CASE("The implementation is a search dimension; each configuration is one valid point") {
  const Variant& hax = FindVariant("hax", "test");
  REQUIRE(hax.ImplementationsFor(kKokkosPlatform, {}).size() == 2);  // union (Br, Bc, Chunk), generic
  const Implementation& own = hax.implementations[0];
  const Implementation& generic = hax.implementations[1];
  REQUIRE(own.id != generic.id);
  Shape shape = ParseShape("B=1,Hq=4,Hkv=2,L=4096,d=32", "test");
  const SearchSpace search = BuildSearchSpace(hax, {&own, &generic}, shape);
  auto grid_size = [](const std::vector<ParamDecl>& decls) {
    int64_t n = 1;
    for (const ParamDecl& d : decls) n *= d.grid.empty() ? 1 : static_cast<int64_t>(d.grid.size());
    return n;
  };
  const int64_t variant_points = grid_size(hax.params);
  std::set<std::string> configs;
  int64_t valid = 0, generic_points = 0;
  for (int64_t i = 0; i < search.space.Size(); ++i) {
    const Point p = search.space.FromIndex(i);
    if (!search.space.Violation(p).empty()) continue;
    ++valid;
    const Implementation& impl = search.ImplOf(p);
    const Params params = search.ParamsOf(p);
    CHECK_FALSE(params.count("impl"));
    CHECK(params.count("Chunk") == (impl.id == own.id ? 1u : 0u));  // only union's tunable
    generic_points += impl.id == generic.id ? 1 : 0;
    configs.insert(impl.id + " " + CanonicalVariantParamsJson(hax, params) +
                   CanonicalTunablesJson(impl, params));
    CHECK(search.Describe(p).rfind(impl.id + " ", 0) == 0);
  }
  CHECK(valid == variant_points * (grid_size(own.tunables) + grid_size(generic.tunables)));
  CHECK(generic_points == variant_points * grid_size(generic.tunables));
  CHECK(static_cast<int64_t>(configs.size()) == valid);  // no configuration twice
  // One implementation: no "impl" dimension, the space as before.
  const SearchSpace alone = BuildSearchSpace(hax, {&own}, shape);
  CHECK(alone.space.Size() == variant_points * grid_size(own.tunables));
  for (const Dimension& d : alone.space.Dimensions()) CHECK(d.name != "impl");
}

TEST_CASE("A decode step searches one Br of those that give the same blocks; prefill all") {
  TempDir dir;
  CountingTimer timer;
  const DeviceInfo device{"cpu", "test cpu", "{\"test\":1}"};
  auto tried = [&](const std::string& phase, int64_t L, bool generic = true) {
    TuneOptions o = TinyTune(dir.path, {L}, 64);  // more than dense's 25 points
    o.phase = *PhaseFromString(phase);
    o.generic = generic;
    o.strategy = "exhaustive";
    TunePlan plan = PlanTune(o, TestCpu());
    const TuneSummary s = RunTune(plan, timer, nullptr);
    std::set<std::string> br, configs;
    for (const TrialRow& row : plan.db->Trials(TrialFilter{})) {
      if (ToString(row.problem.phase) != phase || row.problem.shape.Lk != L) continue;
      configs.insert(row.config.implementation + " " + row.config.params_json +
                     row.config.tunables_json);
      br.insert(nlohmann::json::parse(row.config.tunables_json).at("Br").dump());
    }
    CHECK(s.evaluations == static_cast<int64_t>(configs.size()));
    return std::make_pair(br, configs.size());
  };
  // Decode: 1 row per query head, 2 per KV head (tiny: 4 query heads, 2 KV heads), so
  // every Br gives one block: only 16 is searched, over the 4 values of tiled's Bc and
  // the 3 of the generic executor's.
  const auto decode = tried("decode", 64);
  CHECK(decode.first == std::set<std::string>{"16"});
  CHECK(decode.second == 4 + 3);
  // Prefill at L = 72: 144 rows per KV head, every Br distinct: tiled's 4 x 4 and the
  // generic executor's 3 x 3 configurations, each once.
  const auto prefill = tried("prefill", 72);
  CHECK(prefill.first == std::set<std::string>{"16", "32", "64", "128"});
  CHECK(prefill.second == 16 + 9);
  // Without the generic executor: tiled's 16 alone (at another length, nothing stored).
  const auto own = tried("prefill", 80, false);
  CHECK(own.second == 16);
}

TEST_CASE("Prefill and decode tunes of the same length share a database and stay apart") {
  TempDir dir;
  CountingTimer timer;
  const DeviceInfo device{"cpu", "test cpu", "{\"test\":1}"};
  for (const char* phase : {"prefill", "decode"}) {
    TuneOptions o = TinyTune(dir.path, {48}, 1);
    o.variants = {"dense", "dma_decode"};
    o.phase = *PhaseFromString(phase);
    TunePlan plan = PlanTune(o, TestCpu());
    RunTune(plan, timer, nullptr);
  }
  TunePlan plan = PlanTune(TinyTune(dir.path, {48}, 1), TestCpu());
  std::map<std::pair<std::string, std::string>, Shape> problems;  // (variant, phase) -> shape
  for (const TrialRow& row : plan.db->Trials(TrialFilter{})) {
    problems[{row.config.variant, ToString(row.problem.phase)}] = row.problem.shape;
  }
  REQUIRE(problems.size() == 4);
  CHECK(problems[{"dense", "prefill"}].Lq == 48);
  CHECK(problems[{"dense", "decode"}].Lq == 1);
  // dma_decode: the same all-steps shape in both phases, stored as two problems.
  CHECK(problems[{"dma_decode", "prefill"}] == problems[{"dma_decode", "decode"}]);
  CHECK(problems[{"dma_decode", "decode"}].Lq == 48);
  const nlohmann::json config =
      nlohmann::json::parse(ReadText(EmitOutputs(*plan.db, dir.path + "/both").json));
  std::set<std::pair<std::string, std::string>> entries;
  for (const auto& e : config.at("entries")) {
    CHECK(e.at("seq_len") == 48);
    entries.insert({e.at("variant").get<std::string>(), e.at("phase").get<std::string>()});
  }
  CHECK(entries == std::set<std::pair<std::string, std::string>>{{"dense", "decode"},
                                                                 {"dense", "prefill"},
                                                                 {"dma_decode", "decode"},
                                                                 {"dma_decode", "prefill"}});
}

TEST_CASE("A decode tune warm-starts from the nearest stored decode length, never from prefill") {
  TempDir dir;
  FasterTimer timer;
  const DeviceInfo device{"cpu", "test cpu", "{\"test\":1}"};
  Seen seen;
  {
    TuneOptions o = TinyTune(dir.path, {64, 128}, 4);
    o.phase = Phase::kDecode;
    TunePlan plan = PlanTune(o, TestCpu());
    RunTune(plan, timer, seen.Fn());
  }
  REQUIRE_FALSE(seen.Best("dense decode L=128").empty());
  {
    TuneOptions o = TinyTune(dir.path, {112}, 1);
    o.phase = Phase::kDecode;
    TunePlan plan = PlanTune(o, TestCpu());
    RunTune(plan, timer, seen.Fn());
    CHECK(seen.First("dense decode L=112") == seen.Best("dense decode L=128"));
  }
  TunePlan plan = PlanTune(TinyTune(dir.path, {96}, 1), TestCpu());
  const Variant& dense = FindVariant("dense", "test");
  const int64_t device_id = plan.db->PutDevice({0, device.kind, device.name, device.fingerprint_json});
  ProblemRecord problem;
  problem.shape = plan.db->Trials(TrialFilter{}).front().problem.shape;
  REQUIRE(problem.shape.Lq == 1);
  problem.phase = Phase::kDecode;
  problem.shape.Lk = 125;  // nearest stored decode length: 128
  const SearchSpace search = BuildSearchSpace(
      dense, {&dense.implementations[0], &dense.implementations[1]}, problem.shape);
  const std::vector<Point> points = WarmStartPoints(*plan.db, device_id, dense, search, problem, 3);
  REQUIRE_FALSE(points.empty());
  CHECK(search.Describe(points[0]) == seen.Best("dense decode L=128"));
  // The same lengths as prefill problems (every row) have nothing stored.
  problem.phase = Phase::kPrefill;
  problem.shape.Lq = problem.shape.Lk;
  CHECK(WarmStartPoints(*plan.db, device_id, dense, search, problem, 3).empty());
  problem.phase = Phase::kDecode;  // decode, but every row: not a decode step's shape
  CHECK(WarmStartPoints(*plan.db, device_id, dense, search, problem, 3).empty());
}

TEST_CASE("PlanTune refuses variants the backend cannot run, before storing anything") {
  TempDir dir;
  TuneOptions o = TinyTune(dir.path, {64}, 1);
  o.phase = Phase::kDecode;
  o.dtype = Dtype::kF16;
  o.model = "qwen3-1.7b";  // d = 128, a head dim the CUDA kernels are compiled for
  o.variants = {"hybrid"};
  FakeBackend gpu(kCudaPlatform, {Dtype::kF16, Dtype::kBf16});  // planning only: no device
  const std::string runs = SupportedVariantsText(kCudaPlatform, {Phase::kDecode, Dtype::kF16, 128});
  // An attention library's entry that takes the phase and dtype but does not load says why
  // (the cudnn entries, kept from loading here: tests/tuner/CMakeLists.txt).
  std::string why;
  for (const Implementation& impl : FindVariant("hybrid", "test").implementations) {
    const bool takes = impl.platform == kCudaPlatform &&
                       std::count(impl.phases.begin(), impl.phases.end(), Phase::kDecode) &&
                       std::count(impl.dtypes.begin(), impl.dtypes.end(), Dtype::kF16);
    if (takes && why.empty()) why = impl.Refuses({Phase::kDecode, Dtype::kF16, 128});
  }
  CHECK_THROWS_WITH(PlanTune(o, gpu),
                    "--variants: hybrid has no cuda implementation for the decode phase, fp16, "
                    "d=128" + (why.empty() ? "" : ": " + why) + " (cuda runs: " + runs + ")");
  CHECK_FALSE(std::filesystem::exists(o.db_path));
  o.dtype = Dtype::kF16;
  CHECK_THROWS_WITH(PlanTune(o, TestCpu()), "--dtype: 'fp16' is not available on cpu (it takes fp32)");
  if (CudaKernelsBuilt()) CHECK(runs == "dense, swa, dma_decode");
}

namespace {

// Whether this build holds FlashInfer's implementations (found at configure time).
bool FlashInferBuilt() {
  for (const Implementation& impl : FindVariant("dense", "test").implementations) {
    if (impl.id == "flashinfer") return true;
  }
  return false;
}

// The ids of a plan's implementations after attntune's own (the first).
std::vector<std::string> IdsAfterFirst(const std::vector<const Implementation*>& impls) {
  std::vector<std::string> ids;
  for (size_t i = 1; i < impls.size(); ++i) ids.push_back(impls[i]->id);
  return ids;
}

}  // namespace

TEST_CASE("PlanTune on a CUDA backend picks cuda_decode in the decode phase, cuda in prefill") {
  if (!CudaKernelsBuilt()) {
    WARN("this build has no CUDA kernels: nothing to plan");
    return;
  }
  TempDir dir;
  TuneOptions o = TinyTune(dir.path, {64, 4096}, 1);
  FakeBackend gpu(kCudaPlatform, {Dtype::kF16, Dtype::kBf16});  // planning only: no device
  o.dtype = Dtype::kF16;
  o.model = "qwen3-1.7b";
  o.variants = {"dense", "swa", "dma_decode"};
  o.phase = Phase::kDecode;
  const ProblemKind kind{Phase::kDecode, Dtype::kF16, 128};
  // FlashInfer's kernels (built where its headers were found; no library to load) join
  // attntune's own for dense and swa, in both phases, and for nothing else.
  const std::vector<std::string> libraries = FlashInferBuilt() ? std::vector<std::string>{"flashinfer"}
                                                                : std::vector<std::string>{};
  {
    TunePlan plan = PlanTune(o, gpu);
    REQUIRE(plan.impls.size() == 3);
    for (size_t v = 0; v < plan.impls.size(); ++v) {
      const auto& impls = plan.impls[v];
      CHECK(impls[0]->id == "cuda_decode");
      CHECK(impls[0]->platform == kCudaPlatform);
      CHECK(IdsAfterFirst(impls) == (v < 2 ? libraries : std::vector<std::string>{}));
    }
    for (size_t v : {0, 1}) {
      REQUIRE(plan.impls[v][0]->TunablesFor(kind).size() == 1);
      CHECK(plan.impls[v][0]->TunablesFor(kind)[0].name == "Split");
    }
    CHECK(plan.impls[2][0]->TunablesFor(kind).empty());  // the gathered kernel has none
    // The split-KV kernel takes a decode step; the gathered one every step.
    Shape step = ParseShape("B=1,Hq=16,Hkv=8,Lq=1,Lk=4096,d=128", "test");
    CHECK(plan.impls[0][0]->check(step, {{"Split", "64"}}) == "");
    CHECK(plan.impls[2][0]->check(step, {}) != "");
    step.Lq = 4096;
    CHECK(plan.impls[0][0]->check(step, {{"Split", "64"}}) != "");
    CHECK(plan.impls[2][0]->check(step, {}) == "");
  }
  o.phase = Phase::kPrefill;
  o.variants = {"dense", "swa"};
  TunePlan plan = PlanTune(o, gpu);
  REQUIRE(plan.impls.size() == 2);
  for (const auto& impls : plan.impls) {
    CHECK(impls[0]->id == "cuda");
    CHECK(IdsAfterFirst(impls) == libraries);
    // The tiles of the problem's dtype and head dimension only.
    const std::vector<std::string> tiles =
        impls[0]->TunablesFor({Phase::kPrefill, Dtype::kF16, 128})[0].grid;
    REQUIRE_FALSE(tiles.empty());
    for (const std::string& tile : tiles) CHECK(tile.find("_f16_d128_") != std::string::npos);
  }
}

TEST_CASE("Bench: the record of one checked, timed candidate, tunables apart from params") {
  BenchRequest r;
  r.variant = "ks";
  r.params = "k=8,Br=16";
  r.shape = "B=1,Hq=4,Hkv=2,L=64,d=64";
  r.max_seconds = 0.01;
  r.min_reps = 2;
  const BenchRecord rec = Bench(r, TestCpu());
  CHECK(rec.status == TrialStatus::kOk);
  CHECK(rec.implementation == "topk");
  CHECK(rec.params_json == R"({"k":8})");
  CHECK(nlohmann::json::parse(rec.tunables_json).at("Br") == 16);
  CHECK(rec.timer == "counting");
  CHECK(rec.samples >= 2);
  CHECK(rec.metrics.at("check_err") < 1e-5);  // gated against the fp64 reference
  CHECK(SelectPhaseMs(rec.kernels) > 0);       // ks scores its keys in a selection phase
  CHECK_FALSE(rec.hardware.has_value());
  r.impl = "nope";
  CHECK_THROWS_WITH(Bench(r, TestCpu()), "--impl: unknown implementation 'nope' of ks (known: topk, generic)");
  r.impl = "";
  r.metrics = true;
  CHECK_THROWS_WITH(Bench(r, TestCpu()), "--metrics: the fake backend was given no counters");
}

TEST_CASE("Bench's problem is the request's inputs as values of its dtype") {
  BenchRequest r;
  r.seed = 3;
  const Shape shape = SmallShape();
  for (const std::string inputs : {"gaussian", "band"}) {
    r.inputs = inputs;
    ProblemContext wide = BenchProblem(r, shape, Dtype::kF32);
    for (const Dtype dtype : {Dtype::kF16, Dtype::kBf16}) {
      INFO(inputs << " " << ToString(dtype));
      ProblemContext narrow = BenchProblem(r, shape, dtype);
      Tensors rounded = wide.Inputs();
      RoundInputs(&rounded, dtype);
      CHECK(narrow.Inputs().q == rounded.q);
      CHECK(narrow.Inputs().k == rounded.k);
      CHECK(narrow.Inputs().v == rounded.v);
      CHECK(narrow.Inputs().v != wide.Inputs().v);
    }
  }
}

TEST_CASE("--params: a variant parameter searched at the values given, each checked against its declaration") {
  TempDir dir;
  TuneOptions o = TinyTune(dir.path, {64}, 2);
  o.variants = {"swa"};
  o.variant_grid = {{"w", {"0100", "48", "100"}}, {"sink", {"0"}}};
  const TunePlan plan = PlanTune(o, TestCpu());
  CHECK(plan.options.variant_grid.at("w") == std::vector<std::string>{"100", "48"});  // canonical, once
  const Variant& swa = *plan.variants.front();
  const Shape shape = TuneShape(plan.options, plan.model, swa, 64);
  const SearchSpace search = BuildSearchSpace(swa, plan.impls.front(), shape, plan.Kind(),
                                              plan.options.variant_grid);
  std::set<std::string> windows, sinks;
  for (int64_t i = 0; i < search.space.Size(); ++i) {
    const Point p = search.space.FromIndex(i);
    if (!search.space.Violation(p).empty()) continue;
    windows.insert(search.ParamsOf(p).at("w"));
    sinks.insert(search.ParamsOf(p).at("sink"));
  }
  CHECK(windows == std::set<std::string>{"100", "48"});
  CHECK(sinks == std::set<std::string>{"0"});

  TuneOptions bad = o;
  bad.variant_grid = {{"k", {"8"}}};
  CHECK_THROWS_WITH(PlanTune(bad, TestCpu()),
                    "--params: 'k' is not a parameter of the variants tuned (swa.w, swa.sink)");
  bad.variant_grid = {{"w", {"0"}}};
  CHECK_THROWS_WITH(PlanTune(bad, TestCpu()), "--params: swa: w=0 is out of range (w >= 1)");
  bad.variant_grid = {{"w", {"x"}}};
  CHECK_THROWS_WITH(PlanTune(bad, TestCpu()), "--params: swa: w='x' is not an integer");
}

TEST_CASE("The build a tune stores its trials under names the libraries loaded at run time") {
  TempDir dir;
  std::unique_ptr<Database> db = Database::Open(dir.path + "/a.db");
  const DeviceInfo device{"cuda", "test gpu", "{\"gpu\":1}"};
  const int64_t without = TrialStore(*db, device, "{}").BuildId();
  const int64_t with = TrialStore(*db, device, "{}", "cudnn 9.10.2 (frontend 1.12.0)").BuildId();
  const int64_t again = TrialStore(*db, device, "{}", "cudnn 9.10.2 (frontend 1.12.0)").BuildId();
  CHECK(without != with);  // a new cuDNN measures again
  CHECK(with == again);
}

TEST_CASE("A tune's outputs and re-timing take its own build's trials; emit takes every build's") {
  TempDir dir;
  CountingTimer timer;  // every time 1 ms
  TuneOptions o = TinyTune(dir.path, {48}, 2);
  o.retime = true;
  FakeBackend cpu(kKokkosPlatform, {Dtype::kF32});
  {
    TunePlan plan = PlanTune(o, cpu);
    RunTune(plan, timer, nullptr);
  }
  // Another attntune's trial of the same device, problem and configuration, far faster.
  {
    std::unique_ptr<Database> db = Database::Open(o.db_path);
    TrialFilter ok;
    ok.ok_only = true;
    const std::vector<TrialRow> rows = db->Trials(ok);
    REQUIRE_FALSE(rows.empty());
    const TrialRow& row = rows.front();
    const int64_t other = db->PutBuild({0, "0.0.1-other", "other kernels"});
    REQUIRE(other != row.build.id);
    TrialResult fast = row.result;
    for (const char* confirm : {kMetricConfirmMs, kMetricConfirmDefaultMs,
                                kMetricConfirmDefaultTrial, kMetricLostToDefault,
                                kMetricIsDefault}) {
      fast.metrics.erase(confirm);  // no re-timing has seen it
    }
    fast.median_ms = fast.p10_ms = fast.p90_ms = 1e-6;
    fast.samples_ms = {1e-6};
    const int64_t run = db->BeginRun("{}", row.device.id, "2026-11-29T00:00:00Z");
    db->InsertTrial(run, row.device.id, row.problem.id, row.config.id, other, fast);
  }
  auto medians = [](const std::string& json_path) {
    std::ifstream in(json_path);
    const nlohmann::json j = nlohmann::json::parse(in);
    std::vector<double> out;
    for (const auto& e : j.at("entries")) out.push_back(e.at("median_ms").get<double>());
    return out;
  };
  // The same tune again: its entries are its own build's times (1 ms), re-timed or not.
  TunePlan again = PlanTune(o, cpu);
  const TuneSummary s = RunTune(again, timer, nullptr);
  REQUIRE(s.outputs.json != "");
  const std::vector<double> tuned = medians(s.outputs.json);
  REQUIRE_FALSE(tuned.empty());
  for (double ms : tuned) CHECK(ms == 1.0);
  // emit reads the database whole: the other build's time is there.
  const OutputPaths emitted = EmitOutputs(*again.db, dir.path + "/emit");
  const std::vector<double> all = medians(emitted.json);
  CHECK(std::count(all.begin(), all.end(), 1e-6) == 1);
}

TEST_CASE("A claim's holder is running while it exists and is not a zombie") {
  CHECK(ProcessRunning(getpid()));
  CHECK_FALSE(ProcessRunning(0));
  CHECK_FALSE(ProcessRunning(-1));
  // A child that exits and is not reaped: kill(pid, 0) still answers, the claim is not live.
  const pid_t child = fork();
  REQUIRE(child >= 0);
  if (child == 0) _exit(0);
  // Waits for it to exit and leaves it unreaped (WNOWAIT): a zombie.
  siginfo_t info{};
  REQUIRE(waitid(P_PID, static_cast<id_t>(child), &info, WEXITED | WNOWAIT) == 0);
  CHECK(kill(child, 0) == 0);  // what the liveness test read before
  CHECK_FALSE(ProcessRunning(child));
  int status = 0;
  REQUIRE(waitpid(child, &status, 0) == child);
  CHECK_FALSE(ProcessRunning(child));  // reaped: gone
}

TEST_CASE("A stored trial is reused only where the gate's tolerance gives it the same verdict") {
  // dense's fp32 output is ~1e-7 from the fp64 reference: wrong_result at 1e-12, ok at 1e-5.
  TempDir dir;
  CountingTimer timer;
  TuneOptions o = TinyTune(dir.path, {48}, 2);
  FakeBackend cpu(kKokkosPlatform, {Dtype::kF32});
  auto tune = [&](double tolerance) {
    o.evaluate.tolerance = tolerance;
    TunePlan plan = PlanTune(o, cpu);
    return RunTune(plan, timer, nullptr);
  };
  const TuneSummary strict = tune(1e-12);
  REQUIRE(strict.measured == 2);
  CHECK(strict.failed == 2);  // wrong_result
  const TuneSummary loose = tune(1e-5);  // measured again: ok under 1e-5
  CHECK(loose.measured == 2);
  CHECK(loose.failed == 0);
  const TuneSummary again = tune(1e-5);  // the ok trials: reused
  CHECK(again.reused == 2);
  CHECK(again.measured == 0);
  const TuneSummary strict_again = tune(1e-12);  // the ok trials fail this gate: again
  CHECK(strict_again.measured == 2);
  CHECK(strict_again.failed == 2);
}

TEST_CASE("A stored time is reused only by a tune that flushes the L2 cache as it did") {
  // --flush-l2 changes what a time means (cold cache against warm): a tune with it reused
  // a plain tune's times, and the reverse.
  TempDir dir;
  CountingTimer timer;
  TuneOptions o = TinyTune(dir.path, {48}, 2);
  FakeBackend gpu(kKokkosPlatform, {Dtype::kF32});
  gpu.records_l2 = true;
  auto tune = [&](bool flush) {
    o.flush_l2 = flush;
    TunePlan plan = PlanTune(o, gpu);
    return RunTune(plan, timer, nullptr);
  };
  CHECK(tune(false).measured == 2);
  CHECK(tune(false).reused == 2);
  const TuneSummary cold = tune(true);
  CHECK(cold.measured == 2);
  CHECK(cold.reused == 0);
  CHECK(tune(true).reused == 2);
  CHECK(tune(false).measured == 2);  // a configuration's newest trial decides: cold now
}

namespace attntune {
namespace {

TEST_CASE("ProblemHostBytes counts the inputs, the output and a checked run's two references") {
  // q 2^20 and k, v 2^19 elements each: fp32 q, k, v, o; checked, dense's fp64 reference
  // and the variant's beside it, and dense's rows' log-sum-exp (fp64, B Hq Lq rows). One
  // reference was counted: a checked sparse bench peaked 1.51x past the estimate.
  const Shape s{1, 16, 8, 512, 512, 128, true};
  const double q = 16.0 * 512 * 128, kv = 8.0 * 512 * 128;
  CHECK(ProblemHostBytes(s, false) == 4.0 * (2 * q + 2 * kv));
  CHECK(ProblemHostBytes(s, true) == 4.0 * (2 * q + 2 * kv) + 2 * 8.0 * q + 8.0 * 16 * 512);
}

}  // namespace
}  // namespace attntune
