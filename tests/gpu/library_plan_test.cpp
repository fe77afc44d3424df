// The attention libraries' planning (kernels/cuda/libraries/library_plan.h) against the
// variant table's key sets (DESIGN.md s1): the calls cuDNN's SDPA is given for dense, swa
// and hybrid, with cuDNN's band (CudnnKeeps), keep exactly S(i) of every row
// of every query head, each head in exactly one call. Runs on every machine.
#include "kernels/cuda/libraries/library_plan.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

#include "core/params.h"
#include "core/shape.h"
#include "core/tensors.h"
#include "kernels/selection/selection.h"
#include "kernels/variant.h"
#include "tests/gpu/library_entries.h"

using namespace attntune;
namespace lp = attntune::library_plan;

namespace {

Shape MakeShape(int64_t b, int64_t hq, int64_t hkv, int64_t lq, int64_t lk, int64_t d) {
  return test::LibraryShape(b, hq, hkv, lq, lk, d);
}

// The windows the cuDNN implementation plans with (cudnn_implementations.cpp).
std::vector<int64_t> WindowsOf(const std::string& variant, const Tensors& t, const Params& p) {
  if (variant == "hybrid") return HybridWindows(t, p);
  const int64_t w = variant == "swa" ? ParamInt(p, "w") : 0;
  return std::vector<int64_t>(static_cast<size_t>(t.shape.Hkv), w);
}

// Whether a library keeps key j (of the call's s_kv keys) of row i, given the call's band.
using KeepFn = bool (*)(int64_t s_q, int64_t s_kv, int64_t left, int64_t i, int64_t j);

// FlashInfer's mask as flashinfer_cuda.h runs it: causal with kv_len = the call's keys and
// its sliding window at FlashInferWindowLeft(left).
bool FlashInferCallKeeps(int64_t s_q, int64_t s_kv, int64_t left, int64_t i, int64_t j) {
  return lp::FlashInferKeeps(s_q, s_kv, lp::FlashInferWindowLeft(left), i, j);
}

// Compares the plan's keys (kept by `keeps`) with the table's S(i), row by row; "" or
// the first difference.
std::string CompareWithTable(const std::string& variant, const Shape& shape, const Params& p,
                             KeepFn keeps = lp::CudnnKeeps) {
  const Tensors t = GaussianTensors(shape, 7);
  const Variant& v = FindVariant(variant, "test");
  const auto sets = v.key_sets(t, p);
  const lp::WindowPlan plan = lp::PlanWindowCalls(shape, WindowsOf(variant, t, p), 0);
  if (!plan.refusal.empty()) return "refused: " + plan.refusal;
  std::vector<int> covered(static_cast<size_t>(shape.Hkv), 0);
  const int64_t g = shape.Group();
  std::vector<int64_t> want, got;
  for (const lp::WindowCall& call : plan.calls) {
    const int64_t s_kv = shape.Lk - call.key_begin;
    for (int64_t h = call.kv_begin; h < call.kv_end; ++h) ++covered[static_cast<size_t>(h)];
    for (int64_t b = 0; b < shape.B; ++b) {
      for (int64_t hq = call.kv_begin * g; hq < call.kv_end * g; ++hq) {
        for (int64_t i = 0; i < shape.Lq; ++i) {
          sets->Row(b, hq, i, &want);
          got.clear();
          for (int64_t j = call.key_begin; j < shape.Lk; ++j) {
            // A call that sees every key runs with no mask (cudnn_sdpa.cpp; FlashInfer's
            // decode kernel has none).
            if (lp::SeesEveryKey(shape, call) ||
                keeps(shape.Lq, s_kv, call.left, i, j - call.key_begin))
              got.push_back(j);
          }
          if (got != want) {
            return "head " + std::to_string(hq) + " row " + std::to_string(i) + ": the library keeps " +
                   std::to_string(got.size()) + " keys, the table " + std::to_string(want.size());
          }
        }
      }
    }
  }
  for (int64_t h = 0; h < shape.Hkv; ++h) {
    if (covered[static_cast<size_t>(h)] != 1) return "KV head " + std::to_string(h) + " not covered once";
  }
  return "";
}

}  // namespace

TEST_CASE("cuDNN's band keeps exactly the table's keys for dense, swa and hybrid") {
  // (B, Hq, Hkv, Lq, Lk): GQA 2 and 1, L not a multiple of 64, Lq < Lk, one query row.
  const std::vector<Shape> shapes = {
      MakeShape(2, 6, 3, 37, 37, 64),   MakeShape(1, 4, 2, 333, 333, 128),
      MakeShape(1, 3, 3, 300, 577, 64), MakeShape(2, 4, 2, 1, 1000, 128),
      MakeShape(1, 2, 1, 1, 1, 64)};
  for (const Shape& shape : shapes) {
    INFO(shape.ToString());
    CHECK(CompareWithTable("dense", shape, {}) == "");
    for (int64_t w : {int64_t{1}, int64_t{2}, int64_t{40}, shape.Lk - 1, shape.Lk, shape.Lk + 5}) {
      if (w < 1) continue;
      INFO("w=" << w);
      CHECK(CompareWithTable("swa", shape, {{"w", std::to_string(w)}, {"sink", "0"}}) == "");
      for (int64_t full = 0; full <= shape.Hkv; ++full) {
        INFO("full=" << full);
        const Params p = {{"w", std::to_string(w)}, {"full", std::to_string(full)}, {"sink", "0"}};
        CHECK(CompareWithTable("hybrid", shape, p) == "");
      }
    }
  }
}

TEST_CASE("cuDNN's band is aligned at the top left exactly where a call has as many rows as keys") {
  CHECK(lp::CudnnTopLeft(37, 37));
  CHECK(lp::CudnnTopLeft(1, 1));
  CHECK_FALSE(lp::CudnnTopLeft(300, 577));
  CHECK_FALSE(lp::CudnnTopLeft(1, 1000));
  // The frontend's bottom-right band (attn_score_modifiers.h sliding_window_mask), written
  // out: with as many rows as keys the top-left band keeps the same keys in every row.
  auto bottom_right = [](int64_t s_q, int64_t s_kv, int64_t left, int64_t i, int64_t j) {
    const int64_t shift = s_kv - s_q;
    return i + shift >= j && (left == 0 || j + left - shift > i);
  };
  for (int64_t s : {int64_t{1}, int64_t{2}, int64_t{37}, int64_t{130}}) {
    for (int64_t left : {int64_t{0}, int64_t{1}, int64_t{2}, int64_t{40}, s - 1, s, s + 5}) {
      if (left < 0) continue;
      int mismatches = 0;
      for (int64_t i = 0; i < s; ++i)
        for (int64_t j = 0; j < s; ++j)
          mismatches += lp::CudnnKeeps(s, s, left, i, j) != bottom_right(s, s, left, i, j);
      INFO("s=" << s << " left=" << left);
      CHECK(mismatches == 0);
    }
  }
  // A chunk (fewer rows than keys) keeps the bottom-right band: row i ends at key i + 277.
  CHECK(lp::CudnnKeeps(300, 577, 0, 0, 277));
  CHECK_FALSE(lp::CudnnKeeps(300, 577, 0, 0, 278));
}

TEST_CASE("Hybrid's KV heads are grouped by effective window, one call per run") {
  const Shape shape = MakeShape(1, 8, 4, 100, 100, 64);
  // Windows 0, 0, 30, 30: two calls; a window >= Lk is full attention and joins the full run.
  lp::WindowPlan plan = lp::PlanWindowCalls(shape, {0, 0, 30, 30}, 0);
  REQUIRE(plan.refusal == "");
  CHECK(plan.calls == std::vector<lp::WindowCall>{{0, 2, 0, 0}, {2, 4, 0, 30}});
  plan = lp::PlanWindowCalls(shape, {0, 100, 250, 30}, 0);
  CHECK(plan.calls == std::vector<lp::WindowCall>{{0, 3, 0, 0}, {3, 4, 0, 30}});
  plan = lp::PlanWindowCalls(shape, {30, 0, 30, 0}, 0);  // not neighbours: four calls
  CHECK(plan.calls.size() == 4);
  // One query row: the window is the last w keys, no band.
  const Shape decode = MakeShape(1, 8, 4, 1, 100, 64);
  plan = lp::PlanWindowCalls(decode, {0, 7, 7, 1}, 0);
  CHECK(plan.calls == std::vector<lp::WindowCall>{{0, 1, 0, 0}, {1, 3, 93, 0}, {3, 4, 99, 0}});
}

TEST_CASE("Views address the call's heads and keys in the [B, H, L, d] tensors") {
  const Shape shape = MakeShape(2, 6, 3, 1, 50, 64);
  const lp::CallViews v = lp::ViewsOf(shape, {1, 3, 20, 0});
  CHECK(v.q == lp::TensorView{{2, 4, 1, 64}, {6 * 64, 64, 64, 1}, 2 * 64});
  CHECK(v.o == v.q);
  CHECK(v.kv == lp::TensorView{{2, 2, 30, 64}, {3 * 50 * 64, 50 * 64, 64, 1}, 50 * 64 + 20 * 64});
}

TEST_CASE("Sinks, non-causal problems and odd head dims are refused in one line") {
  const Shape shape = MakeShape(1, 4, 2, 64, 64, 64);
  CHECK(lp::PlanWindowCalls(shape, {8, 8}, 4).refusal ==
        "sink=4: the library masks one diagonal band; sink keys outside the window need a "
        "second pass merged exactly, which attntune does not build");
  Shape bidirectional = shape;
  bidirectional.causal = false;
  CHECK(lp::PlanWindowCalls(bidirectional, {0, 0}, 0).refusal ==
        "the library calls are built for causal attention");
  CHECK(lp::CudnnHeadDimRefusal(128) == "");
  CHECK(lp::CudnnHeadDimRefusal(260) == "cuDNN's SDPA takes d a multiple of 8 up to 256, not d=260");
  CHECK(lp::CudnnHeadDimRefusal(60) == "cuDNN's SDPA takes d a multiple of 8 up to 256, not d=60");
}

TEST_CASE("FlashInfer's causal mask and window keep exactly the table's keys for dense and swa") {
  // (B, Hq, Hkv, Lq, Lk): GQA 2 and 1, L not a multiple of 64, Lq < Lk, one query row.
  const std::vector<Shape> shapes = {
      MakeShape(2, 6, 3, 37, 37, 64),   MakeShape(1, 4, 2, 333, 333, 128),
      MakeShape(1, 3, 3, 300, 577, 64), MakeShape(2, 4, 2, 1, 1000, 128),
      MakeShape(1, 2, 1, 1, 1, 64)};
  for (const Shape& shape : shapes) {
    INFO(shape.ToString());
    CHECK(CompareWithTable("dense", shape, {}, FlashInferCallKeeps) == "");
    for (int64_t w : {int64_t{1}, int64_t{2}, int64_t{40}, shape.Lk - 1, shape.Lk, shape.Lk + 5}) {
      if (w < 1) continue;
      INFO("w=" << w);
      CHECK(CompareWithTable("swa", shape, {{"w", std::to_string(w)}, {"sink", "0"}},
                             FlashInferCallKeeps) == "");
    }
  }
  // No window: window_left -1 (FlashInfer then takes every key up to the diagonal).
  CHECK(lp::FlashInferWindowLeft(0) == -1);
  CHECK(lp::FlashInferWindowLeft(1) == 0);
  CHECK(lp::FlashInferWindowLeft(40) == 39);
}

TEST_CASE("FlashInfer refuses head dims and decode groups it is not compiled for, in one line") {
  CHECK(lp::FlashInferHeadDimRefusal(64) == "");
  CHECK(lp::FlashInferHeadDimRefusal(128) == "");
  CHECK(lp::FlashInferHeadDimRefusal(96) ==
        "attntune compiles FlashInfer's kernels for d=64 and d=128, not d=96");
  CHECK(lp::FlashInferHeadDimRefusal(256) ==
        "attntune compiles FlashInfer's kernels for d=64 and d=128, not d=256");
  for (const int64_t g : {1, 2, 3, 4, 6, 8, 16}) {
    CHECK(lp::FlashInferShapeRefusal(MakeShape(1, 2 * g, 2, 1, 100, 128)) == "");
  }
  CHECK(lp::FlashInferShapeRefusal(MakeShape(1, 10, 2, 1, 100, 128)) ==
        "FlashInfer's decode takes 1, 2, 3, 4, 6, 8 or 16 query heads per KV head, not 5 "
        "(Hq=10, Hkv=2)");
  CHECK(lp::FlashInferShapeRefusal(MakeShape(1, 64, 2, 1, 100, 128)) ==
        "FlashInfer's decode takes 1, 2, 3, 4, 6, 8 or 16 query heads per KV head, not 32 "
        "(Hq=64, Hkv=2)");
  CHECK(lp::FlashInferShapeRefusal(MakeShape(1, 10, 2, 50, 100, 128)) == "");  // prefill: any
}
