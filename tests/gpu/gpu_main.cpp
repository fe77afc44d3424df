// Main of the GPU-only tests: without a usable CUDA device it prints why and exits 77,
// which ctest reports as "Skipped" (SKIP_RETURN_CODE 77); with one it runs Catch2, with
// Kokkos initialised (the host selection the device's is compared with runs on it).
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <iostream>

#include "kernels/kokkos/runtime.h"
#include "profiler/cuda/cuda_probe.h"

int main(int argc, char* argv[]) {
  const attntune::CudaProbe probe = attntune::ProbeCudaRuntime();
  if (!probe.usable) {
    std::cout << "SKIPPED: GPU tests need a CUDA device: " << probe.reason << "\n";
    return 77;
  }
  attntune::KokkosRuntime kokkos;
  return Catch::Session().run(argc, argv);
}
