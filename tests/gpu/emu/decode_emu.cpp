// kernels/cuda/decode.cu compiled as C++ for the CPU emulator (include/cuda_emu.h), its
// kernels registered for LaunchDecode's and LaunchGatheredDecode's cudaLaunchKernel.
#include "kernels/cuda/plan.h"
#include "kernels/cuda/windowed_cuda.h"

#define ATTNTUNE_CUDA_EMULATION 1
#define __CUDA_ARCH__ 900
#include "kernels/cuda/decode.cu"

namespace {

#define ATTNTUNE_REGISTER_DECODE(tag, d)                                                   \
  attntune_emu::Register(&attntune_decode_split_##tag##_d##d, "attntune_decode_split_" #tag "_d" #d); \
  attntune_emu::Register(&attntune_decode_gathered_##tag##_d##d,                          \
                         "attntune_decode_gathered_" #tag "_d" #d);                       \
  attntune_emu::Register(&attntune_decode_combine_##tag##_d##d,                           \
                         "attntune_decode_combine_" #tag "_d" #d);

const bool registered = [] {
  ATTNTUNE_REGISTER_DECODE(f16, 64)
  ATTNTUNE_REGISTER_DECODE(f16, 128)
  ATTNTUNE_REGISTER_DECODE(bf16, 64)
  ATTNTUNE_REGISTER_DECODE(bf16, 128)
  return true;
}();

}  // namespace
