// RankJob in a build without MPI: alone, or a launch of several ranks refused.
#include "core/error.h"
#include "parallel/ranks.h"

namespace attntune {

std::unique_ptr<RankJob> RankJob::Join() {
  const int ranks = LaunchedRanks();
  if (ranks > 1 && LaunchedRank() != 0) throw RankStopped{2};  // rank 0 says why
  if (ranks > 1) {
    throw UserError("launched as " + std::to_string(ranks) +
                    " MPI ranks, but this attntune was built without MPI (install "
                    "libopenmpi-dev with scripts/install-deps.sh and build again)");
  }
  return nullptr;
}

}  // namespace attntune
