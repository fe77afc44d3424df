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

/// "Kokkos 3.4.01 (Serial)": the version and the backend the kernels run on.
std::string KokkosDescription();

}  // namespace attntune
