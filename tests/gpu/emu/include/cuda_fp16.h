// CPU emulator (tests/gpu/emu): the fp16 type and the conversions the kernels use, rounded
// to nearest even as the device's _rn intrinsics (through GCC's _Float16).
#pragma once

#include <cstdint>
#include <cstring>

#include "cuda_emu.h"

struct __half {
  uint16_t x;
};
struct __half2 {
  __half x, y;  // x: the low 16 bits
};

inline __half __float2half_rn(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  __half r;
  std::memcpy(&r.x, &h, 2);
  return r;
}
inline float __half2float(__half h) {
  _Float16 v;
  std::memcpy(&v, &h.x, 2);
  return static_cast<float>(v);
}
inline __half2 __floats2half2_rn(float lo, float hi) {
  return __half2{__float2half_rn(lo), __float2half_rn(hi)};
}
inline unsigned short __half_as_ushort(__half h) { return h.x; }
inline __half __ushort_as_half(unsigned short u) { return __half{u}; }
