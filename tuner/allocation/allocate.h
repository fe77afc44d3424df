// `attntune allocate` without the CLI: calibration statistics -> allocation at a target
// rho (or the smallest rho that meets a latency or KV-memory budget) -> measured cost
// and the Pareto front of (quality loss, prefill time, KV bytes) over a rho sweep.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "db/database.h"
#include "profiler/device.h"
#include "profiler/timer.h"
#include "tuner/allocation/allocation.h"
#include "tuner/allocation/calibration.h"
#include "tuner/allocation/cost.h"
#include "tuner/allocation/io.h"
#include "tuner/model.h"
#include "db/records.h"

namespace attntune {

struct AllocateOptions {
  std::string model = "qwen3-1.7b";
  Granularity granularity = Granularity::kHead;
  std::string strategy = "greedy";  // rule | greedy | consa | import
  double rho = -1;                  // the target; < 0: from a budget (or import's own)
  double latency_ms = -1;           // budget on the prefill time of all layers
  int64_t kv_bytes = -1;            // budget on the KV cache at `context`
  std::string calib;                // safetensors of captured q/k/v; empty: generator
  /// `--min-quality` (with --calib and --rho or import): the window is chosen, the
  /// smallest of WindowGrid under which every SWA KV head of the allocation keeps the
  /// floor on the captured attention (its mass_kept as mass_recall, its swa_rel_err as
  /// rel_err); empty: the window is --window's (or the default).
  QualityFloor floor;
  std::string import_path;          // strategy import: DuoAttention TSV or mask JSON
  int64_t window = 0;               // 0: the model's sliding_window, else context / 4
  int64_t sink = 0;
  int64_t context = 4096;
  int64_t calib_len = 256;  // generator sequence length
  uint64_t seed = 1;
  bool measure = true;  // false: pairs and bytes only
  int64_t tune_budget = 6;  // timed points of the chosen allocation's tile search; 0: skip
  CostOptions cost;     // br, bc, kv_elem_bytes, policy (context/window set here)
  std::string args_json;  // the command line, stored with the run
};

struct SweepPoint {
  double rho = 0;  // target
  Allocation allocation;
  double quality_loss = 0;
  AllocationCost cost;
  bool on_front = false;
};

struct AllocateResult {
  ModelGeometry model;
  CalibStats stats;
  int64_t window = 0;        // at `context`
  int64_t calib_window = 0;  // the same share of the calibration length
  std::string window_choice;  // how the window was chosen under a floor ("" without one)
  std::string budget;        // "rho=0.5", "latency_ms=120", "kv_bytes=..."
  double rho_target = 0;
  Allocation chosen;
  double quality_loss = 0;
  AllocationCost cost;
  std::string cost_method;
  TunedTiles tuned;  // the chosen allocation's hybrid tiles (tuned.tuned false: skipped)
  std::vector<SweepPoint> sweep;
  MeasureCounts trials;  // the measurements' trials (none without measuring)
};

/// Quality loss of an allocation: the mean over all KV heads of swa_rel_err^2 of its
/// SWA heads (0 for dense attention everywhere).
double QualityLoss(const Allocation& a, const CalibStats& stats);

/// The allocation `strategy` makes at `rho` (import: from `scores`).
Allocation AllocateWith(const std::string& strategy, Granularity g, const CalibStats& stats,
                        const HeadScores* scores, double rho, uint64_t seed);

/// The windows a floor chooses from: 16, 32, 64, ... below `context`.
std::vector<int64_t> WindowGrid(int64_t context);

/// Checks the options without reading calibration data or measuring: UserError naming the
/// flag (RunAllocate checks them first too).
void ValidateAllocate(const AllocateOptions& options);

/// Runs the whole allocation. Bad options -> UserError naming the flag. When measuring,
/// every cost and tile measurement is a trial of one run of `db` on `device`, and trials
/// already stored for this build are reused.
AllocateResult RunAllocate(const AllocateOptions& options, Database& db, const DeviceInfo& device,
                           Timer& timer);

}  // namespace attntune
