// The bucketed layout of lsh and hax (DESIGN.md s2): per (batch, KV head) the keys sorted
// by (bin, position) and the query rows of the head's query heads sorted by (bin,
// position, head), each row's lsh set a window [lo, hi) of the sorted keys, rows cut
// into blocks of same-bin rows with overlapping windows. Plain C++ shared by the Kokkos
// kernels (kernels/kokkos/sparse.cpp) and the CUDA planning (kernels/cuda/bucket_lists.cpp);
// the per-head loops run on the caller's TaskLoop.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/selection/selection.h"
#include "core/shape.h"

namespace attntune {

/// A loop over independent tasks [0, n), named as a phase: the Kokkos kernels pass one
/// that runs it as a fenced parallel_for (host_tasks.h), so that the phase is timed;
/// SerialTasks runs it in order.
using TaskLoop =
    std::function<void(const char* phase, int64_t n, const std::function<void(int64_t)>& fn)>;
void SerialTasks(const char* phase, int64_t n, const std::function<void(int64_t)>& fn);

/// Keys of one KV head sorted by (bin, position): bin c holds perm[start[c], start[c+1]).
struct BinnedKeys {
  std::vector<int64_t> start, perm;
};

/// Stable counting sort of positions [0, n) by bin[.] in [0, bins).
BinnedKeys SortByBin(const int32_t* bin, int64_t n, int64_t bins);

/// SortByBin of every (batch, KV head)'s keys (phase "attntune::select::sort_keys").
std::vector<BinnedKeys> SortKeysAll(const Shape& s, const LshBins& bins,
                                    const TaskLoop& loop = SerialTasks);

/// A block of query rows of one (batch, KV head) that share a bin, in (bin, position)
/// order: rows[begin, end) of that head's sorted rows.
struct LshBlock {
  int64_t head, begin, end;
};

/// The query rows of one (batch, KV head): the rows of its Group() query heads together
/// (a bin's windows depend on the position only, so same-bin rows of the group's heads
/// share their keys), row m = g * Lq + i for query head hq0 + g, position i (Q and O
/// rows m * d floats past row 0 of head hq0).
struct LshQueries {
  std::vector<int64_t> rows, lo, hi;  // Group() * Lq each: sorted rows and their windows
};

/// The blocks of every (batch, KV head), that head's chunks in order: first[(head *
/// chunks + c)] = the index of the first block of chunk c of `head`.
struct LshPlan {
  std::vector<LshQueries> queries;
  std::vector<LshBlock> blocks;
  std::vector<int64_t> first;
  int64_t chunk = 0, chunks = 1;  // query rows per chunk, chunks per head
};

/// Queries of each (batch, KV head) in chunks of `chunk` positions (0: one chunk), the
/// rows of its query heads in each chunk sorted by (bin, position, head), with their lsh
/// windows of k keys, cut into blocks of at most `br` same-bin rows whose windows
/// overlap (phase "attntune::select::sort_queries").
LshPlan SortQueries(const Shape& s, const LshBins& bins, const std::vector<BinnedKeys>& keys,
                    int64_t k, int64_t br, int64_t chunk, const TaskLoop& loop = SerialTasks);

}  // namespace attntune
