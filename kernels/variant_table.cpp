// The variant table (STYLE.md "one table of variants"): DESIGN.md s1's definitions,
// their parameters and constraints, and the implementations that run them.
#include <algorithm>

#include "kernels/cuda/cuda_implementations.h"
#include "kernels/kokkos/sparse.h"
#include "kernels/kokkos/windowed.h"
#include "kernels/reference/key_sets.h"
#include "kernels/selection/lsh_layout.h"
#include "kernels/selection/selection.h"
#include "kernels/variant.h"

namespace attntune {

namespace {

// sum over x in [a, b] of min(max(x, lo), hi), lo <= hi (0 when a > b), in closed form.
int64_t SumClamped(int64_t a, int64_t b, int64_t lo, int64_t hi) {
  if (a > b) return 0;
  int64_t sum = 0;
  if (a < lo) sum += (std::min(b, lo - 1) - a + 1) * lo;  // below lo: lo each
  const int64_t m0 = std::max(a, lo), m1 = std::min(b, hi);
  if (m0 <= m1) {  // x itself; (m0 + m1)(m1 - m0 + 1) / 2 with the halving on the even factor
    const int64_t n = m1 - m0 + 1, ends = m0 + m1;
    sum += n % 2 == 0 ? (n / 2) * ends : n * (ends / 2);
  }
  if (b > hi) sum += (b - std::max(a - 1, hi)) * hi;  // above hi: hi each
  return sum;
}

// |S(i)| summed over rows in closed form, times B * Hq: row i attends the last
// min(p + 1, w) keys up to p = LastKey(i) (all p + 1 when w = 0) and the first
// min(sink, p - w + 1) keys before them.
int64_t WindowPairs(const Shape& s, int64_t window, int64_t sink) {
  const int64_t first = LastKey(s, 0), last = LastKey(s, s.Lq - 1);
  int64_t per_head = 0;
  if (!s.causal) {  // every row at p = Lk - 1
    const int64_t p = s.Lk - 1;
    per_head = s.Lq * (window > 0 ? std::min(p + 1, window) + std::min(sink, std::max<int64_t>(0, p - window + 1))
                                  : p + 1);
  } else if (window <= 0) {
    per_head = SumClamped(first + 1, last + 1, 0, last + 1);
  } else {
    per_head = SumClamped(first + 1, last + 1, 0, window) +
               SumClamped(first - window + 1, last - window + 1, 0, sink);
  }
  return per_head * s.B * s.Hq;
}

// sum_i min(k, p(i) + 1), times B * Hq: ks and dma attend k keys once k precede.
int64_t TopKPairs(const Shape& s, int64_t k) {
  const int64_t per_head = s.causal ? SumClamped(LastKey(s, 0) + 1, LastKey(s, s.Lq - 1) + 1, 0, k)
                                    : s.Lq * std::min(k, s.Lk);
  return per_head * s.B * s.Hq;
}

uint64_t Seed(const Params& p) { return static_cast<uint64_t>(ParamInt(p, "seed")); }
bool ArgmaxRule(const Params& p) { return p.at("rule") == "argmax"; }

// Query-block and key-tile sizes of the sparse implementations (GatherTile: Bc <= 512).
// bc_default: lsh's row groups take 128-column pieces by default (at L=16384, k=64 its
// per-pair time against dense's was lower with Bc=128 than with 64: docs/performance.md).
// br_default: hax's is 128 (see Hax), dma's 64 (see Dma). A default outside the grid joins it.
std::vector<ParamDecl> SparseTunables(const char* bc_default = "64",
                                      const char* br_default = "32") {
  std::vector<ParamDecl> tunables = {
      {"Br", ParamKind::kInt, 1, 256, {}, br_default, {"16", "32", "64"}, "query rows per block",
       ParamRole::kRowsPerBlock},
      {"Bc", ParamKind::kInt, 1, 512, {}, bc_default, {"32", "64", "128"}, "keys per tile"},
  };
  for (ParamDecl& d : tunables) {
    if (std::find(d.grid.begin(), d.grid.end(), d.default_value) == d.grid.end()) {
      d.grid.push_back(d.default_value);
    }
  }
  return tunables;
}

SparseTiles Tiles(const Params& p) { return {ParamInt(p, "Br"), ParamInt(p, "Bc")}; }

// The Kokkos tiled online-softmax kernel; the window per KV head comes from the variant.
Implementation Tiled(std::vector<int64_t> (*windows)(const Tensors&, const Params&),
                     int64_t (*sink)(const Params&)) {
  Implementation impl;
  impl.id = "tiled";
  impl.summary = "Kokkos tiled online softmax over Br x Bc tiles; skips out-of-window tiles";
  // Bounds keep the per-team scratch (Br x Bc scores, Br x d accumulators) in a few MiB.
  impl.tunables = {
      {"Br", ParamKind::kInt, 1, 256, {}, "32", {"16", "32", "64", "128"}, "query rows per tile",
       ParamRole::kRowsPerBlock},
      {"Bc", ParamKind::kInt, 1, 512, {}, "64", {"32", "64", "128", "256"}, "keys per tile"},
  };
  impl.run = [windows, sink](const Tensors& t, const Params& p, float* out) {
    const std::vector<int64_t> w = windows(t, p);
    WindowedArgs args;
    args.head_windows = w.data();
    args.sink = sink(p);
    args.br = ParamInt(p, "Br");
    args.bc = ParamInt(p, "Bc");
    RunWindowedKokkos(t, args, out);
  };
  return impl;
}

// The generic block-sparse executor on the variant's own key sets.
Implementation Generic(const std::string& variant_id) {
  Implementation impl;
  impl.id = kGenericImplementation;
  impl.summary =
      "generic block-sparse executor: key blocks holding a selected key, element predicate "
      "from the variant's key sets (the baseline of the specialised kernels)";
  impl.tunables = SparseTunables();
  impl.run = [variant_id](const Tensors& t, const Params& p, float* out) {
    RunGenericKokkos(t, FindVariant(variant_id, "internal"), p, Tiles(p), out);
  };
  return impl;
}

Implementation Sparse(const std::string& id, const std::string& summary,
                      std::function<void(const Tensors&, const Params&, float*)> run,
                      const char* bc_default = "64", const char* br_default = "32") {
  Implementation impl;
  impl.id = id;
  impl.summary = summary;
  impl.tunables = SparseTunables(bc_default, br_default);
  impl.run = std::move(run);
  return impl;
}

std::vector<int64_t> Uniform(const Tensors& t, int64_t w) {
  return std::vector<int64_t>(static_cast<size_t>(t.shape.Hkv), w);
}
std::vector<int64_t> NoWindow(const Tensors& t, const Params&) { return Uniform(t, 0); }
std::vector<int64_t> SwaWindows(const Tensors& t, const Params& p) {
  return Uniform(t, ParamInt(p, "w"));
}
int64_t NoSink(const Params&) { return 0; }
int64_t Sink(const Params& p) { return ParamInt(p, "sink"); }

ParamDecl SinkParam() {
  return {"sink", ParamKind::kInt, 0, INT64_MAX, {}, "0", {"0", "4"},
          "the first sink keys are always attended"};
}
ParamDecl SeedParam(const std::string& what) {
  return {"seed", ParamKind::kInt, 0, INT64_MAX, {}, "0", {"0"}, "seed of " + what};
}
std::vector<ParamDecl> LshParams() {
  return {{"bits", ParamKind::kInt, 1, 16, {}, "4", {"2", "4", "6", "8"}, "hash bits h"},
          {"rule", ParamKind::kEnum, 0, 0, {"sign", "argmax"}, "sign", {"sign", "argmax"},
           "sign: 2^h bins; argmax: h bins"},
          SeedParam("the projection R")};
}

Variant Dense() {
  Variant v;
  v.id = "dense";
  v.summary = "full causal attention: S(i) = all j <= p(i)";
  v.key_sets = [](const Tensors& t, const Params&) -> std::unique_ptr<KeySets> {
    return MakeWindowKeySets(t.shape, Uniform(t, 0), 0);
  };
  v.pairs = [](const Shape& s, const Params&) { return WindowPairs(s, 0, 0); };
  v.implementations = {Tiled(NoWindow, NoSink), Generic("dense")};
  return v;
}

Variant Swa() {
  Variant v;
  v.id = "swa";
  v.summary = "sliding window with attention sinks: p(i)-w < j <= p(i), plus j < sink";
  v.params = {
      {"w", ParamKind::kInt, 1, INT64_MAX, {}, "", {"128", "256", "512", "1024"},
       "window: the w most recent keys"},
      SinkParam(),
  };
  v.key_sets = [](const Tensors& t, const Params& p) -> std::unique_ptr<KeySets> {
    return MakeWindowKeySets(t.shape, SwaWindows(t, p), ParamInt(p, "sink"));
  };
  v.pairs = [](const Shape& s, const Params& p) {
    return WindowPairs(s, ParamInt(p, "w"), ParamInt(p, "sink"));
  };
  v.implementations = {Tiled(SwaWindows, Sink), Generic("swa")};
  return v;
}

Variant Hybrid() {
  Variant v;
  v.id = "hybrid";
  v.summary = "a window per KV head (0 = full attention), one launch for all heads";
  v.params = {
      {"w", ParamKind::kInt, 1, INT64_MAX, {}, "", {"128", "256", "512", "1024"},
       "window of the sliding-window heads (a `windows` tensor overrides)", ParamRole::kPlain,
       "windows"},
      {"full", ParamKind::kInt, 0, INT64_MAX, {}, "1", {"0", "1", "2", "4"},
       "the first min(full, Hkv) KV heads attend everything (a `windows` tensor overrides)",
       ParamRole::kPlain, "windows"},
      SinkParam(),
  };
  v.key_sets = [](const Tensors& t, const Params& p) -> std::unique_ptr<KeySets> {
    return MakeWindowKeySets(t.shape, HybridWindows(t, p), ParamInt(p, "sink"));
  };
  v.implementations = {Tiled(HybridWindows, Sink), Generic("hybrid")};
  return v;
}

Variant Lsh() {
  Variant v;
  v.id = "lsh";
  v.summary = "the k most recent keys j <= p(i) in the query's LSH bin";
  v.params = LshParams();
  v.params.insert(v.params.begin(), {"k", ParamKind::kInt, 1, INT64_MAX, {}, "",
                                     {"32", "64", "128", "256"}, "keys per query (per bin)"});
  v.key_sets = [](const Tensors& t, const Params& p) -> std::unique_ptr<KeySets> {
    return MakeLshKeySets(t, ParamInt(p, "bits"), ArgmaxRule(p), ParamInt(p, "k"), Seed(p));
  };
  v.implementations = {
      Sparse("bucketed",
             "keys and queries sorted by (bin, position); each bin a sliding window of k",
             [](const Tensors& t, const Params& p, float* out) {
               LshBins bins;
               RunPhase("attntune::select::bins", [&] {
                 bins = ComputeLshBins(t, ParamInt(p, "bits"), ArgmaxRule(p), Seed(p));
               });
               RunLshKokkos(t, bins, ParamInt(p, "k"), Tiles(p), out);
             },
             "128"),
      Generic("lsh")};
  return v;
}

Variant Ks() {
  Variant v;
  v.id = "ks";
  v.summary = "the k highest-scoring keys j <= p(i) (ties: smaller j)";
  v.params = {{"k", ParamKind::kInt, 1, INT64_MAX, {}, "", {"32", "64", "128", "256"},
               "keys per query"}};
  v.key_sets = [](const Tensors& t, const Params& p) -> std::unique_ptr<KeySets> {
    return MakeTopKKeySets(t.shape, KsScores(t), ParamInt(p, "k"), false);
  };
  v.pairs = [](const Shape& s, const Params& p) { return TopKPairs(s, ParamInt(p, "k")); };
  v.implementations = {
      Sparse("topk", "prefix top-k: a query block gathers the union of its rows' sets once",
             [](const Tensors& t, const Params& p, float* out) {
               std::vector<double> x;
               RunPhase("attntune::select::scores", [&] { x = KsScores(t); });
               RunTopKKokkos(t, x, ParamInt(p, "k"), false, Tiles(p), out);
             }),
      Generic("ks")};
  return v;
}

// hax's pairs: per row |lsh| + |ks| - |both|; the ks set of a row at p has min(p + 1,
// k_ks) keys, and an lsh key j (j <= p) is in both iff p < evict[j] (PrefixTopKEvictions).
// O(k_lsh) per row where the key sets' union takes O(L).
int64_t HaxPairs(const Tensors& t, const Params& p) {
  const Shape& s = t.shape;
  const int64_t k_lsh = ParamInt(p, "k_lsh"), k_ks = ParamInt(p, "k_ks");
  const LshBins bins = ComputeLshBins(t, ParamInt(p, "bits"), ArgmaxRule(p), Seed(p));
  const std::vector<double> x = KsScores(t);
  int64_t pairs = 0;
  for (int64_t head = 0; head < s.B * s.Hkv; ++head) {
    const int64_t b = head / s.Hkv, hkv = head % s.Hkv;
    const std::vector<int32_t> evict = PrefixTopKEvictions(x.data() + head * s.Lk, s.Lk, k_ks);
    const BinnedKeys keys = SortByBin(bins.key_bin.data() + head * s.Lk, s.Lk, bins.bins);
    for (int64_t hq = hkv * s.Group(); hq < (hkv + 1) * s.Group(); ++hq) {
      for (int64_t i = 0; i < s.Lq; ++i) {
        const int64_t pos = LastKey(s, i);
        const int32_t c = bins.query_bin[(b * s.Hq + hq) * s.Lq + i];
        const auto begin = keys.perm.begin() + keys.start[c], end = keys.perm.begin() + keys.start[c + 1];
        const int64_t hi = std::upper_bound(begin, end, pos) - keys.perm.begin();
        const int64_t lo = std::max<int64_t>(keys.start[c], hi - k_lsh);
        int64_t both = 0;
        for (int64_t u = lo; u < hi; ++u) both += pos < evict[keys.perm[u]];
        pairs += (hi - lo) + std::min(pos + 1, k_ks) - both;
      }
    }
  }
  return pairs;
}

Variant Hax() {
  Variant v;
  v.id = "hax";
  v.summary = "lsh(k_lsh) ∪ ks(k_ks), each key once";
  v.params = LshParams();
  v.params.insert(v.params.begin(),
                  {{"k_lsh", ParamKind::kInt, 1, INT64_MAX, {}, "", {"16", "32", "64", "128"},
                    "lsh keys per query"},
                   {"k_ks", ParamKind::kInt, 1, INT64_MAX, {}, "", {"16", "32", "64", "128"},
                    "ks keys per query"}});
  v.key_sets = [](const Tensors& t, const Params& p) -> std::unique_ptr<KeySets> {
    return MakeUnionKeySets(
        MakeLshKeySets(t, ParamInt(p, "bits"), ArgmaxRule(p), ParamInt(p, "k_lsh"), Seed(p)),
        MakeTopKKeySets(t.shape, KsScores(t), ParamInt(p, "k_ks"), false));
  };
  v.count_pairs = HaxPairs;
  v.implementations = {
      Sparse("union",
             "one pass in (bin, position) order per chunk of rows, a KV head's query heads "
             "together: each row group's lsh window, then the part of the chunk's prefix "
             "top-k union its positions reach, each key once",
             [](const Tensors& t, const Params& p, float* out) {
               SparseTiles tiles = Tiles(p);
               tiles.chunk = ParamInt(p, "Chunk");
               HaxSelection sel;
               RunPhase("attntune::select::bins_scores", [&] {
                 sel = ComputeHaxSelection(t, ParamInt(p, "bits"), ArgmaxRule(p), Seed(p));
               });
               RunHaxKokkos(t, sel.bins, ParamInt(p, "k_lsh"), sel.scores, ParamInt(p, "k_ks"),
                            tiles, out);
             },
             "64", "128"),
      Generic("hax")};
  // Br = 128 by default (above). It was chosen when each query head was sorted alone: a
  // chunk's same-bin run then stayed one block instead of leaving a partial row group per
  // 32 rows (L=16384, 32+32: 442 ms against 475-517 with Br=32). Since a KV head's query
  // heads are sorted together, Br=32 and Br=128 give the same row groups (counted) and
  // times within the noise (docs/performance.md, "Tried and not adopted"); the default
  // was left as it was.
  v.implementations[0].tunables.push_back(
      {"Chunk", ParamKind::kInt, 0, 1 << 20, {}, "0", {"0", "256", "512", "1024", "2048"},
       "query positions per chunk (gathered ks union and lsh windows per chunk); 0: 512, "
       "or more where the bins are small (about 16 rows of a bin per chunk, at most 4096)"});
  return v;
}

Variant Dma() {
  Variant v;
  v.id = "dma";
  v.summary = "the w keys j <= p(i) of largest b_j = A softplus(v_j·Delta); logits + b_j";
  v.params = {{"w", ParamKind::kInt, 1, INT64_MAX, {}, "", {"256", "512", "1024"},
               "keys per query"},
              {"bias", ParamKind::kInt, 0, 1, {}, "1", {"0", "1"}, "add b_j to the logits"},
              SeedParam("Delta and A")};
  v.key_sets = [](const Tensors& t, const Params& p) -> std::unique_ptr<KeySets> {
    return MakeTopKKeySets(t.shape, DmaScores(t, Seed(p)), ParamInt(p, "w"),
                           ParamInt(p, "bias") == 1);
  };
  v.pairs = [](const Shape& s, const Params& p) { return TopKPairs(s, ParamInt(p, "w")); };
  // Br = 64 by default and 128 in the grid: dma's windows are wide (its grid: w = 256 to
  // 1024), and a block of more rows shares one gather of a union that grows little with
  // them. L=16384, attention ms at Br = 32 / 64 / 128: w=1024 1523 / 1426 / 1375, w=256
  // 398 / 396 / 402, w=64 132 / 138 / 145 (docs/performance.md); ks (k = 32 to 256) keeps 32.
  Implementation topk = Sparse(
      "topk", "prefix top-k: a query block gathers the union of its rows' sets once",
      [](const Tensors& t, const Params& p, float* out) {
        std::vector<double> x;
        RunPhase("attntune::select::scores", [&] { x = DmaScores(t, Seed(p)); });
        RunTopKKokkos(t, x, ParamInt(p, "w"), ParamInt(p, "bias") == 1, Tiles(p), out);
      },
      "64", "64");
  for (ParamDecl& d : topk.tunables) {
    if (d.name == "Br") d.grid.push_back("128");
  }
  v.implementations = {topk, Generic("dma")};
  return v;
}

Variant DmaDecode() {
  Variant v;
  v.id = "dma_decode";
  v.summary = "token-by-token decode: resident set of w_kv keys plus w_q query-chosen slots";
  v.params = {{"w_kv", ParamKind::kInt, 1, INT64_MAX, {}, "", {"256", "512", "1024"},
               "resident keys per KV head"},
              {"w_q", ParamKind::kInt, 0, INT64_MAX, {}, "", {"16", "32", "64"},
               "query-chosen keys per step"},
              {"r", ParamKind::kInt, 0, INT64_MAX, {}, "", {"32", "64", "128"},
               "candidate window: recent keys and recent evictions"},
              {"bias", ParamKind::kInt, 0, 1, {}, "1", {"0", "1"}, "add b_j to the logits"},
              SeedParam("Delta and A")};
  v.check = [](const Shape& s, const Params&) -> std::string {
    if (s.Lq != s.Lk || !s.causal) {
      return "dma_decode runs token by token: it needs Lq == Lk and causal attention";
    }
    return "";
  };
  v.token_by_token = true;
  v.key_sets = [](const Tensors& t, const Params& p) -> std::unique_ptr<KeySets> {
    return MakeDecodeKeySets(t, DmaScores(t, Seed(p)), ParamInt(p, "w_kv"), ParamInt(p, "w_q"),
                             ParamInt(p, "r"), ParamInt(p, "bias") == 1);
  };
  // The resident set holds min(t + 1, w_kv) keys at step t (it fills, then stays full);
  // the chosen keys are counted by the Kokkos decode's own selection (parallel over KV
  // heads), where the key sets rebuild each step's set.
  v.count_pairs = [](const Tensors& t, const Params& p) {
    const int64_t w_kv = ParamInt(p, "w_kv");
    const DecodeSelection sel = SelectDecodeKokkos(t, DmaScores(t, Seed(p)), w_kv,
                                                   ParamInt(p, "w_q"), ParamInt(p, "r"));
    const Shape& s = t.shape;
    int64_t pairs = static_cast<int64_t>(sel.chosen.size());
    for (int64_t step = 0; step < s.Lk; ++step) pairs += s.B * s.Hq * std::min(step + 1, w_kv);
    return pairs;
  };
  Implementation decode;
  decode.id = "decode";
  decode.summary = "one task per KV head steps through the sequence; O(w_kv + w_q) per step";
  decode.run = [](const Tensors& t, const Params& p, float* out) {
    std::vector<double> x;
    RunPhase("attntune::select::scores", [&] { x = DmaScores(t, Seed(p)); });
    RunDecodeKokkos(t, x, ParamInt(p, "w_kv"), ParamInt(p, "w_q"), ParamInt(p, "r"),
                    ParamInt(p, "bias") == 1, out);
  };
  v.implementations = {decode, Generic("dma_decode")};
  return v;
}

}  // namespace

namespace {

struct Table {
  std::vector<Variant> rows;
  std::vector<AbsentImplementation> absent;
};

const Table& TheTable() {
  static const Table kTable = [] {
    Table t;
    t.rows = {Dense(), Swa(), Hybrid(), Lsh(), Ks(), Hax(), Dma(), DmaDecode()};
    // The implementations of the other platforms built in, after the Kokkos ones of each
    // row (explicit, not self-registering: STYLE.md).
    AddCudaImplementations(&t.rows, &t.absent);
    return t;
  }();
  return kTable;
}

}  // namespace

const std::vector<Variant>& Variants() { return TheTable().rows; }

const std::vector<AbsentImplementation>& AbsentImplementations() { return TheTable().absent; }

std::string RuntimeLibraries(const std::string& platform) {
  return platform == kCudaPlatform ? CudaRuntimeLibraries() : "";
}

}  // namespace attntune
