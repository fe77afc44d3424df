// kernels/cuda/select.cu compiled as C++ for the CPU emulator (include/cuda_emu.h): its
// kernels and launchers as they are, the shared headers as the host compiles them (so
// that this object and the rest of the test agree on every inline function), the
// kernels' device paths (DeviceWarp, DeviceBlock) by __CUDA_ARCH__, defined only here.
#include "kernels/cuda/plan.h"
#include "kernels/cuda/select_core.h"
#include "kernels/cuda/select_cuda.h"

#define ATTNTUNE_CUDA_EMULATION 1
#define __CUDA_ARCH__ 900
#include "kernels/cuda/select.cu"
