#include "kernels/cuda/libraries/library_plan.h"

#include <algorithm>

namespace attntune {
namespace library_plan {

WindowPlan PlanWindowCalls(const Shape& shape, const std::vector<int64_t>& windows,
                           int64_t sink) {
  WindowPlan plan;
  if (sink > 0) {
    plan.refusal = "sink=" + std::to_string(sink) +
                   ": the library masks one diagonal band; sink keys outside the window need "
                   "a second pass merged exactly, which attntune does not build";
    return plan;
  }
  if (!shape.causal) {
    plan.refusal = "the library calls are built for causal attention";
    return plan;
  }
  for (int64_t h = 0; h < shape.Hkv; ++h) {
    const int64_t w = windows.at(static_cast<size_t>(h));
    // A window of Lk or more reaches key 0 from every row: full attention.
    const int64_t left = w > 0 && w < shape.Lk ? w : 0;
    WindowCall call{h, h + 1, 0, left};
    if (shape.Lq == 1 && left > 0) {  // one row: its window is keys [Lk - w, Lk)
      call.key_begin = shape.Lk - left;
      call.left = 0;
    }
    if (!plan.calls.empty()) {
      WindowCall& last = plan.calls.back();
      if (last.kv_end == h && last.key_begin == call.key_begin && last.left == call.left) {
        last.kv_end = h + 1;
        continue;
      }
    }
    plan.calls.push_back(call);
  }
  return plan;
}

bool CudnnTopLeft(int64_t s_q, int64_t s_kv) { return s_q == s_kv; }

bool CudnnKeeps(int64_t s_q, int64_t s_kv, int64_t left, int64_t i, int64_t j) {
  const int64_t shift = CudnnTopLeft(s_q, s_kv) ? 0 : s_kv - s_q;
  if (!(i + shift >= j)) return false;
  if (left > 0 && !(j + left - shift > i)) return false;
  return true;
}

bool SeesEveryKey(const Shape& shape, const WindowCall& call) {
  return shape.Lq == 1 && call.left == 0;
}

int64_t FlashInferWindowLeft(int64_t left) { return left > 0 ? left - 1 : -1; }

bool FlashInferKeeps(int64_t qo_len, int64_t kv_len, int64_t window_left, int64_t i, int64_t j) {
  if (j + qo_len > kv_len + i) return false;
  if (window_left >= 0 && !(j + qo_len + window_left >= kv_len + i)) return false;
  return true;
}

CallViews ViewsOf(const Shape& s, const WindowCall& call) {
  const int64_t heads = call.kv_end - call.kv_begin;
  const int64_t g = s.Group();
  CallViews v;
  v.q.dim = {s.B, heads * g, s.Lq, s.d};
  v.q.stride = {s.Hq * s.Lq * s.d, s.Lq * s.d, s.d, 1};
  v.q.offset = call.kv_begin * g * s.Lq * s.d;
  v.o = v.q;
  v.kv.dim = {s.B, heads, s.Lk - call.key_begin, s.d};
  v.kv.stride = {s.Hkv * s.Lk * s.d, s.Lk * s.d, s.d, 1};
  v.kv.offset = call.kv_begin * s.Lk * s.d + call.key_begin * s.d;
  return v;
}

std::string CudnnHeadDimRefusal(int64_t d) {
  if (d % 8 == 0 && d <= 256) return "";
  return "cuDNN's SDPA takes d a multiple of 8 up to 256, not d=" + std::to_string(d);
}

std::string FlashInferHeadDimRefusal(int64_t d) {
  if (d == 64 || d == 128) return "";
  return "attntune compiles FlashInfer's kernels for d=64 and d=128, not d=" + std::to_string(d);
}

std::string FlashInferShapeRefusal(const Shape& shape) {
  const int64_t g = shape.Group();
  if (shape.Lq != 1) return "";
  for (const int64_t ok : {1, 2, 3, 4, 6, 8, 16}) {
    if (g == ok) return "";
  }
  return "FlashInfer's decode takes 1, 2, 3, 4, 6, 8 or 16 query heads per KV head, not " +
         std::to_string(g) + " (Hq=" + std::to_string(shape.Hq) + ", Hkv=" +
         std::to_string(shape.Hkv) + ")";
}

}  // namespace library_plan
}  // namespace attntune
