// The replay page: best-so-far curves of search strategies on recorded tuning data
// (attntune replay --report). A pure function, like the other reporters.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "search/replay.h"

namespace attntune {

/// One offline HTML page (Chart.js inlined): one chart per file with each strategy's
/// mean best-so-far fraction of optimum, its 10th-90th percentile band, and random
/// search's analytic expectation. `results[s][f]` is strategy `strategies[s]` on file f
/// (every strategy replayed on the same files in the same order).
std::string RenderReplayReport(const std::vector<std::string>& strategies,
                               const std::vector<std::vector<ReplayResult>>& results,
                               int repeats, uint64_t seed);

}  // namespace attntune
