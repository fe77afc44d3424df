// What the attention libraries' tests without a device share (cudnn_test, flashinfer_test):
// the table's entry of a library, a problem shape, and a CUDA backend with no device.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/shape.h"
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

/// B = 2, causal.
inline Shape LibraryShape(int64_t hq, int64_t hkv, int64_t lq, int64_t lk, int64_t d) {
  Shape s;
  s.B = 2;
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
