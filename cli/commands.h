// The attntune subcommands. Each returns the process exit code; user errors are thrown
// as UserError and turned into one line and exit code 2 by main().
#pragma once

#include <string>

#include <CLI/CLI.hpp>

#include "backends/backend.h"

namespace attntune {

/// CLI11 checks of a finite number > 0 and >= 0 (CLI::PositiveNumber and CLI::Range let
/// "nan" through: every comparison with NaN is false).
extern const CLI::Validator kPositiveFinite;
extern const CLI::Validator kNonNegativeFinite;
/// A CLI11 check of a floor of repetitions: an integer from 1 to kMaxMinReps.
extern const CLI::Validator kRepetitions;
/// CLI11 checks of an integer >= 0 and > 0, as decimal digits that fit int64 ("-1" would
/// read as a budget's "unset"; CLI11 alone read "" as 0 and saturated past 2^63 - 1).
extern const CLI::Validator kNonNegativeInteger;
extern const CLI::Validator kPositiveInteger;
/// A CLI11 check of a finite number from 0 to 1 (a share).
extern const CLI::Validator kFraction;
/// A CLI11 check of a seed: decimal digits whose value fits uint64 (CLI11 alone read "-1"
/// as 2^64 - 1, "" as 0 and "0x10" as 16).
extern const CLI::Validator kSeed;

/// Registers every subcommand on `app`; the callbacks store their exit code in `*rc`.
void RegisterCommands(CLI::App& app, int* rc);

// One file each (cli/<name>_command.cpp).
void RegisterTune(CLI::App& app, int* rc);
void RegisterBench(CLI::App& app, int* rc);
void RegisterRun(CLI::App& app, int* rc);

}  // namespace attntune
