// The CUDA implementations of the variant table's rows (DESIGN.md s2), added to the rows
// by the table itself (kernels/variant_table.cpp). Plain C++ header; in a build without
// the CUDA kernels AddCudaImplementations adds nothing (cuda_implementations_none.cpp).
//
// Per variant and input dtype (fp16, bf16; fp32 accumulation), platform "cuda":
// - "cuda" (prefill): the tensor-core kernel of the variant's family (windowed for dense,
//   swa, hybrid; block-skipping over prefix top-k lists for ks, dma; bucketed for lsh,
//   hax; selection on the host), tunable "Tile" over the compiled tiles of the problem's
//   dtype and head dimension (hax adds "Chunk");
// - "cuda_decode" (decode): split-KV decode for dense and swa (tunable "Split"), the
//   gathered decode kernel for dma_decode (every step at once, no tunables).
// `run` uploads the inputs once per tensors object, launches on a poisoned output and
// returns O as fp32; `launch` enqueues the kernel alone for the timers; `tolerance` is
// the dtype's rounding bound.
#pragma once

#include <string>
#include <vector>

#include "kernels/variant.h"

namespace attntune {

/// Whether this build holds the CUDA kernels.
bool CudaKernelsBuilt();

/// Appends the CUDA implementations to the rows they exist for (attntune's kernels, then
/// the attention libraries built in); each library this build lacks goes to `absent` with
/// the reason.
void AddCudaImplementations(std::vector<Variant>* rows, std::vector<AbsentImplementation>* absent);

/// The versions of the libraries the CUDA implementations load at run time ("cudnn
/// 9.26.0"), "" when none is built in or loads.
std::string CudaRuntimeLibraries();

/// Makes device `index` current for this thread; "" or the CUDA error.
std::string SelectCudaDevice(int index);

/// Overwrites a device buffer twice the size of the L2 cache, so that the next launch
/// starts cold; throws std::runtime_error on a CUDA error.
void FlushL2();

}  // namespace attntune
