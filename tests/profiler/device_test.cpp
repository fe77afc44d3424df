#include "profiler/device.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/kokkos/runtime.h"
#include "core/error.h"

namespace attntune {

TEST_CASE("CpuDevice: model and canonical JSON fingerprint") {
  const DeviceInfo cpu = CpuDevice();
  CHECK(cpu.kind == "cpu");
  CHECK(!cpu.name.empty());
  const nlohmann::json fp = nlohmann::json::parse(cpu.fingerprint_json);
  CHECK(fp.at("kind") == "cpu");
  CHECK(fp.at("model") == cpu.name);
  CHECK(fp.at("isa").is_array());
  CHECK(fp.at("logical_cores").get<int>() >= 1);
  CHECK(fp.at("kokkos") == KokkosDescription());
  CHECK(fp.at("cache").is_object());
  CHECK(fp.dump() == cpu.fingerprint_json);                     // canonical: sorted keys, compact
  CHECK(CpuDevice().fingerprint_json == cpu.fingerprint_json);  // stable
}

TEST_CASE("CpuDevice: ISA flags come from the fixed list") {
  const nlohmann::json fp = nlohmann::json::parse(CpuDevice().fingerprint_json);
  for (const auto& flag : fp.at("isa")) {
    const std::string f = flag.get<std::string>();
    CHECK((f == "sse4_2" || f == "avx" || f == "avx2" || f == "fma" || f == "avx512f" ||
           f == "avx512bw" || f == "avx512vl" || f == "avx512_vnni" || f == "avx512_bf16" ||
           f == "amx_tile" || f == "neon" || f == "asimd"));
  }
#if defined(__AVX2__)
  // Built with AVX2 enabled, so the CPU running it has it.
  CHECK(fp.at("isa").dump().find("\"avx2\"") != std::string::npos);
#endif
}

TEST_CASE("ProbeCuda: usable only with a device, else says why") {
  const CudaProbe probe = ProbeCuda();
#ifdef ATTNTUNE_HAVE_CUDA
  // Without the NVIDIA kernel driver (the build machine: toolkit, no driver, no GPU) the
  // runtime reports cudaErrorInsufficientDriver.
  const bool have_driver = std::ifstream("/proc/driver/nvidia/version").good();
  if (!have_driver) {
    CHECK(!probe.usable);
    CHECK(probe.device_count == 0);
    CHECK(probe.reason ==
          "no usable CUDA driver (cudaGetDeviceCount: cudaErrorInsufficientDriver, 35)");
  } else if (probe.usable) {
    CHECK(probe.device_count > 0);
    CHECK(probe.reason.empty());
  } else {
    CHECK(!probe.reason.empty());
  }
#else
  CHECK(!probe.usable);
  CHECK(probe.device_count == 0);
  CHECK(probe.reason == "this attntune was built without CUDA support");
#endif
}

TEST_CASE("CudaDevice and ReadGpuClocks: a fingerprint with a device, one clear error without") {
  const CudaProbe probe = ProbeCuda();
  if (probe.usable) {
    const DeviceInfo gpu = CudaDevice(0);
    const auto f = nlohmann::json::parse(gpu.fingerprint_json);
    CHECK(gpu.kind == "cuda");
    CHECK(f.at("name") == gpu.name);
    CHECK(f.at("multiprocessors").get<int>() > 0);
    CHECK(f.at("uuid").get<std::string>().rfind("GPU-", 0) == 0);
    CHECK_THROWS_AS(CudaDevice(probe.device_count), UserError);
    return;
  }
  try {
    CudaDevice(0);
    FAIL("CudaDevice(0) returned without a usable device");
  } catch (const UserError& e) {
    CHECK(std::string(e.what()) == "cuda:0: " + probe.reason);
  }
  CHECK(ReadGpuClocks(0).empty());
}

}  // namespace attntune
