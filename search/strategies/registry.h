// The engine's strategies beyond exhaustive and random: annealing, genetic, ils, bo,
// bandit and auto. MakeStrategy (search/strategy.h) consults this table.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "search/space.h"
#include "search/strategy.h"

namespace attntune {

namespace strategies {
class SpaceIndex;
}

/// The named strategy over `space`, or nullptr when the name is not one of
/// ExtendedStrategyNames().
std::unique_ptr<Strategy> MakeExtendedStrategy(const std::string& name, const Space& space,
                                               uint64_t seed);
/// The same over an index shared by many searches of one space (replay's repeats).
std::unique_ptr<Strategy> MakeExtendedStrategy(const std::string& name,
                                               std::shared_ptr<const strategies::SpaceIndex> index,
                                               uint64_t seed);
std::vector<std::string> ExtendedStrategyNames();

/// Asks `points` first (when feasible and not yet asked), e.g. the best stored
/// configurations of the same variant on the same device at a neighbouring shape.
/// No effect on strategies outside ExtendedStrategyNames().
void WarmStart(Strategy& strategy, const std::vector<Point>& points);

}  // namespace attntune
