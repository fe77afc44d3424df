// Split-KV decode (DecodePlan in plan.h): one query row per head, the attended keys cut
// into splits along the key axis. A thread block per (split, KV head, batch) streams its
// keys once for every query head of the GQA group (4 warps take every 4th key; a lane
// holds d/32 elements of q, k, v; dot products reduce with warp shuffles), keeps the
// online-softmax state in fp32, merges its warps through shared memory and writes the
// partial state; the combine kernel merges the splits and writes O in the input dtype.
// Decode is bound by reading K and V, so plain FMAs suffice: no tensor cores.
// The gathered instantiation (dma_decode) runs every step of a sequence at once: a thread
// block per (step, KV head, batch) over the step's resident keys (a gathered list shared
// by a run of steps, kept per key by j <= t < evict[j]) and then each query head's chosen
// keys, and writes O itself (the steps give the parallelism: no split across blocks).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <string>

#include "kernels/cuda/plan.h"
#include "kernels/cuda/windowed_cuda.h"

namespace attntune {
namespace cuda_plan {
namespace {

struct DecodeParams {
  const uint16_t* q;  // [B,Hq,1,d]
  const uint16_t* k;  // [B,Hkv,Lk,d]
  const uint16_t* v;
  uint16_t* o;        // [B,Hq,1,d]
  float* part_o;      // [B,Hq,splits,d] unnormalised
  float* part_ml;     // [B,Hq,splits,2] running max (base 2) and sum
  int64_t lk;
  int hq, hkv;
  int64_t window, sink;
  int64_t first_key, keys_per_split;
  int splits;
  float scale_log2;
};

// The gathered kernel's second argument (the lists of LaunchGatheredDecode's
// WindowedDeviceArgs). Apart from DecodeParams, so that the split-KV kernels keep the
// parameter block, and the code, that ran on the H100.
struct GatheredDecodeParams {
  const int32_t* list_offsets;  // KeyLists of the resident sets, kDecodeListSteps steps a list
  const int32_t* list_keys;
  const int32_t* evict;           // [B,Hkv,Lk]
  const int32_t* chosen_offsets;  // [B*Hq*Lk + 1]
  const int32_t* chosen;
  const float* bias_log2;  // [B,Hkv,Lk] b_j * log2(e), or nullptr
  int64_t query_blocks;
  const int32_t* list_evict;  // the eviction step of each listed key, or nullptr
  int64_t first_step;         // block x computes step first_step + x
  const int32_t* list_end;    // one past each list's last key (list_offsets: its first)
};

template <Dtype DT>
__device__ __forceinline__ float ToFloat(uint16_t bits) {
  if constexpr (DT == Dtype::kF16) {
    return __half2float(__ushort_as_half(bits));
  } else {
    return __bfloat162float(__ushort_as_bfloat16(bits));
  }
}

template <Dtype DT>
__device__ __forceinline__ uint16_t FromFloat(float x) {
  if constexpr (DT == Dtype::kF16) {
    return __half_as_ushort(__float2half_rn(x));
  } else {
    return __bfloat16_as_ushort(__float2bfloat16_rn(x));
  }
}

constexpr int kDecodeWarps = 4;

// GATHERED: block (step, hk, b) of gathered decode, rows (b, head, step) of [B,Hq,Lk,d],
// keys from gp, O written here; else block (split, hk, b) of split-KV decode.
template <Dtype DT, int D, bool GATHERED>
__device__ __forceinline__ void DecodeSplitBody(const DecodeParams& p,
                                                const GatheredDecodeParams& gp) {
  constexpr int PER = D / 32;  // elements per lane
  constexpr int G = kDecodeMaxGroup;
  const int split = GATHERED ? 0 : blockIdx.x, hk = blockIdx.y, b = blockIdx.z;
  const int group = p.hq / p.hkv;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t step = GATHERED ? gp.first_step + blockIdx.x : 0;
  const int64_t pos = GATHERED ? step : p.lk - 1;
  const int64_t lo = p.first_key + static_cast<int64_t>(split) * p.keys_per_split;
  const int64_t hi = lo + p.keys_per_split < pos + 1 ? lo + p.keys_per_split : pos + 1;
  const uint16_t* kg = p.k + (static_cast<int64_t>(b) * p.hkv + hk) * p.lk * D;
  const uint16_t* vg = p.v + (static_cast<int64_t>(b) * p.hkv + hk) * p.lk * D;

  float q[G][PER], acc[G][PER], m[G], l[G];
#pragma unroll
  for (int h = 0; h < G; ++h) {
    m[h] = -INFINITY;
    l[h] = 0.f;
#pragma unroll
    for (int e = 0; e < PER; ++e) {
      acc[h][e] = 0.f;
      q[h][e] = 0.f;
      if (h < group) {
        int64_t row = static_cast<int64_t>(b) * p.hq + hk * group + h;
        if constexpr (GATHERED) row = row * p.lk + step;
        q[h][e] = ToFloat<DT>(p.q[row * D + lane * PER + e]) * p.scale_log2;
      }
    }
  }
  // The key loop: split-KV walks keys [lo, hi) under Attends; gathered walks the
  // resident list of the step's run of steps under InTopK (every head), then each query
  // head's chosen keys (that head only; never resident at this step, so no key counts
  // twice), as one sequence x so that the body below has one call site.
  const float* bias = nullptr;
  DecodeWalk walk;
  if constexpr (GATHERED) {
    const int64_t head = static_cast<int64_t>(b) * p.hkv + hk;
    if (gp.bias_log2 != nullptr) bias = gp.bias_log2 + head * p.lk;
    const int64_t list = head * gp.query_blocks + step / kDecodeListSteps;
    walk.resident = gp.list_keys + gp.list_offsets[list];
    walk.n_resident = gp.list_end[list] - gp.list_offsets[list];
    walk.evict = gp.evict + head * p.lk;
    if (gp.list_evict != nullptr) walk.resident_evict = gp.list_evict + gp.list_offsets[list];
    walk.step = step;
    walk.chosen_offsets = gp.chosen_offsets;
    walk.chosen = gp.chosen;
    walk.row0 = (static_cast<int64_t>(b) * p.hq + hk * group) * p.lk + step;
    walk.stride = p.lk;
    walk.group = group;
  }
  for (int64_t x = (GATHERED ? 0 : lo) + warp; GATHERED || x < hi; x += kDecodeWarps) {
    int64_t j = x;
    int only = -1;  // every head, or this one
    if constexpr (GATHERED) {
      const int what = walk.At(x, &j, &only);  // uniform across the warp
      if (what == DecodeWalk::kEnd) break;
      if (what == DecodeWalk::kSkip) continue;
    } else {
      if (!Attends(pos, j, p.window, p.sink)) continue;  // uniform across the warp
    }
    float kf[PER], vf[PER];
#pragma unroll
    for (int e = 0; e < PER; ++e) {
      kf[e] = ToFloat<DT>(kg[j * D + lane * PER + e]);
      vf[e] = ToFloat<DT>(vg[j * D + lane * PER + e]);
    }
#pragma unroll
    for (int h = 0; h < G; ++h) {
      if (h >= group) break;
      if (GATHERED && only >= 0 && h != only) continue;
      float s = 0.f;
#pragma unroll
      for (int e = 0; e < PER; ++e) s += q[h][e] * kf[e];
#pragma unroll
      for (int off = 16; off > 0; off /= 2) s += __shfl_xor_sync(0xffffffffu, s, off);
      if (GATHERED && bias != nullptr) s += bias[j];
      const float mn = fmaxf(m[h], s);
      const float alpha = exp2f(m[h] - mn);  // m = -inf: 0
      const float w = exp2f(s - mn);
      l[h] = l[h] * alpha + w;
#pragma unroll
      for (int e = 0; e < PER; ++e) acc[h][e] = acc[h][e] * alpha + w * vf[e];
      m[h] = mn;
    }
  }

  __shared__ float sm_m[kDecodeWarps][G], sm_l[kDecodeWarps][G];
  __shared__ float sm_o[kDecodeWarps][G][D];
#pragma unroll
  for (int h = 0; h < G; ++h) {
    if (lane == 0) {
      sm_m[warp][h] = m[h];
      sm_l[warp][h] = l[h];
    }
#pragma unroll
    for (int e = 0; e < PER; ++e) sm_o[warp][h][lane * PER + e] = acc[h][e];
  }
  __syncthreads();
  for (int x = threadIdx.x; x < group * D; x += kDecodeWarps * 32) {
    const int h = x / D, dd = x % D;
    float mx = -INFINITY;
    for (int w = 0; w < kDecodeWarps; ++w) mx = fmaxf(mx, sm_m[w][h]);
    float o = 0.f, sum = 0.f;
    if (mx != -INFINITY) {
      for (int w = 0; w < kDecodeWarps; ++w) {
        const float f = exp2f(sm_m[w][h] - mx);
        o += sm_o[w][h][dd] * f;
        sum += sm_l[w][h] * f;
      }
    }
    if constexpr (GATHERED) {  // one split: O itself (a row attending nothing writes 0)
      const int64_t row = (static_cast<int64_t>(b) * p.hq + hk * group + h) * p.lk + step;
      p.o[row * D + dd] = FromFloat<DT>(sum > 0.f ? o / sum : 0.f);
    } else {
      const int64_t row = (static_cast<int64_t>(b) * p.hq + hk * group + h) * p.splits + split;
      p.part_o[row * D + dd] = o;
      if (dd == 0) {
        p.part_ml[row * 2] = mx;
        p.part_ml[row * 2 + 1] = sum;
      }
    }
  }
}

template <Dtype DT, int D>
__device__ __forceinline__ void DecodeCombineBody(const DecodeParams& p) {
  const int h = blockIdx.x, b = blockIdx.y, dd = threadIdx.x;
  const int64_t base = (static_cast<int64_t>(b) * p.hq + h) * p.splits;
  float mx = -INFINITY;
  for (int s = 0; s < p.splits; ++s) mx = fmaxf(mx, p.part_ml[(base + s) * 2]);
  float o = 0.f, sum = 0.f;
  if (mx != -INFINITY) {
    for (int s = 0; s < p.splits; ++s) {
      const float f = exp2f(p.part_ml[(base + s) * 2] - mx);
      o += p.part_o[(base + s) * D + dd] * f;
      sum += p.part_ml[(base + s) * 2 + 1] * f;
    }
  }
  // A row with nothing to attend writes zeros, as the other kernels do.
  p.o[(static_cast<int64_t>(b) * p.hq + h) * D + dd] = FromFloat<DT>(sum > 0.f ? o / sum : 0.f);
}

}  // namespace
}  // namespace cuda_plan
}  // namespace attntune

#define ATTNTUNE_DECODE_KERNELS(dtype, tag, d)                                               \
  extern "C" __global__ void __launch_bounds__(128)                                          \
      attntune_decode_split_##tag##_d##d(attntune::cuda_plan::DecodeParams p) {              \
    attntune::cuda_plan::DecodeSplitBody<attntune::cuda_plan::Dtype::k##dtype, d, false>(p, {}); \
  }                                                                                          \
  extern "C" __global__ void __launch_bounds__(128)                                          \
      attntune_decode_gathered_##tag##_d##d(attntune::cuda_plan::DecodeParams p,             \
                                            attntune::cuda_plan::GatheredDecodeParams gp) {  \
    attntune::cuda_plan::DecodeSplitBody<attntune::cuda_plan::Dtype::k##dtype, d, true>(p, gp); \
  }                                                                                          \
  extern "C" __global__ void __launch_bounds__(d)                                            \
      attntune_decode_combine_##tag##_d##d(attntune::cuda_plan::DecodeParams p) {            \
    attntune::cuda_plan::DecodeCombineBody<attntune::cuda_plan::Dtype::k##dtype, d>(p);      \
  }
ATTNTUNE_DECODE_KERNELS(F16, f16, 64)
ATTNTUNE_DECODE_KERNELS(F16, f16, 128)
ATTNTUNE_DECODE_KERNELS(Bf16, bf16, 64)
ATTNTUNE_DECODE_KERNELS(Bf16, bf16, 128)
#undef ATTNTUNE_DECODE_KERNELS

namespace attntune {
namespace cuda_plan {

namespace {

// The parameters both decode launches share: tensors, shape, softmax scale.
DecodeParams BaseParams(const Shape& s, const WindowedDeviceArgs& args) {
  DecodeParams p{};
  p.q = static_cast<const uint16_t*>(args.q);
  p.k = static_cast<const uint16_t*>(args.k);
  p.v = static_cast<const uint16_t*>(args.v);
  p.o = static_cast<uint16_t*>(args.o);
  p.lk = s.Lk;
  p.hq = static_cast<int>(s.Hq);
  p.hkv = static_cast<int>(s.Hkv);
  p.scale_log2 = static_cast<float>(1.4426950408889634 / std::sqrt(static_cast<double>(s.d)));
  return p;
}

}  // namespace

std::string LaunchDecode(const WindowedProblem& problem, Dtype dtype, int64_t splits,
                         const WindowedDeviceArgs& args, void* workspace) {
  const std::string why = CanImplementDecode(problem, splits);
  if (!why.empty()) return why;
  const DecodePlan plan = PlanDecode(problem, splits);
  const Shape& s = problem.shape;
  DecodeParams p = BaseParams(s, args);
  p.part_o = static_cast<float*>(workspace);
  p.part_ml = p.part_o + s.B * s.Hq * plan.splits * s.d;
  p.window = problem.window;
  p.sink = problem.sink;
  p.first_key = plan.first_key;
  p.keys_per_split = plan.keys_per_split;
  p.splits = static_cast<int>(plan.splits);
  const void* split_fn = nullptr;
  const void* combine_fn = nullptr;
  const bool f16 = dtype == Dtype::kF16;
  if (s.d == 64) {
    split_fn = f16 ? reinterpret_cast<const void*>(&attntune_decode_split_f16_d64)
                   : reinterpret_cast<const void*>(&attntune_decode_split_bf16_d64);
    combine_fn = f16 ? reinterpret_cast<const void*>(&attntune_decode_combine_f16_d64)
                     : reinterpret_cast<const void*>(&attntune_decode_combine_bf16_d64);
  } else {
    split_fn = f16 ? reinterpret_cast<const void*>(&attntune_decode_split_f16_d128)
                   : reinterpret_cast<const void*>(&attntune_decode_split_bf16_d128);
    combine_fn = f16 ? reinterpret_cast<const void*>(&attntune_decode_combine_f16_d128)
                     : reinterpret_cast<const void*>(&attntune_decode_combine_bf16_d128);
  }
  void* kernel_args[] = {&p};
  const cudaStream_t stream = static_cast<cudaStream_t>(args.stream);
  cudaError_t error = cudaLaunchKernel(
      split_fn,
      dim3(static_cast<unsigned>(plan.grid_x), static_cast<unsigned>(plan.grid_y),
           static_cast<unsigned>(plan.grid_z)),
      dim3(plan.threads), kernel_args, 0, stream);
  if (error == cudaSuccess) {
    error = cudaLaunchKernel(combine_fn, dim3(static_cast<unsigned>(s.Hq), static_cast<unsigned>(s.B)),
                             dim3(static_cast<unsigned>(s.d)), kernel_args, 0, stream);
  }
  if (error != cudaSuccess) {
    return std::string(cudaGetErrorName(error)) + " (cudaLaunchKernel): " + cudaGetErrorString(error);
  }
  return "";
}

std::string LaunchGatheredDecode(const Shape& s, Dtype dtype, const WindowedDeviceArgs& args) {
  const std::string why = CanImplementGatheredDecode(s);
  if (!why.empty()) return why;
  if (args.list_offsets == nullptr || args.list_keys == nullptr || args.evict == nullptr ||
      args.chosen_offsets == nullptr || args.chosen == nullptr)
    return "gathered decode launch without its lists";
  const DecodeParams p = BaseParams(s, args);
  GatheredDecodeParams gp{};
  gp.list_offsets = args.list_offsets;
  gp.list_keys = args.list_keys;
  gp.evict = args.evict;
  gp.chosen_offsets = args.chosen_offsets;
  gp.chosen = args.chosen;
  gp.bias_log2 = args.bias_log2;
  gp.list_evict = args.list_aux;
  gp.first_step = args.first_step;
  gp.list_end = args.list_ends != nullptr ? args.list_ends : args.list_offsets + 1;
  if (args.steps < 0) return "gathered decode of a negative number of steps";
  const int64_t steps = args.steps > 0 ? args.steps : s.Lk;
  // first_step > Lk - steps, not first_step + steps > Lk: the sum may overflow.
  if (args.first_step < 0 || args.first_step > s.Lk - steps) return "gathered decode steps past Lk";
  gp.query_blocks = (s.Lk + kDecodeListSteps - 1) / kDecodeListSteps;
  const bool f16 = dtype == Dtype::kF16;
  const void* fn =
      s.d == 64 ? (f16 ? reinterpret_cast<const void*>(&attntune_decode_gathered_f16_d64)
                       : reinterpret_cast<const void*>(&attntune_decode_gathered_bf16_d64))
                : (f16 ? reinterpret_cast<const void*>(&attntune_decode_gathered_f16_d128)
                       : reinterpret_cast<const void*>(&attntune_decode_gathered_bf16_d128));
  void* kernel_args[] = {const_cast<DecodeParams*>(&p), &gp};
  const dim3 grid(static_cast<unsigned>(steps), static_cast<unsigned>(s.Hkv),
                  static_cast<unsigned>(s.B));
  const cudaError_t error = cudaLaunchKernel(fn, grid, dim3(kDecodeWarps * 32), kernel_args, 0,
                                             static_cast<cudaStream_t>(args.stream));
  if (error != cudaSuccess) {
    return std::string(cudaGetErrorName(error)) + " (cudaLaunchKernel): " + cudaGetErrorString(error);
  }
  return "";
}

}  // namespace cuda_plan
}  // namespace attntune
