// What the attention libraries' tests share: the table's entry of a library (by dtype, or
// as bench and the tuner find it for a problem), a problem shape, a CUDA backend with no
// device (cudnn_test, flashinfer_test), and one run's error on a poisoned output (the
// [cudnn] and [flashinfer] cases of gpu_windowed_test).
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/shape.h"
#include "kernels/reference/reference.h"
#include "kernels/variant.h"

namespace attntune::test {

/// The table's entry `id` of `variant` that takes `dtype`; nullptr when none.
inline const Implementation* LibraryEntry(const std::string& id, const std::string& variant,
                                          Dtype dtype) {
  for (const Implementation& impl : FindVariant(variant, "test").implementations) {
    if (impl.id == id && impl.dtypes == std::vector<Dtype>{dtype}) return &impl;
  }
  return nullptr;
}

/// The table's implementation `id` for this problem (decode when Lq = 1), as bench and
/// the tuner find it; nullptr when none.
inline const Implementation* LibraryFor(const std::string& id, const Variant& variant,
                                        Dtype dtype, const Shape& shape) {
  const Phase phase = shape.Lq == 1 ? Phase::kDecode : Phase::kPrefill;
  for (const Implementation* impl :
       variant.ImplementationsFor(kCudaPlatform, {phase, dtype, shape.d})) {
    if (impl->id == id) return impl;
  }
  return nullptr;
}

/// Runs `impl` on poisoned output; the relative error against `ref`, or +inf.
inline double RunError(const Implementation& impl, const Tensors& tensors, const Params& p,
                       const std::vector<double>& ref) {
  std::vector<float> out(tensors.q.size(), std::numeric_limits<float>::quiet_NaN());
  impl.run(tensors, p, out.data());
  return RelErr(out.data(), ref);
}

/// A causal problem of `b` batch elements.
inline Shape LibraryShape(int64_t b, int64_t hq, int64_t hkv, int64_t lq, int64_t lk, int64_t d) {
  Shape s;
  s.B = b;
  s.Hq = hq;
  s.Hkv = hkv;
  s.Lq = lq;
  s.Lk = lk;
  s.d = d;
  return s;
}

/// A CUDA backend without a device: what --impl resolves against.
class NoDeviceCuda : public Backend {
 public:
  DeviceId Id() const override { return {"cuda", 0}; }
  std::string Platform() const override { return kCudaPlatform; }
  DeviceInfo Device() const override { return {"cuda", "none", "{}"}; }
  std::vector<Dtype> Dtypes() const override { return {Dtype::kF16, Dtype::kBf16}; }
  std::unique_ptr<Timer> MakeTimer(std::string*) override { return nullptr; }
  MeasureHooks Hooks(bool) const override { return {}; }
  std::unique_ptr<CounterSource> MakeCounters(Dtype, std::string*) override { return nullptr; }
};

}  // namespace attntune::test
