#include "tuner/pool.h"

#include <algorithm>
#include <utility>

#include "core/check.h"
#include "profiler/nvtx.h"

namespace attntune {

std::vector<TuneProblem> TuneProblems(const TunePlan& plan) {
  const TuneOptions& options = plan.options;
  std::vector<TuneProblem> problems;
  for (const int64_t L : options.seq_lens) {
    for (size_t v = 0; v < plan.variants.size(); ++v) {
      const Variant& variant = *plan.variants[v];
      TuneProblem p;
      p.L = L;
      p.variant = v;
      p.shape = TuneShape(options, plan.model, variant, L);
      p.name = variant.id + (options.phase == Phase::kDecode ? " decode" : "") + " L=" +
               std::to_string(L);
      problems.push_back(std::move(p));
    }
  }
  return problems;
}

CandidateRunner::CandidateRunner(const TunePlan& plan, Timer& timer)
    : plan_(plan), timer_(timer), problems_(TuneProblems(plan)) {}

TrialResult CandidateRunner::Run(const CandidateTask& task) {
  ATTNTUNE_CHECK(task.problem >= 0 && task.problem < static_cast<int64_t>(problems_.size()));
  // Inputs and references of problems all done are freed before new ones are built.
  for (auto it = contexts_.begin(); it != contexts_.end();) {
    it = it->second.last_problem < task.first_open_problem ? contexts_.erase(it) : std::next(it);
  }
  const TuneProblem& problem = problems_[static_cast<size_t>(task.problem)];
  // Inputs depend on the shape and the seed only, so every variant of a length sees the
  // same ones (in decode, one step's shape and a token-by-token variant's all steps).
  const std::pair<int64_t, int64_t> key{problem.L, problem.shape.Lq};
  Context& slot = contexts_[key];
  if (!slot.context) {
    slot.context = std::make_unique<ProblemContext>(
        problem.shape, plan_.options.seed ^ static_cast<uint64_t>(problem.L), plan_.options.dtype);
    for (size_t i = 0; i < problems_.size(); ++i) {
      if (problems_[i].L == key.first && problems_[i].shape.Lq == key.second)
        slot.last_problem = static_cast<int64_t>(i);
    }
  }
  const Variant& variant = *plan_.variants[problem.variant];
  const std::vector<const Implementation*>& impls = plan_.impls[problem.variant];
  const auto impl = std::find_if(impls.begin(), impls.end(),
                                 [&](const Implementation* i) { return i->id == task.impl; });
  ATTNTUNE_CHECK_MSG(impl != impls.end(), "no implementation " + task.impl + " of " + variant.id);
  NvtxRange range("candidate " + problem.name + " " + task.impl + " " +
                  ParamsToString(task.params));
  EvaluateOptions options = plan_.options.evaluate;
  if (task.retime) {
    options.check = false;
    options.quality = nullptr;
  }
  return EvaluateCandidate(*slot.context, variant, **impl, task.params, timer_, options).result;
}

InlinePool::InlinePool(CandidateRunner& runner, std::vector<DeviceInfo> devices)
    : runner_(runner), devices_(std::move(devices)) {
  ATTNTUNE_CHECK(!devices_.empty());
}

void InlinePool::Submit(int slot, const CandidateTask& task) {
  ATTNTUNE_CHECK(slot >= 0 && slot < Slots());
  submitted_.emplace_back(slot, task);
  PoolEvent event;
  event.slot = slot;
  event.ticket = task.ticket;
  const auto lost = std::find(lose_.begin(), lose_.end(), slot);
  if (lost != lose_.end()) {
    lose_.erase(lost);
    event.kind = PoolEvent::Kind::kLost;
    event.why = Name(slot) + " was lost (a test)";
  } else {
    event.result = runner_.Run(task);
  }
  done_.push_back(std::move(event));
}

std::optional<PoolEvent> InlinePool::Wait(double /*max_seconds*/) {
  if (done_.empty()) return std::nullopt;  // nothing in flight: nothing to wait for
  PoolEvent event = std::move(done_.front());
  done_.pop_front();
  return event;
}

}  // namespace attntune
