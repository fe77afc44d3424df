// The CUDA runtime as the CPU emulator of tests/gpu/emu provides it (cuda_emu.h): enough
// of the API, the kernel qualifiers and the warp intrinsics for kernels/cuda/select.cu to
// compile as C++ and run its kernels on the CPU. Not the toolkit's header.
#pragma once

#include "cuda_emu.h"
