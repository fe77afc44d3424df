// The machine's single-thread sgemm ceiling (OpenBLAS), the yardstick that dense
// attention's GFLOP/s is quoted against (DESIGN.md s6). Prints one JSON object.
#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

extern "C" {
void openblas_set_num_threads(int);
char* openblas_get_corename(void);
}

int main(int argc, char** argv) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 2048;
  const int reps = argc > 2 ? std::atoi(argv[2]) : 7;
  openblas_set_num_threads(1);
  std::vector<float> a(size_t(n) * n), b(size_t(n) * n), c(size_t(n) * n);
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  for (auto* v : {&a, &b}) for (auto& x : *v) x = u(rng);
  std::vector<double> ms;
  for (int r = 0; r < reps + 1; ++r) {  // first run warms up
    auto t0 = std::chrono::steady_clock::now();
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, n, n, n, 1.f, a.data(), n, b.data(), n,
                0.f, c.data(), n);
    auto t1 = std::chrono::steady_clock::now();
    if (r > 0) ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  const double med = ms[ms.size() / 2];
  const double flops = 2.0 * n * double(n) * n;
  const char* coretype = std::getenv("OPENBLAS_CORETYPE");
  std::printf("{\"n\": %d, \"median_ms\": %.3f, \"gflops\": %.2f, \"openblas_core\": \"%s\", "
              "\"OPENBLAS_CORETYPE\": \"%s\"}\n",
              n, med, flops / (med * 1e6), openblas_get_corename(), coretype ? coretype : "");
  return 0;
}
