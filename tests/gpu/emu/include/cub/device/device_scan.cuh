// CPU emulator (tests/gpu/emu): cub::DeviceScan's ExclusiveSum and InclusiveScan as
// select.cu calls them, run on the host over the emulator's device memory.
#pragma once

#include <iterator>
#include <vector>

#include "cuda_emu.h"

namespace cub {

struct DeviceScan {
  /// CUB's two-call protocol: without `temp`, the bytes it needs (any: the emulator
  /// needs none) and nothing else.
  static bool SizeQuery(void* temp, size_t& bytes) {
    if (temp != nullptr) return false;
    bytes = 256;
    return true;
  }

  template <class In, class Out>
  static cudaError_t ExclusiveSum(void* temp, size_t& bytes, In in, Out out, int items,
                                  cudaStream_t stream = nullptr) {
    (void)stream;
    if (SizeQuery(temp, bytes)) return cudaSuccess;
    if (items < 0) return cudaErrorInvalidValue;
    using T = typename std::iterator_traits<In>::value_type;
    std::vector<T> values(in, in + items);  // out may alias in
    T sum{};
    for (int x = 0; x < items; ++x) {
      out[x] = sum;
      sum = sum + values[static_cast<size_t>(x)];
    }
    return cudaSuccess;
  }

  template <class In, class Out, class Op>
  static cudaError_t InclusiveScan(void* temp, size_t& bytes, In in, Out out, Op op, int items,
                                   cudaStream_t stream = nullptr) {
    (void)stream;
    if (SizeQuery(temp, bytes)) return cudaSuccess;
    if (items < 0) return cudaErrorInvalidValue;
    using T = typename std::iterator_traits<In>::value_type;
    std::vector<T> values(in, in + items);
    for (int x = 0; x < items; ++x) {
      const T v = values[static_cast<size_t>(x)];
      out[x] = x == 0 ? v : op(out[x - 1], v);
    }
    return cudaSuccess;
  }
};

}  // namespace cub
