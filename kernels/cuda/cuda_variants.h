// The CUDA implementations of the variant table's rows (DESIGN.md s2): the same Variant
// (parameters, reference, pair counts) run by the CUDA kernels. Plain C++ header; in a
// build without the CUDA kernels every function answers "none" (see cuda_variants_none.cpp).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "kernels/variant.h"

namespace attntune {

/// Whether this build holds the CUDA kernels.
bool CudaKernelsBuilt();

/// The CUDA implementation of `variant` for inputs and outputs in `dtype` ("fp16" or
/// "bf16"; fp32 accumulation) at head dimension `head_dim`: id "cuda", one tunable "Tile"
/// over the compiled tiles of that dtype and head dimension (kernel names; hax adds
/// "Chunk"), `run` uploads the inputs once per tensors object, launches, and returns O
/// as fp32 (poisoned before the launch); `launch` enqueues the kernel alone for the
/// timers; `tolerance` is the dtype's rounding bound. nullopt when the variant has no
/// CUDA kernel (today: dma_decode; ks and dma run the block-skipping kernel, lsh and hax
/// the bucketed kernel, their selection on the host), no tile is compiled for (dtype,
/// head_dim), or the build has none.
std::optional<Implementation> CudaImplementation(const Variant& variant, const std::string& dtype,
                                                 int64_t head_dim);

/// Split-KV decode of `variant` (dense or swa; one query row per head, Lq = 1): id
/// "cuda_decode", one tunable "Split" (key-axis splits, PlanDecode), same run / launch /
/// tolerance contract as CudaImplementation; for dma_decode (every step, Lq = Lk) the
/// gathered decode kernel, no tunables. nullopt for other variants or builds.
std::optional<Implementation> CudaDecodeImplementation(const Variant& variant,
                                                       const std::string& dtype, int64_t head_dim);

/// Makes device `index` current for this thread; "" or the CUDA error.
std::string SelectCudaDevice(int index);

/// Overwrites a device buffer twice the size of the L2 cache, so that the next launch
/// starts cold; throws std::runtime_error on a CUDA error.
void FlushL2();

}  // namespace attntune
