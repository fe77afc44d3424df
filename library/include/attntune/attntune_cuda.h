// attntune/attntune_cuda.h: the CUDA component (find_package(attntune COMPONENTS cuda),
// target attntune::attntune_cuda): attntune::Run on device pointers enqueued on a
// cudaStream_t.
//
//   attntune::Problem problem;  // ...
//   problem.dtype = attntune::Dtype::kF16;
//   problem.device = attntune::Device::Cuda(0);
//   attntune::Tensors tensors;  // device pointers: q, k, v, o in fp16; windows int32
//   attntune::Run(config, problem, tensors, stream);  // returns once enqueued
//
// On device buffers attntune runs the windowed kernels ("cuda": dense, swa, hybrid),
// split-KV decode ("cuda_decode": dense, swa), the attention libraries' entries built in
// (cudnn, flashinfer) and ks, dma, lsh, hax ("cuda": their selection on the device,
// reading the caller's fp16/bf16 tensors in place, then the attention kernel).
// dma_decode is refused in one line naming what runs. Where problem.device is the
// thread's current device the call sets no device (a context the caller made current
// stays current); otherwise it makes problem.device current for its duration and then
// the thread's previous device again, on that device's primary context (on a thread that
// never chose one, device 0, whose context that creates if none exists). Launches are
// checked through the thread's last CUDA error (cudaGetLastError, and CUB's peek at it):
// an error an earlier call left pending on the thread is reported by this call, so a
// caller that handled one clears it (cudaGetLastError) first.
// Its scratch (split-KV partials, hybrid windows from w and full, the selection's
// buffers, cuDNN's workspace, FlashInfer's split-KV parts and prefill output) is
// allocated and freed on `stream`: calls on different streams share no memory. ks, dma,
// lsh and hax compute dma's Delta and A and LSH's projection on the host (from the
// caller's delta, a, proj when given, read back first: the call then waits for the
// stream); hybrid reads a caller's windows tensor back the same way.
#ifndef ATTNTUNE_ATTNTUNE_CUDA_H_
#define ATTNTUNE_ATTNTUNE_CUDA_H_

#include <cuda_runtime_api.h>

#include "attntune/attntune.h"

namespace attntune {

/// Enqueues `config` on `problem` (a Device::Cuda problem) on `stream`.
inline Status TryRun(const Config& config, const Problem& problem, const Tensors& tensors,
                     cudaStream_t stream) {
  RunOptions options;
  options.stream = static_cast<void*>(stream);
  return TryRun(config, problem, tensors, options);
}

inline void Run(const Config& config, const Problem& problem, const Tensors& tensors,
                cudaStream_t stream) {
  detail::ThrowIf(TryRun(config, problem, tensors, stream));
}

}  // namespace attntune

#endif  // ATTNTUNE_ATTNTUNE_CUDA_H_
