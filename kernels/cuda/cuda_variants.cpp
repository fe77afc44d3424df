// The CUDA implementations of dense, swa and hybrid (cuda_variants.h): device buffers
// cached per tensors object, the variant's parameters mapped onto a WindowedProblem.
#include "kernels/cuda/cuda_variants.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <vector>

#include "kernels/cuda/plan.h"
#include "kernels/cuda/windowed_cuda.h"
#include "kernels/spec/params.h"
#include "kernels/spec/selection.h"

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
  DeviceBuffer q, k, v, o, windows;
};

std::mutex g_mutex;
Resident& TheResident() {
  static Resident* resident = new Resident();  // leaked: no cudaFree after the runtime's teardown
  return *resident;
}

void Upload(DeviceBuffer& buffer, const std::vector<float>& host, cp::Dtype dtype) {
  std::vector<uint16_t> bits(host.size());
  for (size_t x = 0; x < host.size(); ++x) bits[x] = cp::ToBits(host[x], dtype);
  buffer.Resize(bits.size() * 2);
  Check(cudaMemcpy(buffer.ptr, bits.data(), bits.size() * 2, cudaMemcpyHostToDevice),
        "cudaMemcpy");
}

Resident& Prepare(const Tensors& t, cp::Dtype dtype) {
  Resident& r = TheResident();
  int device = 0;
  Check(cudaGetDevice(&device), "cudaGetDevice");
  const Shape& s = t.shape;
  const bool same = r.source == &t && r.dtype == dtype && r.device == device && r.shape.B == s.B &&
                    r.shape.Hq == s.Hq && r.shape.Hkv == s.Hkv && r.shape.Lq == s.Lq &&
                    r.shape.Lk == s.Lk && r.shape.d == s.d;
  if (same) return r;
  r.source = nullptr;  // invalid until every upload succeeded
  Upload(r.q, t.q, dtype);
  Upload(r.k, t.k, dtype);
  Upload(r.v, t.v, dtype);
  r.o.Resize(t.q.size() * 2);
  r.windows.Resize(static_cast<size_t>(s.Hkv) * 4);
  r.source = &t;
  r.shape = s;
  r.dtype = dtype;
  r.device = device;
  return r;
}

const cp::WindowedTile& TileNamed(const std::string& name) {
  for (const cp::WindowedTile& tile : cp::WindowedTiles()) {
    if (cp::KernelName(tile) == name) return tile;
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

// Enqueues the launch on the resident buffers (uploading first if needed).
Resident& Launch(const std::string& variant, const Tensors& t, const Params& p) {
  const cp::WindowedTile& tile = TileNamed(p.at("Tile"));
  Resident& r = Prepare(t, tile.dtype);
  std::vector<int32_t> windows;
  const cp::WindowedProblem problem = ProblemOf(variant, t, p, &windows);
  if (!windows.empty()) {
    Check(cudaMemcpy(r.windows.ptr, windows.data(), windows.size() * 4, cudaMemcpyHostToDevice),
          "cudaMemcpy");
  }
  cp::WindowedDeviceArgs args;
  args.q = r.q.ptr;
  args.k = r.k.ptr;
  args.v = r.v.ptr;
  args.o = r.o.ptr;
  args.windows = static_cast<const int32_t*>(r.windows.ptr);
  const std::string error = cp::LaunchWindowed(problem, tile, args);
  if (!error.empty()) throw std::runtime_error(error);
  return r;
}

}  // namespace

bool CudaKernelsBuilt() { return true; }

std::optional<Implementation> CudaImplementation(const Variant& variant, const std::string& dtype,
                                                 int64_t head_dim) {
  const std::string id = variant.id;
  if (id != "dense" && id != "swa" && id != "hybrid") return std::nullopt;
  if (dtype != "fp16" && dtype != "bf16") return std::nullopt;
  const cp::Dtype want = dtype == "fp16" ? cp::Dtype::kF16 : cp::Dtype::kBf16;
  ParamDecl tile_decl{"Tile", ParamKind::kEnum, 0, 0, {}, "", {}, "compiled CUDA tile (kernel)"};
  for (const cp::WindowedTile& tile : cp::WindowedTiles()) {
    if (tile.dtype != want || tile.d != head_dim) continue;
    tile_decl.choices.push_back(cp::KernelName(tile));
    tile_decl.grid.push_back(cp::KernelName(tile));
  }
  if (tile_decl.choices.empty()) return std::nullopt;
  tile_decl.default_value = tile_decl.choices.front();
  Implementation impl;
  impl.id = "cuda";
  impl.summary = "CUDA tensor-core windowed kernel (mma.sync, " + dtype + " in, fp32 accumulation)";
  impl.tunables = {tile_decl};
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
    Resident& r = Prepare(t, tile.dtype);
    // Poison: 0x7fff is a NaN in fp16 and in bf16.
    const std::vector<uint16_t> poison(t.q.size(), 0x7fff);
    Check(cudaMemcpy(r.o.ptr, poison.data(), poison.size() * 2, cudaMemcpyHostToDevice),
          "cudaMemcpy");
    Launch(id, t, p);
    Check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
    std::vector<uint16_t> bits(t.q.size());
    Check(cudaMemcpy(bits.data(), r.o.ptr, bits.size() * 2, cudaMemcpyDeviceToHost), "cudaMemcpy");
    for (size_t x = 0; x < bits.size(); ++x) out[x] = cp::FromBits(bits[x], tile.dtype);
  };
  impl.launch = [id](const Tensors& t, const Params& p) {
    std::lock_guard<std::mutex> lock(g_mutex);
    Launch(id, t, p);
  };
  // Inputs rounded once to the dtype and P rounded once before P V: fp16 keeps 11
  // significant bits, bf16 8 (the bounds the [gpu] numerics test checks).
  const double tolerance = want == cp::Dtype::kF16 ? 2e-3 : 1.6e-2;
  impl.tolerance = [tolerance](const Params&) { return tolerance; };
  return impl;
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
