// The bucketed layout of lsh and hax (lsh_layout.h).
#include "kernels/selection/lsh_layout.h"

#include <algorithm>

namespace attntune {

void SerialTasks(const char*, int64_t n, const std::function<void(int64_t)>& fn) {
  for (int64_t task = 0; task < n; ++task) fn(task);
}

BinnedKeys SortByBin(const int32_t* bin, int64_t n, int64_t bins) {
  BinnedKeys out;
  out.start.assign(static_cast<size_t>(bins + 1), 0);
  for (int64_t j = 0; j < n; ++j) ++out.start[bin[j] + 1];
  for (int64_t c = 0; c < bins; ++c) out.start[c + 1] += out.start[c];
  out.perm.resize(static_cast<size_t>(n));
  std::vector<int64_t> next(out.start.begin(), out.start.end() - 1);
  for (int64_t j = 0; j < n; ++j) out.perm[next[bin[j]]++] = j;  // stable: ascending j
  return out;
}

std::vector<BinnedKeys> SortKeysAll(const Shape& s, const LshBins& bins, const TaskLoop& loop) {
  std::vector<BinnedKeys> heads(static_cast<size_t>(s.B * s.Hkv));
  loop("attntune::select::sort_keys", s.B * s.Hkv, [&](int64_t h) {
    heads[h] = SortByBin(bins.key_bin.data() + h * s.Lk, s.Lk, bins.bins);
  });
  return heads;
}

namespace {

// The lsh window of a query at position p in bin c: perm indices [lo, hi) = the k
// most recent same-bin keys j <= p. `from`: a perm index in bin c at or before the
// answer's hi (the previous query's hi when the queries come in (bin, position) order),
// so that the scan is amortised O(1) (a binary search per query missed the cache at
// every step); -1: binary search (the first query of a run).
void LshWindow(const BinnedKeys& keys, int32_t c, int64_t p, int64_t k, int64_t from,
               int64_t* lo, int64_t* hi) {
  const int64_t begin = keys.start[c], end = keys.start[c + 1];
  int64_t h;
  if (from < 0) {
    h = std::upper_bound(keys.perm.begin() + begin, keys.perm.begin() + end, p) -
        keys.perm.begin();
  } else {
    h = std::max(from, begin);
    while (h < end && keys.perm[h] <= p) ++h;
  }
  *hi = h;
  *lo = std::max<int64_t>(begin, h - k);
}

}  // namespace

LshPlan SortQueries(const Shape& s, const LshBins& bins, const std::vector<BinnedKeys>& keys,
                    int64_t k, int64_t br, int64_t chunk, const TaskLoop& loop) {
  const int64_t group = s.Group();
  LshPlan plan;
  plan.chunk = chunk > 0 ? std::min(chunk, s.Lq) : s.Lq;
  plan.chunks = std::max<int64_t>(1, (s.Lq + plan.chunk - 1) / plan.chunk);
  std::vector<LshQueries>& queries = plan.queries;
  queries.assign(static_cast<size_t>(s.B * s.Hkv), LshQueries());
  std::vector<std::vector<LshBlock>> head_blocks(queries.size());
  std::vector<std::vector<int64_t>> head_first(queries.size());
  loop("attntune::select::sort_queries", s.B * s.Hkv, [&](int64_t head) {
    const int64_t b = head / s.Hkv, hq0 = head % s.Hkv * group;
    const BinnedKeys& bk = keys[head];
    const int32_t* qbin = bins.query_bin.data() + (b * s.Hq + hq0) * s.Lq;  // [g][i]
    auto bin_of = [&](int64_t m) { return qbin[m]; };  // m = g * Lq + i
    LshQueries& q = queries[head];
    q.rows.resize(static_cast<size_t>(group * s.Lq));
    q.lo.resize(q.rows.size());
    q.hi.resize(q.rows.size());
    std::vector<LshBlock>& blocks = head_blocks[head];
    std::vector<int32_t> cbin;
    int64_t n = 0;
    for (int64_t c = 0; c < plan.chunks; ++c) {
      head_first[head].push_back(static_cast<int64_t>(blocks.size()));
      const int64_t i0 = c * plan.chunk, i1 = std::min(s.Lq, i0 + plan.chunk);
      // The chunk's rows in (position, head) order, then stably by bin.
      cbin.resize(static_cast<size_t>((i1 - i0) * group));
      for (int64_t i = i0; i < i1; ++i) {
        for (int64_t g = 0; g < group; ++g) cbin[(i - i0) * group + g] = bin_of(g * s.Lq + i);
      }
      const std::vector<int64_t> perm =
          SortByBin(cbin.data(), static_cast<int64_t>(cbin.size()), bins.bins).perm;
      const int64_t n0 = n;
      for (const int64_t e : perm) {
        const int64_t i = i0 + e / group, m = e % group * s.Lq + i;
        q.rows[n] = m;
        const bool same_bin = n > n0 && bin_of(q.rows[n - 1]) == bin_of(m);
        LshWindow(bk, bin_of(m), LastKey(s, i), k, same_bin ? q.hi[n - 1] : -1, &q.lo[n], &q.hi[n]);
        // A new block at Br rows, at a new bin, or where the windows stop overlapping
        // (then the union would hold keys no row attends).
        const bool extend = n > n0 && n - blocks.back().begin < br && same_bin &&
                            q.lo[n] <= q.hi[n - 1];
        if (extend) {
          blocks.back().end = n + 1;
        } else {
          blocks.push_back({head, n, n + 1});
        }
        ++n;
      }
    }
  });
  for (size_t head = 0; head < head_blocks.size(); ++head) {
    for (int64_t f : head_first[head]) plan.first.push_back(f + static_cast<int64_t>(plan.blocks.size()));
    plan.blocks.insert(plan.blocks.end(), head_blocks[head].begin(), head_blocks[head].end());
  }
  plan.first.push_back(static_cast<int64_t>(plan.blocks.size()));
  return plan;
}

}  // namespace attntune
