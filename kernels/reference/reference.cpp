#include "kernels/reference/reference.h"

#include <algorithm>
#include <cmath>
#include <atomic>
#include <functional>
#include <limits>
#include <thread>

#include "core/check.h"

namespace attntune {

namespace {

// Scaled logits q_i . k_j / sqrt(d) (plus bias if `sets` is given) for `keys`.
void Logits(const Tensors& t, int64_t b, int64_t hq, const std::vector<double>& q,
            const std::vector<int64_t>& keys, const KeySets* sets, std::vector<double>* logits) {
  const Shape& s = t.shape;
  const int64_t hkv = hq / s.Group();
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.d));
  logits->resize(keys.size());
  for (size_t n = 0; n < keys.size(); ++n) {
    const float* k = t.K(b, hkv, keys[n]);
    const double* qd = q.data();
    double dot = 0.0;
    // In fp64 with lane-wise partial sums (another order of the same exact products than
    // a serial loop: a difference near 1e-16 relative, far below any tolerance it checks).
#pragma omp simd reduction(+ : dot)
    for (int64_t c = 0; c < s.d; ++c) dot += qd[c] * static_cast<double>(k[c]);
    (*logits)[n] = dot * scale + (sets != nullptr ? sets->Bias(b, hkv, keys[n]) : 0.0);
  }
}

// In place: logits -> softmax probabilities (max subtracted first).
void Softmax(std::vector<double>* x) {
  if (x->empty()) return;
  const double m = *std::max_element(x->begin(), x->end());
  double sum = 0.0;
  for (double& e : *x) {
    e = std::exp(e - m);
    sum += e;
  }
  for (double& e : *x) e /= sum;
}

void QueryRow(const Tensors& t, int64_t b, int64_t hq, int64_t i, std::vector<double>* q) {
  const float* src = t.Q(b, hq, i);
  q->assign(src, src + t.shape.d);
}

// log(sum_n exp(x_n)) of logits, max subtracted first; -inf for none.
double LogSumExp(const std::vector<double>& x) {
  if (x.empty()) return -std::numeric_limits<double>::infinity();
  const double m = *std::max_element(x.begin(), x.end());
  double sum = 0.0;
  for (double e : x) sum += std::exp(e - m);
  return m + std::log(sum);
}

// fn(b, hq) for every (batch, query head), on up to hardware_concurrency threads when
// `parallel` (every row of one head on one thread, in order). The reference's rows are
// independent and each writes its own slice, so the result does not depend on the split.
void ForEachHead(const Shape& s, bool parallel, const std::function<void(int64_t, int64_t)>& fn) {
  const int64_t heads = s.B * s.Hq;
  const int64_t threads =
      parallel ? std::min<int64_t>(heads, std::max(1u, std::thread::hardware_concurrency())) : 1;
  std::atomic<int64_t> next{0};
  auto worker = [&] {
    for (int64_t h = next++; h < heads; h = next++) fn(h / s.Hq, h % s.Hq);
  };
  std::vector<std::thread> pool;
  for (int64_t n = 1; n < threads; ++n) pool.emplace_back(worker);
  worker();
  for (std::thread& t : pool) t.join();
}

}  // namespace

std::vector<double> ReferenceAttention(const Tensors& t, const KeySets& sets,
                                       std::vector<double>* row_lse) {
  const Shape& s = t.shape;
  std::vector<double> out(static_cast<size_t>(s.QElems()), 0.0);
  if (row_lse != nullptr) {
    row_lse->assign(static_cast<size_t>(s.B * s.Hq * s.Lq),
                    -std::numeric_limits<double>::infinity());
  }
  ForEachHead(s, sets.ThreadSafe(), [&](int64_t b, int64_t hq) {
    std::vector<int64_t> keys;
    std::vector<double> q, p;
    const int64_t hkv = hq / s.Group();
    for (int64_t i = 0; i < s.Lq; ++i) {
      sets.Row(b, hq, i, &keys);
      if (keys.empty()) continue;  // empty S(i): the row stays zero
      QueryRow(t, b, hq, i, &q);
      Logits(t, b, hq, q, keys, &sets, &p);
      if (row_lse != nullptr) (*row_lse)[static_cast<size_t>((b * s.Hq + hq) * s.Lq + i)] = LogSumExp(p);
      Softmax(&p);
      double* o = out.data() + OutIndex(s, b, hq, i, 0);
      for (size_t n = 0; n < keys.size(); ++n) {
        const float* v = t.V(b, hkv, keys[n]);
        for (int64_t c = 0; c < s.d; ++c) o[c] += p[n] * static_cast<double>(v[c]);
      }
    }
  });
  return out;
}

std::vector<double> ReferenceOutput(const Variant& variant, const Tensors& tensors,
                                    const Params& params) {
  return ReferenceAttention(tensors, *variant.key_sets(tensors, params));
}

namespace {

template <typename T>
double RelErrImpl(const T* out, const std::vector<double>& ref) {
  double diff = 0.0, norm = 0.0;
  for (size_t n = 0; n < ref.size(); ++n) {
    const double o = static_cast<double>(out[n]);
    if (!std::isfinite(o)) return std::numeric_limits<double>::infinity();
    diff += (o - ref[n]) * (o - ref[n]);
    norm += ref[n] * ref[n];
  }
  if (norm == 0.0) return diff == 0.0 ? 0.0 : std::numeric_limits<double>::infinity();
  return std::sqrt(diff / norm);
}

}  // namespace

double RelErr(const float* out, const std::vector<double>& ref) { return RelErrImpl(out, ref); }

double RelErr(const std::vector<double>& out, const std::vector<double>& ref) {
  ATTNTUNE_CHECK(out.size() == ref.size());
  return RelErrImpl(out.data(), ref);
}

namespace {

// Per row (b, hq, i): the dense attention probability S(i) keeps, from the dense rows'
// log-sum-exp.
std::vector<double> KeptPerRow(const Tensors& t, const KeySets& sets,
                               const std::vector<double>& dense_lse) {
  const Shape& s = t.shape;
  ATTNTUNE_CHECK(dense_lse.size() == static_cast<size_t>(s.B * s.Hq * s.Lq));
  std::vector<double> kept(dense_lse.size(), 1.0);  // a row without dense keys loses nothing
  ForEachHead(s, sets.ThreadSafe(), [&](int64_t b, int64_t hq) {
    std::vector<int64_t> keys, inside;
    std::vector<double> q, logits;
    for (int64_t i = 0; i < s.Lq; ++i) {
      const int64_t last = s.causal ? s.QueryPos(i) : s.Lk - 1;
      if (last < 0) continue;
      sets.Row(b, hq, i, &keys);
      inside.clear();
      for (int64_t j : keys) {
        if (j >= 0 && j <= last) inside.push_back(j);
      }
      QueryRow(t, b, hq, i, &q);
      Logits(t, b, hq, q, inside, nullptr, &logits);  // dense's logits: no bias
      const size_t row = static_cast<size_t>((b * s.Hq + hq) * s.Lq + i);
      double sum = 0.0;
      for (double x : logits) sum += std::exp(x - dense_lse[row]);
      kept[row] = sum;
    }
  });
  return kept;
}

}  // namespace

double MassRecall(const Tensors& t, const KeySets& sets, const std::vector<double>& dense_lse) {
  const Shape& s = t.shape;
  const std::vector<double> kept = KeptPerRow(t, sets, dense_lse);
  double total = 0.0;
  for (double k : kept) total += k;  // in row order: the same sum whatever the threads
  const double rows = static_cast<double>(s.B * s.Hq * s.Lq);
  return rows > 0 ? total / rows : 1.0;
}

std::vector<double> MassRecallByHead(const Tensors& t, const KeySets& sets,
                                     const std::vector<double>& dense_lse) {
  const Shape& s = t.shape;
  const std::vector<double> kept = KeptPerRow(t, sets, dense_lse);
  std::vector<double> heads(static_cast<size_t>(s.Hq), 1.0);
  if (s.B * s.Lq == 0) return heads;
  for (int64_t hq = 0; hq < s.Hq; ++hq) {
    double total = 0.0;
    for (int64_t b = 0; b < s.B; ++b)
      for (int64_t i = 0; i < s.Lq; ++i) total += kept[static_cast<size_t>((b * s.Hq + hq) * s.Lq + i)];
    heads[static_cast<size_t>(hq)] = total / static_cast<double>(s.B * s.Lq);
  }
  return heads;
}

namespace {

// Per query head: RelErrImpl over the head's slices of every batch, as one vector.
template <typename T>
std::vector<double> RelErrByHeadImpl(const Shape& s, const T* out, const std::vector<double>& ref) {
  ATTNTUNE_CHECK(ref.size() == static_cast<size_t>(s.QElems()));
  std::vector<double> heads(static_cast<size_t>(s.Hq));
  const size_t slice = static_cast<size_t>(s.Lq * s.d);
  std::vector<T> o;
  std::vector<double> r;
  for (int64_t hq = 0; hq < s.Hq; ++hq) {
    o.clear();
    r.clear();
    for (int64_t b = 0; b < s.B; ++b) {
      const size_t at = static_cast<size_t>(OutIndex(s, b, hq, 0, 0));
      o.insert(o.end(), out + at, out + at + slice);
      r.insert(r.end(), ref.data() + at, ref.data() + at + slice);
    }
    heads[static_cast<size_t>(hq)] = RelErrImpl(o.data(), r);
  }
  return heads;
}

}  // namespace

std::vector<double> RelErrByHead(const Shape& s, const float* out, const std::vector<double>& ref) {
  return RelErrByHeadImpl(s, out, ref);
}

std::vector<double> RelErrByHead(const Shape& s, const std::vector<double>& out,
                                 const std::vector<double>& ref) {
  ATTNTUNE_CHECK(out.size() == ref.size());
  return RelErrByHeadImpl(s, out.data(), ref);
}

double MassRecallFromDenseRows(const Tensors& t, const KeySets& sets) {
  const Shape& s = t.shape;
  std::vector<int64_t> keys, dense;
  std::vector<double> q, p;
  double total = 0.0;
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t hq = 0; hq < s.Hq; ++hq) {
      for (int64_t i = 0; i < s.Lq; ++i) {
        const int64_t last = s.causal ? s.QueryPos(i) : s.Lk - 1;
        if (last < 0) {
          total += 1.0;  // no dense key: nothing to lose
          continue;
        }
        dense.resize(static_cast<size_t>(last + 1));
        for (int64_t j = 0; j <= last; ++j) dense[j] = j;
        QueryRow(t, b, hq, i, &q);
        Logits(t, b, hq, q, dense, nullptr, &p);
        Softmax(&p);
        sets.Row(b, hq, i, &keys);
        double kept = 0.0;
        for (int64_t j : keys) {
          if (j >= 0 && j <= last) kept += p[j];
        }
        total += kept;
      }
    }
  }
  const double rows = static_cast<double>(s.B * s.Hq * s.Lq);
  return rows > 0 ? total / rows : 1.0;
}

Quality QualityAgainstDense(const Variant& variant, const Tensors& tensors, const Params& params,
                            const std::vector<double>& dense_ref) {
  const std::unique_ptr<KeySets> sets = variant.key_sets(tensors, params);
  Quality quality;
  quality.rel_err = RelErr(ReferenceAttention(tensors, *sets), dense_ref);
  quality.mass_recall = MassRecallFromDenseRows(tensors, *sets);
  return quality;
}

}  // namespace attntune
