// The run loop on several slots (tuner/pool.h, tuner/session): InlinePool stands in for
// MPI ranks, so that batches, device models, lost slots and reuse are tested in every
// build, without MPI.
#include <catch2/catch.hpp>
#include <sqlite3.h>

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "tests/temp_dir.h"
#include "reports/reports.h"
#include "tuner/confirm.h"
#include "tuner/emit.h"
#include "tuner/pool.h"
#include "tuner/session.h"
#include "tuner/space.h"

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
  o.retime = false;  // the re-timing stage has tests of its own (pool_test)
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

TEST_CASE("A time budget on several slots gives problems searched side by side equal shares") {
  // 4 problems on 3 slots: the first three open together. A share of the problems left
  // gave them 1/4, 1/3 and 1/2 of the time left and the last whatever remained (MPI, 3
  // ranks, 8 s: 2.0, 2.65, 4.15 and 6.2 s). Shared by rounds of searches over the slots,
  // each gets about half of the time here.
  TempDir dir("attntune_pool");
  TestBackend backend(kX);
  TuneOptions o = Tiny(dir, "random", 0);  // no limit on the evaluations
  o.variants = {"swa"};  // spaces larger than the evaluations the time allows
  o.seq_lens = {48, 56, 64, 72};
  o.time_budget_s = 10;
  double now = 0;
  o.clock = [&now] { return now += 0.05; };
  TunePlan plan = PlanTune(o, backend);
  OneMsTimer timer;
  CandidateRunner runner(plan, timer);
  InlinePool pool(runner, {kX, kX, kX});
  // Each problem's time: from its first evaluation to its last, on the fake clock.
  std::map<std::string, std::pair<double, double>> span;
  RunTune(plan, pool, [&](const ProgressEvent& ev) {
    if (ev.status == "running") return;
    auto it = span.find(ev.problem);
    if (it == span.end()) span[ev.problem] = {now, now};
    else it->second.second = now;
  });
  REQUIRE(span.size() == 4);
  double shortest = 1e30, longest = 0;
  for (const auto& [problem, s] : span) {
    UNSCOPED_INFO(problem << ": " << s.second - s.first << " s");
    shortest = std::min(shortest, s.second - s.first);
    longest = std::max(longest, s.second - s.first);
  }
  CHECK(longest <= 1.5 * shortest);
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

namespace {

// A pool of one slot whose results follow a script: (task) -> median ms, the searches'
// checked evaluations and the re-timings apart, so that the re-timing stage is tested
// without a clock.
class ScriptedPool : public WorkerPool {
 public:
  using Script = std::function<double(const CandidateTask&)>;
  ScriptedPool(DeviceInfo device, Script script)
      : device_(std::move(device)), script_(std::move(script)) {}
  int Slots() const override { return 1; }
  DeviceInfo Device(int) const override { return device_; }
  std::string Name(int) const override { return "scripted"; }
  void Submit(int slot, const CandidateTask& task) override {
    PoolEvent ev;
    ev.slot = slot;
    ev.ticket = task.ticket;
    ev.result.median_ms = ev.result.p10_ms = ev.result.p90_ms = script_(task);
    ev.result.metrics = {{"rel_err", 0.0}, {"mass_recall", 1.0}, {"pairs", 1.0}};
    (task.retime ? retimes : checked).push_back(task.impl + " " + ParamsToString(task.params));
    done_.push_back(std::move(ev));
  }
  std::optional<PoolEvent> Wait(double) override {
    if (done_.empty()) return std::nullopt;
    PoolEvent ev = std::move(done_.front());
    done_.pop_front();
    return ev;
  }
  std::vector<std::string> checked, retimes;

 private:
  DeviceInfo device_;
  Script script_;
  std::deque<PoolEvent> done_;
};

// dense on the tiny model at L=48, every candidate searched, then re-timed.
TuneOptions DenseRetimed(const TempDir& dir) {
  TuneOptions o = Tiny(dir, "exhaustive", 1000);
  o.variants = {"dense"};
  o.seq_lens = {48};
  o.retime = true;
  return o;
}

// DenseRetimed: the default (the first implementation, tiled, with its default tunables)
// takes 3 ms, tiled's other tiles 4 ms and generic 1 ms in the search and
// `generic_retimed` ms when re-timed.
std::vector<BestEntry> TuneScripted(const TempDir& dir, double generic_retimed, TuneSummary* s,
                                    ScriptedPool** seen = nullptr) {
  const TuneOptions o = DenseRetimed(dir);
  TestBackend backend(kX);
  TunePlan plan = PlanTune(o, backend);
  const Variant& dense = *plan.variants.front();
  const Implementation& first = *plan.impls.front().front();
  REQUIRE(first.id == "tiled");
  REQUIRE(plan.impls.front().size() == 2);
  const Params defaults = ResolveParams(dense, &first, TuneShape(o, plan.model, dense, 48), {}, "test");
  static std::unique_ptr<ScriptedPool> pool;
  pool = std::make_unique<ScriptedPool>(kX, [&](const CandidateTask& t) {
    if (t.impl == "generic") return t.retime ? generic_retimed : 1.0;
    return t.params == defaults ? 3.0 : 4.0;
  });
  *s = RunTune(plan, *pool, nullptr);
  if (seen) *seen = pool.get();
  return BestEntries(LoadReportInput(*plan.db));
}

}  // namespace

namespace {

// Slots 0 and 1 of model X, slot 2 of model Y, every task answered at once (generic the
// fastest, so that each model's re-timing has work); slot 2's loss arrives while slot 0
// re-times X's entries, ahead of slot 0's answer. A task sent to slot 2 after that is
// never answered: Wait throws rather than wait for ever.
class LosingPool : public WorkerPool {
 public:
  int Slots() const override { return 3; }
  DeviceInfo Device(int slot) const override { return slot == 2 ? kY : kX; }
  std::string Name(int slot) const override { return "slot " + std::to_string(slot); }
  void Submit(int slot, const CandidateTask& task) override {
    if (slot == 2 && lost_) {
      sent_to_lost = true;
      return;
    }
    PoolEvent ev;
    ev.slot = slot;
    ev.ticket = task.ticket;
    ev.result.median_ms = ev.result.p10_ms = ev.result.p90_ms = task.impl == "generic" ? 1.0 : 3.0;
    ev.result.metrics = {{"rel_err", 0.0}, {"mass_recall", 1.0}, {"pairs", 1.0}};
    done_.push_back(std::move(ev));
    if (task.retime && slot == 0 && !lost_) {
      lost_ = true;
      PoolEvent loss;
      loss.kind = PoolEvent::Kind::kLost;
      loss.slot = 2;
      loss.why = "slot 2 was lost (a test)";
      done_.push_front(std::move(loss));
    }
  }
  std::optional<PoolEvent> Wait(double) override {
    if (done_.empty()) {
      if (sent_to_lost) throw std::runtime_error("a task went to the lost slot 2 and is awaited");
      return std::nullopt;
    }
    PoolEvent ev = std::move(done_.front());
    done_.pop_front();
    return ev;
  }
  bool sent_to_lost = false;

 private:
  bool lost_ = false;
  std::deque<PoolEvent> done_;
};

}  // namespace

TEST_CASE("A slot lost during another model's re-timing gets no re-timing of its own") {
  // The loss arrived while slot 0's task was awaited and was dropped there (a pool reports
  // a loss once); Y's re-timing was then sent to slot 2 and awaited for ever.
  TempDir dir;
  TestBackend backend(kX);
  TunePlan plan = PlanTune(DenseRetimed(dir), backend);
  LosingPool pool;
  TuneSummary s;
  REQUIRE_NOTHROW(s = RunTune(plan, pool, nullptr));
  CHECK_FALSE(pool.sent_to_lost);
  CHECK(s.retimed >= 1);  // X's entries were re-timed on slot 0
}

TEST_CASE("A configuration the default matches when re-timed is no entry; the default takes its place") {
  TempDir dir;
  TuneSummary s;
  ScriptedPool* pool = nullptr;
  const std::vector<BestEntry> best = TuneScripted(dir, 5.0, &s, &pool);
  CHECK(s.retimed == kMaxChallengers);  // generic's three fastest, then the rest marked
  CHECK(s.lost_to_default == kMaxChallengers);
  CHECK(pool->retimes.size() == static_cast<size_t>(4 * kMaxChallengers));  // A B B A each
  REQUIRE(best.size() == 1);
  const BestEntry& e = best.front();
  CHECK(e.implementation == "tiled");
  CHECK(e.median_ms == 3.0);
  CHECK(e.default_implementation == "tiled");
  CHECK(e.default_tunables_json == e.tunables_json);
  CHECK(e.MarginDefault() == 1.0);
  CHECK(e.implementation_ms == std::map<std::string, double>{{"tiled", 3.0}});  // losers out
  CHECK(e.next_implementation.empty());
  const std::string json = RenderConfigJson(LoadReportInput(*Database::OpenReadOnly(dir.File("attntune.db"))));
  CHECK(json.find("\"next_best\": null") != std::string::npos);
  CHECK(json.find("\"retimed\": false") != std::string::npos);
}

TEST_CASE("A configuration faster than the default when re-timed is the entry, with its margins") {
  TempDir dir;
  TuneSummary s;
  const std::vector<BestEntry> best = TuneScripted(dir, 0.5, &s);
  CHECK(s.retimed == 1);
  CHECK(s.lost_to_default == 0);
  REQUIRE(best.size() == 1);
  const BestEntry& e = best.front();
  CHECK(e.implementation == "generic");
  CHECK(e.median_ms == 1.0);
  CHECK(e.default_implementation == "tiled");
  CHECK(e.default_retimed);
  CHECK(e.default_ms == 3.0);
  CHECK(e.retimed_ms == 0.5);
  CHECK(e.MarginDefault() == Approx(6.0));
  CHECK(e.next_implementation == "tiled");
  CHECK(e.MarginNext() == Approx(3.0));
  CHECK(e.implementation_ms == std::map<std::string, double>{{"generic", 1.0}, {"tiled", 3.0}});
  const ReportInput input = LoadReportInput(*Database::OpenReadOnly(dir.File("attntune.db")));
  CHECK(RenderConfigHeader(input).find(
            "generic: 3.00x faster than tiled (3 ms); 6.00x faster than the default tiled") !=
        std::string::npos);
  // The report's Implementations table: each implementation's best, the winner, both margins.
  const std::string html = RenderHtmlReport(input);
  const size_t table = html.find("<section id=\"implementations\">");
  REQUIRE(table != std::string::npos);
  const std::string row = html.substr(html.find("<tr class=\"entry\">", table));
  CHECK(row.rfind("<tr class=\"entry\"><td>dense</td><td>prefill</td><td>{}</td>", 0) == 0);
  CHECK(row.find("<td class=\"num\">1</td><td class=\"num\">3</td><td>generic</td>"
                 "<td class=\"num\">3.00x</td><td class=\"num\">6.00x re-timed</td></tr>") !=
        std::string::npos);
  // db records: each implementation's best, the entry's marked tuned.
  std::istringstream records(RenderEntryRecords(input));
  std::map<std::string, bool> tuned;
  for (std::string line; std::getline(records, line);) {
    const nlohmann::json j = nlohmann::json::parse(line);
    tuned[j.at("implementation").get<std::string>()] = j.at("tuned").get<bool>();
    CHECK(j.at("variant") == "dense");
  }
  CHECK(tuned == std::map<std::string, bool>{{"generic", true}, {"tiled", false}});
}

TEST_CASE("A warm start asks the best of each set of the variant's parameters first") {
  TempDir dir;
  TuneOptions o = Tiny(dir, "exhaustive", 1000);
  o.variants = {"swa"};
  o.seq_lens = {48};
  o.variant_grid = {{"w", {"40", "24"}}, {"sink", {"0"}}};
  TestBackend backend(kX);
  TunePlan plan = PlanTune(o, backend);
  // w=40 is faster in every configuration: a plain ranking would put only w=40 first.
  int64_t n = 0;
  ScriptedPool pool(kX, [&n](const CandidateTask& t) {
    return (t.params.at("w") == "40" ? 1.0 : 5.0) + 0.001 * static_cast<double>(++n);
  });
  RunTune(plan, pool, nullptr);
  const Variant& swa = *plan.variants.front();
  ProblemRecord problem;
  problem.shape = TuneShape(o, plan.model, swa, 64);
  problem.dtype = o.dtype;
  const SearchSpace search = BuildSearchSpace(swa, plan.impls.front(), problem.shape, plan.Kind(),
                                              plan.options.variant_grid);
  const int64_t device = plan.db->Devices().front().id;
  const std::vector<Point> points = WarmStartPoints(*plan.db, device, swa, search, problem, 3);
  REQUIRE(points.size() == 3);
  CHECK(search.ParamsOf(points[0]).at("w") == "40");
  CHECK(search.ParamsOf(points[1]).at("w") == "24");  // the best of the other set second
  CHECK(search.ParamsOf(points[2]).at("w") == "40");
}
