// The attention libraries' implementations of the variant table's rows (DESIGN.md s2: a
// library kernel is an implementation like any other), platform "cuda":
// - "cudnn": cuDNN's SDPA through the cuDNN frontend's graph API (cudnn_sdpa.h) for
//   dense, swa and hybrid, prefill and decode, fp16 and bf16; tunables Engine (the SDPA
//   engine family) and Plan (the heuristics' execution plan);
// - "flashinfer": FlashInfer's FA2-style prefill and decode kernels (flashinfer_cuda.h)
//   for dense and swa.
// Each is built when its headers were found at configure time; otherwise it is listed
// in AbsentImplementations with the reason. Plain C++ header.
#pragma once

#include <string>
#include <vector>

#include "kernels/variant.h"

namespace attntune {

/// Appends the libraries' implementations built in to `rows`; the others to `absent`.
void AddLibraryImplementations(std::vector<Variant>* rows,
                               std::vector<AbsentImplementation>* absent);
void AddCudnnImplementations(std::vector<Variant>* rows, std::vector<AbsentImplementation>* absent);
void AddFlashInferImplementations(std::vector<Variant>* rows,
                                  std::vector<AbsentImplementation>* absent);

/// "cudnn 9.26.0 (frontend 1.32.0)" when cuDNN is built in and loads, else "".
std::string CudnnRuntimeVersion();

}  // namespace attntune
