#include "backends/cuda/cuda_backend.h"

#include <stdexcept>

#include "core/error.h"
#include "profiler/kokkos_hooks.h"
#include "kernels/cuda/cuda_implementations.h"
#include "kernels/cuda/plan.h"
#ifdef ATTNTUNE_HAVE_CUPTI
#include "profiler/cuda/cupti_activity.h"
#include "profiler/cuda/metric_set.h"
#endif

namespace attntune {
namespace {

#ifdef ATTNTUNE_HAVE_CUPTI
// CUPTI's range profiler, one pass per replay. Its first reading stops activity tracing:
// the counter passes come after every timing and the profiler replays alone.
class CuptiCounters : public CounterSource {
 public:
  CuptiCounters(int index, Dtype dtype) : index_(index), dtype_(dtype) {}
  std::map<std::string, double> Read(const std::function<void()>& launch,
                                     std::string* chip) override {
    if (tracing_) {
      StopCuptiActivity();
      tracing_ = false;
    }
    const MetricValues m = CollectRooflineMetrics(index_, launch);
    if (!m.error.empty()) throw std::runtime_error(m.error);
    if (chip) *chip = m.plan.chip;
    return RooflineValues(m.by_role, m.replays, ToString(dtype_));
  }

 private:
  int index_;
  Dtype dtype_;
  bool tracing_ = true;
};
#endif

class CudaBackend : public Backend {
 public:
  explicit CudaBackend(int index) : index_(index) {}
  DeviceId Id() const override { return DeviceId{"cuda", index_}; }
  std::string Platform() const override { return kCudaPlatform; }
  DeviceInfo Device() const override { return CudaDevice(index_); }
  std::vector<Dtype> Dtypes() const override { return {Dtype::kF16, Dtype::kBf16}; }
  std::unique_ptr<Timer> MakeTimer(std::string* note) override {
#ifdef ATTNTUNE_HAVE_CUPTI
    std::string why;
    // The selection's kernels (attntune_select_*, CUB's) named apart: each timed
    // repetition's selection phase beside its total (select_ms).
    std::unique_ptr<Timer> timer = MakeGpuTimer(&why, [](const std::string& kernel) {
      return !cuda_plan::SelectionPhaseOf(kernel).empty();
    });
    if (note) *note = timer->Name() + (why.empty() ? "" : " (CUPTI unavailable: " + why + ")");
    return timer;
#else
    (void)note;
    throw UserError("--device " + Id().ToString() + ": this attntune was built without CUPTI");
#endif
  }
  MeasureHooks Hooks(bool flush_l2) const override {
    MeasureHooks hooks;
    if (flush_l2) hooks.before_each = [] { FlushL2(); };
    const int index = index_;
    hooks.after_measure = [index, flush_l2](std::map<std::string, double>* metrics) {
      for (const auto& [name, value] : ReadGpuClocks(index)) (*metrics)[name] = value;
      (*metrics)["l2_flushed"] = flush_l2 ? 1 : 0;
    };
    // What a checked run launched: the kernels CUPTI recorded (the selection's named by
    // their phase, attntune::select::*, so that bench's select_ms is their time), after
    // any Kokkos dispatches on the host.
    hooks.record_launches = []() -> std::unique_ptr<LaunchRecorder> {
      std::vector<std::unique_ptr<LaunchRecorder>> parts;
      parts.push_back(std::make_unique<KernelCapture>());
#ifdef ATTNTUNE_HAVE_CUPTI
      parts.push_back(std::make_unique<CuptiLaunchRecorder>(&cuda_plan::SelectionPhaseOf));
#endif
      return std::make_unique<CombinedRecorder>(std::move(parts));
    };
    return hooks;
  }
  std::unique_ptr<CounterSource> MakeCounters(Dtype dtype, std::string* why_not) override {
#ifdef ATTNTUNE_HAVE_CUPTI
    (void)why_not;
    return std::make_unique<CuptiCounters>(index_, dtype);
#else
    (void)dtype;
    *why_not = "this attntune was built without CUPTI";
    return nullptr;
#endif
  }

 private:
  int index_;
};

}  // namespace

std::unique_ptr<Backend> OpenCudaBackend(const DeviceId& id, const std::string& what) {
  const CudaProbe probe = ProbeCuda();
  if (!probe.usable) throw UserError(what + ": " + probe.reason);
  if (id.index >= probe.device_count)
    throw UserError(what + ": only " + std::to_string(probe.device_count) +
                    " CUDA device(s) present");
  if (!CudaKernelsBuilt()) throw UserError(what + ": this attntune was built without CUDA kernels");
  const std::string error = SelectCudaDevice(id.index);
  if (!error.empty()) throw UserError(what + ": " + error);
  return std::make_unique<CudaBackend>(id.index);
}

std::vector<std::string> DescribeCudaDevices() {
  const CudaProbe probe = ProbeCuda();
  if (!probe.usable) return {"cuda: none usable: " + probe.reason};
  std::vector<std::string> lines = {
      "cuda: " + std::to_string(probe.device_count) + " device(s)" +
      (CudaKernelsBuilt() ? "" : " (this attntune was built without CUDA kernels)")};
  for (int n = 0; n < probe.device_count; ++n) {
    const DeviceInfo gpu = CudaDevice(n);
    lines.push_back("cuda:" + std::to_string(n) + ": " + gpu.name + "\n  fingerprint: " +
                    gpu.fingerprint_json);
  }
  return lines;
}

}  // namespace attntune
