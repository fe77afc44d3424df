// One candidate on one shape, checked and timed on a backend, as `attntune bench` runs
// it: the request in, the record (reports/bench_record.h) out, rendered by reports/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "reports/bench_record.h"
#include "tuner/evaluate.h"

namespace attntune {

struct BenchRequest {
  std::string variant;
  std::string impl;    // empty: the first the backend runs
  std::string params;  // "w=1024,sink=4"
  std::string shape = "B=1,Hq=16,Hkv=8,L=1024,d=128";
  std::string dtype;   // empty: the backend's default
  uint64_t seed = 1;
  std::string inputs = "gaussian";  // or a pattern of core/generators.h
  bool check = true;                // false: --unchecked
  double max_seconds = 3.0;
  int min_reps = 5;
  bool flush_l2 = false;
  bool metrics = false;
  /// Captured q/k/v (`--calib FILE[,FILE...]`, their heads and head dim those of the
  /// shape): the candidate's quality is measured on them (its first Lk tokens) instead of
  /// on the inputs it is timed on.
  std::vector<std::string> calib;
};

/// The problem a bench runs: the request's inputs (seeded Gaussian or a pattern) of
/// `shape`, as values of `dtype` (what the kernels read; the references are of them).
ProblemContext BenchProblem(const BenchRequest& request, const Shape& shape, Dtype dtype);

/// Checks (unless unchecked) and times the request's candidate on `backend`, then reads
/// its hardware counters when asked; UserError naming the flag for bad input.
BenchRecord Bench(const BenchRequest& request, Backend& backend);

}  // namespace attntune
