#include "kernels/reference/key_sets.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "core/check.h"
#include "kernels/selection/selection.h"

namespace attntune {

namespace {

class WindowKeySets : public KeySets {
 public:
  WindowKeySets(const Shape& shape, std::vector<int64_t> windows, int64_t sink)
      : shape_(shape), windows_(std::move(windows)), sink_(sink) {}
  void Row(int64_t, int64_t hq, int64_t i, std::vector<int64_t>* keys) const override {
    keys->clear();
    const int64_t window = windows_[hq / shape_.Group()];
    const int64_t last = LastKey(shape_, i);
    const int64_t lo = window > 0 ? std::max<int64_t>(0, last - window + 1) : 0;
    for (int64_t j = 0; j < std::min(sink_, lo); ++j) keys->push_back(j);
    for (int64_t j = lo; j <= last; ++j) keys->push_back(j);
  }

 private:
  Shape shape_;
  std::vector<int64_t> windows_;
  int64_t sink_;
};

class LshKeySets : public KeySets {
 public:
  LshKeySets(const Tensors& t, int64_t bits, bool argmax_rule, int64_t k, uint64_t seed)
      : shape_(t.shape), k_(k), bins_(ComputeLshBins(t, bits, argmax_rule, seed)) {}
  void Row(int64_t b, int64_t hq, int64_t i, std::vector<int64_t>* keys) const override {
    const Shape& s = shape_;
    keys->clear();
    const int32_t bin = bins_.query_bin[(b * s.Hq + hq) * s.Lq + i];
    const int32_t* key_bin = bins_.key_bin.data() + (b * s.Hkv + hq / s.Group()) * s.Lk;
    for (int64_t j = LastKey(s, i); j >= 0 && static_cast<int64_t>(keys->size()) < k_; --j) {
      if (key_bin[j] == bin) keys->push_back(j);
    }
    std::reverse(keys->begin(), keys->end());
  }

 private:
  Shape shape_;
  int64_t k_;
  LshBins bins_;
};

class TopKKeySets : public KeySets {
 public:
  TopKKeySets(const Shape& shape, std::vector<double> scores, int64_t k, bool bias)
      : shape_(shape), x_(std::move(scores)), k_(k), bias_(bias) {}
  void Row(int64_t b, int64_t hq, int64_t i, std::vector<int64_t>* keys) const override {
    const double* x = x_.data() + (b * shape_.Hkv + hq / shape_.Group()) * shape_.Lk;
    keys->clear();
    for (int64_t j = 0; j <= LastKey(shape_, i); ++j) keys->push_back(j);
    if (static_cast<int64_t>(keys->size()) > k_) {
      std::nth_element(keys->begin(), keys->begin() + k_, keys->end(),
                       [x](int64_t a, int64_t c) { return RanksBefore(x, a, c); });
      keys->resize(static_cast<size_t>(k_));
    }
    std::sort(keys->begin(), keys->end());
  }
  double Bias(int64_t b, int64_t hkv, int64_t j) const override {
    return bias_ ? x_[(b * shape_.Hkv + hkv) * shape_.Lk + j] : 0.0;
  }

 private:
  Shape shape_;
  std::vector<double> x_;
  int64_t k_;
  bool bias_;
};

class UnionKeySets : public KeySets {
 public:
  UnionKeySets(std::unique_ptr<KeySets> a, std::unique_ptr<KeySets> b)
      : a_(std::move(a)), b_(std::move(b)) {}
  void Row(int64_t b, int64_t hq, int64_t i, std::vector<int64_t>* keys) const override {
    std::vector<int64_t> ka, kb;
    a_->Row(b, hq, i, &ka);
    b_->Row(b, hq, i, &kb);
    keys->clear();
    std::set_union(ka.begin(), ka.end(), kb.begin(), kb.end(), std::back_inserter(*keys));
  }
  double Bias(int64_t b, int64_t hkv, int64_t j) const override { return a_->Bias(b, hkv, j); }
  bool ThreadSafe() const override { return a_->ThreadSafe() && b_->ThreadSafe(); }

 private:
  std::unique_ptr<KeySets> a_, b_;
};

// The decode cache of one (batch, KV head) after step `step`, advanced one step at a
// time exactly as DESIGN.md s1 words it.
struct DecodeState {
  int64_t step = -1;
  std::set<std::pair<double, int64_t>> resident;        // (b_j, j): begin() is evicted first
  std::vector<std::pair<int64_t, int64_t>> evictions;  // (step, key)
};

class DecodeKeySets : public KeySets {
 public:
  DecodeKeySets(const Tensors& t, std::vector<double> scores, int64_t w_kv, int64_t w_q,
                int64_t r, bool bias)
      : t_(t), x_(std::move(scores)), w_kv_(w_kv), w_q_(w_q), r_(r), bias_(bias) {
    ATTNTUNE_CHECK(t.shape.Lq == t.shape.Lk && t.shape.causal && w_kv >= 1);
  }
  void Row(int64_t b, int64_t hq, int64_t i, std::vector<int64_t>* keys) const override {
    const Shape& s = t_.shape;
    const int64_t hkv = hq / s.Group();
    DecodeState& st = states_[{b, hkv}];
    if (st.step > i) st = DecodeState();
    const double* x = x_.data() + (b * s.Hkv + hkv) * s.Lk;
    while (st.step < i) {
      const int64_t j = ++st.step;  // step j appends key j
      if (static_cast<int64_t>(st.resident.size()) < w_kv_) {
        st.resident.insert({x[j], j});
      } else if (x[j] > st.resident.begin()->first) {
        st.evictions.push_back({j, st.resident.begin()->second});
        st.resident.erase(st.resident.begin());
        st.resident.insert({x[j], j});
      }
    }
    std::set<int64_t> in_cache;
    for (const auto& e : st.resident) in_cache.insert(e.second);
    std::set<int64_t> candidates;
    for (int64_t j = std::max<int64_t>(0, i - r_ + 1); j <= i; ++j) candidates.insert(j);
    for (const auto& [step, key] : st.evictions) {
      if (step > i - r_ && step <= i) candidates.insert(key);
    }
    // (NaN, -q·k, j): ascending = best first; a NaN q·k (from a non-finite input) after
    // every number, so that the order stays total.
    std::vector<std::tuple<bool, double, int64_t>> scored;
    for (int64_t j : candidates) {
      if (in_cache.count(j) != 0) continue;
      const float* q = t_.Q(b, hq, i);
      const float* k = t_.K(b, hkv, j);
      double dot = 0.0;
      for (int64_t c = 0; c < s.d; ++c) dot += static_cast<double>(q[c]) * k[c];
      const bool nan = std::isnan(dot);
      scored.push_back({nan, nan ? 0.0 : -dot, j});
    }
    std::sort(scored.begin(), scored.end());
    if (static_cast<int64_t>(scored.size()) > w_q_) scored.resize(static_cast<size_t>(w_q_));
    for (const auto& e : scored) in_cache.insert(std::get<2>(e));
    keys->assign(in_cache.begin(), in_cache.end());
  }
  double Bias(int64_t b, int64_t hkv, int64_t j) const override {
    return bias_ ? x_[(b * t_.shape.Hkv + hkv) * t_.shape.Lk + j] : 0.0;
  }
  bool ThreadSafe() const override { return false; }  // states_ grows row by row

 private:
  const Tensors& t_;
  std::vector<double> x_;
  int64_t w_kv_, w_q_, r_;
  bool bias_;
  mutable std::map<std::pair<int64_t, int64_t>, DecodeState> states_;
};

}  // namespace

std::unique_ptr<KeySets> MakeWindowKeySets(const Shape& shape, std::vector<int64_t> windows,
                                           int64_t sink) {
  return std::make_unique<WindowKeySets>(shape, std::move(windows), sink);
}

std::unique_ptr<KeySets> MakeLshKeySets(const Tensors& t, int64_t bits, bool argmax_rule,
                                        int64_t k, uint64_t seed) {
  return std::make_unique<LshKeySets>(t, bits, argmax_rule, k, seed);
}

std::unique_ptr<KeySets> MakeTopKKeySets(const Shape& shape, std::vector<double> scores,
                                         int64_t k, bool bias) {
  return std::make_unique<TopKKeySets>(shape, std::move(scores), k, bias);
}

std::unique_ptr<KeySets> MakeUnionKeySets(std::unique_ptr<KeySets> a,
                                          std::unique_ptr<KeySets> b) {
  return std::make_unique<UnionKeySets>(std::move(a), std::move(b));
}

std::unique_ptr<KeySets> MakeDecodeKeySets(const Tensors& t, std::vector<double> scores,
                                           int64_t w_kv, int64_t w_q, int64_t r, bool bias) {
  return std::make_unique<DecodeKeySets>(t, std::move(scores), w_kv, w_q, r, bias);
}

}  // namespace attntune
