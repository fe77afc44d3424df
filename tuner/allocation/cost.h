// The cost side of an allocation: prefill time and decode time per token of all layers,
// measured on the tuner's stages (tuner/allocation/measure.h), and the KV-cache bytes at
// a context length.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "profiler/measure.h"
#include "tuner/allocation/allocation.h"
#include "tuner/allocation/measure.h"
#include "tuner/model.h"

namespace attntune {

struct CostOptions {
  int64_t context = 4096;  // prefill length, and the decode step's context
  int64_t window = 1024;   // the SWA heads' window
  int64_t sink = 0;
  int64_t br = 32;  // tiles of the windowed kernel
  int64_t bc = 64;
  int64_t kv_elem_bytes = 2;                     // bf16 cache
  bool measure = true;                           // false: pairs and bytes only (times stay 0)
  MeasurePolicy policy = {1, 3, 20, 1.0, 0.05};  // lighter than tune's: many layers
};

struct AllocationCost {
  double prefill_ms = 0;      // all layers, one sequence of `context` tokens
  double decode_ms = 0;       // per token: one query over `context` keys, all layers
  int64_t kv_bytes = 0;       // K and V cache at `context`, all layers
  int64_t prefill_pairs = 0;  // attended (i, j) pairs summed over query heads and layers
  int64_t decode_pairs = 0;
};

/// The hybrid variant's tiles tuned for one allocation: a search over the `tiled`
/// implementation's declared tunables (MeasureProblem), the variant's parameters held at
/// the allocation's window, sink and the full-head count of its most common layer.
struct TunedTiles {
  bool tuned = false;             // false: skipped (budget 0, --no-measure)
  int64_t br = 0, bc = 0;         // the fastest of the searched points and the defaults
  int64_t window = 0;             // the window the tiles were timed at (not searched)
  int64_t layer_swa_heads = 0;    // SWA KV heads of the timed layer
  double prefill_ms = 0;          // one layer at (br, bc)
  double default_prefill_ms = 0;  // one layer at the default tiles (CostOptions br, bc)
  int64_t evaluations = 0;        // searched points (the defaults not counted)
};

/// Trials of a CostMeter's measurements: evaluated and stored, answered by a stored
/// trial, and of those failed (stored with a status other than ok).
struct MeasureCounts {
  int64_t evaluations = 0, measured = 0, reused = 0, failed = 0;
};

/// Attended pairs of one query head over Lq = Lk = L rows (window 0: full causal).
int64_t HeadPrefillPairs(int64_t length, int64_t window, int64_t sink);
/// Attended keys of one decode query at `context` (window 0: full).
int64_t HeadDecodePairs(int64_t context, int64_t window, int64_t sink);
/// K and V bytes of the allocation at the options' context; an SWA head keeps
/// min(context, window + sink) tokens.
int64_t KvCacheBytes(const ModelGeometry& m, const Allocation& a, const CostOptions& o);

/// Measures allocations of one model. A layer's time depends on how many of its KV
/// heads are SWA, so times are measured once per such count and reused across layers
/// and allocations: a layer is one launch of the `hybrid` variant's `tiled`
/// implementation (its first `full` KV heads dense), at the prefill of `context` tokens
/// and at one decode step over `context` keys. Every measurement goes through
/// MeasureProblem: checked against the fp64 reference and stored in `run`'s database.
class CostMeter {
 public:
  /// `run` may be null when options.measure is false (pairs and bytes only).
  CostMeter(const ModelGeometry& model, const CostOptions& options, MeasureRun* run);
  AllocationCost Cost(const Allocation& a);
  /// "hybrid": how layers were launched.
  const std::string& Method() const { return method_; }
  /// Tunes the hybrid tiles for `a` with at most `budget` searched points of `strategy`
  /// (0: skipped); the defaults are a candidate too.
  TunedTiles TuneTiles(const Allocation& a, int64_t budget, uint64_t seed,
                       const std::string& strategy = "random");
  const MeasureCounts& Counts() const { return counts_; }

 private:
  std::pair<double, double> LayerMs(int64_t swa_heads);  // prefill, decode
  /// The hybrid variant with w, sink and full (KV heads - swa_heads) pinned, and `more`.
  Variant Pinned(int64_t swa_heads, const Params& more) const;
  ProblemMeasurement Search(ProblemContext& problem, Phase phase, const Variant& pinned,
                            const ProblemSearch& search);

  ModelGeometry model_;
  CostOptions options_;
  MeasureRun* run_;
  std::string method_ = "hybrid";
  std::unique_ptr<ProblemContext> prefill_, decode_;
  std::map<int64_t, std::pair<double, double>> memo_;
  MeasureCounts counts_;
};

}  // namespace attntune
