// TensorData: a tensor's elements owned, or a read-only view of a caller's buffer (the
// library's runs read the caller's memory in place); the inputs rounded to a dtype.
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/random.h"
#include "core/tensors.h"

namespace attntune {

TEST_CASE("a view reads the caller's buffer in place; copies of a view are views") {
  std::vector<float> buffer = {1, 2, 3, 4};
  const TensorData<float> view = TensorData<float>::View(buffer.data(), buffer.size());
  CHECK(view.IsView());
  CHECK(view.size() == 4);
  CHECK(view.data() == buffer.data());
  buffer[2] = 30;
  CHECK(view[2] == 30);  // not a copy
  const TensorData<float> copy = view;
  CHECK(copy.data() == buffer.data());
  CHECK(copy == TensorData<float>(std::vector<float>{1, 2, 30, 4}));
  CHECK(view.ToVector() == std::vector<float>{1, 2, 30, 4});
  float sum = 0;
  for (float x : view) sum += x;
  CHECK(sum == 37);
  // nullptr with no elements: not supplied.
  const TensorData<float> none = TensorData<float>::View(nullptr, 0);
  CHECK(none.empty());
  CHECK(!none.IsView());
}

TEST_CASE("owned data is written, copied deeply and compared by value") {
  TensorData<int32_t> owned = {0, 1, 37};
  CHECK(!owned.IsView());
  owned[1] = 5;
  TensorData<int32_t> copy = owned;
  copy[0] = 9;
  CHECK(owned[0] == 0);
  CHECK(owned != copy);
  owned.assign(3, 7);
  CHECK(owned == TensorData<int32_t>({7, 7, 7}));
  owned.resize(5);
  CHECK(owned.size() == 5);
  Tensors t = GaussianTensors(Shape{1, 2, 1, 3, 3, 4, true}, 1);
  const Tensors u = t;  // the struct copies its owned tensors
  t.q[0] += 1;
  CHECK(u.q[0] != t.q[0]);
}

namespace {

uint32_t Bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

float FromBits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

// fp16 by the compiler's conversion (round to nearest even), as fp32.
float CompilerF16(float x) { return static_cast<float>(static_cast<_Float16>(x)); }

}  // namespace

TEST_CASE("RoundToDtype gives the nearest fp16 value, as the compiler's conversion does") {
  std::vector<float> xs = {0.f, -0.f, 1.f, -1.f, 65504.f, 65519.f, 65520.f, -65520.f, 1e30f,
                           0x1p-14f, 0x1p-24f, 0x1p-25f, 0x3p-25f, 0x1.ffcp-15f, 0x1.002p0f,
                           0x1.006p0f, 0x1.001p0f, 0x1.003p0f, 2049.f, 2051.f, 1e-10f,
                           std::numeric_limits<float>::infinity(),
                           std::numeric_limits<float>::denorm_min()};
  std::mt19937 rng(3);
  std::uniform_int_distribution<uint32_t> bits;
  for (int n = 0; n < 200000; ++n) {  // every exponent, ties and subnormals among them
    const float x = FromBits(bits(rng));
    if (!std::isnan(x)) xs.push_back(x);
  }
  for (int e = -26; e < 17; ++e) {  // exact ties of fp16's step at every binade
    for (uint32_t m = 0; m < 64; ++m) xs.push_back(std::ldexp(1.f + (2 * m + 1) * 0x1p-11f, e));
  }
  // Every fp32 value near where the rounding changes kind: the smallest normal fp16 (below
  // it, the subnormals' fixed step) and the largest finite one (above it, infinity).
  for (const float edge : {0x1p-14f, 65504.f, 65520.f}) {
    for (int32_t d = -20000; d <= 20000; ++d) {
      for (const float sign : {1.f, -1.f}) xs.push_back(sign * FromBits(Bits(edge) + d));
    }
  }
  for (const float x : xs) {
    INFO("x = " << x << " (bits " << Bits(x) << ")");
    REQUIRE(Bits(RoundToDtype(x, Dtype::kF16)) == Bits(CompilerF16(x)));
    REQUIRE(Bits(RoundToDtype(x, Dtype::kF32)) == Bits(x));
  }
  CHECK(std::isnan(RoundToDtype(std::nanf(""), Dtype::kF16)));
  CHECK(std::isnan(RoundToDtype(std::nanf(""), Dtype::kBf16)));
}

TEST_CASE("RoundToDtype gives the nearest bf16 value, ties to even") {
  std::mt19937 rng(4);
  std::uniform_int_distribution<uint32_t> bits;
  for (int n = 0; n < 200000; ++n) {
    const float x = FromBits(bits(rng));
    if (!std::isfinite(x)) continue;
    const float r = RoundToDtype(x, Dtype::kBf16);
    INFO("x bits " << Bits(x));
    REQUIRE((Bits(r) & 0xffffu) == 0);  // a bf16 value
    // The two bf16 values around x: x's top 16 bits, and the next one away from zero.
    // Past the largest finite value, `above` is infinity, which rounding takes for 2^128.
    const float below = FromBits(Bits(x) & 0xffff0000u);
    const float above = FromBits((Bits(x) & 0xffff0000u) + 0x10000u);
    const double above_value = std::isinf(above) ? std::copysign(0x1p128, x) : above;
    const double to_below = std::fabs(static_cast<double>(x) - below);
    const double to_above = std::fabs(above_value - x);
    if (to_below < to_above) REQUIRE(Bits(r) == Bits(below));
    if (to_above < to_below) REQUIRE(Bits(r) == Bits(above));  // inf past the largest
    if (to_below == to_above) REQUIRE((Bits(r) & 0x10000u) == 0);  // the even one
  }
  CHECK(RoundToDtype(1.f + 0x1p-8f, Dtype::kBf16) == 1.f);          // a tie: down to even
  CHECK(RoundToDtype(1.f + 0x3p-8f, Dtype::kBf16) == 1.f + 0x1p-6f);  // a tie: up to even
  CHECK(std::isinf(RoundToDtype(std::numeric_limits<float>::max(), Dtype::kBf16)));
}

TEST_CASE("Normal::Fill gives what Next gives, one call at a time") {
  // Sizes about the block of pairs (2^20) and the threads' share (2^15 pairs), odd and
  // even, from a fresh stream and from one with a spare left by an odd count.
  for (const size_t n : {size_t{0}, size_t{1}, size_t{2}, size_t{3}, size_t{65535},
                         size_t{65536}, size_t{65537}, size_t{1} << 21, (size_t{1} << 21) + 1,
                         (size_t{1} << 22) + 3}) {
    for (const size_t before : {size_t{0}, size_t{1}, size_t{2}}) {
      INFO("n " << n << " after " << before);
      Normal filled(11), called(11);
      std::vector<float> lead(before + 1);
      filled.Fill(lead.data(), before);
      for (size_t x = 0; x < before; ++x) REQUIRE(lead[x] == static_cast<float>(called.Next()));
      std::vector<float> out(n + 1, -1.f);
      filled.Fill(out.data(), n);
      CHECK(out[n] == -1.f);  // nothing written past n
      size_t differ = 0;
      for (size_t x = 0; x < n; ++x) differ += out[x] != static_cast<float>(called.Next());
      CHECK(differ == 0);
      CHECK(filled.Next() == called.Next());  // the stream goes on alike, spare included
    }
  }
}

TEST_CASE("RoundInputs rounds q, k and v (a view to an owned copy) and nothing else") {
  Tensors t = GaussianTensors(Shape{1, 2, 1, 5, 5, 8, true}, 2);
  const std::vector<float> caller_k = t.k.ToVector();
  t.k = TensorData<float>::View(caller_k.data(), caller_k.size());
  t.mu = std::vector<float>{0.1f, 0.2f};
  const Tensors before = t;
  RoundInputs(&t, Dtype::kF32);
  CHECK(t.q == before.q);
  CHECK(t.k.IsView());
  for (const Dtype dtype : {Dtype::kF16, Dtype::kBf16}) {
    Tensors u = before;
    RoundInputs(&u, dtype);
    CHECK(!u.k.IsView());
    CHECK(caller_k == before.k.ToVector());  // the caller's buffer is not written
    int changed = 0;
    for (const auto& [got, was] : {std::pair{&u.q, &before.q}, std::pair{&u.k, &before.k},
                                   std::pair{&u.v, &before.v}}) {
      REQUIRE(got->size() == was->size());
      for (size_t n = 0; n < got->size(); ++n) {
        REQUIRE((*got)[n] == RoundToDtype((*was)[n], dtype));
        changed += (*got)[n] != (*was)[n];
      }
    }
    CHECK(changed > 0);  // Gaussian values are not all of a 16-bit dtype
    CHECK(u.mu == before.mu);
  }
}

}  // namespace attntune
