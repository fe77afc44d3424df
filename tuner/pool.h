// The workers a tune hands its candidates to: slots, each one device that checks and
// measures candidates (tuner/evaluate) and answers with the result. The run loop
// (tuner/session) keeps every slot busy and owns the database; a slot never stores
// anything. InlinePool runs its slots in this process; parallel/ has the MPI pool, whose
// slots are ranks.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/params.h"
#include "db/records.h"
#include "profiler/device.h"
#include "profiler/timer.h"
#include "tuner/evaluate.h"
#include "tuner/plan.h"

namespace attntune {

/// One problem of a tune: a variant at a sequence length, in the order a process's own
/// tune searches them (lengths outer, variants inner).
struct TuneProblem {
  int64_t L = 0;
  size_t variant = 0;  // index into TunePlan::variants
  Shape shape;
  std::string name;  // "dense L=1024", "dma_decode decode L=512"
};
std::vector<TuneProblem> TuneProblems(const TunePlan& plan);

/// What a slot evaluates: one candidate of one problem of the plan every slot holds.
struct CandidateTask {
  int64_t ticket = 0;   // the run loop's number, echoed in the outcome
  int64_t problem = 0;  // index into TuneProblems(plan)
  std::string impl;     // the implementation's id
  Params params;        // complete: the variant's parameters and the tunables
  /// Problems before this index are done: their inputs and references may be freed.
  int64_t first_open_problem = 0;
  /// Time it again only (tuner/confirm.h): its output is not checked against the
  /// reference (it was when its trial was stored) and no quality is measured.
  bool retime = false;
};

/// Something that happened in a pool: a task finished, or a slot is gone.
struct PoolEvent {
  enum class Kind { kDone, kLost };
  Kind kind = Kind::kDone;
  int slot = 0;
  int64_t ticket = 0;   // kDone: the task; kLost: the task it held (0: none)
  TrialResult result;   // kDone
  std::string why;      // kLost: what became of the slot, one line
};

class WorkerPool {
 public:
  virtual ~WorkerPool() = default;
  virtual int Slots() const = 0;
  /// The device slot `slot` evaluates on.
  virtual DeviceInfo Device(int slot) const = 0;
  /// How messages name the slot ("rank 2").
  virtual std::string Name(int slot) const = 0;
  /// Starts `task` on `slot`, which is idle and not lost.
  virtual void Submit(int slot, const CandidateTask& task) = 0;
  /// The next finished task or lost slot; nullopt when `max_seconds` pass first.
  virtual std::optional<PoolEvent> Wait(double max_seconds) = 0;
};

/// Evaluates the candidates of a plan's problems on this process's device: each
/// problem's inputs and references built on first use, shared by the problems of one
/// shape and length, and freed once their problems are done.
class CandidateRunner {
 public:
  CandidateRunner(const TunePlan& plan, Timer& timer);
  TrialResult Run(const CandidateTask& task);

 private:
  const TunePlan& plan_;
  Timer& timer_;
  std::vector<TuneProblem> problems_;
  struct Context {
    int64_t last_problem = 0;  // the last problem index that uses it
    std::unique_ptr<ProblemContext> context;
  };
  std::map<std::pair<int64_t, int64_t>, Context> contexts_;  // by (L, Lq)
};

/// Slots in this process, each evaluating a task when it is submitted (one slot: a
/// process's own tune). Several slots, on devices of the caller's choice, stand in for
/// ranks in tests: a batch is asked before any of it is told, as on many ranks.
class InlinePool : public WorkerPool {
 public:
  InlinePool(CandidateRunner& runner, std::vector<DeviceInfo> devices);
  int Slots() const override { return static_cast<int>(devices_.size()); }
  DeviceInfo Device(int slot) const override { return devices_[static_cast<size_t>(slot)]; }
  std::string Name(int slot) const override { return "slot " + std::to_string(slot); }
  void Submit(int slot, const CandidateTask& task) override;
  std::optional<PoolEvent> Wait(double max_seconds) override;
  /// Tests: the next task submitted to `slot` is lost with it instead of evaluated.
  void LoseOnNextTask(int slot) { lose_.push_back(slot); }
  /// Every task submitted so far, in order, with its slot.
  const std::vector<std::pair<int, CandidateTask>>& Submitted() const { return submitted_; }

 private:
  CandidateRunner& runner_;
  std::vector<DeviceInfo> devices_;
  std::deque<PoolEvent> done_;
  std::vector<int> lose_;
  std::vector<std::pair<int, CandidateTask>> submitted_;
};

}  // namespace attntune
