// Peak resident memory of one run of a variant's first implementation on Gaussian
// inputs (issue 3: at L = 65536 no sparse variant may exceed the input and output
// tensors by more than 25%). Unlike `attntune bench --unchecked`, it counts no attended
// pairs (the naive per-row key sets of hax are O(L^2) per head, minutes at 65536), so it
// measures exactly: the binary and Kokkos, the inputs, the output, one kernel call.
//
//   peak_memory VARIANT PARAMS SHAPE      e.g. peak_memory hax k_lsh=32,k_ks=32 B=1,Hq=16,Hkv=8,L=65536,d=128

#include <chrono>
#include <cstdio>
#include <vector>

#include "benchmarks/variant_problem.h"
#include "kernels/kokkos/runtime.h"
#include "profiler/device.h"

using attntune::PeakRssBytes;

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: peak_memory VARIANT PARAMS SHAPE\n");
    return 2;
  }
  attntune::KokkosRuntime kokkos;
  const double base = PeakRssBytes();
  const attntune::VariantProblem pb(argv[1], argv[2], argv[3]);
  const attntune::Variant& v = *pb.variant;
  const attntune::Implementation& impl = *pb.impl;
  const attntune::Shape& s = pb.shape;
  const attntune::Tensors& t = pb.tensors;
  std::vector<float> out(static_cast<size_t>(s.QElems()));
  const auto start = std::chrono::steady_clock::now();
  impl.run(t, pb.params, out.data());
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const double io = 4.0 * static_cast<double>(2 * s.QElems() + 2 * s.KvElems());
  const double peak = PeakRssBytes();
  std::printf("{\"variant\": \"%s\", \"implementation\": \"%s\", \"shape\": \"%s\", \"run_s\": %.2f, "
              "\"baseline_rss_bytes\": %.0f, \"peak_rss_bytes\": %.0f, \"io_bytes\": %.0f, "
              "\"peak_over_io\": %.4f}\n",
              v.id.c_str(), impl.id.c_str(), s.ToString().c_str(), secs, base, peak, io, peak / io);
  return 0;
}
