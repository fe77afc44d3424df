// CPU emulator (tests/gpu/emu): cub::DeviceRadixSort::SortPairs as select.cu calls it, a
// stable sort of (key, value) pairs by the key's bits [begin_bit, end_bit) (unsigned keys),
// run on the host over the emulator's device memory.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <type_traits>
#include <vector>

#include "cuda_emu.h"

namespace cub {

struct DeviceRadixSort {
  template <class K, class V>
  static cudaError_t SortPairs(void* temp, size_t& bytes, const K* keys_in, K* keys_out,
                               const V* values_in, V* values_out, int items, int begin_bit = 0,
                               int end_bit = static_cast<int>(sizeof(K) * 8),
                               cudaStream_t stream = nullptr) {
    static_assert(std::is_unsigned<K>::value, "the emulator sorts unsigned keys");
    (void)stream;
    if (temp == nullptr) {
      bytes = 256;
      return cudaSuccess;
    }
    if (items < 0 || begin_bit < 0 || end_bit > static_cast<int>(sizeof(K) * 8) ||
        begin_bit > end_bit) {
      return cudaErrorInvalidValue;
    }
    const int width = end_bit - begin_bit;
    const K mask = width >= static_cast<int>(sizeof(K) * 8) ? static_cast<K>(~K{0})
                                                             : static_cast<K>((K{1} << width) - 1);
    const auto bits = [&](K key) { return static_cast<K>((key >> begin_bit) & mask); };
    std::vector<int> order(static_cast<size_t>(items));
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int a, int b) { return bits(keys_in[a]) < bits(keys_in[b]); });
    std::vector<K> keys(order.size());
    std::vector<V> values(order.size());
    for (size_t x = 0; x < order.size(); ++x) {
      keys[x] = keys_in[order[x]];
      values[x] = values_in[order[x]];
    }
    std::copy(keys.begin(), keys.end(), keys_out);
    std::copy(values.begin(), values.end(), values_out);
    return cudaSuccess;
  }
};

}  // namespace cub
