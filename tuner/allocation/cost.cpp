#include "tuner/allocation/cost.h"

#include <algorithm>
#include <stdexcept>

#include "core/check.h"
#include "kernels/variant.h"

namespace attntune {

namespace {

// The variant table's pair count of one query head, `rows` causal query rows over `keys`
// keys: the swa row's (window 0: the dense row's).
int64_t HeadPairs(int64_t rows, int64_t keys, int64_t window, int64_t sink) {
  Shape one;  // B = Hq = Hkv = 1
  one.Lq = rows;
  one.Lk = keys;
  if (window <= 0) return FindVariant("dense", "internal").pairs(one, {});
  return FindVariant("swa", "internal")
      .pairs(one, {{"w", std::to_string(window)}, {"sink", std::to_string(sink)}});
}

}  // namespace

int64_t HeadPrefillPairs(int64_t length, int64_t window, int64_t sink) {
  return HeadPairs(length, length, window, sink);
}

int64_t HeadDecodePairs(int64_t context, int64_t window, int64_t sink) {
  return HeadPairs(1, context, window, sink);
}

int64_t KvCacheBytes(const ModelGeometry& m, const Allocation& a, const CostOptions& o) {
  const int64_t per_token = 2 * m.head_dim * o.kv_elem_bytes;  // K and V
  const int64_t swa_tokens = std::min(o.context, o.window + o.sink);
  int64_t bytes = 0;
  for (int64_t l = 0; l < a.layers; ++l)
    for (int64_t h = 0; h < a.kv_heads; ++h)
      bytes += per_token * (a.Swa(l, h) ? swa_tokens : o.context);
  return bytes;
}

CostMeter::CostMeter(const ModelGeometry& model, const CostOptions& options, MeasureRun* run)
    : model_(model), options_(options), run_(run) {
  if (!options_.measure) return;
  ATTNTUNE_CHECK(run_ != nullptr);
  const Shape prefill{
      1, model.q_heads, model.kv_heads, options.context, options.context, model.head_dim, true};
  Shape decode = prefill;
  decode.Lq = 1;
  // Inputs and references are made on first use: a re-run answered by stored trials
  // makes none. Seeds 11 and 12: the prefill's and the decode step's own inputs.
  // fp32: the allocation's problems are stored as fp32 (MeasureProblem).
  prefill_ = std::make_unique<ProblemContext>(prefill, 11, Dtype::kF32);
  decode_ = std::make_unique<ProblemContext>(decode, 12, Dtype::kF32);
}

Variant CostMeter::Pinned(int64_t swa_heads, const Params& more) const {
  Params fixed = {{"w", std::to_string(options_.window)},
                  {"full", std::to_string(model_.kv_heads - swa_heads)},
                  {"sink", std::to_string(options_.sink)}};
  fixed.insert(more.begin(), more.end());
  return PinParams(FindVariant("hybrid", "allocation cost"), fixed);
}

ProblemMeasurement CostMeter::Search(ProblemContext& problem, Phase phase, const Variant& pinned,
                                     const ProblemSearch& search) {
  const Implementation* tiled = pinned.FindImplementation("tiled");
  ATTNTUNE_CHECK(tiled != nullptr);
  ProblemMeasurement m = MeasureProblem(*run_, problem, phase, pinned, {tiled}, search);
  counts_.evaluations += m.evaluations;
  counts_.measured += m.measured;
  counts_.reused += m.reused;
  counts_.failed += m.failed;
  return m;
}

std::pair<double, double> CostMeter::LayerMs(int64_t swa_heads) {
  auto it = memo_.find(swa_heads);
  if (it != memo_.end()) return it->second;
  // Every parameter and tile pinned: a space of one point.
  const Variant pinned = Pinned(
      swa_heads, {{"Br", std::to_string(options_.br)}, {"Bc", std::to_string(options_.bc)}});
  const ProblemSearch one{"exhaustive", 1, 1};
  double ms[2] = {0, 0};
  ProblemContext* problems[2] = {prefill_.get(), decode_.get()};
  const Phase phases[2] = {Phase::kPrefill, Phase::kDecode};
  for (int i = 0; i < 2; ++i) {
    const ProblemMeasurement m = Search(*problems[i], phases[i], pinned, one);
    if (!m.found) {  // the kernel failed its check: no time to build a cost from
      throw std::runtime_error("allocation cost: hybrid tiled with " +
                               std::to_string(swa_heads) + " SWA KV heads on " +
                               problems[i]->GetShape().ToString() + " (" + ToString(phases[i]) +
                               ") has no ok trial; see the database for its status");
    }
    ms[i] = m.result.median_ms;
  }
  return memo_[swa_heads] = {ms[0], ms[1]};
}

TunedTiles CostMeter::TuneTiles(const Allocation& a, int64_t budget, uint64_t seed,
                                const std::string& strategy) {
  ATTNTUNE_CHECK(a.layers == model_.layers && a.kv_heads == model_.kv_heads);
  TunedTiles tuned;
  tuned.window = options_.window;
  if (budget <= 0 || !options_.measure) return tuned;
  // The layer pattern most layers share (ties: fewer SWA heads).
  std::map<int64_t, int64_t> layers_with;
  for (int64_t l = 0; l < a.layers; ++l) ++layers_with[a.SwaHeadsInLayer(l)];
  int64_t n_swa = 0, most = -1;
  for (const auto& [count, layers] : layers_with)
    if (layers > most) n_swa = count, most = layers;
  tuned.layer_swa_heads = n_swa;

  tuned.br = options_.br;
  tuned.bc = options_.bc;
  tuned.default_prefill_ms = LayerMs(n_swa).first;
  tuned.prefill_ms = tuned.default_prefill_ms;
  const ProblemMeasurement m =
      Search(*prefill_, Phase::kPrefill, Pinned(n_swa, {}), {strategy, budget, seed});
  if (m.found && m.result.median_ms < tuned.prefill_ms) {
    tuned.br = std::stoll(m.params.at("Br"));
    tuned.bc = std::stoll(m.params.at("Bc"));
    tuned.prefill_ms = m.result.median_ms;
  }
  tuned.evaluations = m.evaluations;
  tuned.tuned = true;
  return tuned;
}

AllocationCost CostMeter::Cost(const Allocation& a) {
  ATTNTUNE_CHECK(a.layers == model_.layers && a.kv_heads == model_.kv_heads);
  AllocationCost c;
  c.kv_bytes = KvCacheBytes(model_, a, options_);
  const int64_t g = model_.q_heads / model_.kv_heads;
  const int64_t w = options_.window, s = options_.sink, L = options_.context;
  const int64_t full_pairs = HeadPrefillPairs(L, 0, 0), swa_pairs = HeadPrefillPairs(L, w, s);
  for (int64_t l = 0; l < a.layers; ++l) {
    const int64_t n_swa = a.SwaHeadsInLayer(l), n_full = a.kv_heads - n_swa;
    c.prefill_pairs += g * (n_full * full_pairs + n_swa * swa_pairs);
    c.decode_pairs += g * (n_full * HeadDecodePairs(L, 0, 0) + n_swa * HeadDecodePairs(L, w, s));
    if (!options_.measure) continue;
    const auto ms = LayerMs(n_swa);
    c.prefill_ms += ms.first;
    c.decode_ms += ms.second;
  }
  return c;
}

}  // namespace attntune
