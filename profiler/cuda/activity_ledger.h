// Attribution of CUPTI kernel records to tuning candidates. Plain C++, no CUPTI header:
// the buffer-completion callback (cupti_activity.cpp) decodes records into this ledger;
// the attribution rules are tested with fabricated records on any machine.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace attntune {

/// One kernel execution as CUPTI reported it (times in ns on CUPTI's clock).
struct KernelRecord {
  uint32_t correlation_id = 0;
  uint64_t start_ns = 0;
  uint64_t end_ns = 0;  // 0 (with start 0): CUPTI had no device memory to time it
  std::string name;
};

/// The kernels of one candidate (one external correlation id), in start order.
struct CandidateKernels {
  std::vector<KernelRecord> kernels;
  int untimed = 0;  // records with zero timestamps
  /// The kernels' durations summed (what the device spent in them).
  double TotalMs() const;
  /// From the first kernel's start to the last one's end (0 with none timed): the device's
  /// wall time for them, less any overlap and with every gap between launches (where it
  /// waited for the host's next launch, or ran work CUPTI does not record as a kernel).
  double SpanMs() const;
  /// The durations of the kernels whose names `which` takes, summed (TotalMs' part).
  double MsWhere(const std::function<bool(const std::string&)>& which) const;
  /// Why these kernels' time is not the repetition's, "" when it is: none recorded, or
  /// some without timestamps or ending before they start (a sum that left them out, as
  /// TotalMs does, would be too small).
  std::string TimingProblem() const;
};

/// Thread-safe store of the records of every completed buffer. Kernel and external
/// correlation records may arrive in any order and in different buffers: attribution
/// joins them by correlation id only when asked.
class ActivityLedger {
 public:
  void AddKernel(const KernelRecord& record);
  void AddExternalCorrelation(uint64_t external_id, uint32_t correlation_id);
  /// Records CUPTI reported as dropped (buffer full, no buffer given).
  void AddDropped(size_t count);
  void AddMalformedBuffer();

  /// Kernels per external id; kernels whose correlation id has no external record are
  /// counted in Unattributed().
  std::map<uint64_t, CandidateKernels> Attribute() const;
  /// The kernels of `external_id` (as Attribute gives them), removed from the ledger with
  /// its correlation records, so that the ledger does not grow with every repetition.
  CandidateKernels Take(uint64_t external_id);
  size_t Unattributed() const;
  size_t Dropped() const;
  size_t MalformedBuffers() const;
  /// "" when every record arrived; else one line naming what was lost.
  std::string Problems() const;
  /// Problems(), with the losses counted so far then forgotten: the repetition that finds
  /// them fails, and the next ones, whose records came after, are timed (a lost record
  /// made every later repetition fail, ending a tune).
  std::string TakeProblems();
  /// "K kernel records, E external records, U unattributed": for error messages.
  std::string Counts() const;
  void Clear();

 private:
  mutable std::mutex mutex_;
  std::vector<KernelRecord> kernels_;
  std::map<uint32_t, uint64_t> external_of_;  // correlation id -> external id
  size_t dropped_ = 0;
  size_t malformed_ = 0;
};

}  // namespace attntune
