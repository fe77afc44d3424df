// The CUDA implementations (cuda_implementations.h) of dense, swa, hybrid (windowed kernels),
// ks, dma (top-k kernels) and lsh, hax (bucketed kernels): device buffers cached per
// tensors object, the variant's parameters mapped onto a WindowedProblem, the sparse
// variants' selection computed on the host.
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

#include "kernels/cuda/plan.h"
#include "kernels/cuda/windowed_cuda.h"
#include "core/params.h"
#include "kernels/kokkos/sparse.h"
#include "kernels/selection/selection.h"

namespace attntune {
namespace {

namespace cp = cuda_plan;

void Check(cudaError_t error, const char* call) {
  if (error != cudaSuccess) {
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
  // The top-k or bucketed family's selection for these inputs (host, fp64, once per key).
  std::string selection;
  DeviceBuffer offsets, keys, evict, bias;
  DeviceBuffer block_head, row_offsets, rows, row_lo, row_hi, spos;  // bucketed
  DeviceBuffer chosen_offsets, chosen;                                // dma_decode
  int64_t blocks = 0;
  bool has_evict = false;
  DeviceBuffer workspace;  // split-KV decode partials
  bool has_bias = false;
};

std::mutex g_mutex;
Resident& TheResident() {
  static Resident* resident = new Resident();  // leaked: no cudaFree after the runtime's teardown
  return *resident;
}

void Upload(DeviceBuffer& buffer, const TensorData<float>& host, cp::Dtype dtype) {
  std::vector<uint16_t> bits(host.size());
  for (size_t x = 0; x < host.size(); ++x) bits[x] = cp::ToBits(host[x], dtype);
  buffer.Resize(bits.size() * 2);
  Check(cudaMemcpy(buffer.ptr, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice),
        "cudaMemcpy");
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
  r.selection.clear();
  r.windows_host.clear();
  Upload(r.q, t.q, dtype);
  Upload(r.k, t.k, dtype);
  Upload(r.v, t.v, dtype);
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
void UploadRaw(DeviceBuffer& buffer, const std::vector<T>& host) {
  buffer.Resize(host.size() * sizeof(T));
  if (!host.empty()) {
    Check(cudaMemcpy(buffer.ptr, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice),
          "cudaMemcpy");
  }
}

cp::Family FamilyOf(const std::string& variant) {
  if (variant == "ks" || variant == "dma") return cp::Family::kTopK;
  if (variant == "lsh" || variant == "hax") return cp::Family::kBucketed;
  return cp::Family::kWindowed;
}

// Prefix top-k eviction positions [B,Hkv,Lk] of the scores x[B,Hkv,Lk].
std::vector<int32_t> Evictions(const Shape& s, const std::vector<double>& x, int64_t k) {
  std::vector<int32_t> evict(static_cast<size_t>(s.B * s.Hkv * s.Lk));
  for (int64_t head = 0; head < s.B * s.Hkv; ++head) {
    const std::vector<int32_t> e = PrefixTopKEvictions(x.data() + head * s.Lk, s.Lk, k);
    std::copy(e.begin(), e.end(), evict.begin() + head * s.Lk);
  }
  return evict;
}

// The additive logit bias b_j in base 2 (the kernels' softmax is exp2).
std::vector<float> BiasLog2(const std::vector<double>& x) {
  std::vector<float> b(x.size());
  for (size_t n = 0; n < x.size(); ++n) b[n] = static_cast<float>(x[n] * 1.4426950408889634);
  return b;
}

// What the selection depends on: the variant's parameters (the tile only through Br).
std::string SelectionKey(const std::string& variant, Params p, const cp::WindowedTile& tile) {
  p.erase("Tile");
  return variant + "|" + ParamsToString(p) + "|" + std::to_string(tile.br);
}

// The bucketed selection of lsh or hax: bins (and hax's ks scores and evictions), the
// bucketed layout and its row and key lists on the host, uploaded once.
void PrepareBucketed(const std::string& variant, const Tensors& t, const Params& p,
                     const cp::WindowedTile& tile, Resident& r) {
  const bool hax = variant == "hax";
  const int64_t bits = ParamInt(p, "bits");
  const bool argmax = p.at("rule") == "argmax";
  const uint64_t seed = static_cast<uint64_t>(ParamInt(p, "seed"));
  LshBins bins;
  std::vector<int32_t> evict;
  cp::BucketLists lists;
  if (hax) {
    HaxSelection sel;
    RunPhase("attntune::select::bins_scores",
             [&] { sel = ComputeHaxSelection(t, bits, argmax, seed); });
    RunPhase("attntune::select::topk",
             [&] { evict = Evictions(t.shape, sel.scores, ParamInt(p, "k_ks")); });
    bins = std::move(sel.bins);
  } else {
    RunPhase("attntune::select::bins", [&] { bins = ComputeLshBins(t, bits, argmax, seed); });
  }
  RunPhase("attntune::select::bucket_lists", [&] {
    lists = cp::BuildBucketLists(t.shape, bins, ParamInt(p, hax ? "k_lsh" : "k"), evict, tile.br,
                                 hax ? ParamInt(p, "Chunk") : 0);
  });
  UploadRaw(r.offsets, lists.key_offsets);
  UploadRaw(r.keys, lists.keys);
  UploadRaw(r.block_head, lists.head);
  UploadRaw(r.row_offsets, lists.row_offsets);
  UploadRaw(r.rows, lists.rows);
  UploadRaw(r.row_lo, lists.lo);
  UploadRaw(r.row_hi, lists.hi);
  UploadRaw(r.spos, lists.spos);
  UploadRaw(r.evict, evict);
  r.blocks = lists.Blocks();
  r.has_evict = hax;
  r.has_bias = false;
}

// The selection of a top-k (ks, dma) or bucketed (lsh, hax) variant for the resident
// inputs and the tile's Br: computed on the host (fp64, the same functions as the
// reference), uploaded once per SelectionKey; timed as the phases attntune::select::*.
void PrepareSelection(const std::string& variant, const Tensors& t, const Params& p,
                      const cp::WindowedTile& tile, Resident& r) {
  const std::string key = SelectionKey(variant, p, tile);
  if (r.selection == key) return;
  r.selection.clear();
  if (FamilyOf(variant) == cp::Family::kBucketed) {
    PrepareBucketed(variant, t, p, tile, r);
    r.selection = key;
    return;
  }
  const bool dma = variant == "dma";
  const int64_t k = ParamInt(p, dma ? "w" : "k");
  const bool bias = dma && ParamInt(p, "bias") == 1;
  const Shape& s = t.shape;
  std::vector<double> x;
  std::vector<int32_t> evict;
  cp::KeyLists lists;
  RunPhase("attntune::select::scores", [&] {
    x = dma ? DmaScores(t, static_cast<uint64_t>(ParamInt(p, "seed"))) : KsScores(t);
  });
  RunPhase("attntune::select::topk", [&] {
    evict = Evictions(s, x, k);
    lists = cp::BuildKeyLists(s, evict, tile.br);
  });
  UploadRaw(r.offsets, lists.offsets);
  UploadRaw(r.keys, lists.keys);
  UploadRaw(r.evict, evict);
  r.has_evict = true;
  r.has_bias = bias;
  if (bias) UploadRaw(r.bias, BiasLog2(x));
  r.selection = key;
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
class DeviceGuard {
 public:
  explicit DeviceGuard(int device) {
    Check(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device) Check(cudaSetDevice(device), "cudaSetDevice");
  }
  ~DeviceGuard() { cudaSetDevice(previous_); }
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;

 private:
  int previous_ = 0;
};

// Scratch memory ordered on the caller's stream: allocated before the launch, freed after
// it (cudaMallocAsync / cudaFreeAsync), so that concurrent calls share nothing.
class StreamScratch {
 public:
  StreamScratch(size_t bytes, cudaStream_t stream) : stream_(stream) {
    if (bytes > 0) Check(cudaMallocAsync(&ptr_, bytes, stream), "cudaMallocAsync");
  }
  ~StreamScratch() {
    if (ptr_ != nullptr) cudaFreeAsync(ptr_, stream_);
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  void* get() const { return ptr_; }

 private:
  void* ptr_ = nullptr;
  cudaStream_t stream_;
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

// Enqueues the launch on the resident buffers (uploading first if needed).
Resident& Launch(const std::string& variant, const Tensors& t, const Params& p) {
  const cp::WindowedTile& tile = TileNamed(p.at("Tile"));
  Resident& r = Prepare(t, tile.dtype);
  const cp::Family family = FamilyOf(variant);
  if (family != cp::Family::kWindowed) PrepareSelection(variant, t, p, tile, r);
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
    args.list_offsets = static_cast<const int32_t*>(r.offsets.ptr);
    args.list_keys = static_cast<const int32_t*>(r.keys.ptr);
    args.evict = r.has_evict ? static_cast<const int32_t*>(r.evict.ptr) : nullptr;
    args.bias_log2 = r.has_bias ? static_cast<const float*>(r.bias.ptr) : nullptr;
  }
  if (family == cp::Family::kBucketed) {
    args.block_head = static_cast<const int32_t*>(r.block_head.ptr);
    args.row_offsets = static_cast<const int32_t*>(r.row_offsets.ptr);
    args.rows = static_cast<const int32_t*>(r.rows.ptr);
    args.row_lo = static_cast<const int32_t*>(r.row_lo.ptr);
    args.row_hi = static_cast<const int32_t*>(r.row_hi.ptr);
    args.spos = static_cast<const int32_t*>(r.spos.ptr);
    args.blocks = r.blocks;
  }
  const std::string error = cp::LaunchWindowed(problem, tile, args);
  if (!error.empty()) throw std::runtime_error(error);
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

// dma_decode on the gathered decode kernel: the selection (scores, then the resident
// sets' eviction steps and the chosen keys, by the Kokkos decode's own code) on the host
// once per inputs and parameters, then one launch for every step.
Implementation DmaDecodeImplementation(const std::string& dtype, cp::Dtype dt) {
  Implementation impl;
  impl.id = "cuda_decode";
  impl.platform = kCudaPlatform;
  impl.phases = {Phase::kDecode};
  impl.dtypes = {dt == cp::Dtype::kF16 ? Dtype::kF16 : Dtype::kBf16};
  impl.summary = "CUDA gathered decode: every step at once, a thread block per (step, KV head) "
                 "over the resident keys and each query head's chosen keys (selection on the "
                 "host), " + dtype + " in, fp32 state";
  impl.supports = DecodeHeadDims;
  impl.check = [](const Shape& shape, const Params&) {
    return cp::CanImplementGatheredDecode(shape);
  };
  auto launch = [dt](const Tensors& t, const Params& p) {
    Resident& r = Prepare(t, dt);
    const Shape& s = t.shape;
    const std::string key = SelectionKey("dma_decode", p, cp::WindowedTile());
    if (r.selection != key) {
      r.selection.clear();
      std::vector<double> x;
      DecodeSelection sel;
      cp::KeyLists lists;
      RunPhase("attntune::select::scores",
               [&] { x = DmaScores(t, static_cast<uint64_t>(ParamInt(p, "seed"))); });
      sel = SelectDecodeKokkos(t, x, ParamInt(p, "w_kv"), ParamInt(p, "w_q"), ParamInt(p, "r"));
      RunPhase("attntune::select::lists",
               [&] { lists = cp::BuildKeyLists(s, sel.evict, cp::kDecodeListSteps); });
      UploadRaw(r.offsets, lists.offsets);
      UploadRaw(r.keys, lists.keys);
      UploadRaw(r.evict, sel.evict);
      UploadRaw(r.chosen_offsets, sel.offsets);
      UploadRaw(r.chosen, sel.chosen);
      r.has_bias = ParamInt(p, "bias") == 1;
      if (r.has_bias) UploadRaw(r.bias, BiasLog2(x));
      r.selection = key;
    }
    cp::WindowedDeviceArgs args = TensorArgs(r);
    args.list_offsets = static_cast<const int32_t*>(r.offsets.ptr);
    args.list_keys = static_cast<const int32_t*>(r.keys.ptr);
    args.evict = static_cast<const int32_t*>(r.evict.ptr);
    args.chosen_offsets = static_cast<const int32_t*>(r.chosen_offsets.ptr);
    args.chosen = static_cast<const int32_t*>(r.chosen.ptr);
    args.bias_log2 = r.has_bias ? static_cast<const float*>(r.bias.ptr) : nullptr;
    const std::string error = cp::LaunchGatheredDecode(s, dt, args);
    if (!error.empty()) throw std::runtime_error(error);
  };
  WireDecode(&impl, dt, launch);
  return impl;
}

}  // namespace

bool CudaKernelsBuilt() { return true; }

namespace {

// The compiled tiles of `family` for `dt` (and head dimension `d`; 0: any), as the
// choices of the tunable "Tile" (kernel names).
ParamDecl TileDecl(cp::Family family, cp::Dtype dt, int64_t d) {
  ParamDecl decl{"Tile", ParamKind::kEnum, 0, 0, {}, "", {}, "compiled CUDA tile (kernel)"};
  for (const cp::WindowedTile& tile : cp::WindowedTiles()) {
    if (tile.dtype != dt || (d != 0 && tile.d != d)) continue;
    const std::string name = cp::KernelName(tile, family);
    decl.choices.push_back(name);
    decl.grid.push_back(name);
  }
  if (!decl.choices.empty()) decl.default_value = decl.choices.front();
  return decl;
}

std::string DtypeText(cp::Dtype dt) { return dt == cp::Dtype::kF16 ? "fp16" : "bf16"; }

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
  const std::string dtype = DtypeText(dt);
  Implementation impl;
  impl.id = "cuda";
  impl.platform = kCudaPlatform;
  impl.phases = {Phase::kPrefill};
  impl.dtypes = {dt == cp::Dtype::kF16 ? Dtype::kF16 : Dtype::kBf16};
  const std::string math = dtype + " in, fp32 accumulation";
  if (family == cp::Family::kTopK) {
    impl.summary = "CUDA tensor-core block-skipping kernel over prefix top-k block lists "
                   "(selection on the host), " + math;
  } else if (family == cp::Family::kBucketed) {
    impl.summary = "CUDA tensor-core kernel over blocks of rows sorted by (LSH bin, position): "
                   "gathered rows, their lsh keys" +
                   std::string(id == "hax" ? " and prefix top-k keys" : "") +
                   " (selection on the host), " + math;
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
    return cp::CanImplement(problem, tile);
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
  if (family == cp::Family::kWindowed) {  // the others select on the host from fp32 inputs
    impl.run_device = [id](const DeviceTensors& t, const Params& p) {
      RunWindowedOnCallerBuffers(id, t, p);
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
  const std::string dtype = DtypeText(dt);
  if (id == "dma_decode") return DmaDecodeImplementation(dtype, dt);
  Implementation impl;
  impl.id = "cuda_decode";
  impl.platform = kCudaPlatform;
  impl.phases = {Phase::kDecode};
  impl.dtypes = {dt == cp::Dtype::kF16 ? Dtype::kF16 : Dtype::kBf16};
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

void AddCudaImplementations(std::vector<Variant>* rows) {
  for (Variant& v : *rows) {
    for (const cp::Dtype dt : {cp::Dtype::kF16, cp::Dtype::kBf16}) {
      if (auto impl = PrefillImplementation(v, dt)) v.implementations.push_back(std::move(*impl));
      if (auto impl = DecodeImplementation(v, dt)) v.implementations.push_back(std::move(*impl));
    }
  }
}

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
