// Every (variant, implementation) against its fp64 reference over awkward shapes:
// lengths 1, 37, 577, 1000, Lq < Lk, GQA groups 1/2/4, B = 2, windows wider than L,
// w = 1, sinks wider than the window, tiles that do not divide L, non-causal.
// Outputs are poisoned with NaN before each run.
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "kernels/kokkos/tiles.h"
#include "kernels/reference/reference.h"
#include "kernels/variant.h"

namespace attntune {
namespace {

constexpr double kFp32Tol = 1e-5;  // rel_err bound for fp32 kernels (DESIGN.md s1 metric)

struct Case {
  std::string variant;
  std::string impl;
  std::string shape;
  std::string params;
};

// Shapes: Hkv = 3 with Hq = 3, 6, 12 gives groups 1, 2, 4.
const std::vector<Case>& Cases() {
  static const std::vector<Case> kCases = {
      {"dense", "tiled", "Hq=1,L=1,d=64", ""},
      {"dense", "tiled", "Hq=6,Hkv=3,L=37,d=64", "Br=7,Bc=13"},
      {"dense", "tiled", "Hq=3,Hkv=3,L=577,d=128", "Br=128,Bc=256"},
      {"dense", "tiled", "B=2,Hq=12,Hkv=3,Lq=37,Lk=577,d=64", "Br=16,Bc=32"},
      {"dense", "tiled", "Hq=6,Hkv=3,Lq=37,Lk=577,d=128,causal=0", "Br=32,Bc=64"},
      {"dense", "tiled", "Hq=3,Hkv=3,L=577,d=64,causal=0", "Br=256,Bc=512"},
      {"dense", "tiled", "Hq=2,Hkv=1,L=1000,d=128", "Br=64,Bc=128"},
      {"dense", "tiled", "Hq=2,Hkv=1,L=1000,d=64", ""},
      {"dense", "tiled", "Hq=2,Hkv=2,L=37,d=24", "Br=5,Bc=3"},  // d not a whole tile
      {"dense", "tiled", "Hq=1,Lq=1,Lk=577,d=64", "Br=1,Bc=1"},
      {"swa", "tiled", "Hq=1,L=1,d=64", "w=1,sink=4"},
      {"swa", "tiled", "Hq=6,Hkv=3,L=37,d=64", "w=1,Br=7,Bc=13"},
      {"swa", "tiled", "Hq=6,Hkv=3,L=37,d=128", "w=5,sink=2,Br=1,Bc=1"},
      {"swa", "tiled", "Hq=3,Hkv=3,L=577,d=128", "w=16,sink=4,Br=32,Bc=64"},
      {"swa", "tiled", "Hq=12,Hkv=3,L=577,d=64", "w=8,sink=20,Br=7,Bc=13"},
      {"swa", "tiled", "Hq=6,Hkv=3,L=577,d=64", "w=2048,Br=128,Bc=256"},
      {"swa", "tiled", "Hq=3,Hkv=3,L=577,d=64", "w=200,sink=4,Br=256,Bc=512"},
      {"swa", "tiled", "B=2,Hq=6,Hkv=3,Lq=37,Lk=577,d=128", "w=100,sink=4,Br=16,Bc=32"},
      {"swa", "tiled", "Hq=2,Hkv=1,L=1000,d=64", "w=300,sink=4,Br=64,Bc=64"},
      {"swa", "tiled", "Hq=4,Hkv=1,L=1000,d=128", "w=128,sink=0"},
      {"swa", "tiled", "Hq=6,Hkv=3,Lq=37,Lk=577,d=64,causal=0", "w=50,sink=4,Br=8,Bc=24"},
      {"swa", "tiled", "Hq=2,Hkv=2,L=577,d=40", "w=64,sink=70,Br=19,Bc=33"},
  };
  return kCases;
}

struct Run {
  Tensors tensors;
  std::vector<float> out;
  std::vector<double> ref;
};

Run RunCase(const Case& c, uint64_t seed) {
  const Shape shape = ParseShape(c.shape, "case");
  const Variant& variant = FindVariant(c.variant, "case");
  const Implementation* impl = variant.FindImplementation(c.impl);
  REQUIRE(impl != nullptr);
  const Params params = ResolveParams(variant, impl, shape, ParseParams(c.params, "case"), "case");
  Run run{GaussianTensors(shape, seed), {}, {}};
  run.out.assign(shape.QElems(), std::numeric_limits<float>::quiet_NaN());  // poison
  impl->run(run.tensors, params, run.out.data());
  run.ref = ReferenceOutput(variant, run.tensors, params);
  return run;
}

TEST_CASE("Kernels match their fp64 reference") {
  uint64_t seed = 100;
  for (const Case& c : Cases()) {
    INFO(c.variant << "/" << c.impl << " " << c.shape << " " << c.params);
    const Run run = RunCase(c, seed++);
    CHECK(RelErr(run.out.data(), run.ref) < kFp32Tol);
  }
}

TEST_CASE("Kernels match their reference over a sweep of tiles and windows") {
  // A cross product at the short lengths (the long ones are in Cases()).
  const std::vector<std::string> shapes = {"Hq=3,Hkv=3,L=37,d=64", "Hq=6,Hkv=3,L=37,d=128",
                                           "Hq=12,Hkv=3,Lq=37,Lk=577,d=64",
                                           "Hq=3,Hkv=3,L=577,d=64"};
  const std::vector<std::string> tiles = {"Br=7,Bc=13", "Br=16,Bc=32", "Br=32,Bc=64",
                                          "Br=128,Bc=256"};
  const std::vector<std::pair<std::string, std::string>> patterns = {
      {"dense", ""},          {"swa", "w=1"},        {"swa", "w=1,sink=4"},
      {"swa", "w=16,sink=4"}, {"swa", "w=8,sink=20"}, {"swa", "w=600,sink=4"}};
  uint64_t seed = 1000;
  for (const std::string& shape : shapes) {
    for (const std::string& tile : tiles) {
      for (const auto& [variant, params] : patterns) {
        const Case c{variant, "tiled", shape, params.empty() ? tile : params + "," + tile};
        INFO(c.variant << " " << c.shape << " " << c.params);
        const Run run = RunCase(c, seed++);
        CHECK(RelErr(run.out.data(), run.ref) < kFp32Tol);
      }
    }
  }
}

TEST_CASE("The reference check catches a wrong kernel") {
  const Case c{"swa", "tiled", "Hq=2,Hkv=1,L=37,d=64", "w=4,sink=1,Br=8,Bc=8"};
  Run run = RunCase(c, 1);
  REQUIRE(RelErr(run.out.data(), run.ref) < kFp32Tol);
  const Shape& s = run.tensors.shape;

  SECTION("one row of NaN") {
    run.out[OutIndex(s, 0, 1, 20, 0)] = std::numeric_limits<float>::quiet_NaN();
    CHECK_FALSE(RelErr(run.out.data(), run.ref) < kFp32Tol);
  }
  SECTION("one row of zeros") {
    std::fill_n(run.out.begin() + OutIndex(s, 0, 1, 36, 0), s.d, 0.0f);
    CHECK_FALSE(RelErr(run.out.data(), run.ref) < kFp32Tol);
  }
  SECTION("one element off by 1e-3") {
    run.out[OutIndex(s, 0, 0, 5, 7)] += 1e-3f;
    CHECK_FALSE(RelErr(run.out.data(), run.ref) < kFp32Tol);
  }
  SECTION("the dense kernel on swa's problem (window ignored)") {
    const Variant& dense = FindVariant("dense", "x");
    dense.FindImplementation("tiled")->run(run.tensors, {{"Br", "8"}, {"Bc", "8"}},
                                           run.out.data());
    CHECK_FALSE(RelErr(run.out.data(), run.ref) < kFp32Tol);
  }
}

TEST_CASE("Rows see only their keys: a huge value outside the window changes nothing") {
  // Key 10's value is huge; rows whose set excludes it must not see it at all.
  const Shape shape = ParseShape("Hq=1,L=64,d=64", "x");
  Tensors t = GaussianTensors(shape, 2);
  for (int64_t c = 0; c < shape.d; ++c) t.v[10 * shape.d + c] = 1e6f;
  const Variant& swa = FindVariant("swa", "x");
  const Params params = {{"w", "4"}, {"sink", "0"}, {"Br", "16"}, {"Bc", "16"}};
  std::vector<float> out(shape.QElems(), std::numeric_limits<float>::quiet_NaN());
  swa.FindImplementation("tiled")->run(t, params, out.data());
  CHECK(RelErr(out.data(), ReferenceOutput(swa, t, params)) < kFp32Tol);
  for (int64_t i = 14; i < 64; ++i) {
    for (int64_t c = 0; c < shape.d; ++c) REQUIRE(std::abs(out[i * shape.d + c]) < 100.0f);
  }
}

}  // namespace
}  // namespace attntune

TEST_CASE("ExpNonPositive: e^x on (-87, 0], 0 below and at -inf, NaN kept, no undefined cast") {
  using attntune::tiles::ExpNonPositive;
  for (float x : {0.0f, -1e-6f, -0.5f, -1.0f, -10.0f, -50.0f, -86.9f}) {
    INFO(x);
    CHECK(std::fabs(ExpNonPositive(x) - std::exp(x)) <= 2e-7f * std::exp(x));
  }
  CHECK(ExpNonPositive(-87.5f) == 0.0f);
  CHECK(ExpNonPositive(-std::numeric_limits<float>::infinity()) == 0.0f);
  CHECK(std::isnan(ExpNonPositive(std::numeric_limits<float>::quiet_NaN())));
}
