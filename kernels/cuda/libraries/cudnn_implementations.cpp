// library_implementations.h's cuDNN part: "cudnn" implementations of dense, swa and hybrid
// (prefill and decode, fp16 and bf16) over cudnn_sdpa.h.
#include <stdexcept>

#include "core/params.h"
#include "kernels/cuda/cuda_resident.h"
#include "kernels/cuda/libraries/cudnn_sdpa.h"
#include "kernels/cuda/libraries/library_implementations.h"
#include "kernels/cuda/libraries/library_plan.h"

namespace attntune {
namespace {

namespace lp = library_plan;

cudnn_sdpa::Engine EngineNamed(const std::string& name) {
  if (name == "composite") return cudnn_sdpa::Engine::kComposite;
  if (name == "unified") return cudnn_sdpa::Engine::kUnified;
  return cudnn_sdpa::Engine::kAuto;
}

int64_t SinkOf(const std::string& variant, const Params& p) {
  return variant == "dense" ? 0 : ParamInt(p, "sink");
}

Implementation CudnnImplementation(const std::string& variant, Dtype dtype) {
  Implementation impl;
  impl.id = "cudnn";
  impl.platform = kCudaPlatform;
  impl.phases = {Phase::kPrefill, Phase::kDecode};
  impl.dtypes = {dtype};
  impl.summary = "cuDNN's fused SDPA (cuDNN frontend graph API, causal band, top-left where Lq = Lk" +
                 std::string(variant == "hybrid" ? ", one graph per run of KV heads with one window"
                                                 : "") +
                 "), " + ToString(dtype) + " in, fp32 softmax; libcudnn loaded at run time";
  impl.tunables = {
      {"Engine", ParamKind::kEnum, 0, 0, {"auto", "composite", "unified"}, "auto",
       {"auto", "composite", "unified"},
       "cuDNN SDPA engine family (the frontend's AttentionImplementation_t)"},
      {"Plan", ParamKind::kInt, 0, 63, {}, "0", {"0", "1", "2"},
       "index of the execution plan among those cuDNN's heuristics (mode A) offer; 0: their "
       "first choice"},
  };
  impl.supports = [](const ProblemKind& kind) -> std::string {
    const std::string loaded = cudnn_sdpa::LoadError();
    if (!loaded.empty()) return loaded;
    return lp::CudnnHeadDimRefusal(kind.head_dim);
  };
  impl.check = [variant](const Shape& shape, const Params& p) -> std::string {
    // The windows do not matter for what is refused (sinks); hybrid's come from its tensors.
    const std::vector<int64_t> windows(static_cast<size_t>(shape.Hkv), 0);
    return lp::PlanWindowCalls(shape, windows, SinkOf(variant, p)).refusal;
  };
  const bool bf16 = dtype == Dtype::kBf16;
  WireWindowedDeviceLaunch(
      &impl, variant, dtype,
      [variant, bf16](const DeviceTensors& t, const Params& p, const std::vector<int64_t>& windows) {
        const lp::WindowPlan plan = lp::PlanWindowCalls(t.shape, windows, SinkOf(variant, p));
        cudnn_sdpa::Run(t.shape, plan, bf16, EngineNamed(p.at("Engine")), ParamInt(p, "Plan"),
                        t.q, t.k, t.v, t.o, t.stream);
      });
  return impl;
}

}  // namespace

void AddCudnnImplementations(std::vector<Variant>* rows, std::vector<AbsentImplementation>*) {
  for (Variant& v : *rows) {
    if (v.id != "dense" && v.id != "swa" && v.id != "hybrid") continue;
    for (const Dtype dtype : {Dtype::kF16, Dtype::kBf16}) {
      v.implementations.push_back(CudnnImplementation(v.id, dtype));
    }
  }
}

std::string CudnnRuntimeVersion() {
  const std::string version = cudnn_sdpa::LoadedVersion();
  if (version.empty()) return "";
  return "cudnn " + version + " (frontend " + cudnn_sdpa::FrontendVersion() + ")";
}

}  // namespace attntune
