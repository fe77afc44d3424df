// attntune replay: judge a search strategy offline on recorded GPU tuning data.
#pragma once

#include <CLI/CLI.hpp>

namespace attntune {

/// Registers `attntune replay` on `app`; its callback stores the exit code in `*rc`.
void RegisterReplay(CLI::App& app, int* rc);

}  // namespace attntune
