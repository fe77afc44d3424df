// dma_decode on the GPU, one step at position t against the whole sequence (issue 19: a
// step at t = 65536 within 1.25x of a step at t = 4096). For each t: Gaussian inputs of t
// tokens (seed 1), B=1, Hq=16, Hkv=8, d=128, fp16, w_kv=1024, w_q=32, r=64, bias on;
//  - all steps: the selection of every step and the gathered decode of every step, as
//    `attntune bench --variant dma_decode --impl cuda_decode` times them;
//  - one step: what a server runs for the last step t - 1 with its cache (the resident
//    sets of step t - 2, the evictions of earlier steps): the resident sets' update for
//    key t - 1 (EnqueueDecodeStep: StepReplace), the step's chosen keys, and its attention
//    (LaunchGatheredDecode of that step alone); its output row is checked equal to the
//    whole sequence's.
// CUDA events, median of the repetitions (launch latency included). One JSON line per t.
//   cuda_decode_step t1 [t2 ...]
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/tensors.h"
#include "kernels/cuda/select_cuda.h"
#include "kernels/cuda/windowed_cuda.h"
#include "kernels/selection/selection.h"

namespace cp = attntune::cuda_plan;

namespace {

void Require(const std::string& error, const char* what) {
  if (error.empty()) return;
  std::fprintf(stderr, "cuda_decode_step: %s: %s\n", what, error.c_str());
  std::exit(1);
}

void RequireCuda(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return;
  Require(cudaGetErrorString(error), what);
}

// Median milliseconds of `reps` runs of fn, each bracketed by CUDA events.
double MedianMs(int reps, const std::function<void()>& fn) {
  cudaEvent_t start, stop;
  RequireCuda(cudaEventCreate(&start), "cudaEventCreate");
  RequireCuda(cudaEventCreate(&stop), "cudaEventCreate");
  fn();  // warm-up
  std::vector<double> ms;
  for (int n = 0; n < reps; ++n) {
    RequireCuda(cudaEventRecord(start), "cudaEventRecord");
    fn();
    RequireCuda(cudaEventRecord(stop), "cudaEventRecord");
    RequireCuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float t = 0.f;
    RequireCuda(cudaEventElapsedTime(&t, start, stop), "cudaEventElapsedTime");
    ms.push_back(t);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

template <class T>
T* Upload(cp::SelectWorkspace& ws, const std::string& name, const std::vector<T>& host) {
  T* device = ws.Get<T>(name, static_cast<int64_t>(host.size()));
  Require(cp::CopyToDevice(device, host.data(), host.size() * sizeof(T)), "upload");
  return device;
}

std::vector<uint16_t> Half(const std::vector<float>& x) {
  std::vector<uint16_t> bits(x.size());
  for (size_t n = 0; n < x.size(); ++n) bits[n] = cp::ToBits(x[n], cp::Dtype::kF16);
  return bits;
}

void Step(int64_t t) {
  const int64_t w_kv = 1024, w_q = 32, r = 64;
  attntune::Shape s;
  s.Hq = 16;
  s.Hkv = 8;
  s.d = 128;
  s.Lq = s.Lk = t;
  // fp16 inputs: the kernels and the selection read the same tensors (in place).
  attntune::Tensors in = attntune::GaussianTensors(s, 1);
  attntune::RoundInputs(&in, attntune::Dtype::kF16);
  cp::SelectWorkspace ws;
  std::vector<double> delta, a;
  attntune::DmaDeltaA(in, 0, &delta, &a);
  const double* delta_d = Upload(ws, "delta", delta);
  const double* a_d = Upload(ws, "a", a);
  cp::WindowedDeviceArgs args;
  args.q = Upload(ws, "q", Half(in.q.ToVector()));
  args.k = Upload(ws, "k", Half(in.k.ToVector()));
  args.v = Upload(ws, "v", Half(in.v.ToVector()));
  args.o = ws.Get<uint16_t>("o", static_cast<int64_t>(in.q.size()));
  const cp::DeviceInput q16{args.q, cp::Dtype::kF16}, k16{args.k, cp::Dtype::kF16},
      v16{args.v, cp::Dtype::kF16};
  cp::TopKDevice topk;
  cp::DecodeDevice sel;
  auto select = [&] {
    cp::AllocTopK(s.B * s.Hkv, s.Lk, w_kv, true, ws, "topk", &topk);
    Require(cp::EnqueueDmaScores(s, v16, delta_d, a_d, cp::HostFusesDmaProducts(),
                                 &topk, nullptr),
            "dma scores");
    Require(cp::EnqueueTopK(&topk, ws, "topk", nullptr), "top-k");
    Require(cp::EnqueueDecodeSelection(s, q16, k16, topk, w_q, r, &sel, ws, nullptr), "decode");
    args.list_offsets = sel.resident.begin;
    args.list_ends = sel.resident.end;
    args.list_keys = sel.resident.keys;
    args.list_aux = sel.resident.key_evict;
    args.evict = sel.evict;
    args.chosen_offsets = sel.chosen_offsets;
    args.chosen = sel.chosen;
    args.bias_log2 = topk.bias_log2;
  };
  const double all_ms = MedianMs(5, [&] {
    select();
    args.first_step = 0;
    args.steps = 0;
    Require(cp::LaunchGatheredDecode(s, cp::Dtype::kF16, args), "gathered decode");
  });
  // The whole sequence's row of the last step, then the same step alone.
  const size_t row = static_cast<size_t>(s.d) * 2, rows = static_cast<size_t>(s.Hq);
  std::vector<uint16_t> whole(static_cast<size_t>(s.Hq * s.d)), alone(whole.size());
  auto copy_rows = [&](std::vector<uint16_t>* out) {
    for (size_t h = 0; h < rows; ++h) {
      Require(cp::CopyToHost(out->data() + h * s.d,
                             static_cast<const uint16_t*>(args.o) + (h * t + t - 1) * s.d, row),
              "copy");
    }
  };
  copy_rows(&whole);
  const double step_ms = MedianMs(200, [&] {
    Require(cp::EnqueueDecodeStep(s, q16, k16, topk, w_q, r, t - 1, sel, ws, nullptr), "step");
    args.first_step = t - 1;
    args.steps = 1;
    Require(cp::LaunchGatheredDecode(s, cp::Dtype::kF16, args), "gathered decode step");
  });
  copy_rows(&alone);
  cudaDeviceProp prop;
  RequireCuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  std::printf("{\"device\":\"%s\",\"t\":%lld,\"w_kv\":%lld,\"w_q\":%lld,\"r\":%lld,"
              "\"all_steps_ms\":%.4f,\"all_steps_us_per_step\":%.4f,\"one_step_us\":%.2f,"
              "\"one_step_row_equal\":%s}\n",
              prop.name, static_cast<long long>(t), static_cast<long long>(w_kv),
              static_cast<long long>(w_q), static_cast<long long>(r), all_ms, 1e3 * all_ms / t,
              1e3 * step_ms, whole == alone ? "true" : "false");
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: cuda_decode_step t1 [t2 ...]\n");
    return 2;
  }
  for (int n = 1; n < argc; ++n) Step(std::atoll(argv[n]));
  return 0;
}
