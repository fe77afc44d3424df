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

/// What `attntune devices` prints: each backend's devices and fingerprints, or why none.
std::vector<std::string> DescribeDevices();

}  // namespace attntune
