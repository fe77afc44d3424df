// Kernel times from the CUPTI Activity API: CONCURRENT_KERNEL records, each candidate's
// launches tagged with an external correlation id, per-thread 8-byte-aligned buffers,
// a forced flush after synchronising, dropped records counted. Plain C++ header.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <functional>
#include <string>
#include <vector>

#include "profiler/cuda/activity_ledger.h"
#include "profiler/launches.h"
#include "profiler/timer.h"

namespace attntune {

/// Size of each activity buffer handed to CUPTI.
constexpr size_t kCuptiBufferBytes = 8 << 20;

/// The ledger the buffer-completion callback fills (one per process: CUPTI callbacks
/// carry no user data).
ActivityLedger& CuptiLedger();

/// Enables CONCURRENT_KERNEL and EXTERNAL_CORRELATION records and registers the
/// callbacks; "" or the reason CUPTI cannot trace ("cuptiActivityEnable
/// (CONCURRENT_KERNEL): CUPTI_ERROR_UNKNOWN (999)").
std::string StartCuptiActivity();
/// Flushes every buffer (forced) and disables the kinds again.
void StopCuptiActivity();
/// Tags the launches of the calling thread with `external_id` until EndCandidate().
std::string BeginCandidate(uint64_t external_id);
std::string EndCandidate();
/// Delivers every buffer, including incomplete ones, to the completion callback.
std::string FlushCuptiActivity();

/// Timer over CUPTI: runs fn under a fresh external id, synchronises, flushes, and
/// returns the summed kernel time of that id (LastSpanMs: their span; LastSelectMs, given
/// `is_selection`: the part in the kernels it takes). Throws std::runtime_error when
/// records were lost or a kernel of fn was not timed.
class CuptiTimer : public Timer {
 public:
  explicit CuptiTimer(std::function<bool(const std::string&)> is_selection = {})
      : is_selection_(std::move(is_selection)) {}
  std::string Name() const override { return "cupti-activity"; }
  double TimeMs(const std::function<void()>& fn) override;
  std::optional<double> LastSpanMs() const override { return last_span_ms_; }
  std::optional<double> LastSelectMs() const override { return last_select_ms_; }

 private:
  uint64_t next_id_ = 1;
  std::function<bool(const std::string&)> is_selection_;
  std::optional<double> last_span_ms_;
  std::optional<double> last_select_ms_;
};

/// Records the kernels of the work done while it is alive from CUPTI's activity records
/// (under an external id of its own; activity tracing must have been started, else it
/// records nothing): in start order, kind "cuda", each named `name_of(kernel name)`, or
/// by its own name where that gives "".
class CuptiLaunchRecorder : public LaunchRecorder {
 public:
  explicit CuptiLaunchRecorder(std::function<std::string(const std::string&)> name_of);
  ~CuptiLaunchRecorder() override;
  CuptiLaunchRecorder(const CuptiLaunchRecorder&) = delete;
  CuptiLaunchRecorder& operator=(const CuptiLaunchRecorder&) = delete;
  /// Ends the recording on its first call (synchronises the device and flushes CUPTI).
  std::vector<KernelEvent> Events() const override;

 private:
  void Finish() const;
  uint64_t id_;
  std::function<std::string(const std::string&)> name_of_;
  mutable bool open_ = false;
  mutable std::vector<KernelEvent> events_;
};

/// Timer over CUDA events on the default stream (the fallback without CUPTI).
class CudaEventTimer : public Timer {
 public:
  std::string Name() const override { return "cuda-events"; }
  double TimeMs(const std::function<void()>& fn) override;
};

/// The GPU timer to wire in: CuptiTimer when CUPTI tracing starts, else CudaEventTimer;
/// `why_not_cupti` receives the reason CUPTI was not used ("" when it is); the CUPTI timer
/// gives the time of the kernels `is_selection` takes (LastSelectMs) where it is given.
std::unique_ptr<Timer> MakeGpuTimer(std::string* why_not_cupti,
                                    std::function<bool(const std::string&)> is_selection = {});

}  // namespace attntune
