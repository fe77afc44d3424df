#include "tuner/session.h"

#include <time.h>

#include <algorithm>
#include <cmath>
#include <deque>
#include <stdexcept>
#include <thread>
#include <map>
#include <set>
#include <memory>
#include <utility>

#include "core/check.h"
#include "tuner/confirm.h"
#include "tuner/pool.h"
#include "tuner/store.h"
#include "profiler/nvtx.h"
#include "search/strategies/registry.h"
#include "search/strategy.h"

namespace attntune {

namespace {

// Stored configurations a warm-started search asks first.
constexpr size_t kWarmStartPoints = 3;

// How often a candidate that another tune holds a claim on is asked about again: a
// candidate takes tens of milliseconds at the least, so this adds little to the wait.
constexpr double kClaimPollSeconds = 0.02;

// How long the loop waits for a pool event when nothing else can happen meanwhile (a
// pool reports lost slots by itself, so this only bounds the wait).
constexpr double kEventWaitSeconds = 1.0;

}  // namespace

namespace {

// A metric every counter reading holds: a trial that has it was counted before.
constexpr const char kCounterProbe[] = "hw_passes";

struct UncountedTrial {
  int64_t trial_id;
  int64_t problem_index;
  std::string problem;  // "dense L=1024"
  size_t variant;
  const Implementation* impl;  // an entry of the variant table
  Params params;
  std::string config;
};

// The counter passes of a run: per sequence length, the inputs are generated again (same
// seed, so the same values as when timed), and every ok trial still without counters runs
// once to make its inputs and selection resident, then under TuneOptions::counters. Each
// trial's counters are stored in a transaction of their own; a failure is reported and
// counted, and the passes go on.
void CounterPasses(TunePlan& plan, const std::map<int64_t, std::vector<UncountedTrial>>& uncounted,
                   int64_t problem_count, const ProgressFn& progress, TuneSummary* summary) {
  const TuneOptions& options = plan.options;
  for (const auto& [L, trials] : uncounted) {
    std::map<int64_t, std::unique_ptr<ProblemContext>> contexts;  // by Lq, as RunTune's
    std::vector<float> scratch;
    for (const UncountedTrial& t : trials) {
      const Variant& variant = *plan.variants[t.variant];
      const Shape shape = TuneShape(options, plan.model, variant, L);
      std::unique_ptr<ProblemContext>& slot = contexts[shape.Lq];
      if (!slot) {
        slot = std::make_unique<ProblemContext>(shape, options.seed ^ static_cast<uint64_t>(L),
                                                options.dtype);
      }
      const Tensors& inputs = slot->Inputs();
      const Implementation& impl = *t.impl;
      auto launch = [&] {
        if (impl.launch) {
          impl.launch(inputs, t.params);
        } else {
          scratch.resize(static_cast<size_t>(inputs.shape.QElems()));
          impl.run(inputs, t.params, scratch.data());
        }
      };
      ProgressEvent ev{t.problem_index, problem_count, t.problem, 0, 0, t.config, "counters",
                       "", 0.0, false};
      std::map<std::string, double> metrics;
      bool read = false;
      try {
        NvtxRange range("counters " + t.config);
        launch();
        metrics = plan.counters->Read(launch, nullptr);
        read = true;
      } catch (const std::exception& e) {  // the reading failed: reported, and the passes go on
        ev.status = "counters failed";
        ev.message = e.what();
        ++summary->counter_failures;
      }
      if (read) {
        plan.db->AddMetrics(t.trial_id, metrics);  // a database failure stops the run
        ++summary->counted;
      }
      if (progress) progress(ev);
    }
  }
}

// The metric a floor ranks candidates by when none meets it: the worst-case mass_recall
// (higher is closer), else minus the worst-case rel_err.
double Closeness(const QualityFloor& floor, const TrialResult& r) {
  auto worst = [&](const char* name, double none) {
    auto it = r.metrics.find(name);
    return it == r.metrics.end() ? none : it->second;
  };
  return floor.min_mass_recall || !floor.max_rel_err ? worst("mass_recall_worst", 0.0)
                                                     : -worst("rel_err_worst", 1e300);
}

// Folds one evaluated candidate into the problem's choice under `floor`.
void NoteChoice(const QualityFloor& floor, const std::string& config, const TrialResult& r,
                ProblemChoice* choice) {
  if (r.status != TrialStatus::kOk) return;
  auto ratio = r.metrics.find("pair_ratio");
  const bool sparse = ratio != r.metrics.end() && ratio->second < 1.0;
  if (floor.MetBy(r.metrics)) {
    choice->sparse_found = choice->sparse_found || sparse;
    if (!choice->found || r.median_ms < choice->result.median_ms) {
      choice->found = true;
      choice->sparse = sparse;
      choice->config = config;
      choice->result = r;
    }
  } else if (sparse && (choice->closest.empty() ||
                        Closeness(floor, r) > Closeness(floor, choice->closest_result))) {
    choice->closest = config;
    choice->closest_result = r;
  }
}

struct Group;

// A point of a search that this process has claimed: waiting for a slot, or in flight.
struct Candidate {
  struct Search* search = nullptr;
  Point point;
  int64_t eval_index = 0;  // 1-based within its search
  TrialStore::Claimed claimed;
};

// One problem searched on one model of device.
struct Search {
  size_t problem = 0;  // index into the run's problems
  Group* group = nullptr;
  int64_t problem_id = 0;
  SearchSpace space;
  std::unique_ptr<Strategy> strategy;
  SearchBudget budget;
  double start = 0;
  int64_t asked = 0;      // points taken from the strategy
  int64_t in_flight = 0;  // candidates on slots
  bool closed = false;    // the budget is spent or the strategy has nothing left
  std::deque<Candidate> ready;  // claimed and waiting for a slot (their slot was lost)
  // Held by another tune's claim, with when to ask again (SteadySeconds).
  std::vector<std::pair<Candidate, double>> held;

  ProblemChoice choice;   // what it found under the run's floor

  bool Done() const { return closed && in_flight == 0 && ready.empty() && held.empty(); }
};

// The slots of one model of device, the store of their trials, and their searches.
struct Group {
  std::unique_ptr<TrialStore> store;
  std::vector<int> slots;
  std::map<int, size_t> unit_of;  // slot -> the store's unit (its device row and run)
  size_t next_problem = 0;        // the next problem to open
  std::vector<std::unique_ptr<Search>> active;  // in the order opened
  int live = 0;                   // slots not lost

  bool Finished(size_t problems) const { return next_problem == problems && active.empty(); }
};

// What the searches of one run share.
struct RunState {
  TunePlan& plan;
  WorkerPool& pool;
  const ProgressFn& progress;
  std::vector<TuneProblem> problems;
  std::vector<std::unique_ptr<Group>> groups;
  std::vector<Group*> group_of;   // by slot
  std::vector<bool> busy, lost;   // by slot
  std::map<int64_t, Candidate> in_flight;  // by ticket
  int64_t next_ticket = 1;
  TuneSummary summary;
  // The choices of retired searches: (problem, group index) -> choice.
  std::map<std::pair<size_t, size_t>, ProblemChoice> choices;
  SecondsClock clock;
  double run_start = 0;
  // The ok trials of this run without hardware counters, for the counter passes.
  std::map<int64_t, std::vector<UncountedTrial>> uncounted;  // by sequence length
};

// The group's searches that will still ask for points: open and not closed, and its
// problems not yet opened.
int64_t Asking(const RunState& run, const Group& group) {
  int64_t asking = static_cast<int64_t>(run.problems.size() - group.next_problem);
  for (const auto& s : group.active) asking += s->closed ? 0 : 1;
  return asking;
}

// The search budget of a problem `group` opens now (its next_problem already counted):
// the options' evaluation count and, with a time budget, an equal share of the time left
// among the rounds of searches still to run: the group's searches asking for points
// (open, and not yet opened, this one included) over its live slots. On one slot that is
// the time left over the problems left; on 3 slots 4 problems of 8 s get 4 s each, where
// a share of the problems left gave the first three 2, 2.7 and 4 s (they open together)
// and the last what remained.
SearchBudget ProblemBudget(const RunState& run, const Group& group) {
  const TuneOptions& options = run.plan.options;
  SearchBudget budget{options.budget > 0 ? options.budget : -1, 0.0};
  if (options.time_budget_s > 0) {
    const double left = options.time_budget_s - (run.clock() - run.run_start);
    const int64_t asking = Asking(run, group) + 1;  // this search is not yet among them
    const int64_t slots = std::max(group.live, 1);
    const int64_t rounds = (asking + slots - 1) / slots;
    budget.max_seconds = std::max(left / static_cast<double>(rounds), 1e-9);
  }
  return budget;
}

// One group per model of device among the pool's slots, in the order of their first
// slot; each slot's device stored as a unit of its group's store.
void FormGroups(RunState& run) {
  const int slots = run.pool.Slots();
  ATTNTUNE_CHECK(slots > 0);
  run.group_of.assign(static_cast<size_t>(slots), nullptr);
  run.busy.assign(static_cast<size_t>(slots), false);
  run.lost.assign(static_cast<size_t>(slots), false);
  std::map<std::string, Group*> by_model;
  for (int slot = 0; slot < slots; ++slot) {
    const DeviceInfo device = run.pool.Device(slot);
    const std::string model = ModelFingerprint(device.fingerprint_json, device.unit_fields);
    Group*& group = by_model[model];
    if (group == nullptr) {
      run.groups.push_back(std::make_unique<Group>());
      group = run.groups.back().get();
      group->store = std::make_unique<TrialStore>(*run.plan.db, device, run.plan.options.args_json,
                                                  RuntimeLibraries(run.plan.backend->Platform()));
      group->store->SetTolerance(run.plan.options.evaluate.tolerance);
      group->store->SetFlushL2(run.plan.options.flush_l2);
      group->unit_of[slot] = 0;
    } else {
      group->unit_of[slot] = group->store->AddUnit(device);
    }
    group->slots.push_back(slot);
    ++group->live;
    run.group_of[static_cast<size_t>(slot)] = group;
  }
}

// Opens the group's next problem: its space, strategy (warm-started from the model's
// stored trials at the nearest length) and budget.
Search* OpenSearch(RunState& run, Group& group) {
  const TuneOptions& options = run.plan.options;
  auto search = std::make_unique<Search>();
  search->problem = group.next_problem++;
  search->group = &group;
  const TuneProblem& problem = run.problems[search->problem];
  const Variant& variant = *run.plan.variants[problem.variant];
  Database& db = group.store->Db();
  const ProblemRecord record{0, problem.shape, options.dtype, options.phase, run.plan.calib_id};
  search->problem_id = db.PutProblem(record);
  for (const int64_t run_id : group.store->RunIds())
    db.PutRunProblem({run_id, search->problem_id, options.floor.ToString()});
  search->choice.problem = problem.name;
  search->choice.variant = variant.id;
  // The implementation is a search dimension (DESIGN.md s2): every one the backend runs.
  search->space = BuildSearchSpace(variant, run.plan.impls[problem.variant], problem.shape,
                                   run.plan.Kind(), options.variant_grid);
  search->strategy = MakeStrategy(options.strategy, search->space.space, options.seed, "--strategy");
  if (options.warm_start) {
    ProblemRecord here = record;
    here.id = search->problem_id;
    WarmStart(*search->strategy, WarmStartPoints(db, group.store->Peers(), variant,
                                                 search->space, here, kWarmStartPoints,
                                                 options.floor));
  }
  search->budget = ProblemBudget(run, group);
  if (search->budget.max_seconds > 0) search->start = run.clock();
  group.active.push_back(std::move(search));
  return group.active.back().get();
}

// The progress event of a candidate of `search`.
ProgressEvent EventOf(const RunState& run, const Search& search, const Candidate& c) {
  const TuneProblem& problem = run.problems[search.problem];
  return ProgressEvent{static_cast<int64_t>(search.problem) + 1,
                       static_cast<int64_t>(run.problems.size()),
                       problem.name,
                       c.eval_index,
                       run.plan.options.budget,
                       search.space.Describe(c.point),
                       "",
                       "",
                       0.0,
                       false,
                       ""};
}

// A candidate's trial, stored or reused: counted, reported, told to its strategy.
void Answer(RunState& run, Search& search, const Candidate& c, const TrialStore::Trial& trial,
            int slot) {
  const TrialResult& result = trial.result;
  ProgressEvent ev = EventOf(run, search, c);
  ev.reused = trial.reused;
  if (slot >= 0 && run.pool.Slots() > 1) ev.worker = run.pool.Name(slot);
  ++(trial.reused ? run.summary.reused : run.summary.measured);
  if (run.plan.options.metrics && result.status == TrialStatus::kOk &&
      !result.metrics.count(kCounterProbe)) {
    const TuneProblem& problem = run.problems[search.problem];
    run.uncounted[problem.L].push_back({trial.id, static_cast<int64_t>(search.problem) + 1,
                                        problem.name, problem.variant,
                                        &search.space.ImplOf(c.point),
                                        search.space.ParamsOf(c.point), ev.config});
  }
  ++run.summary.evaluations;
  if (result.status != TrialStatus::kOk) ++run.summary.failed;
  ev.status = ToString(result.status);
  ev.median_ms = result.median_ms;
  if (run.progress) run.progress(ev);
  const QualityFloor& floor = run.plan.options.floor;
  NoteChoice(floor, ev.config, result, &search.choice);
  // A candidate below the floor is no answer to the search (it is stored all the same).
  const bool answer = result.status == TrialStatus::kOk && floor.MetBy(result.metrics);
  search.strategy->Tell(Evaluation{c.point, answer, result.median_ms});
}

// Claims `c`: returns it when this process is to evaluate it; answers it from the
// database when a reusable trial is stored; holds it when another tune is measuring it.
std::optional<Candidate> ClaimCandidate(RunState& run, Search& search, Candidate c) {
  const Variant& variant = *run.plan.variants[run.problems[search.problem].variant];
  c.claimed = search.group->store->Claim(search.problem_id, variant, search.space.ImplOf(c.point),
                                         search.space.ParamsOf(c.point));
  switch (c.claimed.outcome) {
    case TrialStore::Claimed::Outcome::kReusable:
      Answer(run, search, c, c.claimed.trial, -1);
      return std::nullopt;
    case TrialStore::Claimed::Outcome::kHeld:
      search.held.emplace_back(std::move(c), SteadySeconds() + kClaimPollSeconds);
      return std::nullopt;
    case TrialStore::Claimed::Outcome::kClaimed:
      break;
  }
  return c;
}

// The next candidate of `search` for a slot: one whose slot was lost, one another tune
// no longer holds, or a new point of its strategy (until the budget is spent: no
// evaluation starts once its time is up, but the first always does).
std::optional<Candidate> TakeFrom(RunState& run, Search& search) {
  if (!search.ready.empty()) {
    Candidate c = std::move(search.ready.front());
    search.ready.pop_front();
    return c;
  }
  const double now = search.held.empty() ? 0.0 : SteadySeconds();
  for (size_t i = 0; i < search.held.size(); ++i) {
    if (search.held[i].second > now) continue;
    Candidate c = std::move(search.held[i].first);
    search.held.erase(search.held.begin() + static_cast<std::ptrdiff_t>(i));
    if (std::optional<Candidate> mine = ClaimCandidate(run, search, std::move(c))) return mine;
    break;  // answered or held again (at the end of the list)
  }
  while (!search.closed) {
    const SearchBudget& budget = search.budget;
    if (budget.max_evaluations >= 0 && search.asked >= budget.max_evaluations) break;
    if (budget.max_seconds > 0 && search.asked > 0 &&
        run.clock() - search.start >= budget.max_seconds)
      break;
    std::optional<Point> point = search.strategy->Next();
    if (!point) break;
    Candidate c;
    c.search = &search;
    c.point = std::move(*point);
    c.eval_index = ++search.asked;
    if (std::optional<Candidate> mine = ClaimCandidate(run, search, std::move(c))) return mine;
  }
  search.closed = true;
  return std::nullopt;
}

// How many candidates of one search may be in flight at once: the group's slots shared
// among its problems still asking for points, so that problems run side by side and a
// search asks a batch only when slots outnumber them.
int64_t InFlightCap(const RunState& run, const Group& group) {
  const int64_t asking = std::max<int64_t>(Asking(run, group), 1);
  return std::max<int64_t>(1, (group.live + asking - 1) / asking);
}

// Drops the group's finished searches, keeping what each chose.
void Retire(RunState& run, Group& group) {
  size_t index = 0;
  while (run.groups[index].get() != &group) ++index;
  for (const auto& s : group.active) {
    if (s->Done()) run.choices[{s->problem, index}] = std::move(s->choice);
  }
  group.active.erase(std::remove_if(group.active.begin(), group.active.end(),
                                    [](const std::unique_ptr<Search>& s) { return s->Done(); }),
                     group.active.end());
}

// The next candidate for an idle slot of `group`: from the searches open, in the order
// opened, under the in-flight cap; else from the next problem, opened now.
std::optional<Candidate> NextCandidate(RunState& run, Group& group) {
  for (;;) {
    const int64_t cap = InFlightCap(run, group);
    for (const auto& search : group.active) {
      if (search->in_flight >= cap && search->ready.empty()) continue;
      if (std::optional<Candidate> c = TakeFrom(run, *search)) return c;
    }
    Retire(run, group);
    if (group.next_problem == run.problems.size()) return std::nullopt;
    OpenSearch(run, group);
  }
}

// The first problem some group has not finished: a slot may free the inputs of those
// before it.
int64_t FirstOpenProblem(const RunState& run) {
  size_t first = run.problems.size();
  for (const auto& group : run.groups) {
    first = std::min(first, group->next_problem);
    for (const auto& search : group->active) first = std::min(first, search->problem);
  }
  return static_cast<int64_t>(first);
}

// Gives every idle slot a candidate, while there are any.
void Dispatch(RunState& run) {
  for (int slot = 0; slot < run.pool.Slots(); ++slot) {
    const size_t s = static_cast<size_t>(slot);
    if (run.busy[s] || run.lost[s]) continue;
    std::optional<Candidate> c = NextCandidate(run, *run.group_of[s]);
    if (!c) continue;
    Search& search = *c->search;
    CandidateTask task;
    task.ticket = run.next_ticket++;
    task.problem = static_cast<int64_t>(search.problem);
    task.impl = search.space.ImplOf(c->point).id;
    task.params = search.space.ParamsOf(c->point);
    task.first_open_problem = FirstOpenProblem(run);
    if (run.progress) {
      ProgressEvent ev = EventOf(run, search, *c);
      ev.status = "running";
      if (run.pool.Slots() > 1) ev.worker = run.pool.Name(slot);
      run.progress(ev);
    }
    ++search.in_flight;
    run.busy[s] = true;
    run.in_flight.emplace(task.ticket, std::move(*c));
    run.pool.Submit(slot, task);
  }
}

// A slot is gone: its candidate goes back to its search for another slot of the model;
// a model with work left and no slot is the end of the run.
void SlotLost(RunState& run, const PoolEvent& event) {
  const size_t s = static_cast<size_t>(event.slot);
  if (run.lost[s]) return;
  run.lost[s] = true;
  run.busy[s] = false;
  Group& group = *run.group_of[s];
  --group.live;
  ProgressEvent ev{0, static_cast<int64_t>(run.problems.size()), "", 0, 0, "", "lost", event.why,
                   0.0, false, run.pool.Name(event.slot)};
  const auto it = run.in_flight.find(event.ticket);
  if (it != run.in_flight.end()) {
    Candidate c = std::move(it->second);
    run.in_flight.erase(it);
    ev = EventOf(run, *c.search, c);
    ev.status = "lost";
    ev.message = event.why;
    ev.worker = run.pool.Name(event.slot);
    --c.search->in_flight;
    c.search->ready.push_back(std::move(c));
  }
  if (run.progress) run.progress(ev);
  if (group.live == 0 && !group.Finished(run.problems.size())) {
    std::string names;
    for (const int slot : group.slots) names += (names.empty() ? "" : ", ") + run.pool.Name(slot);
    throw std::runtime_error("every slot of " + run.pool.Device(group.slots.front()).name +
                             " is gone (" + names + "; " + event.why +
                             "); what was stored stays, and a re-run resumes from it");
  }
}

// Stores the outcome of a finished task and tells its search.
void TaskDone(RunState& run, PoolEvent& event) {
  const size_t s = static_cast<size_t>(event.slot);
  run.busy[s] = false;
  const auto it = run.in_flight.find(event.ticket);
  ATTNTUNE_CHECK_MSG(it != run.in_flight.end(), "an outcome of no task in flight");
  Candidate c = std::move(it->second);
  run.in_flight.erase(it);
  Search& search = *c.search;
  --search.in_flight;
  TrialStore::Trial trial;
  trial.result = std::move(event.result);
  trial.id = search.group->store->Store(c.claimed, search.group->unit_of.at(event.slot),
                                        trial.result);
  Answer(run, search, c, trial, event.slot);
}

// Whether any search waits on another tune's claim.
bool AnyHeld(const RunState& run) {
  for (const auto& group : run.groups) {
    for (const auto& search : group->active) {
      if (!search->held.empty()) return true;
    }
  }
  return false;
}

// Drops this process's claims on candidates it will not store (the run failed): those
// in flight and those waiting for a slot.
void ReleaseClaims(RunState& run) {
  auto release = [](const Candidate& c) {
    try {
      c.search->group->store->Release(c.claimed);
    } catch (...) {  // a dead claimant's claim is taken over anyway
    }
  };
  for (const auto& [ticket, c] : run.in_flight) release(c);
  for (const auto& group : run.groups) {
    for (const auto& search : group->active) {
      for (const Candidate& c : search->ready) release(c);
    }
  }
}

// CPU seconds of the calling thread: what the run loop costs, whatever else the machine
// runs meanwhile.
double ThreadCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

void SearchAll(RunState& run) {
  double busy_since = ThreadCpuSeconds();
  for (;;) {
    Dispatch(run);
    const bool held = AnyHeld(run);
    if (run.in_flight.empty() && !held) break;
    run.summary.loop_seconds += ThreadCpuSeconds() - busy_since;
    std::optional<PoolEvent> event =
        run.in_flight.empty() ? std::nullopt
                              : run.pool.Wait(held ? kClaimPollSeconds : kEventWaitSeconds);
    busy_since = ThreadCpuSeconds();
    if (!event) {
      if (run.in_flight.empty()) std::this_thread::sleep_for(
          std::chrono::duration<double>(kClaimPollSeconds));
      continue;
    }
    if (event->kind == PoolEvent::Kind::kLost) {
      SlotLost(run, *event);
    } else {
      TaskDone(run, *event);
    }
  }
  run.summary.loop_seconds += ThreadCpuSeconds() - busy_since;
  for (const auto& group : run.groups) {
    ATTNTUNE_CHECK_MSG(group->Finished(run.problems.size()), "a group stopped with work left");
  }
}

}  // namespace

TuneSummary RunTune(TunePlan& plan, WorkerPool& pool, const ProgressFn& progress) {
  const TuneOptions& options = plan.options;
  ATTNTUNE_CHECK_MSG(!options.metrics || pool.Slots() == 1, "counter passes need one slot");
  RunState run{plan, pool, progress, TuneProblems(plan), {}, {}, {}, {}, {}, 1, {}, {},
               options.clock ? options.clock : SecondsClock(SteadySeconds), 0, {}};
  run.summary.db_path = plan.db_path;
  run.summary.quality_source = plan.calibration ? plan.calibration->Describe() : "gaussian inputs";
  run.run_start = run.clock();
  FormGroups(run);
  try {
    SearchAll(run);
  } catch (...) {
    ReleaseClaims(run);
    throw;
  }
  // Per model of device, its fastest configurations re-timed against the default on one
  // of its slots still there.
  std::vector<DefaultTrialSeen> defaults;
  for (const auto& group : run.groups) {
    if (!options.retime) break;
    for (const int slot : group->slots) {
      if (run.lost[static_cast<size_t>(slot)]) continue;
      NvtxRange range("re-time");
      ConfirmAgainstDefault({plan, run.pool, slot, *group->store, group->unit_of.at(slot),
                             run.problems, progress, &defaults, &run.lost},
                            &run.summary);
      break;
    }
  }
  // The counter passes after every timing, the re-timing's included (on CUDA the first
  // counter reading stops CUPTI's activity tracing: a timing after it would find no
  // kernel), over the searches' ok trials and the defaults the re-timing evaluated.
  if (options.metrics) {
    std::set<int64_t> queued;
    for (const auto& [L, trials] : run.uncounted) {
      for (const UncountedTrial& t : trials) queued.insert(t.trial_id);
    }
    for (const DefaultTrialSeen& d : defaults) {
      if (d.metrics.count(kCounterProbe) || !queued.insert(d.trial_id).second) continue;
      const TuneProblem& problem = run.problems[d.problem];
      run.uncounted[problem.L].push_back({d.trial_id, static_cast<int64_t>(d.problem) + 1,
                                          problem.name, problem.variant, d.impl, d.params,
                                          d.impl->id + " " + ParamsToString(d.params)});
    }
    NvtxRange range("counters");
    CounterPasses(plan, run.uncounted, static_cast<int64_t>(run.problems.size()), progress,
                  &run.summary);
  }
  // Per problem, then per model of device (named when there are several).
  for (auto& [key, choice] : run.choices) {
    if (run.groups.size() > 1)
      choice.problem += " on " + run.pool.Device(run.groups[key.second]->slots.front()).name;
    run.summary.choices.push_back(std::move(choice));
  }
  for (const auto& group : run.groups) group->store->Finish();
  {
    NvtxRange range("emit");
    // The run's own geometry: trials of other models or dtypes in the same database never
    // meet its entries.
    GeometrySelection selection;
    selection.dtype = options.dtype;
    selection.batch = options.batch;
    selection.q_heads = plan.model.q_heads;
    selection.kv_heads = plan.model.kv_heads;
    // Its own builds' trials: those of another attntune (other kernels, other libraries)
    // stay in the database, for emit, but are not this binary's times.
    for (const auto& group : run.groups) selection.builds.insert(group->store->BuildId());
    run.summary.outputs = EmitOutputs(*plan.db, options.out_dir, selection);
  }
  return run.summary;
}

TuneSummary RunTune(TunePlan& plan, Timer& timer, const ProgressFn& progress) {
  CandidateRunner runner(plan, timer);
  InlinePool pool(runner, {plan.backend->Device()});
  return RunTune(plan, pool, progress);
}

}  // namespace attntune
