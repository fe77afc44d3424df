// library_implementations.h's cuDNN part in a build without the cuDNN frontend's headers.
#include "kernels/cuda/libraries/library_implementations.h"

#ifndef ATTNTUNE_CUDNN_ABSENT
#define ATTNTUNE_CUDNN_ABSENT "cuDNN was not built in"
#endif

namespace attntune {

void AddCudnnImplementations(std::vector<Variant>*, std::vector<AbsentImplementation>* absent) {
  absent->push_back({"cudnn", kCudaPlatform, ATTNTUNE_CUDNN_ABSENT});
}

std::string CudnnRuntimeVersion() { return ""; }

}  // namespace attntune
