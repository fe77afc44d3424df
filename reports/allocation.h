// Renderers of an FA/SWA allocation (attntune allocate): its page and a self-contained
// C++ header; attntune_config.json carries it in "allocations" (ReportInput::allocations).
// Plain records in, text out; reports does not depend on the tuner.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attntune {

struct AllocationRecord {
  std::string tool_version;
  std::string generated_at;  // ISO-8601 UTC
  std::string device;        // where the costs were measured
  std::string model;         // name or config path
  std::string model_type;
  int64_t layers = 0, q_heads = 0, kv_heads = 0, head_dim = 0;
  std::string granularity;  // layer | head | head-global
  std::string strategy;     // rule | greedy | consa | import
  std::string budget;       // "rho=0.5", "latency_ms=...", "kv_bytes=...", "import"
  double rho_target = 0;
  double rho = 0;  // achieved SWA share of all KV heads
  int64_t window = 0, sink = 0, context = 0, br = 0, bc = 0;
  std::string calib_source;
  int64_t calib_length = 0, calib_window = 0;
  std::string cost_method;              // hybrid (one launch per layer)
  std::vector<std::vector<int>> swa;    // [layer][kv_head]: 1 = sliding window
  std::vector<std::string> head_class;  // [layer * kv_heads + head] range class
  std::vector<double> head_mass_kept, head_swa_rel_err;
  double quality_loss = 0;
  double prefill_ms = 0, decode_ms = 0;
  int64_t kv_bytes = 0, prefill_pairs = 0, decode_pairs = 0;
  struct Point {
    double rho = 0, quality_loss = 0, prefill_ms = 0, decode_ms = 0;
    int64_t kv_bytes = 0, prefill_pairs = 0;
    bool on_front = false;
  };
  std::vector<Point> sweep;
  // The hybrid variant's tiles tuned for this allocation (tuned false: skipped).
  struct Tuned {
    bool tuned = false;
    int64_t br = 0, bc = 0, window = 0, layer_swa_heads = 0, evaluations = 0, budget = 0;
    double prefill_ms = 0, default_prefill_ms = 0;  // one layer
    double quality_loss = 0;                        // of the allocation at `window`
  } tuned;
};

/// allocation.html: self-contained page with the layers x KV heads heatmap (SWA or
/// full, shaded by the head's swa_rel_err), the per-layer SWA share and the front.
std::string RenderAllocationHtml(const AllocationRecord& r);

/// attntune_allocation.h: constexpr kWindows[layer][kv_head], a Window() lookup and the
/// tiles (kTileBr, kTileBc: tuned, else the defaults).
std::string RenderAllocationHeader(const AllocationRecord& r);

}  // namespace attntune
