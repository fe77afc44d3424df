// The record of `attntune bench` (one candidate checked and timed on one shape) and its
// two renderings: the JSON object of `bench --json` and the human-readable lines.
// Reporters are pure functions: the record in, text out.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/shape.h"
#include "core/types.h"
#include "db/records.h"

namespace attntune {

/// Kernels whose names start with this are the selection phase (kernels/selection: the
/// kernels that choose each query block's keys); select_ms is the sum of their times.
constexpr const char kSelectPhasePrefix[] = "attntune::select::";

/// One kernel the checked run launched (from the Kokkos Tools hooks or CUPTI).
struct BenchKernel {
  std::string name;
  std::string kind;  // "for", "reduce", "scan", "cuda", ...
  double ms = 0;
};

/// Hardware counters read after the timing, in passes of their own (bench --metrics).
struct BenchHardware {
  std::string chip;
  std::map<std::string, double> counters;  // by metric name ("hw_dram_gb_per_s", ...)
  std::string error;  // not empty: reading failed, and only the error is shown
};

/// What bench measured. Statistics (median .. samples) are shown for status ok only.
struct BenchRecord {
  std::string variant;
  std::string implementation;
  std::string params_json = "{}";    // the variant's own parameters, canonical JSON object
  std::string tunables_json = "{}";  // the implementation's tunables, canonical JSON object
  Shape shape;
  std::string device;  // the device's name
  Dtype dtype = Dtype::kF32;
  std::string timer;   // what timed it ("steady_clock", "cupti activity", ...)
  std::string inputs;  // the input pattern: gaussian, band, sinks, clusters or needle
  /// The calibration set quality was measured on (`bench --calib`: CalibrationSet::Describe);
  /// "" for the inputs it was timed on.
  std::string calibration;
  TrialStatus status = TrialStatus::kOk;
  std::string message;                    // why it failed; empty when ok
  std::map<std::string, double> metrics;  // rel_err, mass_recall, pairs, gflops, ...
  double median_ms = 0, p10_ms = 0, p90_ms = 0, cv = 0;
  int64_t samples = 0;  // timed repetitions
  std::vector<BenchKernel> kernels;
  std::optional<BenchHardware> hardware;  // absent: not asked for
  double peak_rss_bytes = 0;              // of the whole process
};

/// The summed time of the kernels named kSelectPhasePrefix*.
double SelectPhaseMs(const std::vector<BenchKernel>& kernels);

/// `bench --json`: one JSON object (schema 1; "params" holds the variant's parameters and
/// the tunables in one object, metrics are top-level keys), indented by 2, then "\n".
std::string RenderBenchRecordJson(const BenchRecord& record);

/// bench's human-readable output: "<variant> <impl> <params> on <shape>: <status>", then
/// the statistics, quality, selection phase, kernels and counters, one per line.
std::string RenderBenchRecordText(const BenchRecord& record);

}  // namespace attntune
