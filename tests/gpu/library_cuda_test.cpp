// [gpu] The library's CUDA component: attntune::Run on device pointers enqueued on the
// caller's stream (attntune/attntune_cuda.h), against the fp64 reference of the inputs as
// rounded to fp16 or bf16; the caller's current device is left as it was. Needs a device.
#include <attntune/attntune_cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "tests/library/table_runner.h"

namespace {

// One cudaMalloc'ed buffer, freed once: not copyable (a vector that grows moves it).
struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes) { REQUIRE(cudaMalloc(&ptr, bytes) == cudaSuccess); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept : ptr(other.ptr) { other.ptr = nullptr; }
  DeviceBuffer& operator=(DeviceBuffer&&) = delete;
  ~DeviceBuffer() {
    if (ptr != nullptr) cudaFree(ptr);
  }
};

uint16_t Round(float x, bool bf16) {
  uint16_t bits;
  if (bf16) {
    const __nv_bfloat16 h = __float2bfloat16(x);
    std::memcpy(&bits, &h, 2);
  } else {
    const __half h = __float2half(x);
    std::memcpy(&bits, &h, 2);
  }
  return bits;
}

float Widen(uint16_t bits, bool bf16) {
  if (bf16) {
    __nv_bfloat16 h;
    std::memcpy(&h, &bits, 2);
    return __bfloat162float(h);
  }
  __half h;
  std::memcpy(&h, &bits, 2);
  return __half2float(h);
}

struct Case {
  std::string variant, impl, params, tunables;
  int64_t hq, hkv, lq, lk, d;
  bool bf16;
  bool device_windows;  // hybrid: a windows tensor on the device
  bool supplied = false;  // ks, hax: scores; dma: delta and a; lsh: mu and proj (bits 3)
};

// fp32 values on the device (a supplied optional tensor).
DeviceBuffer Upload(const std::vector<float>& host) {
  DeviceBuffer out(host.size() * 4);
  REQUIRE(cudaMemcpy(out.ptr, host.data(), host.size() * 4, cudaMemcpyHostToDevice) == cudaSuccess);
  return out;
}

}  // namespace

TEST_CASE("the library runs on caller device buffers and its stream", "[gpu]") {
  const Case cases[] = {
      {"dense", "cuda", "", "", 6, 3, 300, 577, 64, false, false},
      {"swa", "cuda", "w=64,sink=4", "", 4, 2, 577, 577, 128, true, false},
      {"hybrid", "cuda", "w=32,full=1,sink=2", "", 4, 2, 300, 300, 64, false, false},
      {"hybrid", "cuda", "w=32", "", 4, 2, 300, 300, 64, true, true},
      {"dense", "cuda_decode", "", "Split=8", 8, 2, 1, 1000, 128, false, false},
      {"swa", "cuda_decode", "w=100,sink=4", "Split=4", 4, 2, 1, 577, 64, true, false},
      // The selected variants: fp32 copies of the caller's q, k, v and the selection on
      // the device, all on the caller's stream; the reference selects on the same values.
      {"ks", "cuda", "k=24", "", 6, 3, 300, 577, 64, false, false},
      {"ks", "cuda", "k=16", "", 4, 2, 577, 577, 128, true, false, true},
      {"dma", "cuda", "w=40,bias=1,seed=3", "", 4, 2, 577, 577, 128, false, false},
      {"dma", "cuda", "w=50,bias=0", "", 6, 3, 300, 577, 64, true, false, true},
      {"lsh", "cuda", "k=24,bits=3", "", 4, 2, 300, 300, 64, false, false},
      {"lsh", "cuda", "k=16,bits=3,rule=argmax", "", 4, 2, 577, 577, 128, true, false, true},
      {"hax", "cuda", "k_lsh=16,k_ks=16,bits=3", "Chunk=256", 4, 2, 577, 577, 128, false, false},
      {"hax", "cuda", "k_lsh=8,k_ks=24,bits=4", "", 6, 3, 300, 577, 64, true, false, true},
  };
  cudaStream_t stream;
  REQUIRE(cudaStreamCreate(&stream) == cudaSuccess);
  for (const Case& c : cases) {
    INFO(c.variant << "/" << c.impl << " " << c.params << (c.bf16 ? " bf16" : " fp16"));
    const table::Problem shape{1, c.hq, c.hkv, c.lq, c.lk, c.d, true};
    std::mt19937 rng(7);
    std::normal_distribution<float> normal;
    std::vector<float> host[3];
    std::vector<uint16_t> bits[3];
    const int64_t sizes[3] = {c.hq * c.lq * c.d, c.hkv * c.lk * c.d, c.hkv * c.lk * c.d};
    std::vector<DeviceBuffer> device;
    for (int n = 0; n < 3; ++n) {
      for (int64_t e = 0; e < sizes[n]; ++e) {
        bits[n].push_back(Round(normal(rng), c.bf16));
        host[n].push_back(Widen(bits[n].back(), c.bf16));  // the reference sees the rounding
      }
      device.emplace_back(static_cast<size_t>(sizes[n]) * 2);
      REQUIRE(cudaMemcpy(device.back().ptr, bits[n].data(), bits[n].size() * 2, cudaMemcpyHostToDevice) == cudaSuccess);
    }
    DeviceBuffer o(static_cast<size_t>(sizes[0]) * 2);
    REQUIRE(cudaMemset(o.ptr, 0xff, static_cast<size_t>(sizes[0]) * 2) == cudaSuccess);  // NaN
    const std::vector<int32_t> windows = {0, 32};
    DeviceBuffer windows_device(windows.size() * 4);
    REQUIRE(cudaMemcpy(windows_device.ptr, windows.data(), 8, cudaMemcpyHostToDevice) == cudaSuccess);

    attntune::Problem problem;
    problem.q_heads = c.hq;
    problem.kv_heads = c.hkv;
    problem.q_len = c.lq;
    problem.kv_len = c.lk;
    problem.head_dim = c.d;
    problem.dtype = c.bf16 ? attntune::Dtype::kBf16 : attntune::Dtype::kF16;
    problem.device = attntune::Device::Cuda(0);
    // Supplied optional tensors (fp32, on the device and for the reference).
    std::vector<float> scores, delta, a, mu, proj;
    const int64_t proj_bits = 3;
    if (c.supplied) {
      if (c.variant == "ks" || c.variant == "hax") {
        for (int64_t e = 0; e < c.hkv * c.lk; ++e) scores.push_back(normal(rng));
      }
      if (c.variant == "dma") {
        for (int64_t e = 0; e < c.hkv * c.d; ++e) delta.push_back(normal(rng) * 0.2f);
        for (int64_t e = 0; e < c.hkv; ++e) a.push_back(0.5f + 0.1f * static_cast<float>(e));
      }
      if (c.variant == "lsh") {
        for (int64_t e = 0; e < c.hkv * c.d; ++e) mu.push_back(normal(rng) * 0.1f);
        for (int64_t e = 0; e < c.hkv * c.d * proj_bits; ++e) proj.push_back(normal(rng));
      }
    }
    std::vector<DeviceBuffer> optional;
    auto supply = [&](const std::vector<float>& host) -> const float* {
      if (host.empty()) return nullptr;
      optional.push_back(Upload(host));
      return static_cast<const float*>(optional.back().ptr);
    };
    attntune::Tensors t;
    t.q = device[0].ptr;
    t.k = device[1].ptr;
    t.v = device[2].ptr;
    t.o = o.ptr;
    if (c.device_windows) t.windows = static_cast<const int32_t*>(windows_device.ptr);
    optional.reserve(5);  // the pointers handed out stay valid
    t.scores = supply(scores);
    t.delta = supply(delta);
    t.a = supply(a);
    t.mu = supply(mu);
    t.proj = supply(proj);
    if (!proj.empty()) t.proj_bits = proj_bits;
    attntune::Run(attntune::MakeConfig(c.variant, c.impl, c.params, c.tunables), problem, t, stream);
    REQUIRE(cudaStreamSynchronize(stream) == cudaSuccess);
    std::vector<uint16_t> out_bits(static_cast<size_t>(sizes[0]));
    REQUIRE(cudaMemcpy(out_bits.data(), o.ptr, out_bits.size() * 2, cudaMemcpyDeviceToHost) == cudaSuccess);
    std::vector<float> out;
    for (uint16_t b : out_bits) out.push_back(Widen(b, c.bf16));

    table::Inputs in;
    in.q = host[0].data();
    in.k = host[1].data();
    in.v = host[2].data();
    if (c.device_windows) in.windows = windows.data();
    auto host_of = [](const std::vector<float>& x) { return x.empty() ? nullptr : x.data(); };
    in.scores = host_of(scores);
    in.delta = host_of(delta);
    in.a = host_of(a);
    in.mu = host_of(mu);
    in.proj = host_of(proj);
    if (!proj.empty()) in.proj_bits = proj_bits;
    const double tolerance = c.bf16 ? 1.6e-2 : 2e-3;  // the implementations' own bounds
    CHECK(table::RelErrToReference(c.variant, c.params, shape, in, out.data()) < tolerance);
  }
  cudaStreamDestroy(stream);
}

TEST_CASE("the library leaves the caller's current device as it was", "[gpu]") {
  int count = 0;
  REQUIRE(cudaGetDeviceCount(&count) == cudaSuccess);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);  // the buffers live on device 0
  {
    DeviceBuffer q(64 * 64 * 2), o(64 * 64 * 2);
    REQUIRE(cudaMemset(q.ptr, 0, 64 * 64 * 2) == cudaSuccess);
    attntune::Problem problem;
    problem.q_len = problem.kv_len = 64;
    problem.dtype = attntune::Dtype::kF16;
    problem.device = attntune::Device::Cuda(0);
    attntune::Tensors t;
    t.q = t.k = t.v = q.ptr;
    t.o = o.ptr;
    const int mine = count - 1;  // the caller's own current device (0 on a one-GPU machine)
    REQUIRE(cudaSetDevice(mine) == cudaSuccess);
    attntune::Run(attntune::MakeConfig("dense", "cuda"), problem, t, cudaStream_t{});
    int now = -1;
    REQUIRE(cudaGetDevice(&now) == cudaSuccess);
    CHECK(now == mine);
    REQUIRE(cudaSetDevice(0) == cudaSuccess);
    CHECK(cudaDeviceSynchronize() == cudaSuccess);
  }
}
