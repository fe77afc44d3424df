#include "profiler/device.h"

#include <sys/resource.h>

#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <stdexcept>
#include <sstream>
#include <thread>
#include <vector>

#include "kernels/kokkos/runtime.h"
#include "core/error.h"
#include "core/files.h"

#ifdef ATTNTUNE_HAVE_CUDA
#include "profiler/cuda/cuda_probe.h"
#endif

namespace attntune {
namespace {

// The ISA extensions that change what the Kokkos kernels compile to or how fast they
// run; the rest of /proc/cpuinfo's flags would only make fingerprints differ needlessly.
constexpr const char* kIsaFlags[] = {"sse4_2",      "avx",      "avx2",     "fma",
                                     "avx512f",     "avx512bw", "avx512vl", "avx512_vnni",
                                     "avx512_bf16", "amx_tile", "neon",     "asimd"};

std::string Trim(const std::string& s) {
  const size_t begin = s.find_first_not_of(" \t");
  if (begin == std::string::npos) return "";
  const size_t end = s.find_last_not_of(" \t\r\n");
  return s.substr(begin, end - begin + 1);
}

struct CpuInfo {
  std::string model;
  std::set<std::string> flags;
};

// The first processor's block of /proc/cpuinfo ("flags" on x86, "Features" on Arm).
CpuInfo ReadCpuInfo() {
  CpuInfo info;
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  bool have_flags = false;
  while (std::getline(in, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = Trim(line.substr(0, colon));
    const std::string value = Trim(line.substr(colon + 1));
    if (info.model.empty() && (key == "model name" || key == "Hardware")) info.model = value;
    if (!have_flags && (key == "flags" || key == "Features")) {
      std::istringstream words(value);
      std::string flag;
      while (words >> flag) info.flags.insert(flag);
      have_flags = true;
    }
  }
  if (info.model.empty()) info.model = "unknown CPU";
  return info;
}

std::string ReadLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return Trim(line);
}

// {"l1d": "48K", "l2": "1280K", ...} of cpu0 from sysfs; empty where sysfs lacks it.
nlohmann::json CacheSizes() {
  nlohmann::json caches = nlohmann::json::object();
  for (int i = 0;; ++i) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(i) + "/";
    const std::string level = ReadLine(dir + "level");
    if (level.empty()) break;
    const std::string type = ReadLine(dir + "type");
    const std::string size = ReadLine(dir + "size");
    std::string name = "l" + level;
    if (type == "Data") name += "d";
    if (type == "Instruction") name += "i";
    if (!size.empty()) caches[name] = size;
  }
  return caches;
}

}  // namespace

DeviceInfo CpuDevice() {
  const CpuInfo cpu = ReadCpuInfo();
  nlohmann::json isa = nlohmann::json::array();
  for (const char* flag : kIsaFlags) {
    if (cpu.flags.count(flag)) isa.push_back(flag);
  }
  nlohmann::json fingerprint;  // an object's keys are sorted, so dump() is canonical
  fingerprint["kind"] = "cpu";
  fingerprint["model"] = cpu.model;
  fingerprint["isa"] = isa;
  fingerprint["logical_cores"] = std::thread::hardware_concurrency();
  fingerprint["kokkos"] = KokkosDescription();
  fingerprint["cache"] = CacheSizes();

  DeviceInfo info;
  info.kind = "cpu";
  info.name = cpu.model;
  info.fingerprint_json = fingerprint.dump();
  return info;
}

double HostMemoryBytes() { return PhysicalMemoryBytes(); }

DeviceInfo CudaDevice(int index) {
  const CudaProbe probe = ProbeCuda();
  if (!probe.usable) throw UserError("cuda:" + std::to_string(index) + ": " + probe.reason);
  if (index < 0 || index >= probe.device_count) {
    throw UserError("cuda:" + std::to_string(index) + ": only " +
                    std::to_string(probe.device_count) + " CUDA device(s) present");
  }
#ifdef ATTNTUNE_HAVE_CUDA
  try {
    return CudaDeviceRuntime(index);
  } catch (const std::runtime_error& e) {
    throw UserError("cuda:" + std::to_string(index) + ": " + e.what());
  }
#else
  throw UserError("this attntune was built without CUDA support");
#endif
}

std::map<std::string, double> ReadGpuClocks(int index) {
#ifdef ATTNTUNE_HAVE_CUDA
  return ReadGpuClocksRuntime(index);
#else
  (void)index;
  return {};
#endif
}

CudaProbe ProbeCuda() {
#ifdef ATTNTUNE_HAVE_CUDA
  return ProbeCudaRuntime();
#else
  CudaProbe probe;
  probe.reason = "this attntune was built without CUDA support";
  return probe;
#endif
}

double PeakRssBytes() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024.0;  // kilobytes on Linux
}

}  // namespace attntune
