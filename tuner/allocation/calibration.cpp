#include "tuner/allocation/calibration.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <utility>

#include "core/check.h"
#include "core/error.h"
#include "core/safetensors.h"
#include "core/shape.h"
#include "tuner/calibration_set.h"

namespace attntune {

namespace {

// Thresholds of ClassifyRange (docs/allocation.md explains them).
constexpr double kUniformEntropy = 0.9;
constexpr double kStronglyLocalMass = 0.95;
constexpr double kWeaklyLocalMass = 0.7;
constexpr double kSparseTop8 = 0.5;

uint64_t Mix(uint64_t a, uint64_t b) {  // splitmix64 of a combined key
  uint64_t z = a * 0x9E3779B97F4A7C15ULL + b + 0x632BE59BD9B4E019ULL;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// An AR(1) sequence of d-dim vectors with unit variance per element:
// r_t = rho r_{t-1} + sqrt(1 - rho^2) e_t, so E[r_i . r_j] = d rho^|i-j|.
std::vector<double> ArSequence(int64_t length, int64_t d, double rho, std::mt19937_64& rng) {
  std::normal_distribution<double> n01(0.0, 1.0);
  std::vector<double> r(static_cast<size_t>(length * d));
  const double c = std::sqrt(1.0 - rho * rho);
  for (int64_t c0 = 0; c0 < d; ++c0) r[static_cast<size_t>(c0)] = n01(rng);
  for (int64_t t = 1; t < length; ++t)
    for (int64_t c0 = 0; c0 < d; ++c0)
      r[static_cast<size_t>(t * d + c0)] =
          rho * r[static_cast<size_t>((t - 1) * d + c0)] + c * n01(rng);
  return r;
}

}  // namespace

std::string HeadKindName(HeadKind k) {
  switch (k) {
    case HeadKind::kLocal:
      return "local";
    case HeadKind::kRetrieval:
      return "retrieval";
    case HeadKind::kBroad:
      return "broad";
    case HeadKind::kUniform:
      return "uniform";
  }
  return "?";
}

std::string RangeClassName(RangeClass c) {
  switch (c) {
    case RangeClass::kUniform:
      return "uniform";
    case RangeClass::kWeaklyLocal:
      return "weakly_local";
    case RangeClass::kStronglyLocal:
      return "strongly_local";
    case RangeClass::kSparseBroad:
      return "sparse_broad";
    case RangeClass::kDenseBroad:
      return "dense_broad";
  }
  return "?";
}

std::vector<int64_t> RangeBucketEdges(int64_t length) {
  std::vector<int64_t> edges = {0};
  for (int64_t e = 1; e < length; e *= 4) edges.push_back(e);
  return edges;
}

RangeClass ClassifyRange(const HeadStats& s) {
  if (s.row_entropy >= kUniformEntropy) return RangeClass::kUniform;
  if (s.mass_kept >= kStronglyLocalMass) return RangeClass::kStronglyLocal;
  if (s.mass_kept >= kWeaklyLocalMass) return RangeClass::kWeaklyLocal;
  if (s.far_top8 >= kSparseTop8) return RangeClass::kSparseBroad;
  return RangeClass::kDenseBroad;
}

namespace {

// Sums over the query rows of one head (ComputeHeadStats).
struct HeadSums {
  std::vector<double> range_share;
  double mass = 0, err2 = 0, ref2 = 0, entropy = 0, top8 = 0;
  int64_t rows = 0, entropy_rows = 0, far_rows = 0;
};

// One row's buffers: softmax weights over the keys, the full and the windowed outputs,
// the probabilities of the keys outside the window.
struct RowScratch {
  std::vector<double> p, o, os, far;
};

// p[j] = exp(logit_j - max logit) for the keys j <= pos of query row (hq, i) of KV head 0;
// returns their sum.
double RowWeights(const Tensors& t, int64_t hq, int64_t i, int64_t pos, double scale,
                  std::vector<double>* p) {
  const Shape& s = t.shape;
  const float* q = t.Q(0, hq, i);
  double mx = -1e300;
  for (int64_t j = 0; j <= pos; ++j) {
    const float* k = t.K(0, 0, j);
    double dot = 0;
    for (int64_t c = 0; c < s.d; ++c) dot += static_cast<double>(q[c]) * k[c];
    (*p)[static_cast<size_t>(j)] = dot * scale;
    mx = std::max(mx, dot * scale);
  }
  double z = 0;
  for (int64_t j = 0; j <= pos; ++j)
    z += ((*p)[static_cast<size_t>(j)] = std::exp((*p)[static_cast<size_t>(j)] - mx));
  return z;
}

// From the newest key back: each key's probability into the range buckets and the row's
// entropy `*h`, into the full output o and (within the window or a sink) the windowed
// output os and the kept mass `*kept`; the others' probabilities into far.
void RowOutputs(const Tensors& t, int64_t pos, double z, int64_t window, int64_t sink,
                const std::vector<int64_t>& edges, RowScratch* r, HeadSums* sums, double* kept,
                double* h) {
  const int64_t d = t.shape.d;
  std::fill(r->o.begin(), r->o.end(), 0.0);
  std::fill(r->os.begin(), r->os.end(), 0.0);
  r->far.clear();
  size_t bucket = edges.size() - 1;
  for (int64_t j = pos; j >= 0; --j) {
    const double pj = r->p[static_cast<size_t>(j)] / z;
    const int64_t dist = pos - j;
    while (bucket > 0 && dist < edges[bucket]) --bucket;
    while (bucket + 1 < edges.size() && dist >= edges[bucket + 1]) ++bucket;
    sums->range_share[bucket] += pj;
    if (pj > 0) *h -= pj * std::log(pj);
    const bool in = dist < window || j < sink;
    const float* v = t.V(0, 0, j);
    for (int64_t c = 0; c < d; ++c) {
      r->o[static_cast<size_t>(c)] += pj * v[c];
      if (in) r->os[static_cast<size_t>(c)] += pj * v[c];
    }
    if (in)
      *kept += pj;
    else
      r->far.push_back(pj);
  }
}

// Adds one row to the sums: the windowed output's error against the full one (renormalised
// by the kept mass), the kept mass, the entropy normalised by log(pos + 1), and the share
// of the far mass its 8 largest keys hold.
void AddRow(int64_t d, int64_t pos, double kept, double h, RowScratch* r, HeadSums* sums) {
  const std::vector<double>& o = r->o;
  for (int64_t c = 0; c < d; ++c) {
    const double sw = kept > 0 ? r->os[static_cast<size_t>(c)] / kept : 0.0;
    sums->err2 += (sw - o[static_cast<size_t>(c)]) * (sw - o[static_cast<size_t>(c)]);
    sums->ref2 += o[static_cast<size_t>(c)] * o[static_cast<size_t>(c)];
  }
  sums->mass += kept;
  ++sums->rows;
  if (pos >= 1) {
    sums->entropy += h / std::log(static_cast<double>(pos + 1));
    ++sums->entropy_rows;
  }
  std::vector<double>& far = r->far;
  double far_sum = 0;
  for (double f : far) far_sum += f;
  if (far_sum > 1e-12) {
    const size_t k = std::min<size_t>(8, far.size());
    std::partial_sort(far.begin(), far.begin() + static_cast<long>(k), far.end(),
                      std::greater<double>());
    double top = 0;
    for (size_t a = 0; a < k; ++a) top += far[a];
    sums->top8 += top / far_sum;
    ++sums->far_rows;
  }
}

}  // namespace

HeadStats ComputeHeadStats(const Tensors& t, int64_t window, int64_t sink) {
  const Shape& s = t.shape;
  ATTNTUNE_CHECK(s.Hkv == 1 && s.B == 1 && window >= 1);
  const std::vector<int64_t> edges = RangeBucketEdges(s.Lk);
  HeadSums sums;
  sums.range_share.assign(edges.size(), 0.0);
  const double scale = 1.0 / std::sqrt(static_cast<double>(s.d));
  RowScratch r;
  r.p.resize(static_cast<size_t>(s.Lk));
  r.o.resize(static_cast<size_t>(s.d));
  r.os.resize(static_cast<size_t>(s.d));
  for (int64_t hq = 0; hq < s.Hq; ++hq) {
    for (int64_t i = 0; i < s.Lq; ++i) {
      const int64_t pos = s.QueryPos(i);
      const double z = RowWeights(t, hq, i, pos, scale, &r.p);
      double kept = 0, h = 0;
      RowOutputs(t, pos, z, window, sink, edges, &r, &sums, &kept, &h);
      AddRow(s.d, pos, kept, h, &r, &sums);
    }
  }
  HeadStats out;
  const double rows = static_cast<double>(sums.rows);
  out.mass_kept = sums.mass / rows;
  out.swa_rel_err = sums.ref2 > 0 ? std::sqrt(sums.err2 / sums.ref2) : 0.0;
  out.range_share = sums.range_share;
  for (double& b : out.range_share) b /= rows;
  out.row_entropy =
      sums.entropy_rows > 0 ? sums.entropy / static_cast<double>(sums.entropy_rows) : 0.0;
  out.far_top8 = sums.far_rows > 0 ? sums.top8 / static_cast<double>(sums.far_rows) : 1.0;
  out.range_class = ClassifyRange(out);
  return out;
}

HeadLoss CalibStats::Loss() const {
  HeadLoss loss;
  for (const auto& h : heads) loss.push_back(h.swa_rel_err * h.swa_rel_err);
  return loss;
}

std::vector<HeadKind> DrawHeadKinds(int64_t layers, int64_t kv_heads, uint64_t seed) {
  std::mt19937_64 rng(Mix(seed, 0x6b696e6473ULL));
  std::uniform_real_distribution<double> u(0.0, 1.0);
  std::vector<HeadKind> kinds;
  for (int64_t l = 0; l < layers; ++l) {
    const double depth =
        layers > 1 ? static_cast<double>(l) / static_cast<double>(layers - 1) : 0.0;
    const double p_retrieval = 0.1 + 0.3 * depth;  // 10% in the first layer, 40% in the last
    for (int64_t h = 0; h < kv_heads; ++h) {
      const double x = u(rng);
      kinds.push_back(x < p_retrieval          ? HeadKind::kRetrieval
                      : x < p_retrieval + 0.45 ? HeadKind::kLocal
                      : x < p_retrieval + 0.75 ? HeadKind::kBroad
                                               : HeadKind::kUniform);
    }
  }
  return kinds;
}

Tensors GenerateHead(const GeneratorSpec& spec, HeadKind kind, int64_t layer, int64_t head) {
  Tensors t;
  t.shape = Shape{1, spec.group, 1, spec.length, spec.length, spec.head_dim, true};
  const int64_t d = spec.head_dim, L = spec.length;
  std::mt19937_64 rng(
      Mix(Mix(spec.seed, static_cast<uint64_t>(layer)), static_cast<uint64_t>(head)));
  std::normal_distribution<double> n01(0.0, 1.0);
  const double sd = std::sqrt(static_cast<double>(d));
  // Logit of a key at distance 0 is amp^2 * d / sqrt(d) = peak; AR decay sets the range.
  double peak = 10.0, rho = 0.8, noise = 0.3;
  if (kind == HeadKind::kBroad) peak = 3.0, rho = 0.995;
  if (kind == HeadKind::kUniform) peak = 0.05, rho = 0.0;
  if (kind == HeadKind::kRetrieval) peak = 4.0;
  const double amp = std::sqrt(peak / sd);
  const std::vector<double> r = ArSequence(L, d, rho, rng);
  t.k.resize(static_cast<size_t>(L * d));
  t.v.resize(static_cast<size_t>(L * d));
  t.q.resize(static_cast<size_t>(spec.group * L * d));
  for (int64_t j = 0; j < L * d; ++j) {
    t.k[static_cast<size_t>(j)] = static_cast<float>(amp * r[static_cast<size_t>(j)]);
    t.v[static_cast<size_t>(j)] = static_cast<float>(n01(rng));
  }
  for (int64_t g = 0; g < spec.group; ++g)
    for (int64_t j = 0; j < L * d; ++j)
      t.q[static_cast<size_t>(g * L * d + j)] =
          static_cast<float>(amp * (r[static_cast<size_t>(j)] + noise * n01(rng)));
  if (kind == HeadKind::kRetrieval) {
    // Three needles in the first quarter; every query aligns with their direction u,
    // so a needle's logit is ~12 above the rest (b^2 / sqrt(d) = 12).
    std::vector<double> u(static_cast<size_t>(d));
    double norm = 0;
    for (double& x : u) {
      x = n01(rng);
      norm += x * x;
    }
    for (double& x : u) x /= std::sqrt(norm);
    const double b = std::sqrt(12.0 * sd);
    std::uniform_int_distribution<int64_t> pick(0, std::max<int64_t>(0, L / 4 - 1));
    for (int n = 0; n < 3; ++n) {
      const int64_t j = pick(rng);
      for (int64_t c = 0; c < d; ++c)
        t.k[static_cast<size_t>(j * d + c)] += static_cast<float>(b * u[static_cast<size_t>(c)]);
    }
    for (int64_t g = 0; g < spec.group; ++g)
      for (int64_t i = 0; i < L; ++i)
        for (int64_t c = 0; c < d; ++c)
          t.q[static_cast<size_t>((g * L + i) * d + c)] +=
              static_cast<float>(b * u[static_cast<size_t>(c)]);
  }
  return t;
}

CalibStats GeneratorStats(const GeneratorSpec& spec, int64_t window, int64_t sink) {
  CalibStats st;
  st.layers = spec.layers;
  st.kv_heads = spec.kv_heads;
  st.length = spec.length;
  st.window = window;
  st.sink = sink;
  st.source = "generator seed=" + std::to_string(spec.seed);
  st.kinds = spec.kinds.empty() ? DrawHeadKinds(spec.layers, spec.kv_heads, spec.seed) : spec.kinds;
  ATTNTUNE_CHECK(static_cast<int64_t>(st.kinds.size()) == spec.layers * spec.kv_heads);
  for (int64_t l = 0; l < spec.layers; ++l)
    for (int64_t h = 0; h < spec.kv_heads; ++h)
      st.heads.push_back(ComputeHeadStats(
          GenerateHead(spec, st.kinds[static_cast<size_t>(l * spec.kv_heads + h)], l, h), window,
          sink));
  return st;
}

int64_t CalibWindow(int64_t window, int64_t context, int64_t length) {
  return std::max<int64_t>(1, (window * length + context / 2) / context);
}

void CheckCalibCoverage(int64_t calib_window, int64_t sink, int64_t length,
                        const std::string& what) {
  // The window is scaled to the calibration length, the sink (the same first tokens at
  // any length) is not: with both covering every key the statistics saw no loss at all
  // (qwen3-1.7b, --window 512 --sink 256 at 4096 tokens: a loss of 1e-31 for rho 1).
  if (calib_window + sink < length) return;
  throw UserError(what + ": the SWA set (the window's " + std::to_string(calib_window) +
                  " tokens at this length plus --sink " + std::to_string(sink) +
                  ") covers all " + std::to_string(length) +
                  " calibration tokens, so no head would lose anything; calibrate on more "
                  "than " + std::to_string(calib_window + sink) + " tokens or give a smaller --sink");
}

CalibStats SafetensorsStats(const std::string& path, const ModelGeometry& model,
                            int64_t context_window, int64_t context, int64_t sink,
                            const std::string& what) {
  // The capture read as tune's --calib reads it (tuner/calibration_set.h): another
  // model's (model_type, depth), another head dim, layers of other lengths or a value that
  // is not finite refused in one line.
  const CalibrationSet set = ReadCalibrationSet({path}, model, what);
  const CalibrationSample& sample = set.samples.front();
  for (int64_t l = 0; l < model.layers; ++l) {
    if (l >= static_cast<int64_t>(set.layers.size()) || set.layers[static_cast<size_t>(l)] != l)
      throw UserError(what + ": " + path + ": missing tensor 'q." + std::to_string(l) +
                      "' (expected q.<l>, k.<l>, v.<l> for layers 0.." +
                      std::to_string(model.layers - 1) + ")");
  }
  CalibStats st;
  st.layers = model.layers;
  st.kv_heads = model.kv_heads;
  st.sink = sink;
  st.source = path;
  const int64_t g = model.q_heads / model.kv_heads;
  for (int64_t l = 0; l < model.layers; ++l) {
    const Tensors& layer = sample.layers[static_cast<size_t>(l)];
    const int64_t L = layer.shape.Lk, d = layer.shape.d;
    st.length = L;
    st.window = CalibWindow(context_window, context, L);
    CheckCalibCoverage(st.window, sink, L, what + ": " + path);
    // The first sequence of the batch: its heads lead each tensor.
    for (int64_t h = 0; h < model.kv_heads; ++h) {
      Tensors t;
      t.shape = Shape{1, g, 1, L, L, d, true};
      t.q.assign(layer.q.begin() + h * g * L * d, layer.q.begin() + (h + 1) * g * L * d);
      t.k.assign(layer.k.begin() + h * L * d, layer.k.begin() + (h + 1) * L * d);
      t.v.assign(layer.v.begin() + h * L * d, layer.v.begin() + (h + 1) * L * d);
      st.heads.push_back(ComputeHeadStats(t, st.window, sink));
    }
  }
  return st;
}

}  // namespace attntune
