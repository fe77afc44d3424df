#include "profiler/cuda/cupti_activity.h"

#include <cuda_runtime_api.h>

#include <atomic>
#include <cstdlib>
#include <stdexcept>

#include "profiler/cuda/cupti_callbacks.h"

namespace attntune {
namespace {

std::atomic<DroppedCountFn> g_dropped_fn{&cuptiActivityGetNumDroppedRecords};

std::string CuptiError(CUptiResult result, const std::string& call) {
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr) text = "?";
  return call + ": " + text + " (" + std::to_string(static_cast<int>(result)) + ")";
}

std::string CudaError(cudaError_t error, const std::string& call) {
  return call + ": " + cudaGetErrorName(error) + " (" + std::to_string(static_cast<int>(error)) +
         ")";
}

void Decode(const CUpti_Activity* record, ActivityLedger& ledger) {
  switch (record->kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL: {
      const auto* k = reinterpret_cast<const CUpti_ActivityKernel10*>(record);
      KernelRecord out;
      out.correlation_id = k->correlationId;
      out.start_ns = k->start;
      out.end_ns = k->end;
      out.name = k->name != nullptr ? k->name : "";
      ledger.AddKernel(out);
      break;
    }
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION: {
      const auto* e = reinterpret_cast<const CUpti_ActivityExternalCorrelation*>(record);
      if (e->externalKind == CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0) {
        ledger.AddExternalCorrelation(e->externalId, e->correlationId);
      }
      break;
    }
    default:
      break;  // kinds attntune did not enable
  }
}

/// Bytes of a record of `kind` in an activity buffer, 0 for kinds attntune ignores.
size_t RecordSize(CUpti_ActivityKind kind) {
  switch (kind) {
    case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
    case CUPTI_ACTIVITY_KIND_KERNEL:
      return sizeof(CUpti_ActivityKernel10);
    case CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION:
      return sizeof(CUpti_ActivityExternalCorrelation);
    default:
      return 0;
  }
}

}  // namespace

ActivityLedger& CuptiLedger() {
  static ActivityLedger ledger;
  return ledger;
}

void SetDroppedCountFnForTesting(DroppedCountFn fn) {
  g_dropped_fn = fn != nullptr ? fn : &cuptiActivityGetNumDroppedRecords;
}

void CUPTIAPI CuptiBufferRequested(uint8_t** buffer, size_t* size, size_t* max_records) {
  // CUPTI requires 8-byte alignment (ACTIVITY_RECORD_ALIGNMENT).
  *buffer = static_cast<uint8_t*>(std::aligned_alloc(8, kCuptiBufferBytes));
  *size = *buffer != nullptr ? kCuptiBufferBytes : 0;
  *max_records = 0;  // as many as fit
}

void CUPTIAPI CuptiBufferCompleted(CUcontext context, uint32_t stream_id, uint8_t* buffer,
                                   size_t /*size*/, size_t valid_size) {
  ActivityLedger& ledger = CuptiLedger();
  CUpti_Activity* record = nullptr;
  size_t parsed_end = 0;  // end of the last record of a kind whose size attntune knows
  while (buffer != nullptr && valid_size > 0) {
    const CUptiResult status = cuptiActivityGetNextRecord(buffer, valid_size, &record);
    if (status == CUPTI_SUCCESS) {
      Decode(record, ledger);
      const size_t size = RecordSize(record->kind);
      const size_t offset = static_cast<size_t>(reinterpret_cast<uint8_t*>(record) - buffer);
      parsed_end = size > 0 ? offset + size : valid_size;  // unknown kind: trust CUPTI
      continue;
    }
    // CUPTI ends the walk silently at a truncated last record: bytes left over after
    // the last whole record mean a record was lost.
    if (status != CUPTI_ERROR_MAX_LIMIT_REACHED || parsed_end < valid_size) {
      ledger.AddMalformedBuffer();
    }
    break;
  }
  size_t dropped = 0;
  if (g_dropped_fn.load()(context, stream_id, &dropped) == CUPTI_SUCCESS && dropped > 0) {
    ledger.AddDropped(dropped);
  }
  std::free(buffer);
}

std::string StartCuptiActivity() {
  uint8_t per_thread = 1;
  size_t value_size = sizeof(per_thread);
  CUptiResult r = cuptiActivitySetAttribute(CUPTI_ACTIVITY_ATTR_PER_THREAD_ACTIVITY_BUFFER,
                                            &value_size, &per_thread);
  if (r != CUPTI_SUCCESS)
    return CuptiError(r, "cuptiActivitySetAttribute(PER_THREAD_ACTIVITY_BUFFER)");
  r = cuptiActivityRegisterCallbacks(&CuptiBufferRequested, &CuptiBufferCompleted);
  if (r != CUPTI_SUCCESS) return CuptiError(r, "cuptiActivityRegisterCallbacks");
  r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  if (r != CUPTI_SUCCESS) return CuptiError(r, "cuptiActivityEnable(CONCURRENT_KERNEL)");
  r = cuptiActivityEnable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  if (r != CUPTI_SUCCESS) {
    cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
    return CuptiError(r, "cuptiActivityEnable(EXTERNAL_CORRELATION)");
  }
  // External correlation records are emitted beside the records of the API calls made
  // while an id is pushed: without an API kind enabled CUPTI writes none (seen on an
  // H100, CUDA 13.0, driver 580). The runtime and driver records themselves are ignored.
  for (const CUpti_ActivityKind kind : {CUPTI_ACTIVITY_KIND_RUNTIME, CUPTI_ACTIVITY_KIND_DRIVER}) {
    r = cuptiActivityEnable(kind);
    if (r != CUPTI_SUCCESS) {
      StopCuptiActivity();
      return CuptiError(r, kind == CUPTI_ACTIVITY_KIND_RUNTIME ? "cuptiActivityEnable(RUNTIME)"
                                                               : "cuptiActivityEnable(DRIVER)");
    }
  }
  return "";
}

void StopCuptiActivity() {
  cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_EXTERNAL_CORRELATION);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_RUNTIME);
  cuptiActivityDisable(CUPTI_ACTIVITY_KIND_DRIVER);
}

std::string BeginCandidate(uint64_t external_id) {
  const CUptiResult r =
      cuptiActivityPushExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, external_id);
  return r == CUPTI_SUCCESS ? "" : CuptiError(r, "cuptiActivityPushExternalCorrelationId");
}

std::string EndCandidate() {
  uint64_t last = 0;
  const CUptiResult r =
      cuptiActivityPopExternalCorrelationId(CUPTI_EXTERNAL_CORRELATION_KIND_CUSTOM0, &last);
  return r == CUPTI_SUCCESS ? "" : CuptiError(r, "cuptiActivityPopExternalCorrelationId");
}

std::string FlushCuptiActivity() {
  const CUptiResult r = cuptiActivityFlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
  return r == CUPTI_SUCCESS ? "" : CuptiError(r, "cuptiActivityFlushAll");
}

double CuptiTimer::TimeMs(const std::function<void()>& fn) {
  last_span_ms_.reset();
  last_select_ms_.reset();
  const uint64_t id = next_id_++;
  std::string error = BeginCandidate(id);
  if (!error.empty()) throw std::runtime_error(error);
  fn();
  error = EndCandidate();
  if (!error.empty()) throw std::runtime_error(error);
  const cudaError_t sync = cudaDeviceSynchronize();
  if (sync != cudaSuccess) throw std::runtime_error(CudaError(sync, "cudaDeviceSynchronize"));
  error = FlushCuptiActivity();
  if (!error.empty()) throw std::runtime_error(error);
  const std::string problems = CuptiLedger().TakeProblems();
  if (!problems.empty()) throw std::runtime_error(problems);
  const CandidateKernels kernels = CuptiLedger().Take(id);
  const std::string why = kernels.TimingProblem();
  if (!why.empty()) {
    throw std::runtime_error("CUPTI recorded " + why + " for candidate " + std::to_string(id) +
                             " (" + CuptiLedger().Counts() + ")");
  }
  last_span_ms_ = kernels.SpanMs();
  if (is_selection_) last_select_ms_ = kernels.MsWhere(is_selection_);
  return kernels.TotalMs();
}

namespace {

// The recorders' external ids, apart from the timers' (which count from 1).
std::atomic<uint64_t> g_next_recorder_id{uint64_t{1} << 62};

}  // namespace

CuptiLaunchRecorder::CuptiLaunchRecorder(std::function<std::string(const std::string&)> name_of)
    : id_(g_next_recorder_id++), name_of_(std::move(name_of)) {
  open_ = BeginCandidate(id_).empty();
}

CuptiLaunchRecorder::~CuptiLaunchRecorder() {
  if (open_) EndCandidate();
}

void CuptiLaunchRecorder::Finish() const {
  if (!open_) return;
  open_ = false;
  EndCandidate();
  if (cudaDeviceSynchronize() != cudaSuccess || !FlushCuptiActivity().empty()) return;
  for (const KernelRecord& k : CuptiLedger().Take(id_).kernels) {
    const std::string phase = name_of_ ? name_of_(k.name) : "";
    // A record that does not end after it starts adds nothing (unsigned, it would wrap).
    const uint64_t ns = k.end_ns > k.start_ns ? k.end_ns - k.start_ns : 0;
    events_.push_back({phase.empty() ? k.name : phase, "cuda", static_cast<double>(ns) * 1e-6});
  }
}

std::vector<KernelEvent> CuptiLaunchRecorder::Events() const {
  Finish();
  return events_;
}

std::unique_ptr<Timer> MakeGpuTimer(std::string* why_not_cupti,
                                    std::function<bool(const std::string&)> is_selection) {
  *why_not_cupti = StartCuptiActivity();
  if (why_not_cupti->empty()) return std::make_unique<CuptiTimer>(std::move(is_selection));
  return std::make_unique<CudaEventTimer>();
}

double CudaEventTimer::TimeMs(const std::function<void()>& fn) {
  cudaEvent_t start = nullptr, stop = nullptr;
  cudaError_t e = cudaEventCreate(&start);
  if (e != cudaSuccess) throw std::runtime_error(CudaError(e, "cudaEventCreate"));
  e = cudaEventCreate(&stop);
  if (e != cudaSuccess) {
    cudaEventDestroy(start);
    throw std::runtime_error(CudaError(e, "cudaEventCreate"));
  }
  float ms = 0.f;
  e = cudaEventRecord(start, nullptr);
  if (e == cudaSuccess) {
    fn();
    e = cudaEventRecord(stop, nullptr);
  }
  if (e == cudaSuccess) e = cudaEventSynchronize(stop);
  if (e == cudaSuccess) e = cudaEventElapsedTime(&ms, start, stop);
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (e != cudaSuccess) throw std::runtime_error(CudaError(e, "cudaEvent timing"));
  return ms;
}

}  // namespace attntune
