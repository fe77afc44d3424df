#include "cli/backends.h"

#include "backends/cuda/cuda_backend.h"
#include "backends/kokkos/kokkos_backend.h"
#include "core/error.h"

namespace attntune {
namespace {

struct BackendEntry {
  const char* name;   // the backend part of --device
  const char* usage;  // how --device names its devices
  std::unique_ptr<Backend> (*open)(const DeviceId& id, const std::string& what);
  std::vector<std::string> (*describe)();
};

// Every backend of this build, one line each (a new backend adds its line).
const BackendEntry kBackends[] = {
    {"cpu", "cpu", OpenKokkosBackend, DescribeKokkosDevices},
    {"cuda", "cuda:N", OpenCudaBackend, DescribeCudaDevices},
};

std::string Usage() {
  std::string text;
  for (const BackendEntry& b : kBackends) text += (text.empty() ? "" : " or ") + std::string(b.usage);
  return text;
}

}  // namespace

std::unique_ptr<Backend> OpenBackend(const std::string& device, const std::string& what) {
  const std::optional<DeviceId> id = ParseDeviceId(device);
  if (id) {
    for (const BackendEntry& b : kBackends) {
      if (id->backend == b.name) return b.open(*id, what + " " + device);
    }
  }
  throw UserError(what + ": '" + device + "' is not a device (expected " + Usage() + ")");
}

std::string ResolveLocalDevice(const std::string& device, int local_rank) {
  return device == "cuda:local" ? "cuda:" + std::to_string(local_rank) : device;
}

std::vector<std::string> DescribeDevices() {
  std::vector<std::string> lines;
  for (const BackendEntry& b : kBackends) {
    for (std::string& line : b.describe()) lines.push_back(std::move(line));
  }
  return lines;
}

}  // namespace attntune
