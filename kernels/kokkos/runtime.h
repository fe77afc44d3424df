// Kokkos lifetime: one KokkosRuntime per process, created in main() (or a test main).
#pragma once

#include <string>

namespace attntune {

class KokkosRuntime {
 public:
  KokkosRuntime();
  ~KokkosRuntime();
  KokkosRuntime(const KokkosRuntime&) = delete;
  KokkosRuntime& operator=(const KokkosRuntime&) = delete;
};

/// For a library, whose caller has no main() of attntune's: initialises Kokkos once per
/// process (std::call_once) unless the program already did, and then finalises it at exit
/// (std::atexit). A program that initialised Kokkos itself keeps it, and finalises it.
void EnsureKokkosInitialized();

/// "Kokkos 3.4.01 (Serial)": the version and the backend the kernels run on.
std::string KokkosDescription();

}  // namespace attntune
