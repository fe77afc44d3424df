// The CUDA implementations (cuda_implementations.h) of dense, swa, hybrid (windowed kernels),
// ks, dma (top-k kernels) and lsh, hax (bucketed kernels): device buffers cached per
// tensors object, the variant's parameters mapped onto a WindowedProblem, the sparse
// variants' selection enqueued on the device before the attention kernel at every launch
// (select_cuda.h), so that a timed launch is what the user pays: selection plus attention.
#include "kernels/cuda/cuda_implementations.h"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "kernels/cuda/cuda_resident.h"
#include "kernels/cuda/libraries/library_implementations.h"
#include "kernels/cuda/plan.h"
#include "kernels/cuda/select_core.h"
#include "kernels/cuda/select_cuda.h"
#include "kernels/cuda/stream_scratch.h"
#include "kernels/cuda/windowed_cuda.h"
#include "core/check.h"
#include "core/params.h"
#include "kernels/selection/selection.h"

namespace attntune {
namespace {

namespace cp = cuda_plan;

void Check(cudaError_t error, const char* call) {
  if (error != cudaSuccess) {
    // The runtime also keeps a failed call's error for the next cudaGetLastError, which
    // would fail the next launch's check (another candidate's): reported here instead.
    (void)cudaGetLastError();
    throw std::runtime_error(std::string(call) + ": " + cudaGetErrorName(error) + ": " +
                             cudaGetErrorString(error));
  }
}

struct DeviceBuffer {
  void* ptr = nullptr;
  size_t bytes = 0;
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() {
    if (ptr != nullptr) cudaFree(ptr);
  }
  void Resize(size_t n) {
    if (n <= bytes && ptr != nullptr) return;
    if (ptr != nullptr) cudaFree(ptr);
    ptr = nullptr;
    bytes = 0;
    Check(cudaMalloc(&ptr, n == 0 ? 1 : n), "cudaMalloc");
    bytes = n;
  }
};

// The inputs of the problem being tuned, resident on the device in one dtype. Re-uploaded
// when another tensors object (or the same one with another shape or dtype) comes in.
struct Resident {
  const Tensors* source = nullptr;
  Shape shape;
  cp::Dtype dtype = cp::Dtype::kF16;
  int device = -1;
  uint64_t fingerprint = 0;  // of sampled input values: a new tensors object at a reused
                             // address, with the same shape, must not hit stale buffers
  DeviceBuffer q, k, v, o, windows;
  std::vector<int32_t> windows_host;  // what `windows` holds on the device
  // Whether every element of q, k and v is a value of `dtype` (tune's and bench's inputs
  // are: RoundInputs): the selection then reads q, k and v above, else fp32 copies of the
  // values the fp64 reference selects on (q32, k32, v32, uploaded on first use).
  bool exact = false;
  DeviceBuffer q32, k32, v32;
  bool have_fp32 = false;
  // What the selection takes from the parameters alone (supplied scores, dma's Delta
  // and A, LSH's R and mu), uploaded once per `inputs_key`.
  std::string inputs_key;
  DeviceBuffer scores, delta, a, rt, mu;
  cp::SelectWorkspace select;  // the selection's buffers, reused launch after launch
  DeviceBuffer workspace;      // split-KV decode partials
};

std::mutex g_mutex;
Resident& TheResident() {
  static Resident* resident = new Resident();  // leaked: no cudaFree after the runtime's teardown
  return *resident;
}

// Uploads `host` in `dtype`; returns whether every element was exactly a value of it.
bool Upload(DeviceBuffer& buffer, const TensorData<float>& host, cp::Dtype dtype) {
  std::vector<uint16_t> bits(host.size());
  bool exact = true;
  for (size_t x = 0; x < host.size(); ++x) {
    bits[x] = cp::ToBits(host[x], dtype);
    // Compared as values: -0 stays -0 in both dtypes, and NaN (never equal) is not exact.
    exact = exact && cp::FromBits(bits[x], dtype) == host[x];
  }
  buffer.Resize(bits.size() * 2);
  Check(cudaMemcpy(buffer.ptr, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice),
        "cudaMemcpy");
  return exact;
}

// FNV-1a over up to 64 evenly spaced values of q, k and v (and their data addresses).
uint64_t Fingerprint(const Tensors& t) {
  uint64_t h = 1469598103934665603ull;
  auto mix = [&h](uint64_t x) {
    for (int byte = 0; byte < 8; ++byte) {
      h ^= (x >> (8 * byte)) & 0xff;
      h *= 1099511628211ull;
    }
  };
  for (const TensorData<float>* x : {&t.q, &t.k, &t.v}) {
    mix(reinterpret_cast<uintptr_t>(x->data()));
    const size_t step = std::max<size_t>(1, x->size() / 64);
    for (size_t n = 0; n < x->size(); n += step) {
      uint32_t bits;
      std::memcpy(&bits, &(*x)[n], 4);
      mix(bits);
    }
  }
  return h;
}

Resident& Prepare(const Tensors& t, cp::Dtype dtype) {
  Resident& r = TheResident();
  int device = 0;
  Check(cudaGetDevice(&device), "cudaGetDevice");
  const Shape& s = t.shape;
  const uint64_t fingerprint = Fingerprint(t);
  const bool same = r.source == &t && r.fingerprint == fingerprint && r.dtype == dtype &&
                    r.device == device && r.shape.B == s.B && r.shape.Hq == s.Hq &&
                    r.shape.Hkv == s.Hkv && r.shape.Lq == s.Lq && r.shape.Lk == s.Lk &&
                    r.shape.d == s.d;
  if (same) return r;
  r.source = nullptr;  // invalid until every upload succeeded
  r.have_fp32 = false;
  r.inputs_key.clear();
  r.windows_host.clear();
  const bool exact_q = Upload(r.q, t.q, dtype);
  const bool exact_k = Upload(r.k, t.k, dtype);
  const bool exact_v = Upload(r.v, t.v, dtype);
  r.exact = exact_q && exact_k && exact_v;
  r.o.Resize(t.q.size() * 2);
  r.windows.Resize(static_cast<size_t>(s.Hkv) * 4);
  r.source = &t;
  r.fingerprint = fingerprint;
  r.shape = s;
  r.dtype = dtype;
  r.device = device;
  return r;
}

const cp::WindowedTile& TileNamed(const std::string& name) {
  for (const cp::WindowedTile& tile : cp::WindowedTiles()) {
    for (const cp::Family family : cp::kFamilies) {
      if (cp::KernelName(tile, family) == name) return tile;
    }
  }
  throw std::runtime_error("no compiled CUDA tile named " + name);
}

cp::WindowedProblem ProblemOf(const std::string& variant, const Tensors& t, const Params& p,
                              std::vector<int32_t>* windows) {
  cp::WindowedProblem problem;
  problem.shape = t.shape;
  if (variant == "swa") {
    problem.window = ParamInt(p, "w");
    problem.sink = ParamInt(p, "sink");
  } else if (variant == "hybrid") {
    problem.sink = ParamInt(p, "sink");
    problem.per_head_windows = true;
    windows->clear();
    for (int64_t w : HybridWindows(t, p)) windows->push_back(static_cast<int32_t>(w));
  }
  return problem;
}

template <class T>
void UploadRaw(DeviceBuffer& buffer, const T* host, size_t size) {
  buffer.Resize(size * sizeof(T));
  if (size > 0) {
    Check(cudaMemcpy(buffer.ptr, host, size * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
}

template <typename T>
void UploadRaw(DeviceBuffer& buffer, const std::vector<T>& host) {
  UploadRaw(buffer, host.data(), host.size());
}

template <typename T>
void UploadRaw(DeviceBuffer& buffer, const TensorData<T>& host) {
  UploadRaw(buffer, host.data(), host.size());
}

cp::Family FamilyOf(const std::string& variant) {
  if (variant == "ks" || variant == "dma") return cp::Family::kTopK;
  if (variant == "lsh" || variant == "hax") return cp::Family::kBucketed;
  return cp::Family::kWindowed;
}

void ThrowIf(const std::string& error) {
  if (!error.empty()) throw std::runtime_error(error);
}

template <class T>
T* Ptr(DeviceBuffer& buffer) {
  return static_cast<T*>(buffer.ptr);
}

// fp32 q, k, v on the device, uploaded once per inputs.
void EnsureFp32(const Tensors& t, Resident& r) {
  if (r.have_fp32) return;
  UploadRaw(r.q32, t.q);
  UploadRaw(r.k32, t.k);
  UploadRaw(r.v32, t.v);
  r.have_fp32 = true;
}

// The selection's inputs that depend on the parameters alone, uploaded once per
// (variant, parameters): supplied ks scores, dma's Delta and A, LSH's R and mu.
void EnsureSelectInputs(const std::string& variant, const Tensors& t, Params p, Resident& r) {
  p.erase("Tile");
  p.erase("Chunk");
  const std::string key = variant + "|" + ParamsToString(p);
  if (r.inputs_key == key) return;
  r.inputs_key.clear();
  if ((variant == "ks" || variant == "hax") && !t.scores.empty()) {
    UploadRaw(r.scores, std::vector<double>(t.scores.begin(), t.scores.end()));
  }
  if (variant == "dma" || variant == "dma_decode") {
    std::vector<double> delta, a;
    DmaDeltaA(t, static_cast<uint64_t>(ParamInt(p, "seed")), &delta, &a);
    UploadRaw(r.delta, delta);
    UploadRaw(r.a, a);
  }
  if (variant == "lsh" || variant == "hax") {
    UploadRaw(r.rt, cp::LshProjectionRows(t, ParamInt(p, "bits"),
                                          static_cast<uint64_t>(ParamInt(p, "seed"))));
    if (!t.mu.empty()) UploadRaw(r.mu, t.mu);
  }
  r.inputs_key = key;
}

// What the selection reads on the device: q, k, v (fp32 copies, or a caller's fp16/bf16
// tensors read in place); the parameters' inputs (supplied ks scores in fp64 or nullptr,
// dma's Delta and A, LSH's R transposed, mu or nullptr); the workspace it fills and the
// stream it is enqueued on.
struct SelectSources {
  cp::DeviceInput q, k, v;
  const double* scores = nullptr;
  const double* delta = nullptr;
  const double* a = nullptr;
  const float* rt = nullptr;
  const float* mu = nullptr;
  cp::SelectWorkspace* ws = nullptr;
  void* stream = nullptr;
};

// The resident inputs' sources (after EnsureSelectInputs), on the default stream: the
// kernels' copies when the inputs are exactly their dtype's values, else fp32 copies.
SelectSources ResidentSources(const Tensors& t, Resident& r) {
  SelectSources src;
  if (r.exact) {
    src.q = {r.q.ptr, r.dtype};
    src.k = {r.k.ptr, r.dtype};
    src.v = {r.v.ptr, r.dtype};
  } else {
    EnsureFp32(t, r);
    src.q = cp::F32Input(Ptr<float>(r.q32));
    src.k = cp::F32Input(Ptr<float>(r.k32));
    src.v = cp::F32Input(Ptr<float>(r.v32));
  }
  src.scores = t.scores.empty() ? nullptr : Ptr<double>(r.scores);
  src.delta = Ptr<double>(r.delta);
  src.a = Ptr<double>(r.a);
  src.rt = Ptr<float>(r.rt);
  src.mu = t.mu.empty() ? nullptr : Ptr<float>(r.mu);
  src.ws = &r.select;
  return src;
}

// The prefix top-k selection with budget k of the variant's scores (ks's, supplied or
// default, for ks and hax; dma's for dma and dma_decode), enqueued on the device.
cp::TopKDevice EnqueuePrefixTopK(const std::string& variant, const Shape& s, int64_t k,
                                 bool bias, const SelectSources& src) {
  cp::TopKDevice topk;
  cp::AllocTopK(s.B * s.Hkv, s.Lk, k, bias, *src.ws, "topk", &topk);
  if (variant == "dma" || variant == "dma_decode") {
    ThrowIf(cp::EnqueueDmaScores(s, src.v, src.delta, src.a, cp::HostFusesDmaProducts(),
                                 &topk, src.stream));
  } else if (src.scores != nullptr) {
    ThrowIf(cp::EnqueueScoreKeys(src.scores, &topk, src.stream));
  } else {
    ThrowIf(cp::EnqueueKsScores(s, src.q, src.k, &topk, *src.ws, src.stream));
  }
  // dma_decode's selection reads the sorted order; the others take the scan's states.
  ThrowIf(cp::EnqueueTopK(&topk, *src.ws, "topk", src.stream, variant == "dma_decode"));
  return topk;
}

// ks and dma: scores, evictions and the query blocks' key lists, on the device.
void EnqueueTopKSelection(const std::string& variant, const Shape& s, const Params& p,
                          const cp::WindowedTile& tile, const SelectSources& src,
                          cp::WindowedDeviceArgs* args) {
  const bool dma = variant == "dma";
  const bool bias = dma && ParamInt(p, "bias") == 1;
  const cp::TopKDevice topk = EnqueuePrefixTopK(variant, s, ParamInt(p, dma ? "w" : "k"), bias, src);
  cp::ListsDevice lists;
  ThrowIf(cp::EnqueueKeyLists(topk, s.Lq, tile.br, cp::KeyOrder::kHeldFirst, &lists, *src.ws,
                              "lists", src.stream));
  args->list_offsets = lists.begin;
  args->list_ends = lists.end;
  args->list_keys = lists.keys;
  args->evict = topk.evict;
  args->bias_log2 = topk.bias_log2;
  args->list_aux = lists.key_evict;
  args->list_bias = lists.key_bias;
}

// lsh and hax: bins (and hax's prefix top-k), the bucketed layout and its lists.
void EnqueueBucketSelection(const std::string& variant, const Shape& s, const Params& p,
                            const cp::WindowedTile& tile, const SelectSources& src,
                            cp::WindowedDeviceArgs* args) {
  const bool hax = variant == "hax";
  const int64_t bits = ParamInt(p, "bits");
  const bool argmax = p.at("rule") == "argmax";
  int32_t* key_bin = src.ws->Get<int32_t>("lsh.key_bin", s.B * s.Hkv * s.Lk);
  int32_t* query_bin = src.ws->Get<int32_t>("lsh.query_bin", s.B * s.Hq * s.Lq);
  ThrowIf(cp::EnqueueLshBins(s, src.q, src.k, src.mu, src.rt, bits, argmax,
                             cp::HostFusesLshProducts(), key_bin, query_bin, src.stream));
  cp::TopKDevice topk;
  if (hax) topk = EnqueuePrefixTopK(variant, s, ParamInt(p, "k_ks"), false, src);
  cp::BucketDevice bucket;
  ThrowIf(cp::EnqueueBucketLayout(s, argmax ? bits : (int64_t{1} << bits), key_bin, query_bin,
                                  ParamInt(p, hax ? "k_lsh" : "k"), hax ? &topk : nullptr,
                                  tile.br, hax ? ParamInt(p, "Chunk") : 0, &bucket, *src.ws,
                                  src.stream));
  args->list_offsets = bucket.key_offsets;
  args->list_keys = bucket.keys;
  args->evict = hax ? topk.evict : nullptr;
  args->block_head = bucket.head;
  args->row_offsets = bucket.row_offsets;
  args->rows = bucket.rows;
  args->row_lo = bucket.lo;
  args->row_hi = bucket.hi;
  args->spos = bucket.spos;
  args->list_aux = bucket.key_spos;
  args->list_aux2 = bucket.key_evict;
  args->blocks = bucket.blocks_bound;
  args->block_count = bucket.block_count;
}

constexpr const char* kListsWhy =
    "the selection's key lists on the device take fewer than 2^31 entries (a smaller budget, "
    "Tile or shape)";

// Why the selection of a top-k or bucketed variant cannot run on the device ("" = it
// can): ks's default scores hold a group's prefixes in one block; int32 indices, the key
// lists' places included (sized as EnqueueKeyLists and EnqueueBucketLayout size them,
// which refuse them too, but only once the candidate runs).
std::string CanSelect(const std::string& variant, const Shape& s, const Params& p,
                      const cp::WindowedTile& tile) {
  if ((variant == "ks" || variant == "hax") && (s.d > 256 || s.Group() > 8)) {
    return "ks scores on the device take d <= 256 and at most 8 query heads per KV head";
  }
  if (s.B * s.Hq * s.Lq >= INT32_MAX || s.B * s.Hkv * s.Lk >= INT32_MAX) {
    return "the selection on the device takes fewer than 2^31 rows and keys";
  }
  if (s.B * s.Hkv > cp::kSelectMaxHeads) return cp::SelectHeadsWhy(s.B * s.Hkv);
  const int64_t heads = s.B * s.Hkv;
  const std::string lists_why = kListsWhy;
  if (variant == "ks" || variant == "dma") {
    const int64_t k = ParamInt(p, variant == "dma" ? "w" : "k");
    if (cp::ListBegin(heads, 0, tile.br, s.Lq, s.Lk, k) >= INT32_MAX) return lists_why;
  } else if (variant == "lsh" || variant == "hax") {
    const bool hax = variant == "hax";
    const int64_t bits = ParamInt(p, "bits");
    const int64_t bins = p.at("rule") == "argmax" ? bits : (int64_t{1} << bits);
    const int64_t chunk = cp::BucketChunk(hax, hax ? ParamInt(p, "Chunk") : 0, s.Lq);
    const int64_t k_ks = hax ? ParamInt(p, "k_ks") : -1;
    if (hax && cp::ListBegin(heads, 0, chunk, s.Lq, s.Lk, k_ks) >= INT32_MAX) return lists_why;
    const cp::BucketSizes sizes = cp::BucketLayoutSizes(
        heads, s.Group(), s.Lq, s.Lk, bins, ParamInt(p, hax ? "k_lsh" : "k"), tile.br, chunk,
        k_ks);
    if (sizes.keys >= INT32_MAX) return lists_why;
  }
  return "";
}

// Launch arguments with the resident Q, K, V and O.
cp::WindowedDeviceArgs TensorArgs(const Resident& r) {
  cp::WindowedDeviceArgs args;
  args.q = r.q.ptr;
  args.k = r.k.ptr;
  args.v = r.v.ptr;
  args.o = r.o.ptr;
  return args;
}

// Makes the caller's CUDA device current for one call and restores the caller's own.
// Where it is current already nothing is set, before or after: cudaSetDevice binds the
// device's primary context, which would replace a context the caller made current itself
// (a device switched to and back still comes back on its primary context).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    Check(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device) {
      Check(cudaSetDevice(device), "cudaSetDevice");
      switched_ = true;
    }
  }
  ~DeviceGuard() {
    if (switched_) cudaSetDevice(previous_);
  }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
  bool switched_ = false;
};

cp::WindowedDeviceArgs CallerArgs(const DeviceTensors& t) {
  cp::WindowedDeviceArgs args;
  args.q = t.q;
  args.k = t.k;
  args.v = t.v;
  args.o = t.o;
  args.stream = t.stream;
  return args;
}

// dense, swa, hybrid ("cuda") on the caller's device buffers, enqueued on its stream.
// hybrid's windows: the caller's device tensor, else w and full uploaded on the stream.
void RunWindowedOnCallerBuffers(const std::string& variant, const DeviceTensors& t,
                                const Params& p) {
  DeviceGuard device(t.device);
  const cp::WindowedTile& tile = TileNamed(p.at("Tile"));
  const cudaStream_t stream = static_cast<cudaStream_t>(t.stream);
  cp::WindowedProblem problem;
  problem.shape = t.shape;
  if (variant == "swa") {
    problem.window = ParamInt(p, "w");
    problem.sink = ParamInt(p, "sink");
  } else if (variant == "hybrid") {
    problem.sink = ParamInt(p, "sink");
    problem.per_head_windows = true;
  }
  cp::WindowedDeviceArgs args = CallerArgs(t);
  const bool upload_windows = problem.per_head_windows && t.windows == nullptr;
  StreamScratch windows(upload_windows ? static_cast<size_t>(t.shape.Hkv) * 4 : 0, stream);
  if (upload_windows) {
    std::vector<int32_t> host(static_cast<size_t>(t.shape.Hkv));
    const int64_t full = ParamInt(p, "full"), w = ParamInt(p, "w");
    for (int64_t h = 0; h < t.shape.Hkv; ++h) host[h] = static_cast<int32_t>(h < full ? 0 : w);
    // From pageable memory: returns once `host` is staged, so it may go out of scope.
    Check(cudaMemcpyAsync(windows.get(), host.data(), host.size() * 4, cudaMemcpyHostToDevice,
                          stream),
          "cudaMemcpyAsync");
    args.windows = static_cast<const int32_t*>(windows.get());
  } else {
    args.windows = t.windows;
  }
  const std::string error = cp::LaunchWindowed(problem, tile, args);
  if (!error.empty()) throw std::runtime_error(error);
}

// Split-KV decode ("cuda_decode" of dense, swa) on the caller's device buffers; its
// partials in scratch ordered on the caller's stream.
void RunDecodeOnCallerBuffers(const cp::WindowedProblem& problem, cp::Dtype dt,
                              const DeviceTensors& t, int64_t splits) {
  DeviceGuard device(t.device);
  const cudaStream_t stream = static_cast<cudaStream_t>(t.stream);
  StreamScratch workspace(static_cast<size_t>(cp::PlanDecode(problem, splits).workspace_bytes),
                          stream);
  const std::string error = cp::LaunchDecode(problem, dt, splits, CallerArgs(t), workspace.get());
  if (!error.empty()) throw std::runtime_error(error);
}

// A caller's small fp32 device tensor [n] (delta, a, proj) read back to the host; empty
// when not supplied. The copy is ordered on the caller's stream (its earlier work may be
// writing the tensor) and the host waits for it.
TensorData<float> ReadBack(const float* device_ptr, int64_t n, cudaStream_t stream) {
  if (device_ptr == nullptr) return {};
  std::vector<float> host(static_cast<size_t>(n));
  Check(cudaMemcpyAsync(host.data(), device_ptr, host.size() * 4, cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync");
  Check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  return TensorData<float>(std::move(host));
}

// `host` copied into a workspace buffer on the stream (from pageable memory: returns once
// staged, so `host` may go out of scope).
template <class T>
const T* Stage(const std::vector<T>& host, const std::string& name, cp::SelectWorkspace& ws,
               cudaStream_t stream) {
  T* device_ptr = ws.Get<T>(name, static_cast<int64_t>(host.size()));
  if (!host.empty()) {
    Check(cudaMemcpyAsync(device_ptr, host.data(), host.size() * sizeof(T),
                          cudaMemcpyHostToDevice, stream),
          "cudaMemcpyAsync");
  }
  return device_ptr;
}

// ks, dma, lsh, hax ("cuda") on the caller's device buffers, all on its stream: the
// selection reads the caller's q, k, v in place (each value widened to fp32 where it is
// read: exact, so the selection is the reference's on the values the kernel reads), then
// the attention kernel, in a workspace ordered on the stream. The per-head inputs the
// variant draws from its seed (dma's Delta and A, LSH's R) are computed on the host, from
// the caller's delta, a, proj when given (read back first); supplied scores are widened
// on the device, mu read in place.
void RunSelectedOnCallerBuffers(const std::string& variant, const DeviceTensors& t,
                                const Params& p) {
  DeviceGuard device(t.device);
  const cp::WindowedTile& tile = TileNamed(p.at("Tile"));
  const Shape& s = t.shape;
  const cudaStream_t stream = static_cast<cudaStream_t>(t.stream);
  const cp::Family family = FamilyOf(variant);
  const bool dma = variant == "dma";
  const bool lsh = family == cp::Family::kBucketed;
  Tensors host;  // the shape and the small inputs the host computes from
  host.shape = s;
  if (dma) {
    host.delta = ReadBack(t.delta, s.Hkv * s.d, stream);
    host.a = ReadBack(t.a, s.Hkv, stream);
  }
  if (lsh) host.proj = ReadBack(t.proj, s.Hkv * s.d * ParamInt(p, "bits"), stream);

  cp::SelectWorkspace ws(t.stream);
  SelectSources src;
  src.ws = &ws;
  src.stream = t.stream;
  src.q = {t.q, t.dtype};
  src.k = {t.k, t.dtype};
  src.v = {t.v, t.dtype};
  if (dma) {
    std::vector<double> delta, a;
    DmaDeltaA(host, static_cast<uint64_t>(ParamInt(p, "seed")), &delta, &a);
    src.delta = Stage(delta, "caller.delta", ws, stream);
    src.a = Stage(a, "caller.a", ws, stream);
  }
  if ((variant == "ks" || variant == "hax") && t.scores != nullptr) {
    double* scores = ws.Get<double>("caller.scores", s.B * s.Hkv * s.Lk);
    ThrowIf(cp::EnqueueWidenScores(t.scores, s.B * s.Hkv * s.Lk, scores, t.stream));
    src.scores = scores;
  }
  if (lsh) {
    src.rt = Stage(cp::LshProjectionRows(host, ParamInt(p, "bits"),
                                         static_cast<uint64_t>(ParamInt(p, "seed"))),
                   "caller.rt", ws, stream);
    src.mu = t.mu;
  }
  cp::WindowedDeviceArgs args = CallerArgs(t);
  args.family = family;
  if (family == cp::Family::kTopK) EnqueueTopKSelection(variant, s, p, tile, src, &args);
  if (family == cp::Family::kBucketed) EnqueueBucketSelection(variant, s, p, tile, src, &args);
  cp::WindowedProblem problem;
  problem.shape = s;
  ThrowIf(cp::LaunchWindowed(problem, tile, args));
}

// The checked run of every CUDA implementation: O poisoned on the device (0x7fff is a NaN
// in fp16 and in bf16, so rows a kernel never writes fail the check), `launch` enqueued,
// O copied back as fp32.
void RunChecked(const Tensors& t, cp::Dtype dtype, const std::function<void()>& launch,
                float* out) {
  Resident& r = Prepare(t, dtype);
  const std::vector<uint16_t> poison(t.q.size(), 0x7fff);
  Check(cudaMemcpy(r.o.ptr, poison.data(), poison.size() * 2, cudaMemcpyHostToDevice),
        "cudaMemcpy");
  launch();
  Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
  std::vector<uint16_t> bits(t.q.size());
  Check(cudaMemcpy(bits.data(), r.o.ptr, bits.size() * 2, cudaMemcpyDeviceToHost), "cudaMemcpy");
  for (size_t x = 0; x < bits.size(); ++x) out[x] = cp::FromBits(bits[x], dtype);
}

// Enqueues the launch on the resident buffers (uploading first if needed): for the
// top-k and bucketed families the selection on the device, then the attention kernel.
Resident& Launch(const std::string& variant, const Tensors& t, const Params& p) {
  const cp::WindowedTile& tile = TileNamed(p.at("Tile"));
  Resident& r = Prepare(t, tile.dtype);
  const cp::Family family = FamilyOf(variant);
  std::vector<int32_t> windows;
  const cp::WindowedProblem problem = ProblemOf(variant, t, p, &windows);
  if (!windows.empty() && windows != r.windows_host) {  // hybrid: upload once per params
    Check(cudaMemcpy(r.windows.ptr, windows.data(), windows.size() * 4, cudaMemcpyHostToDevice),
          "cudaMemcpy");
    r.windows_host = windows;
  }
  cp::WindowedDeviceArgs args = TensorArgs(r);
  args.windows = static_cast<const int32_t*>(r.windows.ptr);
  args.family = family;
  if (family != cp::Family::kWindowed) {
    EnsureSelectInputs(variant, t, p, r);
    const SelectSources src = ResidentSources(t, r);
    if (family == cp::Family::kTopK) EnqueueTopKSelection(variant, t.shape, p, tile, src, &args);
    if (family == cp::Family::kBucketed) {
      EnqueueBucketSelection(variant, t.shape, p, tile, src, &args);
    }
  }
  ThrowIf(cp::LaunchWindowed(problem, tile, args));
  return r;
}

// The run (checked: O poisoned, launched, copied back), launch (enqueue only) and
// tolerance of a decode implementation that enqueues with `launch`.
void WireDecode(Implementation* impl, cp::Dtype dt,
                const std::function<void(const Tensors&, const Params&)>& launch) {
  impl->run = [launch, dt](const Tensors& t, const Params& p, float* out) {
    std::lock_guard<std::mutex> lock(g_mutex);
    RunChecked(t, dt, [&] { launch(t, p); }, out);
  };
  impl->launch = [launch](const Tensors& t, const Params& p) {
    std::lock_guard<std::mutex> lock(g_mutex);
    launch(t, p);
  };
  // Inputs rounded once to the dtype; the state and P stay fp32 (no P rounding), so the
  // windowed kernels' bounds hold with margin.
  const double tolerance = dt == cp::Dtype::kF16 ? 2e-3 : 1.6e-2;
  impl->tolerance = [tolerance](const Params&) { return tolerance; };
}

// The decode kernels are compiled for head dimensions 64 and 128.
std::string DecodeHeadDims(const ProblemKind& kind) {
  if (kind.head_dim == 64 || kind.head_dim == 128) return "";
  return "the CUDA decode kernels are compiled for d = 64 and 128, not d=" +
         std::to_string(kind.head_dim);
}

// dma_decode on the gathered decode kernel: the selection on the device (scores, the
// resident sets' eviction steps and the chosen keys, equal to the Kokkos decode's; q, k
// and v read as ResidentSources gives them), then one launch for every step.
Implementation DmaDecodeImplementation(const std::string& dtype, cp::Dtype dt) {
  Implementation impl;
  impl.id = "cuda_decode";
  impl.platform = kCudaPlatform;
  impl.phases = {Phase::kDecode};
  impl.dtypes = {dt};
  impl.summary = "CUDA gathered decode: every step at once, a thread block per (step, KV head) "
                 "over the resident keys and each query head's chosen keys (selection on the "
                 "device), " + dtype + " in, fp32 state";
  impl.supports = DecodeHeadDims;
  impl.check = [](const Shape& shape, const Params& p) {
    std::string why = cp::CanImplementGatheredDecode(shape);
    if (why.empty()) {
      why = cp::CanSelectDecode(shape, p.count("w_q") != 0 ? ParamInt(p, "w_q") : 0,
                                p.count("r") != 0 ? ParamInt(p, "r") : 0);
    }
    // The resident sets' lists, kDecodeListSteps steps a list (EnqueueDecodeSelection's
    // EnqueueKeyLists, which refuses them only once the candidate runs).
    if (why.empty() && p.count("w_kv") != 0 &&
        cp::ListBegin(shape.B * shape.Hkv, 0, cp::kDecodeListSteps, shape.Lk, shape.Lk,
                      ParamInt(p, "w_kv")) >= INT32_MAX) {
      why = kListsWhy;
    }
    return why;
  };
  auto launch = [dt](const Tensors& t, const Params& p) {
    Resident& r = Prepare(t, dt);
    const Shape& s = t.shape;
    EnsureSelectInputs("dma_decode", t, p, r);
    const bool bias = ParamInt(p, "bias") == 1;
    const SelectSources src = ResidentSources(t, r);
    const cp::TopKDevice topk = EnqueuePrefixTopK("dma_decode", s, ParamInt(p, "w_kv"), bias, src);
    cp::DecodeDevice sel;
    ThrowIf(cp::EnqueueDecodeSelection(s, src.q, src.k, topk, ParamInt(p, "w_q"),
                                       ParamInt(p, "r"), &sel, r.select, nullptr));
    cp::WindowedDeviceArgs args = TensorArgs(r);
    args.list_offsets = sel.resident.begin;
    args.list_ends = sel.resident.end;
    args.list_keys = sel.resident.keys;
    args.evict = sel.evict;
    args.list_aux = sel.resident.key_evict;
    args.chosen_offsets = sel.chosen_offsets;
    args.chosen = sel.chosen;
    args.bias_log2 = topk.bias_log2;
    ThrowIf(cp::LaunchGatheredDecode(s, dt, args));
  };
  WireDecode(&impl, dt, launch);
  return impl;
}

// The windows of each KV head of a windowed variant on the host (dense all 0, swa all w,
// hybrid HybridWindows).
std::vector<int64_t> HostWindows(const std::string& variant, const Tensors& t, const Params& p) {
  if (variant == "hybrid") return HybridWindows(t, p);
  const int64_t w = variant == "swa" ? ParamInt(p, "w") : 0;
  return std::vector<int64_t>(static_cast<size_t>(t.shape.Hkv), w);
}

// The same for the caller's device tensors: hybrid's windows copied from the caller's
// device tensor (the stream waits for it), else from w and full.
std::vector<int64_t> CallerWindows(const std::string& variant, const DeviceTensors& t,
                                   const Params& p) {
  const int64_t hkv = t.shape.Hkv;
  std::vector<int64_t> out(static_cast<size_t>(hkv), variant == "swa" ? ParamInt(p, "w") : 0);
  if (variant != "hybrid") return out;
  if (t.windows == nullptr) {
    const int64_t full = ParamInt(p, "full"), w = ParamInt(p, "w");
    for (int64_t h = 0; h < hkv; ++h) out[h] = h < full ? 0 : w;
    return out;
  }
  std::vector<int32_t> host(static_cast<size_t>(hkv));
  const cudaStream_t stream = static_cast<cudaStream_t>(t.stream);
  Check(cudaMemcpyAsync(host.data(), t.windows, host.size() * 4, cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync");
  Check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  for (int64_t h = 0; h < hkv; ++h) out[h] = host[h];
  return out;
}

// The resident inputs as device tensors on the default stream.
DeviceTensors ResidentTensors(const Resident& r, const Shape& shape, Dtype dtype) {
  DeviceTensors d;
  d.shape = shape;
  d.dtype = dtype;
  d.q = r.q.ptr;
  d.k = r.k.ptr;
  d.v = r.v.ptr;
  d.o = r.o.ptr;
  d.device = r.device;
  return d;
}

}  // namespace

void WireWindowedDeviceLaunch(Implementation* impl, const std::string& variant, Dtype dtype,
                              WindowedDeviceLaunch launch) {
  ATTNTUNE_CHECK_MSG(dtype != Dtype::kF32, "the CUDA attention kernels take fp16 or bf16");
  auto on_resident = [variant, dtype, launch](const Tensors& t, const Params& p) {
    Resident& r = Prepare(t, dtype);
    launch(ResidentTensors(r, t.shape, dtype), p, HostWindows(variant, t, p));
  };
  impl->run = [on_resident, dtype](const Tensors& t, const Params& p, float* out) {
    std::lock_guard<std::mutex> lock(g_mutex);
    RunChecked(t, dtype, [&] { on_resident(t, p); }, out);
  };
  impl->launch = [on_resident](const Tensors& t, const Params& p) {
    std::lock_guard<std::mutex> lock(g_mutex);
    on_resident(t, p);
  };
  impl->run_device = [variant, launch](const DeviceTensors& t, const Params& p) {
    DeviceGuard device(t.device);
    launch(t, p, CallerWindows(variant, t, p));
  };
  // As attntune's own kernels: inputs rounded once to the dtype, P rounded once before P V.
  const double tolerance = dtype == Dtype::kF16 ? 2e-3 : 1.6e-2;
  impl->tolerance = [tolerance](const Params&) { return tolerance; };
}

bool CudaKernelsBuilt() { return true; }

namespace {

// The compiled tiles of `family` for `dt` (and head dimension `d`; 0: any), as the
// choices of the tunable "Tile" (kernel names); for one head dimension the default is
// cp::DefaultTile's (its preferred tile where one is, else the first), else the first.
ParamDecl TileDecl(cp::Family family, cp::Dtype dt, int64_t d) {
  ParamDecl decl{"Tile", ParamKind::kEnum, 0, 0, {}, "", {}, "compiled CUDA tile (kernel)"};
  for (const cp::WindowedTile& tile : cp::WindowedTiles()) {
    if (tile.dtype != dt || (d != 0 && tile.d != d)) continue;
    const std::string name = cp::KernelName(tile, family);
    decl.choices.push_back(name);
    decl.grid.push_back(name);
  }
  const cp::WindowedTile* preferred =
      d != 0 ? cp::DefaultTile(dt, static_cast<int>(d), family) : nullptr;
  if (preferred != nullptr) {
    decl.default_value = cp::KernelName(*preferred, family);
  } else if (!decl.choices.empty()) {
    decl.default_value = decl.choices.front();
  }
  return decl;
}

// The prefill implementation "cuda" of `variant` for inputs in `dt`; nullopt when the
// variant has no CUDA kernel (dma_decode) or no tile of `dt` is compiled.
std::optional<Implementation> PrefillImplementation(const Variant& variant, cp::Dtype dt) {
  const std::string id = variant.id;
  const cp::Family family = FamilyOf(id);
  if (family == cp::Family::kWindowed && id != "dense" && id != "swa" && id != "hybrid") {
    return std::nullopt;
  }
  const ParamDecl all_tiles = TileDecl(family, dt, 0);
  if (all_tiles.choices.empty()) return std::nullopt;
  const std::string dtype = ToString(dt);
  Implementation impl;
  impl.id = "cuda";
  impl.platform = kCudaPlatform;
  impl.phases = {Phase::kPrefill};
  impl.dtypes = {dt};
  const std::string math = dtype + " in, fp32 accumulation";
  if (family == cp::Family::kTopK) {
    impl.summary = "CUDA tensor-core block-skipping kernel over prefix top-k key lists "
                   "(selection on the device), " + math;
  } else if (family == cp::Family::kBucketed) {
    impl.summary = "CUDA tensor-core kernel over blocks of rows sorted by (LSH bin, position): "
                   "gathered rows, their lsh keys" +
                   std::string(id == "hax" ? " and prefix top-k keys" : "") +
                   " (selection on the device), " + math;
  } else {
    impl.summary = "CUDA tensor-core windowed kernel (mma.sync, " + math + ")";
  }
  std::vector<ParamDecl> extra;
  if (id == "hax") {  // as the Kokkos union's Chunk: rows sorted a chunk at a time
    extra.push_back({"Chunk", ParamKind::kInt, 1, 1 << 20, {}, "512", {"256", "512", "1024"},
                     "query positions per chunk (a block's rows and ks union span at most one "
                     "chunk)"});
  }
  impl.tunables = {all_tiles};
  impl.tunables.insert(impl.tunables.end(), extra.begin(), extra.end());
  impl.tunables_for = [family, dt, extra](const ProblemKind& kind) {
    std::vector<ParamDecl> out = {TileDecl(family, dt, kind.head_dim)};
    out.insert(out.end(), extra.begin(), extra.end());
    return out;
  };
  impl.supports = [family, dt, dtype](const ProblemKind& kind) -> std::string {
    if (!TileDecl(family, dt, kind.head_dim).choices.empty()) return "";
    return "no CUDA tile compiled for " + dtype + ", d=" + std::to_string(kind.head_dim);
  };
  impl.check = [id](const Shape& shape, const Params& p) -> std::string {
    const cp::WindowedTile& tile = TileNamed(p.at("Tile"));
    cp::WindowedProblem problem;
    problem.shape = shape;
    if (id == "swa") problem.window = ParamInt(p, "w");
    problem.per_head_windows = id == "hybrid";
    const std::string why = cp::CanImplement(problem, tile);
    return why.empty() && FamilyOf(id) != cp::Family::kWindowed ? CanSelect(id, shape, p, tile)
                                                                 : why;
  };
  impl.run = [id](const Tensors& t, const Params& p, float* out) {
    std::lock_guard<std::mutex> lock(g_mutex);
    const cp::WindowedTile& tile = TileNamed(p.at("Tile"));
    RunChecked(t, tile.dtype, [&] { Launch(id, t, p); }, out);
  };
  impl.launch = [id](const Tensors& t, const Params& p) {
    std::lock_guard<std::mutex> lock(g_mutex);
    Launch(id, t, p);
  };
  if (family == cp::Family::kWindowed) {
    impl.run_device = [id](const DeviceTensors& t, const Params& p) {
      RunWindowedOnCallerBuffers(id, t, p);
    };
  } else {
    impl.run_device = [id](const DeviceTensors& t, const Params& p) {
      RunSelectedOnCallerBuffers(id, t, p);
    };
  }
  // Inputs rounded once to the dtype and P rounded once before P V: fp16 keeps 11
  // significant bits, bf16 8 (the bounds the [gpu] numerics test checks).
  const double tolerance = dt == cp::Dtype::kF16 ? 2e-3 : 1.6e-2;
  impl.tolerance = [tolerance](const Params&) { return tolerance; };
  return impl;
}

// The decode implementation "cuda_decode" of `variant` for inputs in `dt`: split-KV decode
// (dense, swa) or the gathered decode (dma_decode); nullopt for other variants.
std::optional<Implementation> DecodeImplementation(const Variant& variant, cp::Dtype dt) {
  const std::string id = variant.id;
  if (id != "dense" && id != "swa" && id != "dma_decode") return std::nullopt;
  const std::string dtype = ToString(dt);
  if (id == "dma_decode") return DmaDecodeImplementation(dtype, dt);
  Implementation impl;
  impl.id = "cuda_decode";
  impl.platform = kCudaPlatform;
  impl.phases = {Phase::kDecode};
  impl.dtypes = {dt};
  impl.summary = "CUDA split-KV decode (one query row per head), " + dtype + " in, fp32 state";
  impl.tunables = {{"Split", ParamKind::kInt, 1, 65535, {}, "64", {"16", "32", "64", "128", "256"},
                    "key-axis splits (thread blocks per KV head)"}};
  impl.supports = DecodeHeadDims;
  auto problem_of = [id](const Shape& shape, const Params& p) {
    cp::WindowedProblem problem;
    problem.shape = shape;
    if (id == "swa") {
      problem.window = ParamInt(p, "w");
      problem.sink = ParamInt(p, "sink");
    }
    return problem;
  };
  impl.check = [problem_of](const Shape& shape, const Params& p) {
    return cp::CanImplementDecode(problem_of(shape, p), ParamInt(p, "Split"));
  };
  auto launch = [problem_of, dt](const Tensors& t, const Params& p) {
    Resident& r = Prepare(t, dt);
    const cp::WindowedProblem problem = problem_of(t.shape, p);
    const int64_t splits = ParamInt(p, "Split");
    r.workspace.Resize(static_cast<size_t>(cp::PlanDecode(problem, splits).workspace_bytes));
    cp::WindowedDeviceArgs args = TensorArgs(r);
    const std::string error = cp::LaunchDecode(problem, dt, splits, args, r.workspace.ptr);
    if (!error.empty()) throw std::runtime_error(error);
  };
  WireDecode(&impl, dt, launch);
  impl.run_device = [problem_of, dt](const DeviceTensors& t, const Params& p) {
    RunDecodeOnCallerBuffers(problem_of(t.shape, p), dt, t, ParamInt(p, "Split"));
  };
  return impl;
}

}  // namespace

void AddCudaImplementations(std::vector<Variant>* rows,
                            std::vector<AbsentImplementation>* absent) {
  for (Variant& v : *rows) {
    for (const cp::Dtype dt : {cp::Dtype::kF16, cp::Dtype::kBf16}) {
      if (auto impl = PrefillImplementation(v, dt)) v.implementations.push_back(std::move(*impl));
      if (auto impl = DecodeImplementation(v, dt)) v.implementations.push_back(std::move(*impl));
    }
  }
  // The attention libraries' implementations after attntune's own (library_implementations.h).
  AddLibraryImplementations(rows, absent);
}

std::string CudaRuntimeLibraries() { return CudnnRuntimeVersion(); }

std::string SelectCudaDevice(int index) {
  const cudaError_t error = cudaSetDevice(index);
  if (error != cudaSuccess) return std::string("cudaSetDevice: ") + cudaGetErrorName(error);
  return "";
}

void FlushL2() {
  static DeviceBuffer* scratch = new DeviceBuffer();  // leaked, as TheResident()
  int device = 0, l2 = 0;
  Check(cudaGetDevice(&device), "cudaGetDevice");
  Check(cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, device), "cudaDeviceGetAttribute");
  const size_t bytes = 2 * static_cast<size_t>(l2 > 0 ? l2 : (64 << 20));
  scratch->Resize(bytes);
  Check(cudaMemsetAsync(scratch->ptr, 0, bytes), "cudaMemsetAsync");
}

}  // namespace attntune
