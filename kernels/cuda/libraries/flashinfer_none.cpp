// library_implementations.h's FlashInfer part in a build without FlashInfer's headers.
#include "kernels/cuda/libraries/library_implementations.h"

#ifndef ATTNTUNE_FLASHINFER_ABSENT
#define ATTNTUNE_FLASHINFER_ABSENT "FlashInfer was not built in"
#endif

namespace attntune {

void AddFlashInferImplementations(std::vector<Variant>*,
                                  std::vector<AbsentImplementation>* absent) {
  absent->push_back({"flashinfer", kCudaPlatform, ATTNTUNE_FLASHINFER_ABSENT});
}

}  // namespace attntune
