// Time per call and per phase of a variant's first implementation on Gaussian inputs,
// without `attntune bench`'s pair counting (hax's naive key sets are O(L^2) per head:
// ~40 s at L = 16384), so that two builds can be run alternately in minutes. Each call's
// Kokkos kernels (attntune::select::*, attntune::attend::*) are summed by name; the
// medians and minima over the calls are printed, and the call's CPU time (this thread's:
// on a machine shared with other work it leaves out the time the thread waited for a
// core, which the wall times include).
//
//   phase_times VARIANT PARAMS SHAPE [CALLS]
//   e.g. phase_times hax k_lsh=32,k_ks=32,bits=4 B=1,Hq=16,Hkv=8,L=16384,d=128 5
#include <algorithm>
#include <chrono>
#include <ctime>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "benchmarks/variant_problem.h"
#include "kernels/kokkos/runtime.h"
#include "core/error.h"
#include "profiler/kokkos_hooks.h"

namespace {

double ThreadCpuMs() {
  timespec ts;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec * 1e-6;
}

double Median(std::vector<double> x) {
  std::sort(x.begin(), x.end());
  return x[x.size() / 2];
}

void Print(const char* name, const std::vector<double>& ms) {
  std::printf("%-32s median %8.1f ms  min %8.1f ms\n", name, Median(ms),
              *std::min_element(ms.begin(), ms.end()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4 || argc > 5) {
    std::fprintf(stderr, "usage: phase_times VARIANT PARAMS SHAPE [CALLS]\n");
    return 2;
  }
  const int calls = argc == 5 ? std::atoi(argv[4]) : 5;
  if (calls < 1) {
    std::fprintf(stderr, "phase_times: error: CALLS must be a positive integer, got '%s'\n",
                 argv[4]);
    return 2;
  }
  attntune::KokkosRuntime kokkos;
  try {
    const attntune::VariantProblem pb(argv[1], argv[2], argv[3]);
    const attntune::Variant& v = *pb.variant;
    const attntune::Implementation& impl = *pb.impl;
    const attntune::Shape& s = pb.shape;
    const attntune::Params& p = pb.params;
    const attntune::Tensors& t = pb.tensors;
    std::vector<float> out(static_cast<size_t>(s.QElems()));
    std::vector<double> total, cpu;
    std::map<std::string, std::vector<double>> phases;
    for (int c = 0; c < calls; ++c) {
      attntune::KernelCapture capture;
      const auto start = std::chrono::steady_clock::now();
      const double cpu0 = ThreadCpuMs();
      impl.run(t, p, out.data());
      cpu.push_back(ThreadCpuMs() - cpu0);
      total.push_back(std::chrono::duration<double, std::milli>(
                          std::chrono::steady_clock::now() - start).count());
      std::map<std::string, double> sum;
      for (const attntune::KernelEvent& e : capture.Events()) sum[e.name] += e.ms;
      for (const auto& [name, ms] : sum) phases[name].push_back(ms);
    }
    std::printf("%s/%s %s, %d calls\n", v.id.c_str(), impl.id.c_str(), s.ToString().c_str(),
                calls);
    Print("call", total);
    Print("call (thread CPU time)", cpu);
    for (const auto& [name, ms] : phases) Print(name.c_str(), ms);
  } catch (const attntune::UserError& e) {
    std::fprintf(stderr, "phase_times: error: %s\n", e.what());
    return 2;
  }
  return 0;
}
