// Seeded inputs with structured attention, one per pattern a variant is built to find
// (DESIGN.md s1 quality metrics): a local band, attention sinks with vertical stripes,
// clustered keys (what LSH should find), a needle far from its queries.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/tensors.h"

namespace attntune {

/// "gaussian", "band", "sinks", "clusters", "needle".
const std::vector<std::string>& InputPatterns();

/// Gaussian q, k, v from `seed` plus the pattern's structure (same seed, same tensors).
/// Throws UserError naming `what` for an unknown pattern.
Tensors StructuredTensors(const Shape& shape, const std::string& pattern, uint64_t seed,
                          const std::string& what);

}  // namespace attntune
