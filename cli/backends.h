// The backends this attntune can run on, and the choice of one per run (--device).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"

namespace attntune {

/// Opens the backend that `device` names ("cpu", "cuda:N"); UserError naming `what`
/// ("--device") when the text names none or the backend refuses (no driver, no device).
std::unique_ptr<Backend> OpenBackend(const std::string& device, const std::string& what);

/// `device` with "cuda:local" made "cuda:<local_rank>" (an MPI rank takes the GPU of its
/// number among the ranks on its node); any other text as it is.
std::string ResolveLocalDevice(const std::string& device, int local_rank);

/// What `attntune devices` prints: each backend's devices and fingerprints, or why none.
std::vector<std::string> DescribeDevices();

}  // namespace attntune
