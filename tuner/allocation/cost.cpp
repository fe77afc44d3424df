#include "tuner/allocation/cost.h"

#include <algorithm>
#include <vector>

#include "kernels/kokkos/windowed.h"
#include "core/check.h"
#include "kernels/variant.h"
#include "search/space.h"
#include "search/strategy.h"

namespace attntune {

namespace {

const Variant* FindHybrid() {
  for (const Variant& v : Variants())
    if (v.id == "hybrid") return &v;
  return nullptr;
}

// Q, K, V of the KV heads [first, first + count) of `t`, as a problem of their own.
Tensors SliceHeads(const Tensors& t, int64_t first, int64_t count) {
  Tensors s;
  s.shape = t.shape;
  s.shape.Hkv = count;
  s.shape.Hq = count * t.shape.Group();
  const int64_t qh = t.shape.Lq * t.shape.d, kh = t.shape.Lk * t.shape.d, g = t.shape.Group();
  s.q.assign(t.q.begin() + first * g * qh, t.q.begin() + (first + count) * g * qh);
  s.k.assign(t.k.begin() + first * kh, t.k.begin() + (first + count) * kh);
  s.v.assign(t.v.begin() + first * kh, t.v.begin() + (first + count) * kh);
  return s;
}

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

CostMeter::CostMeter(const ModelGeometry& model, const CostOptions& options, Timer& timer)
    : model_(model), options_(options), timer_(timer) {
  method_ = FindHybrid() != nullptr ? "hybrid" : "windowed-per-group";
  if (!options_.measure) return;
  const Shape prefill{
      1, model.q_heads, model.kv_heads, options.context, options.context, model.head_dim, true};
  Shape decode = prefill;
  decode.Lq = 1;
  prefill_ = GaussianTensors(prefill, 11);
  decode_ = GaussianTensors(decode, 12);
}

double CostMeter::Time(const Tensors& t, int64_t swa_heads) {
  return Time(t, swa_heads, options_.br, options_.bc);
}

double CostMeter::Time(const Tensors& t, int64_t swa_heads, int64_t br, int64_t bc) {
  const int64_t full = t.shape.Hkv - swa_heads;
  std::vector<float> out(static_cast<size_t>(t.shape.QElems()));
  if (const Variant* hybrid = FindHybrid()) {
    const Implementation* impl = hybrid->FindImplementation("tiled");
    ATTNTUNE_CHECK(impl != nullptr);
    const Params given = {{"w", std::to_string(options_.window)},
                          {"full", std::to_string(full)},
                          {"sink", std::to_string(options_.sink)},
                          {"Br", std::to_string(br)},
                          {"Bc", std::to_string(bc)}};
    const Params p = ResolveParams(*hybrid, impl, t.shape, given, "allocation cost");
    return Measure(
               timer_, [&] { impl->run(t, p, out.data()); }, options_.policy)
        .median_ms;
  }
  const Tensors full_t = SliceHeads(t, 0, full), swa_t = SliceHeads(t, full, swa_heads);
  WindowedArgs fa;
  fa.window = 0;
  fa.sink = 0;
  fa.br = br;
  fa.bc = bc;
  WindowedArgs sa = fa;
  sa.window = options_.window;
  sa.sink = options_.sink;
  return Measure(
             timer_,
             [&] {
               if (full > 0) RunWindowedKokkos(full_t, fa, out.data());
               if (swa_heads > 0) RunWindowedKokkos(swa_t, sa, out.data());
             },
             options_.policy)
      .median_ms;
}

std::pair<double, double> CostMeter::LayerMs(int64_t swa_heads) {
  auto it = memo_.find(swa_heads);
  if (it != memo_.end()) return it->second;
  const std::pair<double, double> ms = {Time(prefill_, swa_heads), Time(decode_, swa_heads)};
  memo_[swa_heads] = ms;
  return ms;
}

TunedTiles CostMeter::TuneTiles(const Allocation& a, int64_t budget, uint64_t seed) {
  ATTNTUNE_CHECK(a.layers == model_.layers && a.kv_heads == model_.kv_heads);
  TunedTiles tuned;
  tuned.window = options_.window;
  const Variant* hybrid = FindHybrid();
  if (budget <= 0 || !options_.measure || hybrid == nullptr) return tuned;
  const Implementation* impl = hybrid->FindImplementation("tiled");
  ATTNTUNE_CHECK(impl != nullptr);
  // The layer pattern most layers share (ties: fewer SWA heads).
  std::map<int64_t, int64_t> layers_with;
  for (int64_t l = 0; l < a.layers; ++l) ++layers_with[a.SwaHeadsInLayer(l)];
  int64_t n_swa = 0, most = -1;
  for (const auto& [count, layers] : layers_with)
    if (layers > most) n_swa = count, most = layers;
  tuned.layer_swa_heads = n_swa;

  Space space;
  for (const char* name : {"Br", "Bc"})
    for (const ParamDecl& d : impl->tunables)
      if (d.name == name) space.AddDimension(d.name, d.grid);
  ATTNTUNE_CHECK(space.Dimensions().size() == 2);
  const Shape shape = prefill_.shape;
  const Params fixed = {{"w", std::to_string(options_.window)},
                        {"full", std::to_string(model_.kv_heads - n_swa)},
                        {"sink", std::to_string(options_.sink)}};
  space.AddConstraint([&](const std::map<std::string, std::string>& values) {
    Params p = fixed;
    for (const auto& [k, v] : values) p[k] = v;
    return CheckParams(*hybrid, *impl, shape, p);
  });

  tuned.br = options_.br;
  tuned.bc = options_.bc;
  tuned.default_prefill_ms = LayerMs(n_swa).first;
  tuned.prefill_ms = tuned.default_prefill_ms;
  auto strategy = MakeStrategy("random", space, seed, "tile search");
  const std::vector<Evaluation> evals = RunSearch(*strategy, budget, [&](const Point& point) {
    const auto values = space.Values(point);
    Evaluation e;
    e.point = point;
    e.objective = Time(prefill_, n_swa, std::stoll(values.at("Br")), std::stoll(values.at("Bc")));
    e.ok = true;
    return e;
  });
  for (const Evaluation& e : evals) {
    if (!e.ok || e.objective >= tuned.prefill_ms) continue;
    const auto values = space.Values(e.point);
    tuned.br = std::stoll(values.at("Br"));
    tuned.bc = std::stoll(values.at("Bc"));
    tuned.prefill_ms = e.objective;
  }
  tuned.evaluations = static_cast<int64_t>(evals.size());
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
