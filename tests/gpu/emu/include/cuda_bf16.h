// CPU emulator (tests/gpu/emu): select.cu reads 16-bit elements as Bf16Bits (plan.h), so
// nothing of the toolkit's cuda_bf16.h is needed.
#pragma once
#include "cuda_emu.h"
