// Import and export of allocations: DuoAttention's full_attention_heads.tsv and a
// ConSA-style mask file (JSON, format below).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tuner/allocation/allocation.h"

namespace attntune {

/// Per-head "keep full attention" scores, [layer * kv_heads + head], higher = keep.
struct HeadScores {
  int64_t layers = 0;
  int64_t kv_heads = 0;
  std::vector<double> keep;
};

/// DuoAttention's full_attention_heads.tsv: one line per layer, one tab-separated
/// number per KV head (gate values; 1 = full attention). Values are clipped to [0, 1]
/// as DuoAttention does. Bad text -> UserError naming `source`.
HeadScores ParseDuoAttentionTsv(const std::string& text, const std::string& source);

/// An allocation as DuoAttention TSV: 1 for full-attention heads, 0 for SWA heads.
std::string FormatDuoAttentionTsv(const Allocation& a);

/// A ConSA-style mask file, JSON:
///   {"format": "attntune-consa-mask", "version": 1,
///    "mask": [[1, 0, ...], ...]}        per layer, per KV head: P(keep full) in [0, 1]
/// or "log_alpha": [[...], ...] (hard-concrete gate logits) instead of "mask".
HeadScores ParseConsaMask(const std::string& text, const std::string& source);
std::string FormatConsaMask(const Allocation& a);

/// The largest import file attntune reads (1024 layers x 1024 heads of scores are ~20 MiB).
constexpr uint64_t kMaxImportBytes = uint64_t{64} << 20;

/// Reads either format from a file (JSON if it starts with '{', else TSV), at most
/// kMaxImportBytes.
HeadScores ReadHeadScores(const std::string& path, const std::string& what);

/// The allocation of imported scores: with rho, per group the s units with the lowest
/// summed keep score become SWA (DuoAttention's quantile rule); without rho (negative),
/// a head is SWA iff its score < 0.5 (granularity is then ignored).
Allocation AllocationFromScores(const HeadScores& s, Granularity g, double rho);

}  // namespace attntune
