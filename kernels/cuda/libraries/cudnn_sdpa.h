// cuDNN's scaled-dot-product attention through the cuDNN frontend's C++ graph API, for
// the windowed variants (dense, swa, hybrid) in both phases. libcudnn is loaded at run
// time (cudnn_loader.cpp): a binary built with this code runs where cuDNN is absent, and
// the implementations refuse in one line there. Plain C++ header (no cuDNN or CUDA type).
#pragma once

#include <cstdint>
#include <string>

#include "core/shape.h"
#include "kernels/cuda/libraries/library_plan.h"

namespace attntune {
namespace cudnn_sdpa {

/// "" when libcudnn loads (once per process), else why not, in one line.
std::string LoadError();

/// The loaded cuDNN's version ("9.26.0"), "" when none loads.
std::string LoadedVersion();

/// The cuDNN frontend version the build compiled ("1.32.0") and the cuDNN headers' ("9.26.0").
std::string FrontendVersion();
std::string HeaderVersion();

/// The SDPA engine family cuDNN's frontend picks from (its AttentionImplementation_t).
enum class Engine { kAuto, kComposite, kUnified };

/// One graph: a call of `plan` on a problem of `shape`, in fp16 or bf16.
struct GraphKey {
  Shape shape;
  library_plan::WindowCall call;
  bool bf16 = false;
  Engine engine = Engine::kAuto;
};

/// Builds the frontend graph of `key` (tensors with their views, the SDPA node with its
/// band, scale 1/sqrt(d), O as output) and validates it for a GPU of `sm_version` (90:
/// sm_90), without a device: "" when the frontend accepts it, else its message. Throws
/// std::runtime_error when cuDNN is absent.
std::string ValidateGraph(const GraphKey& key, int sm_version);

/// Enqueues every call of `plan` on `stream` (a cudaStream_t; nullptr: default), the
/// graph of each built once per (device, key, plan index) and cached; `plan_index` picks
/// the execution plan among those cuDNN's heuristics (mode A) offer for the graph.
/// q, k, v, o are the problem's [B, H, L, d] device tensors. Throws std::runtime_error
/// with cuDNN's message when a graph is not supported or a plan index is out of range.
void Run(const Shape& shape, const library_plan::WindowPlan& plan, bool bf16, Engine engine,
         int64_t plan_index, const void* q, const void* k, const void* v, void* o,
         void* stream);

}  // namespace cudnn_sdpa
}  // namespace attntune
