// library_implementations.h's FlashInfer part: "flashinfer" implementations of dense and
// swa (prefill and decode, fp16 and bf16, head dims 64 and 128) over flashinfer_cuda.h.
#include <string>
#include <vector>

#include "core/params.h"
#include "kernels/cuda/cuda_resident.h"
#include "kernels/cuda/libraries/flashinfer_cuda.h"
#include "kernels/cuda/libraries/library_implementations.h"
#include "kernels/cuda/libraries/library_plan.h"

namespace attntune {
namespace {

namespace lp = library_plan;

int64_t SinkOf(const std::string& variant, const Params& p) {
  return variant == "dense" ? 0 : ParamInt(p, "sink");
}

Implementation FlashInferImplementation(const std::string& variant, Dtype dtype) {
  Implementation impl;
  impl.id = "flashinfer";
  impl.platform = kCudaPlatform;
  impl.phases = {Phase::kPrefill, Phase::kDecode};
  impl.dtypes = {dtype};
  impl.summary = "FlashInfer " + flashinfer_cuda::Version() +
                 "'s FA2-style single-request kernels (causal, bottom-right; sliding window "
                 "through window_left), " +
                 ToString(dtype) + " in, fp32 softmax";
  // CtaTileQ is a prefill choice (decode runs one query row per call: no such tile).
  const ParamDecl split{"SplitKV", ParamKind::kEnum, 0, 0, {"on", "off"}, "on", {"on", "off"},
                        "on: FlashInfer gets its temporary buffer and splits the keys across "
                        "thread blocks (merging the parts) where its heuristics see idle SMs; "
                        "off: never split"};
  const ParamDecl tile{"CtaTileQ", ParamKind::kEnum, 0, 0, {"auto", "16", "64", "128"}, "auto",
                       {"auto", "16", "64", "128"},
                       "prefill: packed query rows (rows times the GQA group) per thread block; "
                       "auto: FlashInfer's own choice (FA2DetermineCtaTileQ)"};
  impl.tunables = {split, tile};
  impl.tunables_for = [split, tile](const ProblemKind& kind) {
    return kind.phase == Phase::kDecode ? std::vector<ParamDecl>{split}
                                        : std::vector<ParamDecl>{split, tile};
  };
  impl.supports = [](const ProblemKind& kind) -> std::string {
    return lp::FlashInferHeadDimRefusal(kind.head_dim);
  };
  impl.check = [variant](const Shape& shape, const Params& p) -> std::string {
    const std::vector<int64_t> windows(static_cast<size_t>(shape.Hkv), 0);
    const std::string plan = lp::PlanWindowCalls(shape, windows, SinkOf(variant, p)).refusal;
    if (!plan.empty()) return plan;
    const auto tile = p.find("CtaTileQ");
    if (shape.Lq == 1 && tile != p.end() && tile->second != "auto") {
      return "CtaTileQ=" + tile->second +
             ": FlashInfer's decode kernel runs one query row and has no query tile (CtaTileQ=auto)";
    }
    return lp::FlashInferShapeRefusal(shape);
  };
  const bool bf16 = dtype == Dtype::kBf16;
  WireWindowedDeviceLaunch(
      &impl, variant, dtype,
      [variant, bf16](const DeviceTensors& t, const Params& p, const std::vector<int64_t>& windows) {
        const lp::WindowPlan plan = lp::PlanWindowCalls(t.shape, windows, SinkOf(variant, p));
        flashinfer_cuda::Choices choices;
        choices.split_kv = p.at("SplitKV") == "on";
        const auto tile = p.find("CtaTileQ");
        choices.cta_tile_q =
            tile == p.end() || tile->second == "auto" ? 0 : static_cast<int>(ParamInt(p, "CtaTileQ"));
        flashinfer_cuda::Run(t.shape, plan, bf16, choices, t.q, t.k, t.v, t.o, t.stream);
      });
  return impl;
}

}  // namespace

void AddFlashInferImplementations(std::vector<Variant>* rows, std::vector<AbsentImplementation>*) {
  for (Variant& v : *rows) {
    if (v.id != "dense" && v.id != "swa") continue;
    for (const Dtype dtype : {Dtype::kF16, Dtype::kBf16}) {
      v.implementations.push_back(FlashInferImplementation(v.id, dtype));
    }
  }
}

}  // namespace attntune
