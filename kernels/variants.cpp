// The variant table (STYLE.md "one table of variants"): DESIGN.md s1's definitions,
// their parameters and constraints, and the implementations that run them.
#include <algorithm>

#include "kernels/kokkos/windowed.h"
#include "kernels/spec/variant.h"

namespace attntune {

namespace {

// Last key row i may see: p(i) when causal, else every key.
int64_t LastKey(const Shape& s, int64_t i) { return s.causal ? s.QueryPos(i) : s.Lk - 1; }

// S(i) = [0, min(sink, lo)) ∪ [lo, p(i)] with lo = max(0, p(i) - w + 1), or [0, p(i)]
// when window == 0 (dense). The two pieces overlap when sink >= lo; their union is
// then [0, p(i)].
class WindowKeySets : public KeySets {
 public:
  WindowKeySets(const Shape& shape, int64_t window, int64_t sink)
      : shape_(shape), window_(window), sink_(sink) {}
  void Row(int64_t, int64_t, int64_t i, std::vector<int64_t>* keys) const override {
    keys->clear();
    const int64_t last = LastKey(shape_, i);
    const int64_t lo = window_ > 0 ? std::max<int64_t>(0, last - window_ + 1) : 0;
    for (int64_t j = 0; j < std::min(sink_, lo); ++j) keys->push_back(j);
    for (int64_t j = lo; j <= last; ++j) keys->push_back(j);
  }

 private:
  Shape shape_;
  int64_t window_, sink_;
};

// |S(i)| summed over rows (O(Lq)), times B * Hq.
int64_t WindowPairs(const Shape& s, int64_t window, int64_t sink) {
  int64_t per_head = 0;
  for (int64_t i = 0; i < s.Lq; ++i) {
    const int64_t last = LastKey(s, i);
    const int64_t lo = window > 0 ? std::max<int64_t>(0, last - window + 1) : 0;
    per_head += (last - lo + 1) + std::min(sink, lo);
  }
  return per_head * s.B * s.Hq;
}

// The Kokkos tiled online-softmax kernel; `window` and `sink` come from the variant.
Implementation Tiled(int64_t (*window)(const Params&), int64_t (*sink)(const Params&)) {
  Implementation impl;
  impl.id = "tiled";
  impl.summary = "Kokkos tiled online softmax over Br x Bc tiles; skips out-of-window tiles";
  // Bounds keep the per-team scratch (Br x Bc scores, Br x d accumulators) in a few MiB.
  impl.tunables = {
      {"Br", ParamKind::kInt, 1, 256, {}, "32", {"16", "32", "64", "128"}, "query rows per tile"},
      {"Bc", ParamKind::kInt, 1, 512, {}, "64", {"32", "64", "128", "256"}, "keys per tile"},
  };
  impl.run = [window, sink](const Tensors& t, const Params& p, float* out) {
    WindowedArgs args;
    args.window = window(p);
    args.sink = sink(p);
    args.br = ParamInt(p, "Br");
    args.bc = ParamInt(p, "Bc");
    RunWindowedKokkos(t, args, out);
  };
  return impl;
}

int64_t NoWindow(const Params&) { return 0; }
int64_t SwaWindow(const Params& p) { return ParamInt(p, "w"); }
int64_t SwaSink(const Params& p) { return ParamInt(p, "sink"); }

Variant Dense() {
  Variant v;
  v.id = "dense";
  v.summary = "full causal attention: S(i) = all j <= p(i)";
  v.key_sets = [](const Tensors& t, const Params&) -> std::unique_ptr<KeySets> {
    return std::make_unique<WindowKeySets>(t.shape, 0, 0);
  };
  v.pairs = [](const Shape& s, const Params&) { return WindowPairs(s, 0, 0); };
  v.implementations = {Tiled(NoWindow, NoWindow)};
  return v;
}

Variant Swa() {
  Variant v;
  v.id = "swa";
  v.summary = "sliding window with attention sinks: p(i)-w < j <= p(i), plus j < sink";
  v.params = {
      {"w", ParamKind::kInt, 1, INT64_MAX, {}, "", {"128", "256", "512", "1024"},
       "window: the w most recent keys"},
      {"sink", ParamKind::kInt, 0, INT64_MAX, {}, "0", {"0", "4"},
       "the first sink keys are always attended"},
  };
  v.key_sets = [](const Tensors& t, const Params& p) -> std::unique_ptr<KeySets> {
    return std::make_unique<WindowKeySets>(t.shape, ParamInt(p, "w"), ParamInt(p, "sink"));
  };
  v.pairs = [](const Shape& s, const Params& p) {
    return WindowPairs(s, ParamInt(p, "w"), ParamInt(p, "sink"));
  };
  v.implementations = {Tiled(SwaWindow, SwaSink)};
  return v;
}

}  // namespace

const std::vector<Variant>& Variants() {
  static const std::vector<Variant> kVariants = {Dense(), Swa()};
  return kVariants;
}

}  // namespace attntune
