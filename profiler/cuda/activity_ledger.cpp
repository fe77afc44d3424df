#include "profiler/cuda/activity_ledger.h"

#include <algorithm>
#include <iterator>

namespace attntune {

double CandidateKernels::TotalMs() const {
  uint64_t ns = 0;
  for (const KernelRecord& k : kernels) {
    if (k.end_ns > k.start_ns) ns += k.end_ns - k.start_ns;
  }
  return static_cast<double>(ns) * 1e-6;
}

double CandidateKernels::MsWhere(const std::function<bool(const std::string&)>& which) const {
  uint64_t ns = 0;
  for (const KernelRecord& k : kernels) {
    if (k.end_ns > k.start_ns && which(k.name)) ns += k.end_ns - k.start_ns;
  }
  return static_cast<double>(ns) * 1e-6;
}

double CandidateKernels::SpanMs() const {
  uint64_t first = 0, last = 0;
  bool any = false;
  for (const KernelRecord& k : kernels) {
    if (k.end_ns <= k.start_ns) continue;  // untimed
    first = any ? std::min(first, k.start_ns) : k.start_ns;
    last = any ? std::max(last, k.end_ns) : k.end_ns;
    any = true;
  }
  return any ? static_cast<double>(last - first) * 1e-6 : 0.0;
}

std::string CandidateKernels::TimingProblem() const {
  if (untimed > 0) {
    return std::to_string(untimed) + (untimed == 1 ? " kernel" : " kernels") +
           " without timestamps (CUPTI had no device memory to time them)";
  }
  for (const KernelRecord& k : kernels) {
    if (k.end_ns <= k.start_ns) return "a kernel (" + k.name + ") that does not end after it starts";
  }
  return kernels.empty() ? "no timed kernel" : "";
}

void ActivityLedger::AddKernel(const KernelRecord& record) {
  std::lock_guard<std::mutex> lock(mutex_);
  kernels_.push_back(record);
}

void ActivityLedger::AddExternalCorrelation(uint64_t external_id, uint32_t correlation_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  external_of_[correlation_id] = external_id;
}

void ActivityLedger::AddDropped(size_t count) {
  std::lock_guard<std::mutex> lock(mutex_);
  dropped_ += count;
}

void ActivityLedger::AddMalformedBuffer() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++malformed_;
}

std::map<uint64_t, CandidateKernels> ActivityLedger::Attribute() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::map<uint64_t, CandidateKernels> out;
  for (const KernelRecord& k : kernels_) {
    const auto external = external_of_.find(k.correlation_id);
    if (external == external_of_.end()) continue;
    CandidateKernels& c = out[external->second];
    if (k.start_ns == 0 && k.end_ns == 0) {
      ++c.untimed;
      continue;
    }
    c.kernels.push_back(k);
  }
  for (auto& entry : out) {
    std::sort(entry.second.kernels.begin(), entry.second.kernels.end(),
              [](const KernelRecord& a, const KernelRecord& b) { return a.start_ns < b.start_ns; });
  }
  return out;
}

CandidateKernels ActivityLedger::Take(uint64_t external_id) {
  std::lock_guard<std::mutex> lock(mutex_);
  CandidateKernels out;
  std::vector<KernelRecord> kept;
  for (KernelRecord& k : kernels_) {
    const auto external = external_of_.find(k.correlation_id);
    if (external == external_of_.end() || external->second != external_id) {
      kept.push_back(std::move(k));
    } else if (k.start_ns == 0 && k.end_ns == 0) {
      ++out.untimed;
    } else {
      out.kernels.push_back(std::move(k));
    }
  }
  kernels_ = std::move(kept);
  for (auto it = external_of_.begin(); it != external_of_.end();) {
    it = it->second == external_id ? external_of_.erase(it) : std::next(it);
  }
  std::sort(out.kernels.begin(), out.kernels.end(),
            [](const KernelRecord& a, const KernelRecord& b) { return a.start_ns < b.start_ns; });
  return out;
}

size_t ActivityLedger::Unattributed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (const KernelRecord& k : kernels_) n += external_of_.count(k.correlation_id) == 0;
  return n;
}

size_t ActivityLedger::Dropped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_;
}

size_t ActivityLedger::MalformedBuffers() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return malformed_;
}

std::string ActivityLedger::Counts() const {
  size_t kernels = 0, externals = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    kernels = kernels_.size();
    externals = external_of_.size();
  }
  return std::to_string(kernels) + " kernel records, " + std::to_string(externals) +
         " external records, " + std::to_string(Unattributed()) + " unattributed";
}

namespace {

std::string LostLine(size_t dropped, size_t malformed) {
  if (dropped == 0 && malformed == 0) return "";
  return "CUPTI lost activity records: " + std::to_string(dropped) + " dropped, " +
         std::to_string(malformed) + " buffers with invalid records";
}

}  // namespace

std::string ActivityLedger::Problems() const { return LostLine(Dropped(), MalformedBuffers()); }

std::string ActivityLedger::TakeProblems() {
  std::lock_guard<std::mutex> lock(mutex_);
  const std::string line = LostLine(dropped_, malformed_);
  dropped_ = 0;
  malformed_ = 0;
  return line;
}

void ActivityLedger::Clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  kernels_.clear();
  external_of_.clear();
  dropped_ = 0;
  malformed_ = 0;
}

}  // namespace attntune
