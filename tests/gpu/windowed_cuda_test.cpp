// [gpu] Numerics of the CUDA windowed kernels against the fp64 reference, the run-time
// confirmation of the static resource table, and timer sanity. Needs a device, or runs
// its numerics on the CPU emulator (tests/gpu/emu, ATTNTUNE_CUDA_EMULATION: without the
// cases about the device itself, its timers and counters).
#include "kernels/cuda/windowed_cuda.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cmath>
#include <optional>
#include <thread>
#include <utility>
#include <vector>

#include "kernels/cuda/cuda_implementations.h"
#include "kernels/cuda/plan.h"
#include "kernels/reference/reference.h"
#include "kernels/selection/selection.h"
#include "core/shape.h"
#include "core/tensors.h"
#include "kernels/variant.h"
#if !defined(ATTNTUNE_CUDA_EMULATION)
#include "profiler/cuda/cupti_activity.h"
#include "profiler/cuda/metric_set.h"
#endif

namespace cp = attntune::cuda_plan;
using namespace attntune;

namespace {

// fp16 keeps 11 significant bits, bf16 8: inputs rounded once, P rounded once.
double Tolerance(cp::Dtype dtype) { return dtype == cp::Dtype::kF16 ? 2e-3 : 1.6e-2; }

// B=2, GQA 6/3, Lq = Lk = 1 or 37, or Lq 300 < Lk 577.
Shape AwkwardShape(int64_t lq_lk, int64_t d) {
  Shape shape;
  shape.B = 2;
  shape.Hq = 6;
  shape.Hkv = 3;
  shape.Lk = lq_lk;
  shape.Lq = lq_lk == 577 ? 300 : lq_lk;
  shape.d = d;
  return shape;
}

}  // namespace

namespace {

// The table's CUDA implementation of `variant` for (phase, dtype, head_dim), with its
// tunables for that kind, as the tuner and bench find it; nullopt when there is none.
std::optional<attntune::Implementation> CudaEntry(const attntune::Variant& variant,
                                                  const std::string& dtype, int64_t head_dim,
                                                  attntune::Phase phase) {
  using namespace attntune;
  const ProblemKind kind{phase, *DtypeFromString(dtype), head_dim};
  // attntune's own kernels ("cuda", "cuda_decode"), not the attention libraries' entries
  // (cudnn_cuda_test.cpp checks those).
  const Implementation* own = nullptr;
  for (const Implementation* i : variant.ImplementationsFor(kCudaPlatform, kind)) {
    if (own == nullptr && i->id.rfind("cuda", 0) == 0) own = i;
  }
  if (own == nullptr) return std::nullopt;
  Implementation impl = *own;
  impl.tunables = impl.TunablesFor(kind);
  return impl;
}
std::optional<attntune::Implementation> CudaImplementation(const attntune::Variant& variant,
                                                           const std::string& dtype, int64_t d) {
  return CudaEntry(variant, dtype, d, attntune::Phase::kPrefill);
}
std::optional<attntune::Implementation> CudaDecodeImplementation(const attntune::Variant& variant,
                                                                 const std::string& dtype,
                                                                 int64_t d) {
  return CudaEntry(variant, dtype, d, attntune::Phase::kDecode);
}

}  // namespace

#if !defined(ATTNTUNE_CUDA_EMULATION)
TEST_CASE("Every compiled tile launches on this device", "[gpu]") {
  for (const cp::WindowedTile& tile : cp::WindowedTiles()) {
    INFO(cp::KernelName(tile));
    CHECK(cp::ConfirmOnDevice(tile) == "");
  }
}
#endif

TEST_CASE("CUDA windowed kernels match the fp64 reference over awkward shapes", "[gpu]") {
  struct Case {
    const char* variant;
    int64_t w, sink;
  };
  const Case cases[] = {
      {"dense", 0, 0}, {"swa", 37, 0}, {"swa", 100, 4}, {"swa", 1, 3}, {"hybrid", 50, 2}};
  for (const cp::WindowedTile& tile : cp::WindowedTiles()) {
    for (int64_t lq_lk : {1, 37, 577}) {
      for (const Case& c : cases) {
        const Shape shape = AwkwardShape(lq_lk, tile.d);
        const Tensors tensors = GaussianTensors(shape, 11);
        Params params;
        const std::string id = c.variant;
        if (id == "swa") params = {{"w", std::to_string(c.w)}, {"sink", std::to_string(c.sink)}};
        if (id == "hybrid") {  // KV head 0 full, heads 1 and 2 a window of w
          params = {{"w", std::to_string(c.w)}, {"full", "1"}, {"sink", std::to_string(c.sink)}};
        }
        const std::vector<double> ref =
            ReferenceOutput(FindVariant(c.variant, "test"), tensors, params);
        cp::WindowedProblem problem;
        problem.shape = shape;
        problem.window = c.w;
        problem.sink = c.sink;
        std::vector<int32_t> windows;
        if (id == "hybrid") {
          for (int64_t w : HybridWindows(tensors, params))
            windows.push_back(static_cast<int32_t>(w));
          problem.per_head_windows = true;
        }
        std::vector<float> out;
        INFO(cp::KernelName(tile) << " " << c.variant << " w=" << c.w << " sink=" << c.sink << " "
                                  << shape.ToString());
        REQUIRE(cp::RunWindowedOnDevice(problem, tile, tensors, windows, &out) == "");
        CHECK(RelErr(out.data(), ref) < Tolerance(tile.dtype));
      }
    }
  }
}

#if !defined(ATTNTUNE_CUDA_EMULATION)
TEST_CASE("CUDA-event and CUPTI timers time a kernel and exclude host work", "[gpu]") {
  const Shape shape = ParseShape("Hq=8,Hkv=8,L=2048,d=128", "test");
  const Tensors tensors = GaussianTensors(shape, 3);
  cp::WindowedProblem problem;
  problem.shape = shape;
  const cp::WindowedTile& tile = cp::WindowedTiles()[1];
  std::vector<float> out;
  REQUIRE(cp::RunWindowedOnDevice(problem, tile, tensors, {}, &out) == "");  // warm-up
  CudaEventTimer events;
  const double ms =
      events.TimeMs([] { std::this_thread::sleep_for(std::chrono::milliseconds(20)); });
  CHECK(ms >= 19.0);  // events bracket host time on the default stream
  const std::string why = StartCuptiActivity();
  if (!why.empty()) {
    WARN("CUPTI unavailable on this device: " << why);
    return;
  }
  CuptiTimer cupti;
  const double kernel_ms = cupti.TimeMs([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    REQUIRE(cp::RunWindowedOnDevice(problem, tile, tensors, {}, &out) == "");
  });
  CHECK(kernel_ms > 0.0);
  CHECK(kernel_ms < 20.0);  // kernel time only, not the host sleep
  REQUIRE(cupti.LastSpanMs().has_value());
  CHECK(*cupti.LastSpanMs() >= kernel_ms * (1 - 1e-9));  // one stream: none overlap
  // Two kernels with the host asleep between them: their span holds the sleep.
  const double two_ms = cupti.TimeMs([&] {
    REQUIRE(cp::RunWindowedOnDevice(problem, tile, tensors, {}, &out) == "");
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    REQUIRE(cp::RunWindowedOnDevice(problem, tile, tensors, {}, &out) == "");
  });
  StopCuptiActivity();
  CHECK(two_ms < 20.0);
  REQUIRE(cupti.LastSpanMs().has_value());
  CHECK(*cupti.LastSpanMs() >= 20.0 + two_ms / 2);
}
#endif

namespace {

// The table's CUDA implementation of each configuration `ids` names, at every tile of
// its grid, against the fp64 reference on B=1, Hq=4, Hkv=2, L=333, d=128: once per
// (dtype, rounded) in `runs` (rounded: inputs rounded to the dtype, as tune's and
// bench's are, so that the selection reads the kernels' own copies; else fp32 copies).
// ks_all (k past L: every key held to the end) and dma_long (w = 300 of 333) give key
// tiles that every row of a warp attends, which skip the mask.
void CheckTableImplementations(const std::vector<std::pair<const char*, bool>>& runs,
                               const std::vector<const char*>& ids) {
  const Shape shape = ParseShape("B=1,Hq=4,Hkv=2,L=333,d=128", "test");
  for (const auto& [dtype, rounded] : runs) {
    Tensors tensors = GaussianTensors(shape, 5);
    if (rounded) RoundInputs(&tensors, *DtypeFromString(dtype));
    for (const char* id : ids) {
      const std::string name = id;
      const std::string base = name == "dma_nobias" || name == "dma_long" ? "dma"
                               : name == "ks_all"                         ? "ks"
                                                                          : name;
      const Variant& variant = FindVariant(base, "test");
      const std::optional<Implementation> impl = CudaImplementation(variant, dtype, shape.d);
      REQUIRE(impl.has_value());
      Params given;
      if (name == "swa" || name == "hybrid" || name == "dma") given["w"] = "40";
      if (name == "ks") given["k"] = "24";
      if (name == "dma_nobias") given = {{"w", "50"}, {"bias", "0"}, {"seed", "3"}};
      if (name == "ks_all") given["k"] = "1000";
      if (name == "dma_long") given["w"] = "300";
      if (name == "lsh") given = {{"k", "24"}, {"bits", "3"}};
      if (name == "hax") given = {{"k_lsh", "16"}, {"k_ks", "16"}, {"bits", "3"}};
      const Params params = ResolveParams(variant, &*impl, shape, given, "test");
      const std::vector<double> ref = ReferenceOutput(variant, tensors, params);
      for (const std::string& tile : impl->tunables.front().grid) {
        Params p = params;
        p["Tile"] = tile;
        INFO(dtype << (rounded ? " rounded " : " ") << id << " " << tile);
        REQUIRE(impl->check(shape, p) == "");
        std::vector<float> out(tensors.q.size(), 0.f);
        impl->run(tensors, p, out.data());
        CHECK(RelErr(out.data(), ref) < impl->tolerance(p));
        impl->launch(tensors, p);  // enqueues only; must not throw
      }
    }
  }
}

}  // namespace

TEST_CASE("The variant table's CUDA implementations match the reference", "[gpu]") {
  CheckTableImplementations({{"fp16", false}, {"bf16", false}, {"fp16", true}, {"bf16", true}},
                            {"dense", "swa", "hybrid", "ks", "dma", "dma_nobias", "ks_all",
                             "dma_long", "lsh", "hax"});
  FlushL2();
  CHECK(!CudaImplementation(FindVariant("dma_decode", "test"), "fp16", 128).has_value());
  CHECK(!CudaImplementation(FindVariant("dense", "test"), "fp16", 96).has_value());
}

// The attention kernels of every family once at every tile (one and two stages, one and
// two row tiles a warp), on lists of one to eleven key tiles, masked and unmasked tiles:
// 7 of the case above's 40 (input setting, configuration) runs, for compute-sanitizer's
// racecheck and synccheck (gpu-checks.sh, capped at 90 and 60 s), which slow every
// shared-memory access.
TEST_CASE("Attention kernels of every family at every tile, once (for racecheck)", "[gpu]") {
  CheckTableImplementations({{"fp16", true}}, {"dense", "swa", "ks", "dma", "dma_long", "lsh",
                                               "hax"});
}

TEST_CASE("CUDA bucketed kernels (lsh, hax) match the fp64 reference over awkward shapes",
          "[gpu]") {
  struct Case {
    const char* variant;
    Params given;
  };
  const Case cases[] = {
      {"lsh", {{"k", "16"}, {"bits", "3"}, {"rule", "sign"}}},
      {"lsh", {{"k", "1000"}, {"bits", "2"}, {"rule", "argmax"}}},  // k > L: the whole bin
      {"lsh", {{"k", "20"}, {"bits", "1"}, {"rule", "argmax"}}},    // one bin: the last k keys
      {"hax", {{"k_lsh", "8"}, {"k_ks", "8"}, {"bits", "4"}, {"rule", "sign"}}},
      {"hax", {{"k_lsh", "40"}, {"k_ks", "1000"}, {"bits", "2"}, {"rule", "sign"}, {"Chunk", "100"}}},
  };
  for (const char* dtype : {"fp16", "bf16"}) {
    for (int64_t lq_lk : {1, 37, 577}) {
      for (int64_t d : {64, 128}) {
        const Shape shape = AwkwardShape(lq_lk, d);
        const Tensors tensors = GaussianTensors(shape, 29);
        for (const Case& c : cases) {
          const Variant& variant = FindVariant(c.variant, "test");
          const std::optional<Implementation> impl = CudaImplementation(variant, dtype, d);
          REQUIRE(impl.has_value());
          const Params params = ResolveParams(variant, &*impl, shape, c.given, "test");
          const std::vector<double> ref = ReferenceOutput(variant, tensors, params);
          for (const std::string& tile : impl->tunables.front().grid) {
            Params p = params;
            p["Tile"] = tile;
            INFO(dtype << " " << ParamsToString(p) << " " << shape.ToString());
            REQUIRE(impl->check(shape, p) == "");
            std::vector<float> out(tensors.q.size(), 0.f);
            impl->run(tensors, p, out.data());  // O poisoned with NaN on the device first
            CHECK(RelErr(out.data(), ref) < impl->tolerance(p));
          }
        }
      }
    }
  }
}

TEST_CASE("Gathered decode (dma_decode) matches the fp64 reference at every step", "[gpu]") {
  const Variant& variant = FindVariant("dma_decode", "test");
  const Params cases[] = {
      {{"w_kv", "16"}, {"w_q", "4"}, {"r", "8"}, {"bias", "1"}},
      {{"w_kv", "1000"}, {"w_q", "8"}, {"r", "8"}, {"bias", "0"}},  // w_kv > L: every key
      {{"w_kv", "40"}, {"w_q", "0"}, {"r", "0"}, {"bias", "1"}},
  };
  for (const char* dtype : {"fp16", "bf16"}) {
    for (int64_t l : {1, 37, 300}) {
      for (int64_t d : {64, 128}) {
        Shape shape = AwkwardShape(l, d);
        shape.Lq = shape.Lk = l;  // decode steps: Lq = Lk
        const Tensors tensors = GaussianTensors(shape, 31);
        const std::optional<Implementation> impl = CudaDecodeImplementation(variant, dtype, d);
        REQUIRE(impl.has_value());
        for (const Params& given : cases) {
          const Params p = ResolveParams(variant, &*impl, shape, given, "test");
          INFO(dtype << " " << ParamsToString(p) << " " << shape.ToString());
          REQUIRE(impl->check(shape, p) == "");
          const std::vector<double> ref = ReferenceOutput(variant, tensors, p);
          std::vector<float> out(tensors.q.size(), 0.f);
          impl->run(tensors, p, out.data());  // O poisoned with NaN on the device first
          CHECK(RelErr(out.data(), ref) < impl->tolerance(p));
        }
      }
    }
  }
}

TEST_CASE("Split-KV decode matches the reference for one query row", "[gpu]") {
  for (int64_t lk : {1, 37, 1000, 5000}) {
    for (int64_t group : {1, 2, 8}) {
      Shape shape;
      shape.B = 2;
      shape.Hkv = 2;
      shape.Hq = 2 * group;
      shape.Lq = 1;
      shape.Lk = lk;
      shape.d = group == 2 ? 64 : 128;
      const Tensors tensors = GaussianTensors(shape, 21);
      for (const char* dtype : {"fp16", "bf16"}) {
        for (const char* id : {"dense", "swa"}) {
          const Variant& variant = FindVariant(id, "test");
          const std::optional<Implementation> impl = CudaDecodeImplementation(variant, dtype, shape.d);
          REQUIRE(impl.has_value());
          Params given;
          if (std::string(id) == "swa") given = {{"w", "100"}, {"sink", "4"}};
          const Params params = ResolveParams(variant, &*impl, shape, given, "test");
          const std::vector<double> ref = ReferenceOutput(variant, tensors, params);
          for (const char* split : {"1", "7", "64"}) {
            Params p = params;
            p["Split"] = split;
            INFO(dtype << " " << id << " Lk=" << lk << " group=" << group << " Split=" << split);
            REQUIRE(impl->check(shape, p) == "");
            std::vector<float> out(tensors.q.size(), 0.f);
            impl->run(tensors, p, out.data());
            CHECK(RelErr(out.data(), ref) < impl->tolerance(p));
          }
        }
      }
    }
  }
  CHECK(!CudaDecodeImplementation(FindVariant("hybrid", "test"), "fp16", 128).has_value());
}

#if !defined(ATTNTUNE_CUDA_EMULATION)
TEST_CASE("The range profiler reads the roofline counters of a launch", "[gpu]") {
  const Shape shape = ParseShape("Hq=16,Hkv=8,L=4096,d=128", "test");
  const Tensors tensors = GaussianTensors(shape, 4);
  const std::optional<Implementation> impl =
      CudaImplementation(FindVariant("dense", "test"), "fp16", 128);
  REQUIRE(impl.has_value());
  Params p = {{"Tile", impl->tunables.front().default_value}};
  std::vector<float> out(tensors.q.size());
  impl->run(tensors, p, out.data());  // uploads the inputs
  const MetricValues m = CollectRooflineMetrics(0, [&] { impl->launch(tensors, p); });
  INFO(m.error);
  REQUIRE(m.error.empty());
  CHECK(m.replays == static_cast<int>(m.plan.passes));
  std::string all;
  for (const auto& [role, value] : m.by_role) all += " " + role + "=" + std::to_string(value);
  WARN(m.plan.chip << ", " << m.replays << " replays:" << all);
  const double useful = 4.0 * 128 * 16 * (4096.0 * 4097.0 / 2.0);
  REQUIRE(m.by_role.count("tensor_ops_f16") == 1);
  CHECK(m.by_role.at("tensor_ops_f16") >= useful);        // the kernel does all useful work
  CHECK(m.by_role.at("tensor_ops_f16") <= 1.1 * useful);  // and masks little beyond it
  CHECK(m.by_role.at("duration") > 0);
  CHECK(m.by_role.at("dram_bytes") > 0);
}
#endif
