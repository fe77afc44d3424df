// The CUDA device fingerprint (runtime API) and the clocks recorded with each GPU
// measurement (NVML, loaded at run time so that attntune needs no driver library to start).
#include <cuda_runtime_api.h>
#include <dlfcn.h>

#include <cstdio>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>

#include "profiler/cuda/cuda_probe.h"

namespace attntune {
namespace {

void Check(cudaError_t error, const char* call) {
  if (error != cudaSuccess) {
    throw std::runtime_error(std::string(call) + ": " + cudaGetErrorName(error));
  }
}

int Attribute(cudaDeviceAttr attr, int index) {
  int value = 0;
  Check(cudaDeviceGetAttribute(&value, attr, index), "cudaDeviceGetAttribute");
  return value;
}

std::string UuidText(const cudaUUID_t& uuid) {
  std::string text = "GPU-";
  char hex[3];
  for (int i = 0; i < 16; ++i) {
    std::snprintf(hex, sizeof hex, "%02x", static_cast<unsigned char>(uuid.bytes[i]));
    text += hex;
    if (i == 3 || i == 5 || i == 7 || i == 9) text += '-';
  }
  return text;
}

// The few NVML entry points attntune reads, by their C signatures (nvml.h is not part of
// the toolkit here; the ABI is stable: these symbols exist since NVML 5).
using NvmlInit = int (*)();
using NvmlHandleByPci = int (*)(const char*, void**);
using NvmlClock = int (*)(void*, int, unsigned*);
using NvmlTemperature = int (*)(void*, int, unsigned*);
using NvmlReasons = int (*)(void*, unsigned long long*);

struct Nvml {
  bool ok = false;
  NvmlHandleByPci handle_by_pci = nullptr;
  NvmlClock clock = nullptr;
  NvmlTemperature temperature = nullptr;
  NvmlReasons reasons = nullptr;
};

const Nvml& LoadNvml() {
  static const Nvml nvml = [] {
    Nvml n;
    void* lib = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) return n;
    auto init = reinterpret_cast<NvmlInit>(dlsym(lib, "nvmlInit_v2"));
    n.handle_by_pci = reinterpret_cast<NvmlHandleByPci>(dlsym(lib, "nvmlDeviceGetHandleByPciBusId_v2"));
    n.clock = reinterpret_cast<NvmlClock>(dlsym(lib, "nvmlDeviceGetClockInfo"));
    n.temperature = reinterpret_cast<NvmlTemperature>(dlsym(lib, "nvmlDeviceGetTemperature"));
    n.reasons = reinterpret_cast<NvmlReasons>(dlsym(lib, "nvmlDeviceGetCurrentClocksEventReasons"));
    if (n.reasons == nullptr) {
      n.reasons = reinterpret_cast<NvmlReasons>(dlsym(lib, "nvmlDeviceGetCurrentClocksThrottleReasons"));
    }
    n.ok = init != nullptr && n.handle_by_pci != nullptr && n.clock != nullptr && init() == 0;
    return n;
  }();
  return nvml;
}

std::string PciBusId(int index) {
  char bus[32] = {0};
  if (cudaDeviceGetPCIBusId(bus, sizeof bus, index) != cudaSuccess) return "";
  return bus;
}

}  // namespace

DeviceInfo CudaDeviceRuntime(int index) {
  cudaDeviceProp prop{};
  Check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
  int driver = 0, runtime = 0;
  Check(cudaDriverGetVersion(&driver), "cudaDriverGetVersion");
  Check(cudaRuntimeGetVersion(&runtime), "cudaRuntimeGetVersion");
  nlohmann::ordered_json f;
  f["kind"] = "cuda";
  f["name"] = prop.name;
  f["uuid"] = UuidText(prop.uuid);
  f["sm"] = prop.major * 10 + prop.minor;
  f["multiprocessors"] = prop.multiProcessorCount;
  f["global_memory_bytes"] = static_cast<long long>(prop.totalGlobalMem);
  f["l2_bytes"] = prop.l2CacheSize;
  f["smem_per_block_optin"] = static_cast<long long>(prop.sharedMemPerBlockOptin);
  f["smem_per_sm"] = static_cast<long long>(prop.sharedMemPerMultiprocessor);
  f["regs_per_sm"] = prop.regsPerMultiprocessor;
  f["max_sm_clock_khz"] = Attribute(cudaDevAttrClockRate, index);
  f["max_mem_clock_khz"] = Attribute(cudaDevAttrMemoryClockRate, index);
  f["memory_bus_bits"] = prop.memoryBusWidth;
  f["ecc"] = prop.ECCEnabled != 0;
  f["pci_bus_id"] = PciBusId(index);
  f["driver_version"] = driver;
  f["runtime_version"] = runtime;
  DeviceInfo info;
  info.kind = "cuda";
  info.name = prop.name;
  info.fingerprint_json = f.dump();
  info.unit_fields = {"uuid", "pci_bus_id"};
  return info;
}

std::map<std::string, double> ReadGpuClocksRuntime(int index) {
  std::map<std::string, double> out;
  const Nvml& nvml = LoadNvml();
  if (!nvml.ok) return out;
  const std::string bus = PciBusId(index);
  void* device = nullptr;
  if (bus.empty() || nvml.handle_by_pci(bus.c_str(), &device) != 0) return out;
  unsigned value = 0;
  if (nvml.clock(device, /*NVML_CLOCK_SM*/ 1, &value) == 0) out["sm_clock_mhz"] = value;
  if (nvml.clock(device, /*NVML_CLOCK_MEM*/ 2, &value) == 0) out["mem_clock_mhz"] = value;
  if (nvml.temperature != nullptr && nvml.temperature(device, /*NVML_TEMPERATURE_GPU*/ 0, &value) == 0)
    out["gpu_temp_c"] = value;
  unsigned long long reasons = 0;
  if (nvml.reasons != nullptr && nvml.reasons(device, &reasons) == 0)
    out["clock_event_reasons"] = static_cast<double>(reasons);
  return out;
}

}  // namespace attntune
