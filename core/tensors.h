// Host tensors of one attention problem, fp32, row-major as DESIGN.md s1 names them.
#pragma once

#include <cstdint>
#include <vector>

#include "core/shape.h"

namespace attntune {

struct Tensors {
  Shape shape;
  std::vector<float> q;  // [B,Hq,Lq,d]
  std::vector<float> k;  // [B,Hkv,Lk,d]
  std::vector<float> v;  // [B,Hkv,Lk,d]
  // Optional tensors of DESIGN.md s1 (empty: not supplied, the seeded default applies).
  std::vector<float> scores;     // ks: per-key score x [B,Hkv,Lk]
  std::vector<float> delta;      // dma: Delta [Hkv,d]
  std::vector<float> a;          // dma: A [Hkv]
  std::vector<float> mu;         // lsh: centering vector [Hkv,d]
  std::vector<float> proj;       // lsh: projection R [Hkv,d,h]; h = proj.size() / (Hkv*d)
  std::vector<int32_t> windows;  // hybrid: window per KV head [Hkv], 0 = full

  const float* Q(int64_t b, int64_t h, int64_t i) const {
    return q.data() + ((b * shape.Hq + h) * shape.Lq + i) * shape.d;
  }
  const float* K(int64_t b, int64_t h, int64_t j) const {
    return k.data() + ((b * shape.Hkv + h) * shape.Lk + j) * shape.d;
  }
  const float* V(int64_t b, int64_t h, int64_t j) const {
    return v.data() + ((b * shape.Hkv + h) * shape.Lk + j) * shape.d;
  }
};

/// Standard-normal q, k, v drawn from `seed` (same seed, same tensors, any machine).
Tensors GaussianTensors(const Shape& shape, uint64_t seed);

/// Index of element (b, h, i, c) in an output O[B,Hq,Lq,d].
inline int64_t OutIndex(const Shape& s, int64_t b, int64_t h, int64_t i, int64_t c) {
  return ((b * s.Hq + h) * s.Lq + i) * s.d + c;
}

}  // namespace attntune
