// The CPU backend: the Kokkos implementations of the table (fp32), the steady clock, the
// CPU fingerprint. No cache flush and no hardware counters.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace attntune {

/// The backend of --device cpu. `what` names the flag for errors ("--device cpu").
std::unique_ptr<Backend> OpenKokkosBackend(const DeviceId& id, const std::string& what);

/// `attntune devices`: the CPU and its fingerprint.
std::vector<std::string> DescribeKokkosDevices();

}  // namespace attntune
