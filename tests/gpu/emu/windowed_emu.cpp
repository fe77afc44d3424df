// kernels/cuda/windowed.cu compiled as C++ for the CPU emulator (include/cuda_emu.h), as
// select_emu.cpp compiles select.cu: its PTX (mma, ldmatrix, cp.async, ex2) through the
// emulator's models of those instructions; every compiled kernel registered, so that
// LaunchWindowed's cudaLaunchKernel runs it.
#include "kernels/cuda/plan.h"
#include "kernels/cuda/windowed_cuda.h"

#define ATTNTUNE_CUDA_EMULATION 1
#define __CUDA_ARCH__ 900
#include "kernels/cuda/windowed.cu"

namespace {

const bool registered = [] {
  namespace cp = attntune::cuda_plan;
  for (const cp::CompiledKernel& k : cp::CompiledKernels()) {
    attntune_emu::RegisterKernel(k.functions[0],
                                 &attntune_emu::Invoker<cp::KernelParams>::Invoke,
                                 cp::KernelName(k.tile, cp::Family::kWindowed));
    attntune_emu::RegisterKernel(k.functions[1],
                                 &attntune_emu::Invoker<cp::KernelParams, cp::BucketParams>::Invoke,
                                 cp::KernelName(k.tile, cp::Family::kTopK));
    attntune_emu::RegisterKernel(k.functions[2],
                                 &attntune_emu::Invoker<cp::KernelParams, cp::BucketParams>::Invoke,
                                 cp::KernelName(k.tile, cp::Family::kBucketed));
  }
  return true;
}();

}  // namespace
