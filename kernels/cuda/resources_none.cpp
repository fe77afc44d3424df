// CompiledResources() of a build without the CUDA toolkit: no kernel was compiled.
#include "kernels/cuda/plan.h"

namespace attntune {
namespace cuda_plan {

const std::vector<KernelResources>& CompiledResources() {
  static const std::vector<KernelResources> none;
  return none;
}

}  // namespace cuda_plan
}  // namespace attntune
