#include "backends/kokkos/kokkos_backend.h"

#include "core/error.h"
#include "profiler/kokkos_hooks.h"

namespace attntune {
namespace {

class KokkosBackend : public Backend {
 public:
  DeviceId Id() const override { return DeviceId{"cpu", 0}; }
  std::string Platform() const override { return kKokkosPlatform; }
  DeviceInfo Device() const override { return CpuDevice(); }
  std::vector<Dtype> Dtypes() const override { return {Dtype::kF32}; }
  std::unique_ptr<Timer> MakeTimer(std::string* note) override {
    auto timer = std::make_unique<CpuTimer>();
    if (note) *note = timer->Name();
    return timer;
  }
  MeasureHooks Hooks(bool flush_l2) const override {
    if (flush_l2) throw UserError("--flush-l2: the cpu backend cannot flush a cache between repetitions");
    MeasureHooks hooks;
    hooks.record_launches = [] { return std::make_unique<KernelCapture>(); };
    return hooks;
  }
  std::unique_ptr<CounterSource> MakeCounters(Dtype, std::string* why_not) override {
    *why_not = "the cpu backend has no hardware counters";
    return nullptr;
  }
};

}  // namespace

std::unique_ptr<Backend> OpenKokkosBackend(const DeviceId& id, const std::string& what) {
  if (id.ToString() != "cpu") throw UserError(what + ": the CPU backend has one device, 'cpu'");
  return std::make_unique<KokkosBackend>();
}

std::vector<std::string> DescribeKokkosDevices() {
  const DeviceInfo cpu = CpuDevice();
  return {"cpu: " + cpu.name + "\n  fingerprint: " + cpu.fingerprint_json};
}

}  // namespace attntune
