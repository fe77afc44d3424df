// The machine's single-thread sgemm ceiling (OpenBLAS), the yardstick that dense
// attention's GFLOP/s is quoted against (DESIGN.md s6). Prints one JSON object.
// OpenBLAS picks its kernel from the CPU model; one it does not know (Debian bookworm's
// 0.3.21 on an Emerald Rapids: "Prescott", 32.6 GFLOP/s where its Cooperlake kernel runs
// 150.8) gets an SSE3 kernel far below the machine. Where OPENBLAS_CORETYPE is not set and
// the detected kernel lacks the vector ISA the CPU has, the program runs itself again with
// the kernel of that ISA (Cooperlake: AVX-512 BF16; SkylakeX: AVX-512; Haswell: AVX2 and
// FMA) and reports both names.
#include <cblas.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <vector>

extern "C" {
void openblas_set_num_threads(int);
char* openblas_get_corename(void);
}

namespace {

// The OpenBLAS kernel of the widest vector ISA this CPU has, or nullptr.
const char* NativeCore() {
  if (__builtin_cpu_supports("avx512bf16")) return "Cooperlake";
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
      __builtin_cpu_supports("avx512vl")) {
    return "SkylakeX";
  }
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return nullptr;
}

// Whether OpenBLAS's kernel `core` uses the ISA of `native` (so re-running gains nothing).
bool CoreHasIsa(const std::string& core, const std::string& native) {
  const char* avx512[] = {"SkylakeX", "Cooperlake", "SapphireRapids"};
  const char* avx2[] = {"Haswell", "Zen", "SkylakeX", "Cooperlake", "SapphireRapids"};
  auto in = [&](const auto& names) {
    for (const char* name : names) {
      if (strcasecmp(core.c_str(), name) == 0) return true;
    }
    return false;
  };
  return native == "Haswell" ? in(avx2) : in(avx512);
}

}  // namespace

int main(int argc, char** argv) {
  const char* native = NativeCore();
  if (std::getenv("OPENBLAS_CORETYPE") == nullptr && native != nullptr &&
      !CoreHasIsa(openblas_get_corename(), native)) {
    setenv("ATTNTUNE_OPENBLAS_DETECTED", openblas_get_corename(), 1);
    setenv("OPENBLAS_CORETYPE", native, 1);
    execv("/proc/self/exe", argv);  // returns only on failure: measure as detected
    unsetenv("OPENBLAS_CORETYPE");
  }
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
  const char* detected = std::getenv("ATTNTUNE_OPENBLAS_DETECTED");
  std::printf("{\"n\": %d, \"median_ms\": %.3f, \"gflops\": %.2f, \"openblas_core\": \"%s\", "
              "\"OPENBLAS_CORETYPE\": \"%s\", \"openblas_detected\": \"%s\"}\n",
              n, med, flops / (med * 1e6), openblas_get_corename(), coretype ? coretype : "",
              detected ? detected : openblas_get_corename());
  return 0;
}
