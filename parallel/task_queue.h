// Candidates handed from the thread that talks to the other ranks to the thread that
// evaluates them (the process's main thread, which holds its device: a CUDA device is
// selected per thread), and their results back.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>

#include "tuner/pool.h"

namespace attntune {

class TaskQueue {
 public:
  /// Queues a task for the evaluator.
  void Push(CandidateTask task);
  /// The evaluator's next task, waiting for one; nullopt once the queue is closed.
  std::optional<CandidateTask> Next();
  /// No more tasks: Next() returns nullopt from now on.
  void Close();

  struct Outcome {
    int64_t ticket = 0;
    bool failed = false;  // the evaluation threw: `why` says what
    TrialResult result;
    std::string why;
  };
  /// The evaluator's answer to a task.
  void Finish(Outcome outcome);
  /// An answer, if one is waiting (does not wait).
  std::optional<Outcome> TakeOutcome();

 private:
  std::mutex mutex_;
  std::condition_variable ready_;
  std::deque<CandidateTask> tasks_;
  std::deque<Outcome> outcomes_;
  bool closed_ = false;
};

/// The evaluator: runs each task of `queue` with `runner` until the queue is closed. An
/// evaluation that throws is answered as failed and ends the serving (the rank's device
/// is in an unknown state); returns its message then, else "".
std::string ServeTasks(TaskQueue& queue, CandidateRunner& runner);

}  // namespace attntune
