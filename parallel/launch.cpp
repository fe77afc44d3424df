#include <algorithm>
#include <cstdlib>
#include <string>

#include "parallel/ranks.h"

namespace attntune {

int LaunchedRanks() {
  // Open MPI's mpirun, then PMI (MPICH, Slurm's pmi2), then Slurm's own count of a step's
  // tasks (srun --mpi=pmix sets PMIX_RANK, not a size).
  for (const char* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE"}) {
    if (const char* value = std::getenv(name)) return std::max(1, std::atoi(value));
  }
  if (std::getenv("PMIX_RANK") != nullptr) {
    if (const char* value = std::getenv("SLURM_STEP_NUM_TASKS")) return std::max(1, std::atoi(value));
    if (const char* value = std::getenv("SLURM_NTASKS")) return std::max(1, std::atoi(value));
  }
  return 1;
}

int LaunchedRank() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMI_RANK", "PMIX_RANK", "SLURM_PROCID"}) {
    if (const char* value = std::getenv(name)) return std::max(0, std::atoi(value));
  }
  return 0;
}

}  // namespace attntune
