// Scratch device memory ordered on a stream: allocated before a call's work and freed
// after it on the same stream (cudaMallocAsync, cudaFreeAsync). Each call has its own, so
// calls on different streams (a library caller's threads) share nothing, and nothing waits
// for the device. Plain C++ over the CUDA runtime API; no kernel.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace attntune {

class StreamScratch {
 public:
  /// `bytes` on `stream` (none for 0: get() is nullptr). Throws std::runtime_error.
  StreamScratch(size_t bytes, cudaStream_t stream) : stream_(stream) {
    if (bytes == 0) return;
    const cudaError_t error = cudaMallocAsync(&ptr_, bytes, stream);
    if (error != cudaSuccess) {
      ptr_ = nullptr;
      throw std::runtime_error(std::string("cudaMallocAsync: ") + cudaGetErrorName(error) +
                               ": " + cudaGetErrorString(error));
    }
  }
  ~StreamScratch() {
    if (ptr_ != nullptr) cudaFreeAsync(ptr_, stream_);
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  cudaStream_t stream_;
};

}  // namespace attntune
