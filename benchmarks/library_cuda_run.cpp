// What a program that links libattntune pays for one attention call on the GPU: the
// public API's attntune::Run on the caller's device buffers and stream
// (attntune/attntune_cuda.h), timed with CUDA events around the call on that stream, so
// that everything the call puts on the stream counts: for ks, dma, lsh and hax the
// selection (reading the caller's fp16 tensors in place), the attention kernel and the
// stream-ordered allocations, and any gap while the host prepares (LSH's projection,
// dma's Delta and A). `attntune bench` times the same kernels on its resident inputs
// (fp32 copies uploaded once, CUPTI kernel time); the two side by side give the
// library's own cost.
//
// Gaussian fp16 inputs (seed 1), B=1, Hq=16, Hkv=8, d=128, causal, the default tile;
// median of the repetitions after one warm-up call. One JSON line per configuration:
//   library_cuda_run L [variant:params ...]
// (default: dense, ks k=64, dma w=1024, dma w=64, lsh k=64, hax k_lsh=32,k_ks=32).
#include <attntune/attntune_cuda.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

namespace {

void RequireCuda(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return;
  std::fprintf(stderr, "library_cuda_run: %s: %s\n", what, cudaGetErrorString(error));
  std::exit(1);
}

uint16_t Half(float x) {
  const __half h = __float2half(x);
  uint16_t bits;
  std::memcpy(&bits, &h, 2);
  return bits;
}

struct DeviceBuffer {
  void* ptr = nullptr;
  explicit DeviceBuffer(size_t bytes) { RequireCuda(cudaMalloc(&ptr, bytes), "cudaMalloc"); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(ptr); }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: library_cuda_run L [variant:params ...]\n");
    return 2;
  }
  char* end = nullptr;
  const int64_t L = std::strtoll(argv[1], &end, 10);
  if (end == argv[1] || *end != '\0' || L < 1) {
    std::fprintf(stderr, "library_cuda_run: L must be a positive integer, got '%s'\n", argv[1]);
    return 2;
  }
  std::vector<std::string> runs;
  for (int n = 2; n < argc; ++n) runs.push_back(argv[n]);
  if (runs.empty()) {
    runs = {"dense:", "ks:k=64", "dma:w=1024", "dma:w=64", "lsh:k=64", "hax:k_lsh=32,k_ks=32"};
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "library_cuda_run: no GPU\n");
    return 77;
  }
  const int64_t hq = 16, hkv = 8, d = 128;
  const size_t q_elems = static_cast<size_t>(hq * L * d), kv_elems = static_cast<size_t>(hkv * L * d);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  DeviceBuffer q(q_elems * 2), k(kv_elems * 2), v(kv_elems * 2), o(q_elems * 2);
  for (auto [buffer, count] : {std::pair<void*, size_t>{q.ptr, q_elems}, {k.ptr, kv_elems},
                               {v.ptr, kv_elems}}) {
    std::vector<uint16_t> bits(count);
    for (uint16_t& b : bits) b = Half(normal(rng));
    RequireCuda(cudaMemcpy(buffer, bits.data(), count * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  attntune::Problem problem;
  problem.q_heads = hq;
  problem.kv_heads = hkv;
  problem.q_len = problem.kv_len = L;
  problem.head_dim = d;
  problem.dtype = attntune::Dtype::kF16;
  problem.device = attntune::Device::Cuda(0);
  attntune::Tensors t;
  t.q = q.ptr;
  t.k = k.ptr;
  t.v = v.ptr;
  t.o = o.ptr;
  cudaStream_t stream;
  RequireCuda(cudaStreamCreate(&stream), "cudaStreamCreate");
  cudaEvent_t start, stop;
  RequireCuda(cudaEventCreate(&start), "cudaEventCreate");
  RequireCuda(cudaEventCreate(&stop), "cudaEventCreate");
  const int reps = 20;
  for (const std::string& run : runs) {
    const size_t colon = run.find(':');
    const std::string variant = run.substr(0, colon);
    const std::string params = colon == std::string::npos ? "" : run.substr(colon + 1);
    attntune::Config config;
    const attntune::Status made = attntune::TryMakeConfig(variant, "cuda", params, "", &config);
    if (!made.ok()) {
      std::fprintf(stderr, "%s\n", made.message.c_str());
      return 2;
    }
    std::vector<double> ms;
    for (int n = 0; n <= reps; ++n) {  // the first call warms up
      RequireCuda(cudaEventRecord(start, stream), "cudaEventRecord");
      const attntune::Status status = attntune::TryRun(config, problem, t, stream);
      if (!status.ok()) {
        std::fprintf(stderr, "%s\n", status.message.c_str());
        return 1;
      }
      RequireCuda(cudaEventRecord(stop, stream), "cudaEventRecord");
      RequireCuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
      float elapsed = 0.f;
      RequireCuda(cudaEventElapsedTime(&elapsed, start, stop), "cudaEventElapsedTime");
      if (n > 0) ms.push_back(elapsed);
    }
    std::sort(ms.begin(), ms.end());
    std::printf("{\"path\": \"library\", \"variant\": \"%s\", \"params\": \"%s\", "
                "\"shape\": \"B=1,Hq=%lld,Hkv=%lld,L=%lld,d=%lld\", \"dtype\": \"fp16\", "
                "\"median_ms\": %.4f, \"min_ms\": %.4f, \"reps\": %d}\n",
                variant.c_str(), params.c_str(), static_cast<long long>(hq),
                static_cast<long long>(hkv), static_cast<long long>(L), static_cast<long long>(d),
                ms[ms.size() / 2], ms.front(), reps);
    std::fflush(stdout);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  cudaStreamDestroy(stream);
  return 0;
}
