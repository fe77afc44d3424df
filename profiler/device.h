// Device fingerprints (DESIGN.md s4) and the CUDA availability probe.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace attntune {

struct DeviceInfo {
  std::string kind;              // "cpu" or "cuda"
  std::string name;              // "Intel(R) Xeon(R) Processor @ 2.80GHz"
  std::string fingerprint_json;  // canonical JSON of every identifying field
  /// The fingerprint's fields that tell units of one model apart (a GPU's uuid and PCI
  /// bus): devices whose fingerprints differ only in these share a search (MPI ranks on
  /// a node of identical GPUs), each trial stored under its own device.
  std::vector<std::string> unit_fields;
};

/// The CPU the Kokkos kernels run on: model, ISA flags (avx2, avx512f, fma, ...),
/// logical cores, Kokkos version and backend.
DeviceInfo CpuDevice();

/// This machine's physical memory in bytes (0 if unknown).
double HostMemoryBytes();

/// The peak resident set of this process so far, in bytes.
double PeakRssBytes();

struct CudaProbe {
  bool usable = false;
  int device_count = 0;
  std::string reason;  // why not usable: "no usable CUDA driver (cudaGetDeviceCount:
                       // cudaErrorInsufficientDriver, 35)"
};

/// Asks the CUDA runtime for devices (this build without CUDA: not usable, says so).
CudaProbe ProbeCuda();

/// The fingerprint of CUDA device `index`: name, UUID, compute capability, SMs, memory,
/// L2, shared memory, clocks' maxima, ECC, PCI bus, driver and runtime versions. Throws
/// UserError when the device is unusable (the probe's reason).
DeviceInfo CudaDevice(int index);

/// The clocks and temperature of CUDA device `index` right now (NVML), recorded with
/// each GPU measurement; empty when NVML or CUDA is unavailable.
std::map<std::string, double> ReadGpuClocks(int index);

}  // namespace attntune
