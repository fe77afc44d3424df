// FlashInfer's implementations without a device: the table's entries (dense and swa, both
// phases, fp16 and bf16, tunable SplitKV) and what they refuse, in one line; bench's
// --impl resolving to them.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/shape.h"
#include "kernels/cuda/libraries/flashinfer_entry.h"
#include "kernels/variant.h"
#include "tests/gpu/library_entries.h"

using namespace attntune;

namespace {

using test::NoDeviceCuda;

const Implementation* FlashInferEntry(const std::string& variant, Dtype dtype) {
  return test::LibraryEntry("flashinfer", variant, dtype);
}

Shape MakeShape(int64_t hq, int64_t hkv, int64_t lq, int64_t lk, int64_t d) {
  return test::LibraryShape(2, hq, hkv, lq, lk, d);
}

}  // namespace

TEST_CASE("The table holds flashinfer entries of dense and swa, both phases, fp16 and bf16") {
  for (const char* variant : {"dense", "swa"}) {
    for (const Dtype dtype : {Dtype::kF16, Dtype::kBf16}) {
      INFO(variant << " " << ToString(dtype));
      const Implementation* impl = FlashInferEntry(variant, dtype);
      REQUIRE(impl != nullptr);
      CHECK(impl->platform == kCudaPlatform);
      CHECK(impl->phases == std::vector<Phase>{Phase::kPrefill, Phase::kDecode});
      // Prefill: SplitKV and the query tile; decode (one row per call) SplitKV alone.
      const std::vector<ParamDecl> prefill = impl->TunablesFor({Phase::kPrefill, dtype, 128});
      REQUIRE(prefill.size() == 2);
      CHECK(prefill[0].name == "SplitKV");
      CHECK(DeclaredValues(prefill[0]) == std::vector<std::string>{"on", "off"});
      CHECK(prefill[0].default_value == "on");
      CHECK(prefill[1].name == "CtaTileQ");
      CHECK(DeclaredValues(prefill[1]) == std::vector<std::string>{"auto", "16", "64", "128"});
      CHECK(prefill[1].default_value == "auto");
      const std::vector<ParamDecl> decode = impl->TunablesFor({Phase::kDecode, dtype, 64});
      REQUIRE(decode.size() == 1);
      CHECK(decode[0].name == "SplitKV");
      for (const Phase phase : {Phase::kPrefill, Phase::kDecode}) {
        CHECK(impl->Refuses({phase, dtype, 128}) == "");
        CHECK(impl->Refuses({phase, dtype, 64}) == "");
        CHECK(impl->Refuses({phase, dtype, 96}) ==
              "attntune compiles FlashInfer's kernels for d=64 and d=128, not d=96");
      }
      CHECK(impl->summary.find("FlashInfer 0.") == 0);
    }
  }
  // Not offered: hybrid (per-head windows), the sparse variants (no exact FlashInfer path
  // built), fp32.
  for (const char* variant : {"hybrid", "ks", "lsh", "hax", "dma", "dma_decode"}) {
    CHECK(FlashInferEntry(variant, Dtype::kF16) == nullptr);
  }
  CHECK(FlashInferEntry("dense", Dtype::kF32) == nullptr);
}

TEST_CASE("flashinfer refuses sinks, non-causal problems and decode groups it lacks") {
  const Implementation* swa = FlashInferEntry("swa", Dtype::kF16);
  REQUIRE(swa != nullptr);
  const Shape shape = MakeShape(4, 2, 64, 64, 64);
  CHECK(swa->check(shape, {{"w", "8"}, {"sink", "0"}, {"SplitKV", "on"}}) == "");
  CHECK(swa->check(shape, {{"w", "8"}, {"sink", "4"}, {"SplitKV", "on"}}) ==
        "sink=4: the library masks one diagonal band; sink keys outside the window need a "
        "second pass merged exactly, which attntune does not build");
  Shape bidirectional = shape;
  bidirectional.causal = false;
  const Implementation* dense = FlashInferEntry("dense", Dtype::kBf16);
  REQUIRE(dense != nullptr);
  CHECK(dense->check(bidirectional, {{"SplitKV", "off"}}) ==
        "the library calls are built for causal attention");
  CHECK(dense->check(MakeShape(10, 2, 1, 500, 128), {{"SplitKV", "on"}}) ==
        "FlashInfer's decode takes 1, 2, 3, 4, 6, 8 or 16 query heads per KV head, not 5 "
        "(Hq=10, Hkv=2)");
  CHECK(dense->check(MakeShape(10, 2, 50, 500, 128), {{"SplitKV", "on"}}) == "");
  CHECK(dense->check(MakeShape(32, 8, 1, 500, 128), {{"SplitKV", "on"}}) == "");
  // The query tile is a prefill choice: decode takes auto only.
  CHECK(dense->check(MakeShape(32, 8, 1, 500, 128), {{"SplitKV", "on"}, {"CtaTileQ", "auto"}}) == "");
  CHECK(dense->check(MakeShape(32, 8, 1, 500, 128), {{"SplitKV", "on"}, {"CtaTileQ", "64"}}) ==
        "CtaTileQ=64: FlashInfer's decode kernel runs one query row and has no query tile "
        "(CtaTileQ=auto)");
  CHECK(dense->check(MakeShape(32, 8, 70, 500, 128), {{"SplitKV", "off"}, {"CtaTileQ", "16"}}) == "");
}

TEST_CASE("bench --impl flashinfer resolves to the entry; other head dims refuse in one line") {
  const NoDeviceCuda backend;
  const Variant& swa = FindVariant("swa", "test");
  CHECK(ImplementationNamed(backend, swa, Dtype::kBf16, 128, "flashinfer").id == "flashinfer");
  CHECK(ImplementationNamed(backend, swa, Dtype::kF16, 64, "flashinfer").dtypes ==
        std::vector<Dtype>{Dtype::kF16});
  CHECK_THROWS_WITH(ImplementationNamed(backend, swa, Dtype::kF16, 96, "flashinfer"),
                    Catch::Contains("attntune compiles FlashInfer's kernels for d=64 and d=128, "
                                    "not d=96"));
  CHECK_THROWS(ImplementationNamed(backend, FindVariant("hybrid", "test"), Dtype::kF16, 128,
                                   "flashinfer"));
}

TEST_CASE("FlashInfer's errors become one line without its function and file") {
  namespace fd = attntune::flashinfer_cuda::detail;
  CHECK(fd::ErrorText("Error in function 'SingleDecodeWithKVCacheDispatched' at "
                      "/x/flashinfer/attention/decode.cuh:684: Unsupported group_size: 5") ==
        "flashinfer: Unsupported group_size: 5");
  CHECK(fd::ErrorText("something else") == "flashinfer: something else");
}
