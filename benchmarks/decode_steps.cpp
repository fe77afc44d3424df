// Per-step time of dma_decode at chosen positions (issue 3: the time per step at
// t = 65536 within 1.25x of the time per step at t = 4096). Runs the kernel once over
// the whole sequence (Gaussian inputs, seed 1) with its per-step timer on, and prints,
// for each position t, the median over the steps [t - 128, t) of the step time summed
// over the KV heads (one step = append key t and all Hq query heads attend).
//
//   decode_steps L w_kv w_q r t1 [t2 ...]     (B=1, Hq=16, Hkv=8, d=128, bias on)
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/kokkos/runtime.h"
#include "kernels/kokkos/sparse.h"
#include "core/generators.h"
#include "kernels/selection/selection.h"

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: decode_steps L w_kv w_q r t1 [t2 ...]\n");
    return 2;
  }
  attntune::KokkosRuntime kokkos;
  attntune::Shape s;
  s.Hq = 16;
  s.Hkv = 8;
  s.d = 128;
  s.Lq = s.Lk = std::atoll(argv[1]);
  const int64_t w_kv = std::atoll(argv[2]), w_q = std::atoll(argv[3]), r = std::atoll(argv[4]);
  const attntune::Tensors t = attntune::StructuredTensors(s, "gaussian", 1, "inputs");
  const std::vector<double> x = attntune::DmaScores(t, 0);
  std::vector<float> out(static_cast<size_t>(s.QElems())), step_ns;
  const auto start = std::chrono::steady_clock::now();
  attntune::RunDecodeKokkos(t, x, w_kv, w_q, r, true, out.data(), &step_ns);
  const double total_s =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("dma_decode L=%lld w_kv=%lld w_q=%lld r=%lld: whole run %.2f s (%.1f us per step)\n",
              static_cast<long long>(s.Lk), static_cast<long long>(w_kv),
              static_cast<long long>(w_q), static_cast<long long>(r), total_s,
              1e6 * total_s / s.Lk);
  for (int a = 5; a < argc; ++a) {
    const int64_t pos = std::min<int64_t>(std::atoll(argv[a]), s.Lk);
    std::vector<double> steps;
    for (int64_t step = std::max<int64_t>(0, pos - 128); step < pos; ++step) {
      double ns = 0.0;
      for (int64_t h = 0; h < s.B * s.Hkv; ++h) ns += step_ns[h * s.Lk + step];
      steps.push_back(ns);
    }
    std::sort(steps.begin(), steps.end());
    std::printf("t=%lld: median step %.1f us (p10 %.1f, p90 %.1f, %zu steps)\n",
                static_cast<long long>(pos), steps[steps.size() / 2] / 1e3,
                steps[steps.size() / 10] / 1e3, steps[steps.size() * 9 / 10] / 1e3, steps.size());
  }
  return 0;
}
