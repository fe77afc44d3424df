// The uploads' exactness test against core's rounding: tune's and bench's inputs are
// rounded by RoundToDtype (core, no CUDA), and the CUDA backend uploads them with the
// toolkit's conversion (ToBits, __float2half_rn / __float2bfloat16_rn on the host) and
// lets the selection read the uploaded tensors in place only where every element comes
// back unchanged (FromBits). The two roundings must agree, or the in-place path never
// runs. Host code only: runs without a device.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>

#include "core/types.h"
#include "kernels/cuda/windowed_cuda.h"

namespace cp = attntune::cuda_plan;
using attntune::Dtype;

namespace {

float FromPattern(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

}  // namespace

TEST_CASE("The toolkit's conversion gives RoundToDtype's values, which come back unchanged") {
  std::mt19937 rng(17);
  std::uniform_int_distribution<uint32_t> bits;
  std::normal_distribution<float> normal(0.f, 1.f);
  for (const Dtype dtype : {Dtype::kF16, Dtype::kBf16}) {
    INFO(attntune::ToString(dtype));
    int checked = 0;
    for (int n = 0; n < 400000; ++n) {
      // Random patterns (every binade, subnormals, overflow), Gaussian values (the inputs
      // tune draws), and the ties halfway between neighbours of Gaussian values.
      float x = n % 3 == 0 ? FromPattern(bits(rng)) : normal(rng);
      if (n % 3 == 2) {
        const float r = attntune::RoundToDtype(x, dtype);
        const float next = cp::FromBits(static_cast<uint16_t>(cp::ToBits(r, dtype) + 1), dtype);
        if (std::isfinite(next)) x = r + (next - r) / 2;  // exact in fp32
      }
      if (!std::isfinite(x)) continue;
      const float rounded = attntune::RoundToDtype(x, dtype);
      const float toolkit = cp::FromBits(cp::ToBits(x, dtype), dtype);
      INFO("x=" << x << " bits=" << std::hex << cp::ToBits(x, dtype));
      REQUIRE(toolkit == rounded);  // past the largest finite value both are infinity
      REQUIRE(std::signbit(toolkit) == std::signbit(rounded));
      // What Upload checks: a rounded value converts to itself.
      REQUIRE(cp::FromBits(cp::ToBits(rounded, dtype), dtype) == rounded);
      ++checked;
    }
    CHECK(checked > 390000);  // NaN and infinite patterns are few
  }
}
