// Times the CUDA windowed kernels (dense, swa) on the current device, every compiled tile
// of the requested head dimension, with CUDA events per launch and once more under CUPTI
// activity tracing. Not a test: it needs a GPU and prints one JSON object per line.
//
//   cuda_windowed_bench [L ...]        (default 4096 16384; B=1, Hq=16, Hkv=8, d=128)
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "kernels/cuda/plan.h"
#include "kernels/cuda/windowed_cuda.h"
#include "profiler/cuda/cupti_activity.h"

namespace cp = attntune::cuda_plan;

namespace {

void Die(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return;
  std::fprintf(stderr, "cuda_windowed_bench: %s: %s\n", what, cudaGetErrorString(error));
  std::exit(1);
}

// Attended (row, key) pairs of one head, causal, Lq = Lk = L, window w (0 = dense).
int64_t PairsPerHead(int64_t L, int64_t w) {
  int64_t pairs = 0;
  for (int64_t i = 0; i < L; ++i) pairs += w > 0 ? std::min<int64_t>(i + 1, w) : i + 1;
  return pairs;
}

cp::WindowedProblem Problem(int64_t B, int64_t Hq, int64_t Hkv, int64_t L, int64_t d, int64_t w) {
  cp::WindowedProblem problem;
  problem.shape.B = B;
  problem.shape.Hq = Hq;
  problem.shape.Hkv = Hkv;
  problem.shape.Lq = problem.shape.Lk = L;
  problem.shape.d = d;
  problem.window = w;
  return problem;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> lengths;
  for (int a = 1; a < argc; ++a) lengths.push_back(std::atoll(argv[a]));
  if (lengths.empty()) lengths = {4096, 16384};
  int count = 0;
  const cudaError_t probe = cudaGetDeviceCount(&count);
  if (probe != cudaSuccess || count == 0) {
    std::fprintf(stderr, "cuda_windowed_bench: no usable CUDA device (%s)\n",
                 cudaGetErrorString(probe));
    return 2;
  }
  cudaDeviceProp prop{};
  Die(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("{\"device\":\"%s\",\"sm\":%d%d,\"sms\":%d}\n", prop.name, prop.major, prop.minor,
              prop.multiProcessorCount);
  const int64_t B = 1, Hq = 16, Hkv = 8, d = 128;
  const int reps = 20;
  for (const int64_t L : lengths) {
    const size_t nq = static_cast<size_t>(B * Hq * L * d), nkv = static_cast<size_t>(B * Hkv * L * d);
    std::vector<uint16_t> host(nq);
    std::mt19937 rng(7);
    std::normal_distribution<float> normal(0.f, 1.f);
    void *q, *k, *v, *o;
    Die(cudaMalloc(&q, nq * 2), "cudaMalloc");
    Die(cudaMalloc(&k, nkv * 2), "cudaMalloc");
    Die(cudaMalloc(&v, nkv * 2), "cudaMalloc");
    Die(cudaMalloc(&o, nq * 2), "cudaMalloc");
    // Random bits of the right magnitude for both fp16 and bf16 are not the same, so fill
    // per dtype below; keep the buffers and rewrite them when the dtype changes.
    cp::Dtype filled = cp::Dtype::kF16;
    bool have = false;
    auto fill = [&](cp::Dtype dtype) {
      for (void* buffer : {q, k, v}) {
        const size_t n = buffer == q ? nq : nkv;
        for (size_t x = 0; x < n; ++x) {
          const float f = normal(rng);
          uint32_t bits;
          std::memcpy(&bits, &f, 4);
          if (dtype == cp::Dtype::kBf16) {
            host[x] = static_cast<uint16_t>((bits + 0x7fff + ((bits >> 16) & 1)) >> 16);
          } else {
            // fp16 from a float in [-8, 8]: sign, exponent rebias, 10-bit mantissa.
            const uint32_t sign = (bits >> 16) & 0x8000;
            const int exp = static_cast<int>((bits >> 23) & 0xff) - 127 + 15;
            host[x] = exp <= 0 ? static_cast<uint16_t>(sign)
                               : static_cast<uint16_t>(sign | (exp << 10) | ((bits >> 13) & 0x3ff));
          }
        }
        Die(cudaMemcpy(buffer, host.data(), n * 2, cudaMemcpyHostToDevice), "cudaMemcpy");
      }
      filled = dtype;
      have = true;
    };
    for (const cp::WindowedTile& tile : cp::WindowedTiles()) {
      if (tile.d != d) continue;
      if (!have || filled != tile.dtype) fill(tile.dtype);
      for (const int64_t w : {int64_t{0}, int64_t{1024}}) {
        const cp::WindowedProblem problem = Problem(B, Hq, Hkv, L, d, w);
        const std::string why = cp::CanImplement(problem, tile);
        if (!why.empty()) {
          std::printf("{\"kernel\":\"%s\",\"L\":%lld,\"w\":%lld,\"skipped\":\"%s\"}\n",
                      cp::KernelName(tile).c_str(), static_cast<long long>(L),
                      static_cast<long long>(w), why.c_str());
          continue;
        }
        cp::WindowedDeviceArgs args;
        args.q = q;
        args.k = k;
        args.v = v;
        args.o = o;
        for (int x = 0; x < 3; ++x) {
          const std::string e = cp::LaunchWindowed(problem, tile, args);
          if (!e.empty()) {
            std::fprintf(stderr, "launch: %s\n", e.c_str());
            return 1;
          }
        }
        Die(cudaDeviceSynchronize(), "warm-up");
        std::vector<double> ms;
        cudaEvent_t start, stop;
        Die(cudaEventCreate(&start), "cudaEventCreate");
        Die(cudaEventCreate(&stop), "cudaEventCreate");
        for (int r = 0; r < reps; ++r) {
          Die(cudaEventRecord(start), "cudaEventRecord");
          cp::LaunchWindowed(problem, tile, args);
          Die(cudaEventRecord(stop), "cudaEventRecord");
          Die(cudaEventSynchronize(stop), "cudaEventSynchronize");
          float t = 0;
          Die(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime");
          ms.push_back(t);
        }
        cudaEventDestroy(start);
        cudaEventDestroy(stop);
        std::sort(ms.begin(), ms.end());
        const double median = ms[ms.size() / 2];
        const double flops = 4.0 * static_cast<double>(PairsPerHead(L, w)) * Hq * B * d;
        std::printf(
            "{\"kernel\":\"%s\",\"L\":%lld,\"w\":%lld,\"events_median_ms\":%.4f,"
            "\"events_min_ms\":%.4f,\"events_max_ms\":%.4f,\"tflops\":%.1f}\n",
            cp::KernelName(tile).c_str(), static_cast<long long>(L), static_cast<long long>(w),
            median, ms.front(), ms.back(), flops / (median * 1e-3) / 1e12);
        std::fflush(stdout);
      }
    }
    if (L == lengths.back()) {
      // CUPTI: the last tile's launches timed from activity records beside events (the
      // buffers hold that tile's dtype).
      std::string why_not;
      std::unique_ptr<attntune::Timer> timer = attntune::MakeGpuTimer(&why_not);
      std::printf("{\"gpu_timer\":\"%s\",\"why_not_cupti\":\"%s\"}\n",
                  timer->Name().c_str(), why_not.c_str());
      attntune::CudaEventTimer events;
      const cp::WindowedTile* tile = nullptr;
      for (const cp::WindowedTile& t : cp::WindowedTiles())
        if (t.d == d && t.dtype == filled) tile = &t;
      for (const int64_t w : {int64_t{0}, int64_t{1024}}) {
        const cp::WindowedProblem problem = Problem(B, Hq, Hkv, L, d, w);
        cp::WindowedDeviceArgs args;
        args.q = q;
        args.k = k;
        args.v = v;
        args.o = o;
        std::vector<double> a, b;
        for (int r = 0; r < 10; ++r) {
          a.push_back(timer->TimeMs([&] { cp::LaunchWindowed(problem, *tile, args); }));
          b.push_back(events.TimeMs([&] { cp::LaunchWindowed(problem, *tile, args); }));
        }
        std::sort(a.begin(), a.end());
        std::sort(b.begin(), b.end());
        std::printf("{\"kernel\":\"%s\",\"L\":%lld,\"w\":%lld,\"%s_median_ms\":%.4f,"
                    "\"events_median_ms\":%.4f}\n",
                    cp::KernelName(*tile).c_str(), static_cast<long long>(L),
                    static_cast<long long>(w), timer->Name().c_str(), a[5], b[5]);
      }
      attntune::StopCuptiActivity();
    }
    cudaFree(q);
    cudaFree(k);
    cudaFree(v);
    cudaFree(o);
  }
  return 0;
}
