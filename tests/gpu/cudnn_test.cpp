// cuDNN's SDPA implementations without a device: the table's entries, the frontend graphs
// validated (no handle, no device), the refusals; and, under [absent] (run by ctest as
// cudnn_absent_test with ATTNTUNE_CUDNN_LIBRARY=/nonexistent), the one line that says
// cuDNN does not load.
#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "core/error.h"
#include "core/shape.h"
#include "kernels/cuda/libraries/cudnn_sdpa.h"
#include "kernels/cuda/libraries/library_plan.h"
#include "kernels/variant.h"
#include "tests/gpu/library_entries.h"

using namespace attntune;
namespace lp = attntune::library_plan;

namespace {

using test::NoDeviceCuda;

const Implementation* CudnnEntry(const std::string& variant, Dtype dtype) {
  return test::LibraryEntry("cudnn", variant, dtype);
}

Shape MakeShape(int64_t hq, int64_t hkv, int64_t lq, int64_t lk, int64_t d) {
  return test::LibraryShape(2, hq, hkv, lq, lk, d);
}

}  // namespace

TEST_CASE("The table holds cudnn entries of dense, swa and hybrid, both phases, fp16 and bf16") {
  for (const char* variant : {"dense", "swa", "hybrid"}) {
    for (const Dtype dtype : {Dtype::kF16, Dtype::kBf16}) {
      INFO(variant << " " << ToString(dtype));
      const Implementation* impl = CudnnEntry(variant, dtype);
      REQUIRE(impl != nullptr);
      CHECK(impl->platform == kCudaPlatform);
      CHECK(impl->phases == std::vector<Phase>{Phase::kPrefill, Phase::kDecode});
      REQUIRE(impl->tunables.size() == 2);
      CHECK(impl->tunables[0].name == "Engine");
      CHECK(impl->tunables[1].name == "Plan");
      CHECK(impl->Refuses({Phase::kPrefill, dtype, 128}) == "");
      CHECK(impl->Refuses({Phase::kDecode, dtype, 64}) == "");
      CHECK(impl->Refuses({Phase::kPrefill, dtype, 100}) ==
            "cuDNN's SDPA takes d a multiple of 8 up to 256, not d=100");
    }
  }
  for (const char* variant : {"ks", "lsh", "hax", "dma"}) {
    CHECK(CudnnEntry(variant, Dtype::kF16) == nullptr);
  }
}

TEST_CASE("cudnn refuses sinks with the reason") {
  const Shape shape = MakeShape(4, 2, 64, 64, 64);
  const Implementation* swa = CudnnEntry("swa", Dtype::kF16);
  REQUIRE(swa != nullptr);
  CHECK(swa->check(shape, {{"w", "8"}, {"sink", "0"}, {"Engine", "auto"}, {"Plan", "0"}}) == "");
  CHECK(swa->check(shape, {{"w", "8"}, {"sink", "4"}, {"Engine", "auto"}, {"Plan", "0"}}) ==
        "sink=4: the library masks one diagonal band; sink keys outside the window need a "
        "second pass merged exactly, which attntune does not build");
  const Implementation* hybrid = CudnnEntry("hybrid", Dtype::kBf16);
  REQUIRE(hybrid != nullptr);
  CHECK(hybrid->check(shape, {{"w", "8"}, {"full", "1"}, {"sink", "2"}, {"Engine", "auto"},
                              {"Plan", "0"}}) ==
        "sink=2: the library masks one diagonal band; sink keys outside the window need a "
        "second pass merged exactly, which attntune does not build");
}

TEST_CASE("The frontend validates every graph the implementations build, without a device") {
  const std::string error = cudnn_sdpa::LoadError();
  if (!error.empty()) {
    // The graphs need libcudnn's version even to validate; the build found no libcudnn to
    // fall back to either, so this machine cannot check them.
    WARN("libcudnn does not load here: " << error);
    return;
  }
  CHECK(cudnn_sdpa::LoadedVersion().rfind("9.", 0) == 0);
  const std::vector<Shape> shapes = {MakeShape(4, 2, 333, 333, 128), MakeShape(3, 3, 37, 37, 64),
                                     MakeShape(4, 2, 1, 1000, 128), MakeShape(2, 1, 300, 577, 64)};
  for (const Shape& shape : shapes) {
    for (const bool bf16 : {false, true}) {
      for (const int64_t w : {int64_t{0}, int64_t{1}, int64_t{40}, int64_t{5000}}) {
        for (const auto engine : {cudnn_sdpa::Engine::kAuto, cudnn_sdpa::Engine::kComposite,
                                  cudnn_sdpa::Engine::kUnified}) {
          const std::vector<int64_t> windows(static_cast<size_t>(shape.Hkv), w);
          const lp::WindowPlan plan = lp::PlanWindowCalls(shape, windows, 0);
          REQUIRE(plan.refusal == "");
          for (const lp::WindowCall& call : plan.calls) {
            INFO(shape.ToString() << (bf16 ? " bf16" : " fp16") << " w=" << w << " engine "
                                  << static_cast<int>(engine) << " left=" << call.left);
            for (const int sm : {80, 90}) {
              INFO("sm_" << sm);
              const std::string why = cudnn_sdpa::ValidateGraph({shape, call, bf16, engine}, sm);
              if (engine == cudnn_sdpa::Engine::kUnified) {
                // The unified engine takes a band from cuDNN 9.21 on; before, it refuses so.
                CHECK((why == "" || why.find("requires cuDNN 9.21.0") != std::string::npos));
              } else {
                CHECK(why == "");
              }
            }
          }
        }
      }
    }
  }
}

TEST_CASE("Without libcudnn the implementations refuse in one line", "[.absent]") {
  // ctest runs this with ATTNTUNE_CUDNN_LIBRARY=/nonexistent (tests/gpu/CMakeLists.txt).
  const std::string expected =
      "cudnn: libcudnn.so.9 not found (ATTNTUNE_CUDNN_LIBRARY=/nonexistent: /nonexistent: "
      "cannot open shared object file: No such file or directory)";
  CHECK(cudnn_sdpa::LoadError() == expected);
  CHECK(cudnn_sdpa::LoadedVersion() == "");
  const Implementation* dense = CudnnEntry("dense", Dtype::kF16);
  REQUIRE(dense != nullptr);
  CHECK(dense->Refuses({Phase::kPrefill, Dtype::kF16, 128}) == expected);
  CHECK_THROWS_WITH(cudnn_sdpa::ValidateGraph({MakeShape(2, 1, 8, 8, 64), {0, 1, 0, 0}, false,
                                               cudnn_sdpa::Engine::kAuto},
                                              90),
                    expected);
  CHECK(RuntimeLibraries(kCudaPlatform) == "");
  // bench --impl cudnn says so in one line (cli/ prefixes "attntune: error: ").
  const NoDeviceCuda backend;
  CHECK_THROWS_WITH(ImplementationNamed(backend, FindVariant("swa", "test"), Dtype::kBf16, 128, "cudnn"),
                    "--impl: " + expected);
  CHECK(ImplementationNamed(backend, FindVariant("swa", "test"), Dtype::kBf16, 128, "").id == "cuda");
}
