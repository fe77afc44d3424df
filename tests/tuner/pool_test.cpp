// The run loop on several slots (tuner/pool.h, tuner/session): InlinePool stands in for
// MPI ranks, so that batches, device models, lost slots and reuse are tested in every
// build, without MPI.
#include <catch2/catch.hpp>
#include <sqlite3.h>

#include <map>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "tests/temp_dir.h"
#include "tuner/pool.h"
#include "tuner/session.h"

using namespace attntune;

namespace {

// A timer that runs the candidate once and says 1 ms: nothing depends on the clock.
class OneMsTimer : public Timer {
 public:
  std::string Name() const override { return "one ms"; }
  double TimeMs(const std::function<void()>& fn) override {
    fn();
    return 1.0;
  }
};

// The CPU's implementations under a fingerprint of the test's choice.
class TestBackend : public Backend {
 public:
  explicit TestBackend(DeviceInfo device) : device_(std::move(device)) {}
  DeviceId Id() const override { return {"cpu", 0}; }
  std::string Platform() const override { return kKokkosPlatform; }
  DeviceInfo Device() const override { return device_; }
  std::vector<Dtype> Dtypes() const override { return {Dtype::kF32}; }
  std::unique_ptr<Timer> MakeTimer(std::string*) override { return std::make_unique<OneMsTimer>(); }
  MeasureHooks Hooks(bool) const override { return {}; }
  std::unique_ptr<CounterSource> MakeCounters(Dtype, std::string* why) override {
    *why = "none";
    return nullptr;
  }

 private:
  DeviceInfo device_;
};

DeviceInfo Cpu(const std::string& name, const std::string& fingerprint,
               std::vector<std::string> unit_fields = {}) {
  DeviceInfo d;
  d.kind = "cpu";
  d.name = name;
  d.fingerprint_json = fingerprint;
  d.unit_fields = std::move(unit_fields);
  return d;
}

const DeviceInfo kX = Cpu("cpu x", R"({"model":"x"})");
const DeviceInfo kY = Cpu("cpu y", R"({"model":"y"})");

// Two variants at two lengths of the tiny model: four problems, a few candidates each.
TuneOptions Tiny(const TempDir& dir, const std::string& strategy, int64_t budget) {
  TuneOptions o;
  o.model = std::string(ATTNTUNE_FIXTURES_DIR) + "/models/tiny/config.json";
  o.variants = {"dense", "swa"};
  o.seq_lens = {48, 64};
  o.budget = budget;
  o.strategy = strategy;
  o.seed = 5;
  o.out_dir = dir.File("out");
  o.db_path = dir.File("attntune.db");
  o.evaluate.policy.min_reps = 1;
  o.evaluate.policy.max_reps = 1;
  o.evaluate.policy.warmup = 0;
  return o;
}

// What identifies a stored trial apart from when and where it ran, with what it computed
// (its status and quality, which the deterministic kernels reproduce): one string each.
std::multiset<std::string> StoredTrials(const Database& db, bool with_device = false) {
  std::multiset<std::string> out;
  for (const TrialRow& t : db.Trials(TrialFilter{})) {
    std::string key = std::to_string(t.problem.shape.Lk) + " " + t.config.variant + " " +
                      t.config.implementation + " " + t.config.params_json +
                      t.config.tunables_json + " " + ToString(t.result.status);
    for (const char* metric : {"rel_err", "mass_recall", "pairs"}) {
      const auto it = t.result.metrics.find(metric);
      if (it != t.result.metrics.end()) key += " " + std::to_string(it->second);
    }
    if (with_device) key += " on " + t.device.name;
    out.insert(key);
  }
  return out;
}

// A tune of `options` on the pool of `devices` (InlinePool), on `backend`'s plan.
TuneSummary TuneOn(const TuneOptions& options, Backend& backend, std::vector<DeviceInfo> devices,
                   TunePlan* kept = nullptr, std::vector<ProgressEvent>* events = nullptr,
                   const std::vector<int>& lose = {}) {
  TunePlan plan = PlanTune(options, backend);
  OneMsTimer timer;
  CandidateRunner runner(plan, timer);
  InlinePool pool(runner, std::move(devices));
  for (const int slot : lose) pool.LoseOnNextTask(slot);
  const TuneSummary s = RunTune(plan, pool, [&](const ProgressEvent& ev) {
    if (events && ev.status != "running") events->push_back(ev);
  });
  if (kept) *kept = std::move(plan);
  return s;
}

// Rows of the claim table (the Database API does not read it): a claim left behind
// would make the next tune of its candidate wait.
int64_t Claims(const std::string& db_path) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open_v2(db_path.c_str(), &db, SQLITE_OPEN_READONLY, nullptr) == SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, "SELECT count(*) FROM claim", -1, &stmt, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(stmt) == SQLITE_ROW);
  const int64_t n = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return n;
}

}  // namespace

TEST_CASE("Three slots store exactly the trials one stores: the same configurations under exhaustive and random, the same count under auto") {
  for (const std::string strategy : {"exhaustive", "random", "auto"}) {
    INFO(strategy);
    TempDir one("attntune_pool"), three("attntune_pool");
    TestBackend backend(kX);
    TunePlan a, b;
    const TuneSummary s1 = TuneOn(Tiny(one, strategy, 5), backend, {kX}, &a);
    const TuneSummary s3 = TuneOn(Tiny(three, strategy, 5), backend, {kX, kX, kX}, &b);
    const auto serial = StoredTrials(*a.db), parallel = StoredTrials(*b.db);
    CHECK(s1.evaluations == s3.evaluations);
    CHECK(s3.measured == s3.evaluations);
    CHECK(serial.size() == parallel.size());
    CHECK(std::set<std::string>(parallel.begin(), parallel.end()).size() == parallel.size());
    if (strategy != "auto") CHECK(serial == parallel);
  }
}

TEST_CASE("Slots share the problems out; a problem alone gets a batch") {
  TempDir dir("attntune_pool");
  TestBackend backend(kX);
  TunePlan plan = PlanTune(Tiny(dir, "random", 5), backend);
  OneMsTimer timer;
  CandidateRunner runner(plan, timer);
  SECTION("four problems on three slots: three problems side by side") {
    InlinePool pool(runner, {kX, kX, kX});
    RunTune(plan, pool, nullptr);
    const auto& sent = pool.Submitted();
    REQUIRE(sent.size() == 20);
    // The first three tasks, asked before any outcome was told, are of three problems.
    CHECK(std::set<int64_t>{sent[0].second.problem, sent[1].second.problem,
                            sent[2].second.problem}.size() == 3);
  }
  SECTION("one problem on three slots: a batch of three") {
    TuneOptions o = Tiny(dir, "random", 5);
    o.variants = {"dense"};
    o.seq_lens = {48};
    TunePlan single = PlanTune(o, backend);
    CandidateRunner single_runner(single, timer);
    InlinePool pool(single_runner, {kX, kX, kX});
    RunTune(single, pool, nullptr);
    const auto& sent = pool.Submitted();
    REQUIRE(sent.size() == 5);
    CHECK(sent[0].first == 0);
    CHECK(sent[1].first == 1);
    CHECK(sent[2].first == 2);
  }
}

TEST_CASE("Each model of device searches every problem itself; a search is fed only its model's trials") {
  TempDir dir("attntune_pool");
  TestBackend x(kX), y(kY);
  const TuneOptions o = Tiny(dir, "random", 4);
  TunePlan only_y;
  const TuneSummary first = TuneOn(o, y, {kY}, &only_y);
  REQUIRE(first.measured == 16);
  only_y.db.reset();
  // Y's trials are all stored: its slot answers from them; X's two slots measure theirs.
  TunePlan both;
  const TuneSummary s = TuneOn(o, x, {kX, kY, kX}, &both);
  CHECK(s.evaluations == 32);
  CHECK(s.reused == 16);
  CHECK(s.measured == 16);
  std::map<std::string, int> per_device;
  for (const TrialRow& t : both.db->Trials(TrialFilter{})) ++per_device[t.device.name];
  CHECK(per_device == std::map<std::string, int>{{"cpu x", 16}, {"cpu y", 16}});
  // The same seeded points on each model: X's configurations are Y's.
  std::multiset<std::string> on_x, on_y;
  for (const std::string& k : StoredTrials(*both.db, true)) {
    (k.find(" on cpu x") != std::string::npos ? on_x : on_y).insert(k.substr(0, k.rfind(" on ")));
  }
  CHECK(on_x == on_y);
}

TEST_CASE("Units of one model (equal fingerprints but for their unit fields) share one search, each trial stored under its own device") {
  TempDir dir("attntune_pool");
  const DeviceInfo a = Cpu("gpu", R"({"model":"g","uuid":"a"})", {"uuid"});
  const DeviceInfo b = Cpu("gpu", R"({"model":"g","uuid":"b"})", {"uuid"});
  TestBackend backend(a);
  const TuneOptions o = Tiny(dir, "random", 4);
  TunePlan plan;
  const TuneSummary s = TuneOn(o, backend, {a, b}, &plan);
  CHECK(s.evaluations == 16);
  CHECK(s.measured == 16);
  std::map<std::string, int> per_fingerprint;
  for (const TrialRow& t : plan.db->Trials(TrialFilter{})) ++per_fingerprint[t.device.fingerprint_json];
  CHECK(per_fingerprint.size() == 2);
  CHECK(per_fingerprint[a.fingerprint_json] + per_fingerprint[b.fingerprint_json] == 16);
  plan.db.reset();
  // A re-run on unit b alone reuses what unit a measured.
  TestBackend only_b(b);
  CHECK(TuneOn(o, only_b, {b}).measured == 0);
  // A device of another model does not.
  const DeviceInfo c = Cpu("gpu", R"({"model":"h","uuid":"a"})", {"uuid"});
  TestBackend other(c);
  CHECK(TuneOn(o, other, {c}).measured == 16);
}

TEST_CASE("A lost slot's candidate goes to another slot: nothing lost, nothing stored twice") {
  TempDir one("attntune_pool"), three("attntune_pool");
  TestBackend backend(kX);
  TunePlan a, b;
  TuneOn(Tiny(one, "exhaustive", 5), backend, {kX}, &a);
  std::vector<ProgressEvent> events;
  const TuneSummary s = TuneOn(Tiny(three, "exhaustive", 5), backend, {kX, kX, kX}, &b, &events, {1});
  CHECK(s.evaluations == 20);
  CHECK(StoredTrials(*a.db) == StoredTrials(*b.db));
  int lost = 0;
  for (const ProgressEvent& ev : events) {
    if (ev.status != "lost") continue;
    ++lost;
    CHECK(ev.worker == "slot 1");
    CHECK(ev.message == "slot 1 was lost (a test)");
    CHECK_FALSE(ev.problem.empty());  // it names the candidate it held
  }
  CHECK(lost == 1);
  for (const ProgressEvent& ev : events) {
    if (ev.status != "lost") CHECK(ev.worker != "slot 1");
  }
  CHECK(Claims(three.File("attntune.db")) == 0);
}

TEST_CASE("A model whose every slot is lost ends the run in one line; what was stored stays") {
  TempDir dir("attntune_pool");
  TestBackend backend(kX);
  TunePlan plan;
  try {
    TuneOn(Tiny(dir, "exhaustive", 5), backend, {kX, kY}, &plan, nullptr, {1});
    FAIL("no error");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) ==
          "every slot of cpu y is gone (slot 1; slot 1 was lost (a test)); what was stored "
          "stays, and a re-run resumes from it");
  }
  // A re-run on X alone reuses X's stored trials.
  auto db = Database::OpenReadOnly(dir.File("attntune.db"));
  const int64_t stored = db->Info().trials;
  CHECK(stored >= 1);
  db.reset();
  TestBackend x(kX);
  const TuneSummary again = TuneOn(Tiny(dir, "exhaustive", 5), x, {kX});
  CHECK(again.reused == stored);
  CHECK(Claims(dir.File("attntune.db")) == 0);
}
