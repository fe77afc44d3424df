// cudnn_sdpa.h: the graphs, their cache and their execution. Compiled with the cuDNN
// frontend's headers (found at configure time, kernels/cuda/CMakeLists.txt); the cuDNN C
// functions they call are cudnn_loader.cpp's, which forward to a libcudnn loaded at run time.
#include "kernels/cuda/libraries/cudnn_sdpa.h"

#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cmath>
#include <cudnn_frontend.h>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "kernels/cuda/libraries/cudnn_loader.h"
#include "kernels/cuda/stream_scratch.h"

namespace attntune {
namespace cudnn_sdpa {
namespace {

namespace fe = cudnn_frontend;
namespace lp = library_plan;

// Tensor uids of the variant pack.
constexpr int64_t kQ = 1, kK = 2, kV = 3, kO = 4;

std::vector<int64_t> Vec(const std::array<int64_t, 4>& a) { return {a[0], a[1], a[2], a[3]}; }

fe::AttentionImplementation_t ImplementationOf(Engine engine) {
  switch (engine) {
    case Engine::kComposite: return fe::AttentionImplementation_t::COMPOSITE;
    case Engine::kUnified: return fe::AttentionImplementation_t::UNIFIED;
    case Engine::kAuto: break;
  }
  return fe::AttentionImplementation_t::AUTO;
}

// The graph of one call: Q, K, V as views of the problem's tensors, the SDPA node with the
// band (right bound 0, left bound = the window) aligned as library_plan::CudnnTopLeft
// says, O an output view like Q.
// sm_version 0: the frontend asks the current device.
std::shared_ptr<fe::graph::Graph> MakeGraph(const GraphKey& key, int sm_version = 0) {
  const lp::CallViews views = lp::ViewsOf(key.shape, key.call);
  auto graph = std::make_shared<fe::graph::Graph>();
  if (sm_version > 0) graph->set_sm_version(sm_version);  // before the nodes copy the context
  graph->set_io_data_type(key.bf16 ? fe::DataType_t::BFLOAT16 : fe::DataType_t::HALF)
      .set_intermediate_data_type(fe::DataType_t::FLOAT)
      .set_compute_data_type(fe::DataType_t::FLOAT);
  auto tensor = [&](const char* name, int64_t uid, const lp::TensorView& view) {
    return graph->tensor(fe::graph::Tensor_attributes()
                             .set_name(name)
                             .set_uid(uid)
                             .set_dim(Vec(view.dim))
                             .set_stride(Vec(view.stride)));
  };
  auto q = tensor("Q", kQ, views.q);
  auto k = tensor("K", kK, views.kv);
  auto v = tensor("V", kV, views.kv);
  auto options = fe::graph::SDPA_attributes()
                     .set_name("attntune_sdpa")
                     .set_generate_stats(false)
                     .set_attn_scale(1.0f / std::sqrt(static_cast<float>(key.shape.d)))
                     .set_implementation(ImplementationOf(key.engine));
  // One query row (a decode step) without a window sees every key: no mask, which lets
  // cuDNN choose its kernels for a step (with the band it took 1.08 ms for a step against
  // 65536 keys on an H200 where PyTorch's unmasked cuDNN call took 0.065 ms).
  if (!lp::SeesEveryKey(key.shape, key.call)) {
    // Query rows and keys of the call: dim [B, H, L, d].
    const bool top_left = lp::CudnnTopLeft(views.q.dim[2], views.kv.dim[2]);
    options
        .set_diagonal_alignment(top_left ? fe::DiagonalAlignment_t::TOP_LEFT
                                         : fe::DiagonalAlignment_t::BOTTOM_RIGHT)
        .set_diagonal_band_right_bound(0);
    if (key.call.left > 0) options.set_diagonal_band_left_bound(static_cast<int>(key.call.left));
  }
  auto outputs = graph->sdpa(q, k, v, options);
  outputs[0]->set_output(true).set_uid(kO).set_dim(Vec(views.o.dim)).set_stride(Vec(views.o.stride));
  return graph;
}

void ThrowIfBad(fe::error_t status, const std::string& what) {
  if (status.is_good()) return;
  throw std::runtime_error("cuDNN " + what + ": " + status.get_message());
}

void CheckCuda(cudaError_t error, const char* call) {
  if (error != cudaSuccess) {
    throw std::runtime_error(std::string(call) + ": " + cudaGetErrorName(error) + ": " +
                             cudaGetErrorString(error));
  }
}

std::string KeyText(const GraphKey& key, int device, int64_t plan_index) {
  const Shape& s = key.shape;
  return std::to_string(device) + "|" + s.ToString() + "|" + std::to_string(key.call.kv_begin) +
         "," + std::to_string(key.call.kv_end) + "," + std::to_string(key.call.key_begin) + "," +
         std::to_string(key.call.left) + "|" + (key.bf16 ? "bf16" : "fp16") + "|" +
         std::to_string(static_cast<int>(key.engine)) + "|" + std::to_string(plan_index);
}

struct Built {
  std::shared_ptr<fe::graph::Graph> graph;
  int64_t plan_index = 0;
  int64_t workspace = 0;  // bytes, allocated on the stream of each execution
};

// What a process keeps: one handle per device, the built graphs. Leaked, as the CUDA
// implementations' buffers: nothing is destroyed after the runtime's teardown.
struct State {
  std::mutex mutex;
  std::map<int, cudnnHandle_t> handles;
  std::unordered_map<std::string, std::shared_ptr<Built>> graphs;
};
State& TheState() {
  static State* state = new State();
  return *state;
}

cudnnHandle_t HandleFor(State& state, int device) {
  auto it = state.handles.find(device);
  if (it != state.handles.end()) return it->second;
  cudnnHandle_t handle = nullptr;
  const cudnnStatus_t status = cudnnCreate(&handle);
  if (status != CUDNN_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("cudnnCreate: ") + cudnnGetErrorString(status));
  }
  state.handles[device] = handle;
  return handle;
}

// The graph of `key` with plan `plan_index` built for the handle's device.
std::shared_ptr<Built> Build(const GraphKey& key, int64_t plan_index, cudnnHandle_t handle) {
  auto built = std::make_shared<Built>();
  built->graph = MakeGraph(key);
  fe::graph::Graph& g = *built->graph;
  ThrowIfBad(g.validate(), "graph");
  ThrowIfBad(g.build_operation_graph(handle), "operation graph");
  ThrowIfBad(g.create_execution_plans({fe::HeurMode_t::A}), "heuristics");
  ThrowIfBad(g.check_support(handle), "support");
  const int64_t count = g.get_execution_plan_count();
  if (plan_index >= count) {
    throw std::runtime_error("cuDNN offers " + std::to_string(count) +
                             " execution plan(s) for this graph; Plan=" +
                             std::to_string(plan_index) + " is past them");
  }
  ThrowIfBad(g.build_plan_at_index(handle, plan_index), "plan " + std::to_string(plan_index));
  ThrowIfBad(g.get_workspace_size_plan_at_index(plan_index, built->workspace), "workspace");
  built->plan_index = plan_index;
  return built;
}

const char* Bytes(const void* p, int64_t elements) {
  return static_cast<const char*>(p) + 2 * elements;  // fp16 and bf16: 2 bytes
}

}  // namespace

std::string LoadError() { return cudnn_loader::LoadError(); }

std::string LoadedVersion() {
  if (!cudnn_loader::LoadError().empty()) return "";
  const size_t v = cudnnGetVersion();  // major * 10000 + minor * 100 + patch (cuDNN 9)
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." +
         std::to_string(v % 100);
}

std::string FrontendVersion() {
  return std::to_string(CUDNN_FRONTEND_MAJOR_VERSION) + "." +
         std::to_string(CUDNN_FRONTEND_MINOR_VERSION) + "." +
         std::to_string(CUDNN_FRONTEND_PATCH_VERSION);
}

std::string HeaderVersion() {
  return std::to_string(CUDNN_MAJOR) + "." + std::to_string(CUDNN_MINOR) + "." +
         std::to_string(CUDNN_PATCHLEVEL);
}

std::string ValidateGraph(const GraphKey& key, int sm_version) {
  const std::string error = cudnn_loader::LoadError();
  if (!error.empty()) throw std::runtime_error(error);
  auto graph = MakeGraph(key, sm_version);
  fe::error_t status = graph->validate();
  return status.is_good() ? "" : status.get_message();
}

void Run(const Shape& shape, const library_plan::WindowPlan& plan, bool bf16, Engine engine,
         int64_t plan_index, const void* q, const void* k, const void* v, void* o,
         void* stream) {
  const std::string error = cudnn_loader::LoadError();
  if (!error.empty()) throw std::runtime_error(error);
  if (!plan.refusal.empty()) throw std::runtime_error(plan.refusal);
  int device = 0;
  CheckCuda(cudaGetDevice(&device), "cudaGetDevice");
  State& state = TheState();
  std::lock_guard<std::mutex> lock(state.mutex);
  const cudnnHandle_t handle = HandleFor(state, device);
  const cudnnStatus_t set = cudnnSetStream(handle, static_cast<cudaStream_t>(stream));
  if (set != CUDNN_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("cudnnSetStream: ") + cudnnGetErrorString(set));
  }
  for (const lp::WindowCall& call : plan.calls) {
    const GraphKey key{shape, call, bf16, engine};
    std::shared_ptr<Built>& built = state.graphs[KeyText(key, device, plan_index)];
    if (!built) built = Build(key, plan_index, handle);
    const lp::CallViews views = lp::ViewsOf(shape, call);
    std::unordered_map<int64_t, void*> pack = {
        {kQ, const_cast<char*>(Bytes(q, views.q.offset))},
        {kK, const_cast<char*>(Bytes(k, views.kv.offset))},
        {kV, const_cast<char*>(Bytes(v, views.kv.offset))},
        {kO, const_cast<char*>(Bytes(o, views.o.offset))}};
    // Each execution has its own workspace, allocated and freed on the call's stream:
    // executions of one graph on several streams (a library caller's threads) share
    // nothing. An allocation is no kernel: bench's kernel times hold the graph's work.
    const StreamScratch workspace(static_cast<size_t>(built->workspace),
                                  static_cast<cudaStream_t>(stream));
    fe::error_t status =
        built->graph->execute_plan_at_index(handle, pack, workspace.get(), built->plan_index);
    ThrowIfBad(status, "execute");
  }
}

}  // namespace cudnn_sdpa
}  // namespace attntune
