#include "kernels/kokkos/runtime.h"

#include <Kokkos_Core.hpp>
#include <cstdio>
#include <cstdlib>
#include <mutex>

namespace attntune {

namespace {
// True when this process's KokkosRuntime initialised Kokkos (and so finalises it).
bool g_owns_kokkos = false;
}  // namespace

KokkosRuntime::KokkosRuntime() {
  if (Kokkos::is_initialized()) return;
  Kokkos::initialize();
  g_owns_kokkos = true;
}

KokkosRuntime::~KokkosRuntime() {
  if (g_owns_kokkos && Kokkos::is_initialized()) {
    Kokkos::finalize();
    g_owns_kokkos = false;
  }
}

void EnsureKokkosInitialized() {
  static std::once_flag once;
  std::call_once(once, [] {
    if (Kokkos::is_initialized()) return;
    Kokkos::initialize();
    std::atexit([] {
      if (Kokkos::is_initialized()) Kokkos::finalize();
    });
  });
}

std::string KokkosDescription() {
  const int v = KOKKOS_VERSION;  // e.g. 30401 -> 3.4.01
  char version[32];
  std::snprintf(version, sizeof(version), "%d.%d.%02d", v / 10000, v / 100 % 100, v % 100);
  return std::string("Kokkos ") + version + " (" + Kokkos::DefaultExecutionSpace::name() + ")";
}

}  // namespace attntune
