// One parallel loop of host tasks on Kokkos' host execution space, fenced: the shape of
// every selection and attention phase of the sparse launchers.
#pragma once

#include <Kokkos_Core.hpp>
#include <cstdint>
#include <functional>

namespace attntune {

/// Runs fn(task) for task in [0, n) as the Kokkos kernel `name` and waits for it.
template <class Fn>
void ParallelTasks(const char* name, int64_t n, const Fn& fn) {
  using HostPolicy = Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>;
  Kokkos::parallel_for(name, HostPolicy(0, n), [&](int64_t task) { fn(task); });
  Kokkos::fence();
}

/// ParallelTasks as a TaskLoop (kernels/selection/lsh_layout.h): the layout's per-head loops
/// run as timed Kokkos kernels.
inline void KokkosTasks(const char* name, int64_t n, const std::function<void(int64_t)>& fn) {
  ParallelTasks(name, n, fn);
}

}  // namespace attntune
