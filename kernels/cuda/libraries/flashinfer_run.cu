// flashinfer_cuda.h: the calls per batch element, FlashInfer's buffers (split-KV parts,
// token-major prefill output) and the transpose of that output into attntune's O.
#include <cuda_runtime.h>

#include <algorithm>
#include <regex>
#include <stdexcept>
#include <string>

#include "kernels/cuda/libraries/flashinfer_cuda.h"
#include "kernels/cuda/libraries/flashinfer_entry.h"
#include "kernels/cuda/stream_scratch.h"

#ifndef ATTNTUNE_FLASHINFER_VERSION
#define ATTNTUNE_FLASHINFER_VERSION "unknown"
#endif

namespace attntune {
namespace flashinfer_cuda {
namespace {

namespace lp = library_plan;
using detail::CallArgs;

void CheckCuda(cudaError_t error, const char* call) {
  if (error != cudaSuccess) {
    throw std::runtime_error(std::string(call) + ": " + cudaGetErrorName(error) + ": " +
                             cudaGetErrorString(error));
  }
}

// [Lq, H, d] (token-major, FlashInfer's output) to [H, Lq, d] at `out`, in 16-byte
// vectors (d is 64 or 128: 8 or 16 per row), a thread per vector.
__global__ void TokenMajorToHeadMajor(const uint4* in, uint4* out, int64_t lq, int64_t heads,
                                      int64_t vecs) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= lq * heads * vecs) return;
  const int64_t row = i / vecs;  // token * heads + head
  const int64_t token = row / heads;
  const int64_t head = row % heads;
  out[(head * lq + token) * vecs + i % vecs] = in[i];
}

int64_t CeilDiv(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The split-KV buffer FlashInfer may use: its parts of O (2-byte elements) and their
// log-sum-exps (floats), for at most `chunks` chunks of qo_len * num_qo_heads rows.
size_t SplitBytes(int64_t chunks, int64_t rows, int64_t d) {
  return static_cast<size_t>(chunks * rows * (d * 2 + 4));
}

// An upper bound on the chunks FlashInfer's prefill splits the keys into: its chunks hold
// at least 256 keys, and it splits only while the grid (query tiles of at most 128 packed
// rows, times KV heads) leaves blocks idle; 32 blocks per SM bound its occupancy.
int64_t PrefillChunkBound(const CallArgs& a, int sms) {
  const int64_t tiles = CeilDiv(int64_t{a.qo_len} * (a.num_qo_heads / a.num_kv_heads), 128);
  const int64_t by_grid = int64_t{32} * sms / (int64_t{a.num_kv_heads} * tiles);
  return std::max<int64_t>(1, std::min(CeilDiv(a.kv_len, 256), by_grid));
}

void Enqueue(const CallArgs& a, bool bf16, bool decode) {
  const std::string error = decode ? detail::Decode(a, bf16)
                                   : (bf16 ? detail::PrefillBf16(a) : detail::PrefillF16(a));
  if (!error.empty()) throw std::runtime_error(error);
}

}  // namespace

namespace detail {

std::string ErrorText(const std::string& what) {
  static const std::regex prefix("^Error in function '[^']*' at [^ ]*:[0-9]+: ");
  return "flashinfer: " + std::regex_replace(what, prefix, "");
}

}  // namespace detail

std::string Version() { return ATTNTUNE_FLASHINFER_VERSION; }

void Run(const Shape& s, const lp::WindowPlan& plan, bool bf16, const Choices& choices,
         const void* q, const void* k, const void* v, void* o, void* stream) {
  if (!plan.refusal.empty()) throw std::runtime_error(plan.refusal);
  const bool decode = s.Lq == 1;
  const int64_t g = s.Group();
  int device = 0, sms = 0;
  CheckCuda(cudaGetDevice(&device), "cudaGetDevice");
  CheckCuda(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device),
            "cudaDeviceGetAttribute");
  const auto* q0 = static_cast<const char*>(q);
  const auto* k0 = static_cast<const char*>(k);
  const auto* v0 = static_cast<const char*>(v);
  auto* o0 = static_cast<char*>(o);
  const cudaStream_t st = static_cast<cudaStream_t>(stream);
  for (const lp::WindowCall& call : plan.calls) {
    const int64_t heads = call.kv_end - call.kv_begin;
    CallArgs a;
    a.num_qo_heads = static_cast<uint32_t>(heads * g);
    a.num_kv_heads = static_cast<uint32_t>(heads);
    a.qo_len = static_cast<uint32_t>(s.Lq);
    a.kv_len = static_cast<uint32_t>(s.Lk - call.key_begin);
    a.q_stride_n = static_cast<uint32_t>(s.d);
    a.q_stride_h = static_cast<uint32_t>(s.Lq * s.d);
    a.kv_stride_n = static_cast<uint32_t>(s.d);
    a.kv_stride_h = static_cast<uint32_t>(s.Lk * s.d);
    a.head_dim = static_cast<uint32_t>(s.d);
    a.window_left = static_cast<int32_t>(lp::FlashInferWindowLeft(call.left));
    a.cta_tile_q = static_cast<uint32_t>(choices.cta_tile_q);
    a.stream = stream;
    const int64_t rows = s.Lq * heads * g;
    // The call's own buffers on its stream, freed there after its kernels: the split-KV
    // parts (none where FlashInfer cannot split, one chunk at most: it then runs unsplit,
    // as with the buffer) and prefill's token-major output.
    const int64_t chunks = !choices.split_kv ? 1
                           : decode          ? CeilDiv(a.kv_len, 256)
                                             : PrefillChunkBound(a, sms);
    const StreamScratch split(chunks > 1 ? SplitBytes(chunks, rows, s.d) : 0, st);
    const StreamScratch output(decode ? 0 : static_cast<size_t>(rows * s.d * 2), st);
    a.tmp = split.get();
    void* token_major = output.get();
    for (int64_t b = 0; b < s.B; ++b) {
      const int64_t q_off = 2 * ((b * s.Hq + call.kv_begin * g) * s.Lq * s.d);
      const int64_t kv_off = 2 * ((b * s.Hkv + call.kv_begin) * s.Lk * s.d + call.key_begin * s.d);
      a.q = q0 + q_off;
      a.k = k0 + kv_off;
      a.v = v0 + kv_off;
      // Decode's O [heads * g, d] is attntune's [heads * g, 1, d]; prefill's is token-major.
      a.o = decode ? static_cast<void*>(o0 + q_off) : token_major;
      Enqueue(a, bf16, decode);
      if (!decode) {
        const int64_t vecs = s.d / 8;
        const unsigned blocks = static_cast<unsigned>(CeilDiv(rows * vecs, 256));
        TokenMajorToHeadMajor<<<blocks, 256, 0, st>>>(static_cast<const uint4*>(token_major),
                                                      reinterpret_cast<uint4*>(o0 + q_off), s.Lq,
                                                      heads * g, vecs);
        CheckCuda(cudaGetLastError(), "transpose launch");
      }
    }
  }
}

}  // namespace flashinfer_cuda
}  // namespace attntune
