#include "kernels/cuda/libraries/library_implementations.h"

namespace attntune {

void AddLibraryImplementations(std::vector<Variant>* rows,
                               std::vector<AbsentImplementation>* absent) {
  AddCudnnImplementations(rows, absent);
  AddFlashInferImplementations(rows, absent);
}

}  // namespace attntune
