// Software prefetches of cache lines, for reading or for writing. Inline assembly, not
// __builtin_prefetch: with the builtin, GCC 12 -O2/-O3 removed every prefetch of
// kernels/kokkos/sparse.cpp (lsh's next-row prefetch, PanelKv::Build's look-ahead) as dead
// code: objdump of sparse.cpp.o showed no prefetch instruction. A volatile asm stays.
#pragma once

#include <cstdint>

namespace attntune {

/// The cache line holding p, for reading.
inline void PrefetchRead(const void* p) {
#if defined(__x86_64__)
  asm volatile("prefetcht0 %0" : : "m"(*static_cast<const char*>(p)));
#else
  __builtin_prefetch(p, 0);
#endif
}

/// The cache line holding p, for writing (prefetchw where the ISA has it).
inline void PrefetchWrite(const void* p) {
#if defined(__x86_64__) && defined(__PRFCHW__)
  asm volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
#else
  PrefetchRead(p);
#endif
}

/// Every 64-byte line that holds a byte of [p, p + bytes), for reading.
inline void PrefetchReadBytes(const void* p, int64_t bytes) {
  if (bytes <= 0) return;
  const uintptr_t first = reinterpret_cast<uintptr_t>(p);
  const uintptr_t end = first + static_cast<uintptr_t>(bytes);
  for (uintptr_t a = first - first % 64; a < end; a += 64) {
    PrefetchRead(reinterpret_cast<const void*>(a));
  }
}

}  // namespace attntune
