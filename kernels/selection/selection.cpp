#include "kernels/selection/selection.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <utility>

#include "core/check.h"
#include "core/error.h"
#include "core/prefetch.h"
#include "core/random.h"
#include "core/tensor_file.h"

namespace attntune {

namespace {

// Distinct streams per default tensor, so that dma's Delta is not LSH's R.
constexpr uint64_t kProjStream = 0x9e3779b97f4a7c15ULL;
constexpr uint64_t kDmaStream = 0xd1b54a32d192ed03ULL;

// Floats and doubles per native vector (AVX-512: 16 and 8; otherwise 8 and 4, AVX2's
// width): wider GCC/Clang vectors than the machine's were lowered through general
// registers and the stack on AVX2. The sums below are written over 16 fp32 lanes and 8
// fp64 lanes whatever the width, so that every ISA adds the same numbers in the same
// order (kParts native vectors to a logical vector).
#if defined(__AVX512F__)
constexpr int kFloats = 16;
#else
constexpr int kFloats = 8;
#endif
constexpr int kDoubles = kFloats / 2;
constexpr int kParts16 = 16 / kFloats;  // native float vectors in 16 lanes
constexpr int kParts8 = 8 / kDoubles;   // native double vectors in 8 lanes
typedef float VecF __attribute__((vector_size(kFloats * sizeof(float)), aligned(4)));
typedef double VecD __attribute__((vector_size(kDoubles * sizeof(double)), aligned(8)));
typedef float Floats4 __attribute__((vector_size(4 * sizeof(float)), aligned(4)));
typedef double Doubles4 __attribute__((vector_size(4 * sizeof(double)), aligned(8)));
typedef int64_t Longs8 __attribute__((vector_size(8 * sizeof(int64_t))));

// Eight fp64 lanes t (in kParts8 native vectors) summed as a tree: ((t0 + t4) + (t2 +
// t6)) + ((t1 + t5) + (t3 + t7)), not a chain of seven dependent additions.
inline double SumLanes8(const VecD* v) {
  double t[8];
  std::memcpy(t, v, sizeof(t));
  const double u0 = t[0] + t[4], u1 = t[1] + t[5], u2 = t[2] + t[6], u3 = t[3] + t[7];
  return (u0 + u2) + (u1 + u3);
}

// Sixteen fp32 lanes (in kParts16 native vectors) reduced in fp64: lanes k and k + 8
// converted exactly and added (k < 8), then those eight as SumLanes8 does. Written on
// four-lane quarters: q0 + q2 are lanes 0-3 of the pairs, q1 + q3 lanes 4-7.
inline double SumLanes16(const VecF* v) {
  float lanes[16];
  std::memcpy(lanes, v, sizeof(lanes));
  Doubles4 q[4];
  for (int k = 0; k < 4; ++k) {
    q[k] = __builtin_convertvector(*reinterpret_cast<const Floats4*>(lanes + 4 * k), Doubles4);
  }
  const Doubles4 u = (q[0] + q[2]) + (q[1] + q[3]);  // u[k] = t[k] + t[k + 4]
  return (u[0] + u[2]) + (u[1] + u[3]);
}

// N <= 8 projections of u onto rt's rows (kFloats lanes of part `part` of the 16 lanes):
// acc[c] += u[e] * rt[c][e] for e = 16 x + part * kFloats + lane. One part at a time
// keeps N accumulators and the loads in the registers (16 with AVX2).
template <int N>
inline void ProjectPart(const float* u, const float* rt, int64_t d, int part, VecF* acc) {
  VecF a[N];
  for (int c = 0; c < N; ++c) a[c] = VecF{};
  const int64_t d16 = d / 16 * 16;
  for (int64_t e = part * kFloats; e < d16; e += 16) {
    const VecF ue = *reinterpret_cast<const VecF*>(u + e);
    for (int c = 0; c < N; ++c) a[c] += ue * *reinterpret_cast<const VecF*>(rt + c * d + e);
  }
  for (int c = 0; c < N; ++c) acc[c * kParts16 + part] = a[c];
}

#if defined(__AVX512F__)
typedef double Doubles8 __attribute__((vector_size(8 * sizeof(double))));
typedef float Floats8 __attribute__((vector_size(8 * sizeof(float))));

// Lanes l and l + 8 of a 16-lane sum, converted exactly and added: t[l], l < 8.
inline Doubles8 PairLanes(VecF v) {
  const Floats8 lo = __builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7);
  const Floats8 hi = __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15);
  return __builtin_convertvector(lo, Doubles8) + __builtin_convertvector(hi, Doubles8);
}

// SumLanes16 of up to 8 sums at once (acc[0, n), the others taken as 0), into out[0, n):
// the same additions as SumLanes16 makes of each, ((t0+t4)+(t2+t6)) + ((t1+t5)+(t3+t7)),
// with the sums side by side in the lanes of a vector instead of one by one. The lanes are
// taken as vector values: copied out through memory (as SumLanes16 does), GCC kept the
// 8 accumulators of ProjectPart's loop in memory, a store and a load per step.
inline void SumLanes16x8(const VecF* acc, int n, double* out) {
  // Lanes m0 of (x, y) plus lanes m1 of (x, y), lane by lane.
  auto add = [](Doubles8 x, Doubles8 y, Longs8 m0, Longs8 m1) {
    return __builtin_shuffle(x, y, m0) + __builtin_shuffle(x, y, m1);
  };
  Doubles8 t[8];
  for (int c = 0; c < 8; ++c) t[c] = c < n ? PairLanes(acc[c]) : Doubles8{};
  // a_l = t_l + t_(l+4), l < 4: sums c and c + 1 side by side, [a(c) | a(c+1)]
  Doubles8 a[4];
  for (int c = 0; c < 4; ++c) {
    a[c] = add(t[2 * c], t[2 * c + 1], Longs8{0, 1, 2, 3, 8, 9, 10, 11},
               Longs8{4, 5, 6, 7, 12, 13, 14, 15});
  }
  // b_0 = a_0 + a_2 and b_1 = a_1 + a_3: four sums side by side, [b0 b1] each
  Doubles8 b[2];
  for (int c = 0; c < 2; ++c) {
    b[c] = add(a[2 * c], a[2 * c + 1], Longs8{0, 1, 4, 5, 8, 9, 12, 13},
               Longs8{2, 3, 6, 7, 10, 11, 14, 15});
  }
  // b_0 + b_1 of the eight sums, in order
  const Doubles8 sum = add(b[0], b[1], Longs8{0, 2, 4, 6, 8, 10, 12, 14},
                           Longs8{1, 3, 5, 7, 9, 11, 13, 15});
  for (int c = 0; c < n; ++c) out[c] = sum[c];
}
#endif

// rt: R of one head transposed to [h][d] (fp32); u: x - mu, d floats. P_c = u·R_c in
// fp32 with 16 partial sums (lane k holds the terms e = k mod 16, ascending), then in fp64
// the lanes k and k + 8 added, those eight summed as a tree, and the tail; the bins only
// need P's signs and argmax, and every caller (kernels and reference) bins through this
// one function. Up to 8 projections advance together in registers (independent FMA
// chains); H is a template argument so that the accumulators are not kept in memory
// (with a runtime h the compiler interchanged the loops and stored every accumulator on
// every step). With AVX-512 the lanes of 8 projections are reduced side by side
// (SumLanes16x8), otherwise each alone (SumLanes16): the same additions either way.
template <int H>
void Project(const float* u, const float* rt, int64_t d, double* proj) {
  VecF acc[H * kParts16];
  constexpr int kFirst = H < 8 ? H : 8;
  for (int part = 0; part < kParts16; ++part) {
    ProjectPart<kFirst>(u, rt, d, part, acc);
    if constexpr (H > 8) ProjectPart<H - 8>(u, rt + 8 * d, d, part, acc + 8 * kParts16);
  }
#if defined(__AVX512F__)
  static_assert(kParts16 == 1, "one native vector holds the 16 lanes");
  SumLanes16x8(acc, kFirst, proj);
  if constexpr (H > 8) SumLanes16x8(acc + 8, H - 8, proj + 8);
#else
  for (int c = 0; c < H; ++c) proj[c] = SumLanes16(acc + c * kParts16);
#endif
  const int64_t d16 = d / 16 * 16;
  if (d16 < d) {
    for (int c = 0; c < H; ++c) {
      const float* r = rt + c * d;
      double sum = proj[c];
      for (int64_t e = d16; e < d; ++e) sum += static_cast<double>(u[e]) * r[e];
      proj[c] = sum;
    }
  }
}

// Rows are read once, in order, and each is a few hundred bytes of arithmetic: without
// asking for the rows kRowsAhead ahead, the bins waited on memory (35 ms of L=16384's
// 201 MB of Q and K at 4 bits, 21 ms with it).
constexpr int64_t kRowsAhead = 12;
inline void PrefetchRow(const float* row, int64_t d) {
  PrefetchReadBytes(row, d * static_cast<int64_t>(sizeof(float)));
}

template <int... Hs>
void ProjectAny(int64_t h, const float* u, const float* rt, int64_t d, double* proj,
                std::integer_sequence<int, Hs...>) {
  using Fn = void (*)(const float*, const float*, int64_t, double*);
  static constexpr Fn kFns[] = {&Project<Hs + 1>...};  // h = 1 .. 16
  kFns[h - 1](u, rt, d, proj);
}

int32_t Bin(const float* x, const float* mu, const float* rt, int64_t d, int64_t h,
            bool argmax_rule, float* u) {
  if (mu != nullptr) {
    for (int64_t e = 0; e < d; ++e) u[e] = x[e] - mu[e];
  }
  double proj[16];
  LshProjections(mu != nullptr ? u : x, rt, d, h, proj);
  int32_t bin = 0;
  if (argmax_rule) {
    for (int64_t c = 1; c < h; ++c) {
      if (proj[c] > proj[bin]) bin = static_cast<int32_t>(c);
    }
  } else {
    for (int64_t c = 0; c < h; ++c) bin = bin * 2 + (proj[c] > 0.0 ? 1 : 0);
  }
  return bin;
}

}  // namespace

void LshProjections(const float* u, const float* rt, int64_t d, int64_t h, double* proj) {
  ATTNTUNE_CHECK(h >= 1 && h <= 16);
  ProjectAny(h, u, rt, d, proj, std::make_integer_sequence<int, 16>());
}

std::vector<double> LshProjection(const Tensors& t, int64_t bits, uint64_t seed) {
  const Shape& s = t.shape;
  const size_t n = static_cast<size_t>(s.Hkv * s.d * bits);
  if (!t.proj.empty()) {
    ATTNTUNE_CHECK_MSG(t.proj.size() == n, "proj must be [Hkv,d,bits]");
    return std::vector<double>(t.proj.begin(), t.proj.end());
  }
  std::vector<double> r(n);
  Normal normal(seed ^ kProjStream);
  for (double& e : r) e = normal.Next();
  return r;
}

namespace {

// What Bin needs for the heads of one problem: R per KV head as [h][d] in fp32.
struct BinRule {
  const Tensors* t;
  int64_t bits;
  bool argmax;
  std::vector<float> rt;

  BinRule(const Tensors& t_, int64_t bits_, bool argmax_, uint64_t seed)
      : t(&t_), bits(bits_), argmax(argmax_) {
    const Shape& s = t_.shape;
    ATTNTUNE_CHECK(bits >= 1 && bits <= 16);
    ATTNTUNE_CHECK(t_.mu.empty() || static_cast<int64_t>(t_.mu.size()) == s.Hkv * s.d);
    const std::vector<double> r = LshProjection(t_, bits, seed);
    rt.resize(r.size());
    for (int64_t h = 0; h < s.Hkv; ++h) {
      for (int64_t e = 0; e < s.d; ++e) {
        for (int64_t c = 0; c < bits; ++c) {
          rt[(h * bits + c) * s.d + e] = static_cast<float>(r[(h * s.d + e) * bits + c]);
        }
      }
    }
  }
  int32_t operator()(const float* x, int64_t hkv, float* u) const {
    const float* mu = t->mu.empty() ? nullptr : t->mu.data() + hkv * t->shape.d;
    return Bin(x, mu, rt.data() + hkv * t->shape.d * bits, t->shape.d, bits, argmax, u);
  }
  LshBins Empty() const {
    const Shape& s = t->shape;
    LshBins out;
    out.bins = argmax ? bits : (int64_t{1} << bits);
    out.key_bin.resize(static_cast<size_t>(s.B * s.Hkv * s.Lk));
    out.query_bin.resize(static_cast<size_t>(s.B * s.Hq * s.Lq));
    return out;
  }
};

// One pass over KV head (b, hkv) and its query heads in position order: ks's default
// scores x[0, Lk) of the head, and with `rule` the bins of its keys and query rows into
// `bins`. Per key j, the group's query heads add their terms to x[j] in ascending order,
// as a pass per query head would (bit-identical). Reading each row once is what makes
// hax's fused selection cheaper than bins and scores apart.
void GroupPass(const Tensors& t, int64_t b, int64_t hkv, double* x, const BinRule* rule,
               LshBins* bins) {
  const Shape& s = t.shape;
  const int64_t group = s.Group();
  std::vector<double> sums(static_cast<size_t>(group * s.d), 0.0);
  std::vector<float> u(static_cast<size_t>(s.d));
  auto widen = [](const float* p) {  // kDoubles floats, converted exactly
    VecD v;
    for (int e = 0; e < kDoubles; ++e) v[e] = static_cast<double>(p[e]);
    return v;
  };
  auto at = [](double* p) -> VecD& { return *reinterpret_cast<VecD*>(p); };
  for (int64_t j = 0; j < s.Lk; ++j) {
    const float* k = t.K(b, hkv, j);
    if (rule != nullptr) bins->key_bin[(b * s.Hkv + hkv) * s.Lk + j] = (*rule)(k, hkv, u.data());
    const int64_t i = j - (s.Lk - s.Lq);  // the query row at position j, if any
    if (i < 0) continue;                  // no query precedes key j: x[j] stays 0
    for (int64_t g = 0; g < group; ++g) {
      const int64_t hq = hkv * group + g;
      const float* q = t.Q(b, hq, i);
      if (rule != nullptr) bins->query_bin[(b * s.Hq + hq) * s.Lq + i] = (*rule)(q, hkv, u.data());
      // sum += q_i, then |sum|^2 and k_j · sum in the same pass, in 8-lane partial sums
      // (lane k: the terms c = k mod 8) with two accumulators each (c mod 16 below or
      // above 8: two FMA chains of d/16 steps instead of one of d/8: one chain each took
      // ~50 ms at L = 16384, d = 128); 8 lanes are kParts8 native vectors.
      double* sum = sums.data() + g * s.d;
      VecD norm0[kParts8] = {}, norm1[kParts8] = {}, dot0[kParts8] = {}, dot1[kParts8] = {};
      int64_t c = 0;
      for (; c + 16 <= s.d; c += 16) {
        for (int p = 0; p < kParts8; ++p) {
          const int64_t c0 = c + p * kDoubles, c1 = c0 + 8;
          const VecD s0 = at(sum + c0) + widen(q + c0);
          const VecD s1 = at(sum + c1) + widen(q + c1);
          at(sum + c0) = s0;
          at(sum + c1) = s1;
          norm0[p] += s0 * s0;
          norm1[p] += s1 * s1;
          dot0[p] += widen(k + c0) * s0;
          dot1[p] += widen(k + c1) * s1;
        }
      }
      for (; c + 8 <= s.d; c += 8) {
        for (int p = 0; p < kParts8; ++p) {
          const int64_t c0 = c + p * kDoubles;
          const VecD s0 = at(sum + c0) + widen(q + c0);
          at(sum + c0) = s0;
          norm0[p] += s0 * s0;
          dot0[p] += widen(k + c0) * s0;
        }
      }
      VecD norms[kParts8], dots[kParts8];
      for (int p = 0; p < kParts8; ++p) {
        norms[p] = norm0[p] + norm1[p];
        dots[p] = dot0[p] + dot1[p];
      }
      double norm = SumLanes8(norms), dot = SumLanes8(dots);
      for (; c < s.d; ++c) {
        sum[c] += q[c];
        norm += sum[c] * sum[c];
        dot += static_cast<double>(k[c]) * sum[c];
      }
      if (norm > 0.0) x[j] += dot / std::sqrt(norm);
    }
  }
}

}  // namespace

LshBins ComputeLshBins(const Tensors& t, int64_t bits, bool argmax_rule, uint64_t seed) {
  const Shape& s = t.shape;
  const BinRule rule(t, bits, argmax_rule, seed);
  LshBins out = rule.Empty();
  std::vector<float> u(static_cast<size_t>(s.d));
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t h = 0; h < s.Hkv; ++h) {
      for (int64_t j = 0; j < s.Lk; ++j) {
        if (j + kRowsAhead < s.Lk) PrefetchRow(t.K(b, h, j + kRowsAhead), s.d);
        out.key_bin[(b * s.Hkv + h) * s.Lk + j] = rule(t.K(b, h, j), h, u.data());
      }
    }
    for (int64_t h = 0; h < s.Hq; ++h) {
      for (int64_t i = 0; i < s.Lq; ++i) {
        if (i + kRowsAhead < s.Lq) PrefetchRow(t.Q(b, h, i + kRowsAhead), s.d);
        out.query_bin[(b * s.Hq + h) * s.Lq + i] = rule(t.Q(b, h, i), h / s.Group(), u.data());
      }
    }
  }
  return out;
}

std::vector<double> KsScores(const Tensors& t) {
  const Shape& s = t.shape;
  const size_t n = static_cast<size_t>(s.B * s.Hkv * s.Lk);
  if (!t.scores.empty()) {
    ATTNTUNE_CHECK_MSG(t.scores.size() == n, "scores must be [B,Hkv,Lk]");
    return std::vector<double>(t.scores.begin(), t.scores.end());
  }
  std::vector<double> x(n, 0.0);
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t h = 0; h < s.Hkv; ++h) GroupPass(t, b, h, x.data() + (b * s.Hkv + h) * s.Lk, nullptr, nullptr);
  }
  return x;
}

HaxSelection ComputeHaxSelection(const Tensors& t, int64_t bits, bool argmax_rule,
                                 uint64_t seed) {
  const Shape& s = t.shape;
  HaxSelection out;
  if (!t.scores.empty()) {  // supplied scores: only the bins are left to compute
    out.bins = ComputeLshBins(t, bits, argmax_rule, seed);
    out.scores = KsScores(t);
    return out;
  }
  const BinRule rule(t, bits, argmax_rule, seed);
  out.bins = rule.Empty();
  out.scores.assign(static_cast<size_t>(s.B * s.Hkv * s.Lk), 0.0);
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t h = 0; h < s.Hkv; ++h) {
      GroupPass(t, b, h, out.scores.data() + (b * s.Hkv + h) * s.Lk, &rule, &out.bins);
    }
  }
  return out;
}

void DmaDeltaA(const Tensors& t, uint64_t seed, std::vector<double>* delta_out,
               std::vector<double>* a_out) {
  const Shape& s = t.shape;
  std::vector<double>& delta = *delta_out;
  std::vector<double>& a = *a_out;
  delta.assign(static_cast<size_t>(s.Hkv * s.d), 0.0);
  a.assign(static_cast<size_t>(s.Hkv), 0.0);
  Normal normal(seed ^ kDmaStream);
  const double inv_sqrt_d = 1.0 / std::sqrt(static_cast<double>(s.d));
  for (double& e : delta) e = normal.Next() * inv_sqrt_d;
  for (double& e : a) e = 0.5 + 0.5 * std::fabs(normal.Next());
  if (!t.delta.empty()) {
    ATTNTUNE_CHECK_MSG(t.delta.size() == delta.size(), "delta must be [Hkv,d]");
    delta.assign(t.delta.begin(), t.delta.end());
  }
  if (!t.a.empty()) {
    ATTNTUNE_CHECK_MSG(t.a.size() == a.size(), "a must be [Hkv]");
    a.assign(t.a.begin(), t.a.end());
  }
}

std::vector<double> DmaScores(const Tensors& t, uint64_t seed) {
  const Shape& s = t.shape;
  std::vector<double> delta, a;
  DmaDeltaA(t, seed, &delta, &a);
  std::vector<double> out(static_cast<size_t>(s.B * s.Hkv * s.Lk));
  // z_j = v_j · Delta_h, each a sum in ascending c (the device repeats it, fused as the host
  // is: HostFusesDmaProducts). kKeys keys advance side by side, and the next kKeys rows
  // are fetched meanwhile: one key at a time, its sum was a chain of d dependent
  // multiply-adds (L = 16384, d = 128: 26.9 ms, 13.5 ms side by side).
  constexpr int64_t kKeys = 8;
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t h = 0; h < s.Hkv; ++h) {
      const double* dh = delta.data() + h * s.d;
      for (int64_t j0 = 0; j0 < s.Lk; j0 += kKeys) {
        const int64_t nk = std::min(kKeys, s.Lk - j0);
        const float* v[kKeys];
        double z[kKeys] = {};
        for (int64_t n = 0; n < kKeys; ++n) v[n] = t.V(b, h, j0 + std::min(n, nk - 1));
        for (int64_t n = j0 + kKeys; n < std::min(j0 + 2 * kKeys, s.Lk); ++n) {
          PrefetchRow(t.V(b, h, n), s.d);
        }
        for (int64_t c = 0; c < s.d; ++c) {
          for (int64_t n = 0; n < kKeys; ++n) z[n] += static_cast<double>(v[n][c]) * dh[c];
        }
        for (int64_t n = 0; n < nk; ++n) {
          // softplus(z) = log(1 + e^z), written to stay finite for large |z|.
          const double softplus =
              z[n] > 0.0 ? z[n] + std::log1p(std::exp(-z[n])) : std::log1p(std::exp(z[n]));
          out[(b * s.Hkv + h) * s.Lk + j0 + n] = a[h] * softplus;
        }
      }
    }
  }
  return out;
}

void CheckDmaBias(const Tensors& t, const Params& params, const std::string& what) {
  const auto bias = params.find("bias");
  if (bias == params.end() || ParamInt(params, "bias") != 1) return;
  double largest = 0;
  const uint64_t seed =
      params.count("seed") ? static_cast<uint64_t>(ParamInt(params, "seed")) : 0;
  for (const double b : DmaScores(t, seed))
    largest = std::max(largest, std::fabs(b));
  if (largest > kMaxLogit) {
    char text[64];
    std::snprintf(text, sizeof text, "%.3g", largest);
    throw UserError(what + ": dma's bias A softplus(v . delta) reaches " + text +
                    ", too large for fp32 logits (at most 1e30; check the tensors 'a' and "
                    "'delta', or run with bias=0)");
  }
}

std::vector<int64_t> HybridWindows(const Tensors& t, const Params& params) {
  const Shape& s = t.shape;
  std::vector<int64_t> w(static_cast<size_t>(s.Hkv));
  if (!t.windows.empty()) {
    ATTNTUNE_CHECK_MSG(static_cast<int64_t>(t.windows.size()) == s.Hkv, "windows must be [Hkv]");
    for (int64_t h = 0; h < s.Hkv; ++h) w[h] = t.windows[h];
    return w;
  }
  const int64_t full = ParamInt(params, "full"), win = ParamInt(params, "w");
  for (int64_t h = 0; h < s.Hkv; ++h) w[h] = h < full ? 0 : win;
  return w;
}

std::vector<int32_t> PrefixTopKEvictions(const double* x, int64_t n, int64_t k) {
  std::vector<int32_t> evict(static_cast<size_t>(n), static_cast<int32_t>(n));
  // Heap ordered so that its front is the key that ranks last (evicted first).
  auto ranks_before = [x](int64_t a, int64_t b) { return RanksBefore(x, a, b); };
  std::vector<int64_t> heap;
  heap.reserve(static_cast<size_t>(std::min(n, k) + 1));
  for (int64_t j = 0; j < n; ++j) {
    heap.push_back(j);
    std::push_heap(heap.begin(), heap.end(), ranks_before);
    if (static_cast<int64_t>(heap.size()) > k) {
      std::pop_heap(heap.begin(), heap.end(), ranks_before);
      evict[static_cast<size_t>(heap.back())] = static_cast<int32_t>(j);
      heap.pop_back();
    }
  }
  return evict;
}

}  // namespace attntune
