// [gpu] FlashInfer's kernels ("flashinfer") against the fp64 reference: dense and swa
// prefill and decode, fp16 and bf16, head dims 64 and 128, over awkward shapes (L not a
// multiple of 64, GQA 2 and 1, B = 2, windows 1 and past L, Lq < Lk), every SplitKV and
// CtaTileQ value (each either matches or, for a tile the GPU cannot hold, refuses in one line),
// outputs poisoned before each run (here on the host, and the device's O by the
// implementation's run). Needs a device of sm_80 or later.
#include <catch2/catch.hpp>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/params.h"
#include "core/shape.h"
#include "core/tensors.h"
#include "kernels/reference/reference.h"
#include "kernels/variant.h"
#include "tests/gpu/library_entries.h"

using namespace attntune;

namespace {

Shape MakeShape(int64_t b, int64_t hq, int64_t hkv, int64_t lq, int64_t lk, int64_t d) {
  return test::LibraryShape(b, hq, hkv, lq, lk, d);
}

const Implementation* FlashInfer(const Variant& variant, Dtype dtype, const Shape& shape) {
  return test::LibraryFor("flashinfer", variant, dtype, shape);
}

using test::RunError;

// Every combination of the tunables' declared values (SplitKV; CtaTileQ in prefill).
std::vector<Params> EveryTunableValue(const std::vector<ParamDecl>& tunables) {
  std::vector<Params> out = {{}};
  for (const ParamDecl& decl : tunables) {
    std::vector<Params> next;
    for (const Params& partial : out) {
      for (const std::string& value : DeclaredValues(decl)) {
        Params p = partial;
        p[decl.name] = value;
        next.push_back(p);
      }
    }
    out = next;
  }
  return out;
}

struct Case {
  const char* variant;
  Params given;
};

// dense; swa w = 1, 40 and > Lk.
std::vector<Case> Cases(int64_t lk) {
  const std::string past = std::to_string(lk + 7);
  return {{"dense", {}},
          {"swa", {{"w", "1"}, {"sink", "0"}}},
          {"swa", {{"w", "40"}, {"sink", "0"}}},
          {"swa", {{"w", past}, {"sink", "0"}}}};
}

// Every case on `shape` in both dtypes and every SplitKV value.
void CheckShape(const Shape& shape) {
  const Tensors tensors = GaussianTensors(shape, 13);
  for (const Case& c : Cases(shape.Lk)) {
    const Variant& variant = FindVariant(c.variant, "test");
    for (const Dtype dtype : {Dtype::kF16, Dtype::kBf16}) {
      const Implementation* impl = FlashInfer(variant, dtype, shape);
      REQUIRE(impl != nullptr);
      const Params base = ResolveParams(variant, impl, shape, c.given, "test");
      const std::vector<double> ref = ReferenceOutput(variant, tensors, base);
      const ProblemKind kind{shape.Lq == 1 ? Phase::kDecode : Phase::kPrefill, dtype, shape.d};
      for (const Params& tunables : EveryTunableValue(impl->TunablesFor(kind))) {
        Params given = c.given;
        given.insert(tunables.begin(), tunables.end());
        const Params p = ResolveParams(variant, impl, shape, given, "test");
        INFO(shape.ToString() << " " << c.variant << " " << ParamsToString(p) << " "
                              << ToString(dtype));
        REQUIRE(impl->check(shape, p) == "");
        // Run outside CHECK (which would take the exception as a failure of its own).
        double error = 0.0;
        try {
          error = RunError(*impl, tensors, p, ref);
        } catch (const std::runtime_error& e) {
          // A query tile this GPU cannot hold: refused with FlashInfer's one-line reason.
          INFO(e.what());
          CHECK(std::string(e.what()).rfind("flashinfer: ", 0) == 0);
          CHECK(std::string(e.what()).find('\n') == std::string::npos);
          CHECK(p.at("CtaTileQ") != "auto");
          continue;
        }
        CHECK(error < impl->tolerance(p));
        impl->launch(tensors, p);  // enqueues only; must not throw
      }
    }
  }
}

}  // namespace

TEST_CASE("flashinfer prefill matches the fp64 reference over awkward shapes", "[gpu][flashinfer]") {
  // L not a multiple of 64; GQA 2 and 1; d 128 and 64; two batch elements.
  CheckShape(MakeShape(2, 4, 2, 333, 333, 128));
  CheckShape(MakeShape(1, 3, 3, 37, 37, 64));
}

TEST_CASE("flashinfer prefill of a chunk (Lq < Lk) matches the fp64 reference", "[gpu][flashinfer]") {
  CheckShape(MakeShape(1, 4, 2, 100, 301, 64));
  // Few query rows against many keys: FlashInfer splits the keys when given its buffer.
  CheckShape(MakeShape(2, 2, 1, 16, 5000, 128));
}

TEST_CASE("flashinfer decode (one query row) matches the fp64 reference", "[gpu][flashinfer]") {
  CheckShape(MakeShape(1, 4, 2, 1, 333, 128));
  CheckShape(MakeShape(2, 2, 2, 1, 1000, 64));
  CheckShape(MakeShape(1, 16, 2, 1, 4099, 128));  // GQA 8, split across thread blocks
}

TEST_CASE("flashinfer refuses what it cannot run, in one line", "[gpu][flashinfer]") {
  const Variant& swa = FindVariant("swa", "test");
  const Shape shape = MakeShape(1, 10, 2, 1, 300, 128);  // decode, GQA 5
  const Implementation* impl = FlashInfer(swa, Dtype::kF16, shape);
  REQUIRE(impl != nullptr);
  // ResolveParams runs the implementation's check: its refusal is the one line.
  CHECK_THROWS_WITH(ResolveParams(swa, impl, shape, {{"w", "40"}, {"sink", "0"}}, "test"),
                    "test: FlashInfer's decode takes 1, 2, 3, 4, 6, 8 or 16 query heads per KV "
                    "head, not 5 (Hq=10, Hkv=2)");
  CHECK(FlashInfer(swa, Dtype::kF16, MakeShape(1, 4, 2, 64, 64, 96)) == nullptr);
}
