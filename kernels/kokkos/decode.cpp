// dma_decode on Kokkos: one task per (batch, KV head) runs the sequence token by token.
// The resident set is an array of at most w_kv slots (the slot to replace is found by a
// scan: O(w_kv) per step, the same order as attending it); evictions of the last r steps
// are kept in a queue; each query head of the group scores its candidates by q·k in
// fp64 (so that it chooses exactly the reference's keys) and attends I ∪ chosen in fp32.
// SelectDecodeKokkos runs the same selection alone (the CUDA gathered decode's host phase).
#include <Kokkos_Core.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <limits>
#include <tuple>

#include "kernels/kokkos/sparse.h"
#include "kernels/kokkos/tiles.h"
#include "core/check.h"

namespace attntune {

namespace {

using tiles::Dot;

class DecodeHead {
 public:
  DecodeHead(const Tensors& t, const double* x, const float* bias, int64_t b, int64_t hkv,
             int64_t w_kv, int64_t w_q, int64_t r)
      : t_(t), s_(t.shape), x_(x), bias_(bias), b_(b), hkv_(hkv), w_kv_(w_kv), w_q_(w_q), r_(r),
        in_cache_(static_cast<size_t>(t.shape.Lk), 0) {}

  // step_ns (optional, Lk entries): nanoseconds of each step (append and the group's
  // query heads attending), for per-step timing at a given position.
  void Run(float* out, float* step_ns) {
    using Clock = std::chrono::steady_clock;
    for (int64_t step = 0; step < s_.Lk; ++step) {
      const Clock::time_point start = step_ns != nullptr ? Clock::now() : Clock::time_point();
      Append(step);
      for (int64_t g = 0; g < s_.Group(); ++g) {
        Select(step, hkv_ * s_.Group() + g);
        Attend(step, hkv_ * s_.Group() + g, out);
      }
      if (step_ns != nullptr) {
        step_ns[step] = static_cast<float>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
      }
    }
  }

  // The selection alone (SelectDecodeKokkos): evict[j] = the step at which key j leaves
  // the resident set (Lk: never; j: it never enters), and fn(step, hq, first, last) with
  // the keys query head hq chooses at `step` (never resident then).
  template <class Fn>
  void RunSelect(int32_t* evict, const Fn& fn) {
    for (int64_t step = 0; step < s_.Lk; ++step) {
      Append(step);
      evict[step] = static_cast<int32_t>(in_cache_[step] ? s_.Lk : step);
      if (!evicted_.empty() && evicted_.back().first == step) {
        evict[evicted_.back().second] = static_cast<int32_t>(step);
      }
      for (int64_t g = 0; g < s_.Group(); ++g) {
        Select(step, hkv_ * s_.Group() + g);
        fn(step, hkv_ * s_.Group() + g, keys_.data() + cache_.size(), keys_.data() + keys_.size());
      }
    }
  }

 private:
  // Inserts key `step` while the cache is not full, else replaces the resident key of
  // smallest b (ties: smaller j) when the new b is larger.
  void Append(int64_t step) {
    while (!evicted_.empty() && evicted_.front().first <= step - r_) evicted_.pop_front();
    if (static_cast<int64_t>(cache_.size()) < w_kv_) {
      cache_.push_back(step);
      in_cache_[step] = 1;
      return;
    }
    size_t min = 0;
    for (size_t n = 1; n < cache_.size(); ++n) {
      const int64_t a = cache_[n], m = cache_[min];
      if (x_[a] < x_[m] || (x_[a] == x_[m] && a < m)) min = n;
    }
    if (x_[step] > x_[cache_[min]]) {
      evicted_.push_back({step, cache_[min]});
      in_cache_[cache_[min]] = 0;
      cache_[min] = step;
      in_cache_[step] = 1;
    }
  }

  // keys_ = S(step) of query head hq: the resident set, then the (at most w_q)
  // candidates of largest q·k.
  void Select(int64_t step, int64_t hq) {
    const int64_t d = s_.d;
    const float* q = t_.Q(b_, hq, step);
    // Candidates: the r most recent keys and the keys evicted in the last r steps,
    // not resident. An evicted key j >= step - r + 1 is already among the recent ones.
    scored_.clear();
    auto consider = [&](int64_t j) {
      const float* k = t_.K(b_, hkv_, j);
      double dot = 0.0;
      for (int64_t c = 0; c < d; ++c) dot += static_cast<double>(q[c]) * k[c];
      // A NaN q·k (a non-finite input the caller said not to check) after every number,
      // so that the order stays total, as the device ranks it (ChosenKey).
      const bool nan = std::isnan(dot);
      scored_.push_back({nan, nan ? 0.0 : -dot, j});
    };
    const int64_t recent = std::max<int64_t>(0, step - r_ + 1);
    for (int64_t j = recent; j <= step; ++j) {
      if (!in_cache_[j]) consider(j);
    }
    for (const auto& e : evicted_) {
      if (e.first > step - r_ && e.second < recent && !in_cache_[e.second]) consider(e.second);
    }
    if (static_cast<int64_t>(scored_.size()) > w_q_) {
      std::nth_element(scored_.begin(), scored_.begin() + w_q_, scored_.end());
      scored_.resize(static_cast<size_t>(w_q_));
    }
    keys_.assign(cache_.begin(), cache_.end());
    for (const auto& e : scored_) keys_.push_back(std::get<2>(e));
  }

  // fp32 attention of query head hq's row at `step` over keys_ (Select's).
  void Attend(int64_t step, int64_t hq, float* out) {
    const int64_t d = s_.d;
    const float* q = t_.Q(b_, hq, step);
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
    logits_.resize(keys_.size());
    float m = -std::numeric_limits<float>::infinity();
    for (size_t n = 0; n < keys_.size(); ++n) {
      const float dot = Dot(q, t_.K(b_, hkv_, keys_[n]), d);
      logits_[n] = dot * scale + (bias_ != nullptr ? bias_[keys_[n]] : 0.0f);
      m = std::max(m, logits_[n]);
    }
    float* __restrict o = out + OutIndex(s_, b_, hq, step, 0);
    std::fill(o, o + d, 0.0f);
    float sum = 0.0f;
    for (size_t n = 0; n < keys_.size(); ++n) {
      const float p = std::exp(logits_[n] - m);
      sum += p;
      const float* __restrict v = t_.V(b_, hkv_, keys_[n]);
      for (int64_t c = 0; c < d; ++c) o[c] += p * v[c];
    }
    if (sum > 0.0f) {
      for (int64_t c = 0; c < d; ++c) o[c] /= sum;
    }
  }

  const Tensors& t_;
  const Shape& s_;
  const double* x_;
  const float* bias_;
  int64_t b_, hkv_, w_kv_, w_q_, r_;
  std::vector<int64_t> cache_;
  std::vector<uint8_t> in_cache_;
  std::deque<std::pair<int64_t, int64_t>> evicted_;  // (step, key), oldest first
  // (NaN, -q·k, j): ascending = best first
  std::vector<std::tuple<bool, double, int64_t>> scored_;
  std::vector<int64_t> keys_;
  std::vector<float> logits_;
};

}  // namespace

DecodeSelection SelectDecodeKokkos(const Tensors& t, const std::vector<double>& scores,
                                   int64_t w_kv, int64_t w_q, int64_t r) {
  const Shape& s = t.shape;
  ATTNTUNE_CHECK(s.Lq == s.Lk && s.causal && w_kv >= 1 && w_q >= 0 && r >= 0);
  ATTNTUNE_CHECK(static_cast<int64_t>(scores.size()) == s.B * s.Hkv * s.Lk);
  ATTNTUNE_CHECK(s.B * s.Hq * s.Lk < INT32_MAX);
  DecodeSelection sel;
  sel.evict.assign(static_cast<size_t>(s.B * s.Hkv * s.Lk), 0);
  std::vector<std::vector<int32_t>> chosen(static_cast<size_t>(s.B * s.Hq * s.Lk));
  Kokkos::parallel_for(
      "attntune::select::decode",
      Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, s.B * s.Hkv), [&](int64_t h) {
        const int64_t b = h / s.Hkv;
        DecodeHead(t, scores.data() + h * s.Lk, nullptr, b, h % s.Hkv, w_kv, w_q, r)
            .RunSelect(sel.evict.data() + h * s.Lk,
                       [&](int64_t step, int64_t hq, const int64_t* first, const int64_t* last) {
                         chosen[(b * s.Hq + hq) * s.Lk + step].assign(first, last);
                       });
      });
  Kokkos::fence();
  sel.offsets.push_back(0);
  for (const std::vector<int32_t>& row : chosen) {
    sel.chosen.insert(sel.chosen.end(), row.begin(), row.end());
    ATTNTUNE_CHECK(sel.chosen.size() < static_cast<size_t>(INT32_MAX));
    sel.offsets.push_back(static_cast<int32_t>(sel.chosen.size()));
  }
  return sel;
}

void RunDecodeKokkos(const Tensors& t, const std::vector<double>& scores, int64_t w_kv,
                     int64_t w_q, int64_t r, bool bias, float* out,
                     std::vector<float>* step_ns) {
  const Shape& s = t.shape;
  ATTNTUNE_CHECK(s.Lq == s.Lk && s.causal && w_kv >= 1 && w_q >= 0 && r >= 0);
  ATTNTUNE_CHECK(static_cast<int64_t>(scores.size()) == s.B * s.Hkv * s.Lk);
  const std::vector<float> fbias =
      bias ? std::vector<float>(scores.begin(), scores.end()) : std::vector<float>();
  if (step_ns != nullptr) step_ns->assign(static_cast<size_t>(s.B * s.Hkv * s.Lk), 0.0f);
  Kokkos::parallel_for(
      "attntune::attend::decode",
      Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, s.B * s.Hkv), [&](int64_t h) {
        DecodeHead(t, scores.data() + h * s.Lk, bias ? fbias.data() + h * s.Lk : nullptr,
                   h / s.Hkv, h % s.Hkv, w_kv, w_q, r)
            .Run(out, step_ns != nullptr ? step_ns->data() + h * s.Lk : nullptr);
      });
  Kokkos::fence();
}

}  // namespace attntune
