#include "parallel/task_queue.h"

#include <exception>
#include <utility>

namespace attntune {

void TaskQueue::Push(CandidateTask task) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    tasks_.push_back(std::move(task));
  }
  ready_.notify_one();
}

std::optional<CandidateTask> TaskQueue::Next() {
  std::unique_lock<std::mutex> lock(mutex_);
  ready_.wait(lock, [this] { return closed_ || !tasks_.empty(); });
  if (closed_) return std::nullopt;
  CandidateTask task = std::move(tasks_.front());
  tasks_.pop_front();
  return task;
}

void TaskQueue::Close() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    closed_ = true;
  }
  ready_.notify_all();
}

void TaskQueue::Finish(Outcome outcome) {
  std::lock_guard<std::mutex> lock(mutex_);
  outcomes_.push_back(std::move(outcome));
}

std::optional<TaskQueue::Outcome> TaskQueue::TakeOutcome() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (outcomes_.empty()) return std::nullopt;
  Outcome outcome = std::move(outcomes_.front());
  outcomes_.pop_front();
  return outcome;
}

std::string ServeTasks(TaskQueue& queue, CandidateRunner& runner) {
  while (std::optional<CandidateTask> task = queue.Next()) {
    TaskQueue::Outcome outcome;
    outcome.ticket = task->ticket;
    try {
      outcome.result = runner.Run(*task);
    } catch (const std::exception& e) {
      outcome.failed = true;
      outcome.why = e.what();
    }
    const bool failed = outcome.failed;
    std::string why = outcome.why;
    queue.Finish(std::move(outcome));
    if (failed) return why;
  }
  return "";
}

}  // namespace attntune
