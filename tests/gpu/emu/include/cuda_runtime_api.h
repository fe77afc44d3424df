// CPU emulator (tests/gpu/emu): the runtime API of cuda_emu.h.
#pragma once
#include "cuda_emu.h"
