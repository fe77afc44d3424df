// Catch2 main for every unit-test executable: Kokkos is initialised once per process.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "kernels/kokkos/runtime.h"

int main(int argc, char* argv[]) {
  attntune::KokkosRuntime kokkos;
  return Catch::Session().run(argc, argv);
}
