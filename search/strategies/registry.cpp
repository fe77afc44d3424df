#include "search/strategies/registry.h"

#include <utility>

#include "search/strategies/common.h"

namespace attntune {
namespace {

using strategies::EngineStrategy;
using strategies::SpaceIndex;

struct ExtendedRow {
  const char* name;
  std::unique_ptr<EngineStrategy> (*make)(std::shared_ptr<const SpaceIndex> index, uint64_t seed);
};

// The table of the engine's strategies (STYLE.md: one explicit table).
const ExtendedRow kExtended[] = {
    {"annealing", strategies::MakeAnnealing}, {"genetic", strategies::MakeGenetic},
    {"ils", strategies::MakeIls},             {"bo", strategies::MakeBo},
    {"bandit", strategies::MakeBandit},       {"auto", strategies::MakeAuto},
};

}  // namespace

std::unique_ptr<Strategy> MakeExtendedStrategy(const std::string& name,
                                               std::shared_ptr<const SpaceIndex> index,
                                               uint64_t seed) {
  for (const ExtendedRow& row : kExtended) {
    if (name == row.name) return row.make(std::move(index), seed);
  }
  return nullptr;
}

std::unique_ptr<Strategy> MakeExtendedStrategy(const std::string& name, const Space& space,
                                               uint64_t seed) {
  for (const ExtendedRow& row : kExtended) {
    if (name == row.name) return row.make(std::make_shared<const SpaceIndex>(space), seed);
  }
  return nullptr;
}

std::vector<std::string> ExtendedStrategyNames() {
  std::vector<std::string> names;
  for (const ExtendedRow& row : kExtended) names.push_back(row.name);
  return names;
}

void WarmStart(Strategy& strategy, const std::vector<Point>& points) {
  if (auto* engine = dynamic_cast<EngineStrategy*>(&strategy)) engine->WarmStart(points);
}

}  // namespace attntune
