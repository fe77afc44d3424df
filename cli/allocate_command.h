// attntune allocate: choose which layers or KV heads keep full attention (FA) and which
// use a sliding window (SWA) under a sparsity, latency or KV-memory budget.
#pragma once

#include <CLI/CLI.hpp>

namespace attntune {

/// Registers `attntune allocate` on `app`; its callback stores the exit code in `*rc`.
void RegisterAllocate(CLI::App& app, int* rc);

}  // namespace attntune
