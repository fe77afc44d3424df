// Every (variant, implementation) of the sparse and hybrid families against its fp64
// reference over awkward shapes: L = 1, 37, 577, 1000, 4097; d = 64, 128; GQA groups
// 1, 2, 4; Lq < Lk; budgets larger than L; all keys in one bin; ties in scores;
// supplied optional tensors. Outputs are poisoned with NaN before each run.
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/generators.h"
#include "kernels/kokkos/sparse.h"
#include "kernels/reference/key_sets.h"
#include "kernels/reference/reference.h"
#include "kernels/selection/selection.h"
#include "kernels/variant.h"

namespace attntune {
namespace {

constexpr double kFp32Tol = 1e-5;

struct Case {
  std::string variant;
  std::string shape;
  std::string params;
  std::string inputs;  // "": Gaussian; a pattern of generators.h; or a special below
};

// Run on every implementation of the variant (tunables Br, Bc only where both take them).
const std::vector<Case>& Cases() {
  static const std::vector<Case> kCases = {
      {"dense", "Hq=1,L=1,d=64", "", ""},
      {"dense", "Hq=6,Hkv=3,L=37,d=64", "Br=7,Bc=13", ""},
      {"dense", "Hq=4,Hkv=1,L=577,d=128", "Br=64,Bc=128", ""},
      {"dense", "Hq=4,Hkv=2,Lq=37,Lk=577,d=64", "", ""},
      {"dense", "Hq=2,Hkv=2,Lq=37,Lk=577,d=64,causal=0", "", ""},
      // Decode-sized: every query row of a KV head in one register tile (Lq x group <=
      // 8), scores as dot products with the K rows in place.
      {"dense", "Hq=4,Hkv=2,Lq=1,Lk=577,d=128", "", ""},
      {"dense", "Hq=8,Hkv=2,Lq=2,Lk=1000,d=64", "Br=7,Bc=13", ""},
      {"swa", "Hq=1,L=1,d=64", "w=1,sink=4", ""},
      {"swa", "Hq=6,Hkv=3,L=37,d=64", "w=5,sink=2,Br=7,Bc=13", ""},
      {"swa", "Hq=4,Hkv=1,L=577,d=128", "w=64,sink=4", ""},
      {"swa", "Hq=4,Hkv=2,Lq=37,Lk=577,d=64", "w=2000", ""},
      {"swa", "Hq=2,Hkv=2,L=1000,d=64", "w=100,sink=120,Br=16,Bc=256", ""},
      {"swa", "Hq=4,Hkv=2,Lq=1,Lk=577,d=64", "w=64,sink=4", ""},
      {"swa", "Hq=2,Hkv=2,Lq=3,Lk=1000,d=40", "w=100,sink=3,Bc=13", ""},
      {"hybrid", "Hq=1,L=1,d=64", "w=1,full=0", ""},
      {"hybrid", "Hq=4,Hkv=2,L=37,d=64", "w=5,full=1,sink=2,Br=7,Bc=13", ""},
      {"hybrid", "Hq=4,Hkv=4,L=577,d=128", "w=64,full=2,sink=4", ""},
      {"hybrid", "Hq=8,Hkv=2,Lq=37,Lk=577,d=64", "w=100,full=1", ""},
      {"hybrid", "Hq=4,Hkv=2,Lq=1,Lk=577,d=64", "w=32,full=1", ""},
      {"hybrid", "Hq=2,Hkv=2,L=1000,d=128", "w=2000,full=0,Br=64,Bc=64", ""},
      {"hybrid", "Hq=3,Hkv=3,L=577,d=64", "w=8,full=0", "windows"},
      {"hybrid", "Hq=2,Hkv=2,L=4097,d=64", "w=256,full=1,Br=64,Bc=128", ""},
      {"lsh", "Hq=1,L=1,d=64", "k=4,bits=2", ""},
      {"lsh", "Hq=6,Hkv=3,L=37,d=64", "k=3,bits=2,Br=7,Bc=13", ""},
      {"lsh", "Hq=4,Hkv=1,L=577,d=128", "k=16,bits=4,rule=argmax,seed=3", ""},
      {"lsh", "Hq=4,Hkv=2,Lq=37,Lk=577,d=64", "k=32,bits=3", ""},
      {"lsh", "Hq=2,Hkv=1,L=1000,d=64", "k=2000,bits=1,rule=argmax", ""},  // one bin
      {"lsh", "Hq=2,Hkv=2,L=1000,d=128", "k=8,bits=16", ""},  // mostly empty bins
      {"lsh", "Hq=2,Hkv=1,L=577,d=64", "k=24,bits=4,Br=16,Bc=32", "clusters"},
      {"lsh", "Hq=2,Hkv=2,L=577,d=64", "k=8,bits=3", "mu"},
      {"lsh", "Hq=2,Hkv=1,Lq=37,Lk=577,d=64,causal=0", "k=16,bits=2", ""},
      {"lsh", "Hq=2,Hkv=2,L=4097,d=64", "k=32,bits=4,Br=64,Bc=128", ""},
      // d not a whole number of 32-column tiles (V rows copied with padding), odd tiles.
      {"lsh", "Hq=4,Hkv=2,L=577,d=40", "k=40,bits=2,Br=5,Bc=20", ""},
      {"lsh", "B=2,Hq=4,Hkv=2,L=300,d=64", "k=16,bits=3", ""},  // batches: (b, KV head) rows
      // 8 hash bits (256 small bins), both rules; every key alone in its bin (sign: 256
      // bins for 200 keys; argmax: 16 bins for 16 keys); every key in one bin.
      {"lsh", "Hq=4,Hkv=2,L=1000,d=64", "k=16,bits=8", ""},
      {"lsh", "Hq=4,Hkv=2,L=2048,d=128", "k=64,bits=8,Br=16", ""},
      {"lsh", "Hq=4,Hkv=2,L=1000,d=64", "k=40,bits=8,rule=argmax", ""},
      {"lsh", "Hq=4,Hkv=2,L=200,d=64", "k=4,bits=8", "one_key_bins"},
      {"lsh", "Hq=4,Hkv=2,L=16,d=64", "k=4,bits=16,rule=argmax", "one_key_bins"},
      {"lsh", "Hq=4,Hkv=2,L=577,d=64", "k=32,bits=8", "one_bin"},
      {"lsh", "Hq=4,Hkv=2,L=577,d=64", "k=32,bits=8,rule=argmax", "one_bin"},
      {"ks", "Hq=1,L=1,d=64", "k=1", ""},
      {"ks", "Hq=6,Hkv=3,L=37,d=64", "k=5,Br=7,Bc=13", ""},
      {"ks", "Hq=4,Hkv=1,L=577,d=128", "k=64", ""},
      {"ks", "Hq=4,Hkv=2,Lq=37,Lk=577,d=64", "k=50", ""},
      {"ks", "Hq=2,Hkv=2,L=1000,d=64", "k=5000,Br=64,Bc=128", ""},  // k > L
      {"ks", "Hq=2,Hkv=1,L=577,d=64", "k=20,Br=16,Bc=32", "ties"},
      {"ks", "Hq=2,Hkv=1,Lq=37,Lk=577,d=64,causal=0", "k=16", ""},
      {"ks", "Hq=2,Hkv=2,L=4097,d=64", "k=64,Br=64,Bc=128", ""},
      {"hax", "Hq=1,L=1,d=64", "k_lsh=2,k_ks=2", ""},
      {"hax", "Hq=6,Hkv=3,L=37,d=64", "k_lsh=3,k_ks=3,bits=2,Br=7,Bc=13", ""},
      {"hax", "Hq=4,Hkv=1,L=577,d=128", "k_lsh=16,k_ks=16,bits=3,rule=argmax", ""},
      {"hax", "Hq=4,Hkv=2,Lq=37,Lk=577,d=64", "k_lsh=8,k_ks=32,bits=4", ""},
      {"hax", "Hq=2,Hkv=2,L=1000,d=64", "k_lsh=2000,k_ks=10,bits=1,rule=argmax", ""},
      {"hax", "Hq=2,Hkv=1,L=577,d=64", "k_lsh=8,k_ks=8,bits=2", "ties"},
      {"hax", "Hq=2,Hkv=2,L=4097,d=64", "k_lsh=32,k_ks=32,bits=4,Br=64,Bc=128", ""},
      // Chunks of 2 blocks of 7 rows (the last one partial), and a chunk beyond L.
      {"hax", "Hq=4,Hkv=2,L=577,d=64", "k_lsh=16,k_ks=8,bits=3,Br=7,Chunk=10", ""},
      {"hax", "Hq=2,Hkv=1,Lq=300,Lk=577,d=64", "k_lsh=16,k_ks=8,bits=2,Chunk=4096", ""},
      // lsh and ks overlap heavily (2 bins, large budgets): the lsh window must skip the
      // row's ks keys; d = 40 exercises the padded V copy.
      {"hax", "Hq=4,Hkv=2,L=577,d=40", "k_lsh=64,k_ks=64,bits=1,Br=5,Bc=20", ""},
      {"hax", "Hq=2,Hkv=1,L=1000,d=64", "k_lsh=100,k_ks=100,bits=1", "clusters"},
      {"hax", "B=2,Hq=4,Hkv=2,L=300,d=64", "k_lsh=16,k_ks=8,bits=3,Chunk=64", ""},
      // HAX's own 8 hash bits: 256 small bins, rows of several bins in one row group (each
      // bin's run on a tile of 1, 2, 4 or 8 rows); the default chunk (HaxChunk) and small
      // ones; both rules; every key alone in its bin; every key in one bin.
      {"hax", "Hq=4,Hkv=2,L=1000,d=64", "k_lsh=16,k_ks=16,bits=8", ""},
      {"hax", "Hq=4,Hkv=2,L=1000,d=64", "k_lsh=16,k_ks=16,bits=8,Br=16,Chunk=64", ""},
      {"hax", "Hq=4,Hkv=2,L=2048,d=128", "k_lsh=32,k_ks=32,bits=8,Chunk=256", ""},
      {"hax", "Hq=8,Hkv=2,Lq=300,Lk=1000,d=64", "k_lsh=24,k_ks=8,bits=8,Bc=32", ""},
      {"hax", "Hq=4,Hkv=2,L=1000,d=64", "k_lsh=16,k_ks=24,bits=8,rule=argmax", ""},
      {"hax", "Hq=4,Hkv=2,L=200,d=64", "k_lsh=4,k_ks=8,bits=8,Chunk=32", "one_key_bins"},
      {"hax", "Hq=4,Hkv=2,L=16,d=64", "k_lsh=4,k_ks=4,bits=16,rule=argmax", "one_key_bins"},
      {"hax", "Hq=4,Hkv=2,L=577,d=64", "k_lsh=32,k_ks=16,bits=8", "one_bin"},
      {"hax", "Hq=4,Hkv=2,L=577,d=64", "k_lsh=32,k_ks=16,bits=8,rule=argmax,Chunk=100",
       "one_bin"},
      {"dma", "Hq=1,L=1,d=64", "w=1", ""},
      {"dma", "Hq=6,Hkv=3,L=37,d=64", "w=5,bias=0,Br=7,Bc=13", ""},
      {"dma", "Hq=4,Hkv=1,L=577,d=128", "w=64,seed=5", ""},
      {"dma", "Hq=4,Hkv=2,Lq=37,Lk=577,d=64", "w=100,bias=0", ""},
      {"dma", "Hq=2,Hkv=2,L=1000,d=128", "w=5000,Br=64,Bc=128", ""},  // w > L
      {"dma", "Hq=2,Hkv=1,L=577,d=64", "w=30,Br=16,Bc=32", "flat_delta"},  // all b tie
      {"dma", "Hq=2,Hkv=1,L=577,d=64", "w=30", "delta_a"},
      {"dma", "Hq=2,Hkv=1,Lq=37,Lk=577,d=64,causal=0", "w=16", ""},
      {"dma", "Hq=2,Hkv=2,L=4097,d=64", "w=256,Br=64,Bc=128", ""},
      {"dma", "Hq=4,Hkv=2,L=300,d=64", "w=40,Br=128", ""},  // dma's grid: 256 stacked rows
      {"dma_decode", "Hq=1,L=1,d=64", "w_kv=1,w_q=1,r=1", ""},
      {"dma_decode", "Hq=6,Hkv=3,L=37,d=64", "w_kv=4,w_q=2,r=3", ""},
      {"dma_decode", "Hq=4,Hkv=1,L=577,d=128", "w_kv=32,w_q=8,r=16", ""},
      {"dma_decode", "Hq=4,Hkv=2,L=1000,d=64", "w_kv=2000,w_q=4,r=8,bias=0", ""},
      {"dma_decode", "Hq=2,Hkv=1,L=577,d=64", "w_kv=16,w_q=0,r=0", ""},
      {"dma_decode", "Hq=2,Hkv=2,L=577,d=64", "w_kv=16,w_q=64,r=4", "flat_delta"},
      {"dma_decode", "Hq=2,Hkv=1,L=1000,d=128", "w_kv=64,w_q=16,r=32,seed=2", ""},
  };
  return kCases;
}

// LSH inputs with a supplied projection R [Hkv,d,bits]. "one_bin": R = 0, so every
// projection is 0 and every key and query falls in bin 0 (sign: no P_c > 0; argmax: the
// first maximum). "one_key_bins": R the identity on the first `bits` coordinates, and
// key j's coordinates there the signs of j's bits (sign rule) or 1 at coordinate j
// (argmax rule, Lk <= bits), so that key j alone has bin j; queries stay Gaussian.
Tensors LshInputs(const std::string& kind, const Shape& s, const Params& p, uint64_t seed) {
  Tensors t = GaussianTensors(s, seed);
  const int64_t bits = std::stoll(p.count("bits") != 0 ? p.at("bits") : "4");
  const bool argmax = p.count("rule") != 0 && p.at("rule") == "argmax";
  REQUIRE(bits <= s.d);
  t.proj.assign(static_cast<size_t>(s.Hkv * s.d * bits), 0.0f);
  if (kind == "one_bin") return t;
  for (int64_t h = 0; h < s.Hkv; ++h) {
    for (int64_t c = 0; c < bits; ++c) t.proj[(h * s.d + c) * bits + c] = 1.0f;
  }
  REQUIRE(s.Lk <= (argmax ? bits : int64_t{1} << bits));
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t h = 0; h < s.Hkv; ++h) {
      for (int64_t j = 0; j < s.Lk; ++j) {
        float* k = t.k.data() + ((b * s.Hkv + h) * s.Lk + j) * s.d;
        for (int64_t c = 0; c < bits; ++c) {
          k[c] = argmax ? (c == j ? 1.0f : 0.0f) : ((j >> (bits - 1 - c)) & 1 ? 1.0f : -1.0f);
        }
      }
    }
  }
  return t;
}

Tensors Inputs(const Case& c, const Shape& shape, uint64_t seed) {
  if (c.inputs.empty()) return GaussianTensors(shape, seed);
  if (c.inputs == "one_bin" || c.inputs == "one_key_bins") {
    return LshInputs(c.inputs, shape, ParseParams(c.params, "case"), seed);
  }
  if (c.inputs == "ties" || c.inputs == "windows" || c.inputs == "mu" ||
      c.inputs == "flat_delta" || c.inputs == "delta_a") {
    Tensors t = GaussianTensors(shape, seed);
    if (c.inputs == "ties") {  // scores in {0, 1, 2}: many ties, broken by smaller j
      t.scores.resize(static_cast<size_t>(shape.B * shape.Hkv * shape.Lk));
      for (size_t n = 0; n < t.scores.size(); ++n) t.scores[n] = static_cast<float>(n * 7 % 3);
    } else if (c.inputs == "windows") {  // full, w=1, w=37
      t.windows = {0, 1, 37};
    } else if (c.inputs == "mu") {
      t.mu.assign(static_cast<size_t>(shape.Hkv * shape.d), 0.5f);
    } else if (c.inputs == "flat_delta") {  // b_j = A softplus(0) for every key
      t.delta.assign(static_cast<size_t>(shape.Hkv * shape.d), 0.0f);
    } else {
      t.delta.assign(static_cast<size_t>(shape.Hkv * shape.d), 0.05f);
      t.a.assign(static_cast<size_t>(shape.Hkv), 2.0f);
    }
    return t;
  }
  return StructuredTensors(shape, c.inputs, seed, "case");
}

Params CaseParams(const Variant& v, const Implementation& impl, const Shape& shape,
                  const Case& c) {
  Params given = ParseParams(c.params, "case");
  for (const char* tile : {"Br", "Bc", "Chunk"}) {
    bool takes = false;
    for (const auto& p : impl.tunables) takes = takes || p.name == tile;
    if (!takes) given.erase(tile);
  }
  return ResolveParams(v, &impl, shape, given, "case");
}

// The table's Kokkos implementations of `v` (the CUDA ones run in tests/gpu).
std::vector<const Implementation*> CpuImplementations(const Variant& v) {
  return v.ImplementationsFor(kKokkosPlatform, {Phase::kPrefill, Dtype::kF32, 0});
}

TEST_CASE("Sparse and hybrid kernels match their fp64 reference") {
  uint64_t seed = 300;
  for (const Case& c : Cases()) {
    const Shape shape = ParseShape(c.shape, "case");
    const Variant& v = FindVariant(c.variant, "case");
    const Tensors t = Inputs(c, shape, seed++);
    std::vector<double> ref;
    for (const Implementation* entry : CpuImplementations(v)) {
      const Implementation& impl = *entry;
      const Params params = CaseParams(v, impl, shape, c);
      if (ref.empty()) ref = ReferenceOutput(v, t, params);
      INFO(c.variant << "/" << impl.id << " " << c.shape << " " << c.params << " " << c.inputs);
      std::vector<float> out(shape.QElems(), std::numeric_limits<float>::quiet_NaN());
      impl.run(t, params, out.data());
      CHECK(RelErr(out.data(), ref) < kFp32Tol);
    }
  }
}

// hax's chunk by default: 512 positions, doubled while a bin would hold fewer than 16 of
// a KV head's query rows per chunk, at most 4096.
TEST_CASE("hax's default chunk grows with the number of bins") {
  const Shape s = ParseShape("Hq=16,Hkv=8,L=16384,d=128", "x");  // 2 query heads a group
  CHECK(HaxChunk(s, 16) == 512);     // 4 hash bits
  CHECK(HaxChunk(s, 8) == 512);      // argmax rule, 8 bits
  CHECK(HaxChunk(s, 64) == 512);     // 6 bits: 16 rows of a bin in 512 positions
  CHECK(HaxChunk(s, 128) == 1024);
  CHECK(HaxChunk(s, 256) == 2048);   // 8 bits
  CHECK(HaxChunk(s, 65536) == 4096);  // 16 bits: at most 4096
  CHECK(HaxChunk(ParseShape("Hq=8,Hkv=1,L=100,d=64", "x"), 256) == 512);
}

// The special LSH inputs hold what their names say (so the cases above test those bins).
TEST_CASE("LSH test inputs: every key in one bin, every key alone in its bin") {
  const Shape s = ParseShape("Hq=4,Hkv=2,L=200,d=64", "x");
  for (const bool argmax : {false, true}) {
    const Params one = {{"bits", "8"}, {"rule", argmax ? "argmax" : "sign"}};
    const LshBins all = ComputeLshBins(LshInputs("one_bin", s, one, 3), 8, argmax, 0);
    CHECK(std::all_of(all.key_bin.begin(), all.key_bin.end(), [](int32_t b) { return b == 0; }));
    CHECK(std::all_of(all.query_bin.begin(), all.query_bin.end(), [](int32_t b) { return b == 0; }));
  }
  auto alone = [](const Shape& sh, int64_t bits, bool argmax) {
    const Params p = {{"bits", std::to_string(bits)}, {"rule", argmax ? "argmax" : "sign"}};
    const LshBins bins = ComputeLshBins(LshInputs("one_key_bins", sh, p, 3), bits, argmax, 0);
    bool ok = true;
    for (int64_t h = 0; h < sh.Hkv; ++h) {
      for (int64_t j = 0; j < sh.Lk; ++j) ok = ok && bins.key_bin[h * sh.Lk + j] == j;
    }
    return ok;
  };
  CHECK(alone(s, 8, false));
  CHECK(alone(ParseShape("Hq=4,Hkv=2,L=16,d=64", "x"), 16, true));
}

TEST_CASE("Every variant and implementation has reference cases") {
  for (const Variant& v : Variants()) {
    int cases = 0;
    for (const Case& c : Cases()) cases += c.variant == v.id;
    INFO(v.id);
    CHECK(cases >= 5);
    const std::vector<const Implementation*> cpu = CpuImplementations(v);
    CHECK(cpu.size() >= 2);  // a specialised kernel and the generic one
    CHECK(cpu.back()->id == "generic");
  }
}

// Per step of the decode: row t of every head against the reference's row t.
TEST_CASE("dma_decode equals the per-step reference at every step") {
  const Shape shape = ParseShape("Hq=4,Hkv=2,L=300,d=64", "x");
  const Tensors t = GaussianTensors(shape, 77);
  const Variant& v = FindVariant("dma_decode", "x");
  for (const Implementation* entry : CpuImplementations(v)) {
    const Implementation& impl = *entry;
    const Params p = ResolveParams(v, &impl, shape, {{"w_kv", "24"}, {"w_q", "6"}, {"r", "10"}},
                                   "x");
    const std::vector<double> ref = ReferenceOutput(v, t, p);
    std::vector<float> out(shape.QElems(), std::numeric_limits<float>::quiet_NaN());
    impl.run(t, p, out.data());
    int bad = 0;
    for (int64_t h = 0; h < shape.Hq; ++h) {
      for (int64_t step = 0; step < shape.Lq; ++step) {
        const int64_t at = OutIndex(shape, 0, h, step, 0);
        const std::vector<double> row(ref.begin() + at, ref.begin() + at + shape.d);
        bad += !(RelErr(out.data() + at, row) < kFp32Tol);
      }
    }
    INFO(impl.id);
    CHECK(bad == 0);
  }
}

double RefDiff(const std::string& a, const std::string& pa, const std::string& b,
               const std::string& pb, const Tensors& t) {
  const Variant& va = FindVariant(a, "x");
  const Variant& vb = FindVariant(b, "x");
  const Params ra = ResolveParams(va, nullptr, t.shape, ParseParams(pa, "x"), "x");
  const Params rb = ResolveParams(vb, nullptr, t.shape, ParseParams(pb, "x"), "x");
  return RelErr(ReferenceOutput(va, t, ra), ReferenceOutput(vb, t, rb));
}

TEST_CASE("References reduce to each other where the definitions meet") {
  const Tensors t = GaussianTensors(ParseShape("Hq=4,Hkv=2,L=200,d=64", "x"), 5);
  CHECK(RefDiff("ks", "k=200", "dense", "", t) < 1e-12);
  CHECK(RefDiff("lsh", "k=500,bits=1,rule=argmax", "dense", "", t) < 1e-12);
  CHECK(RefDiff("hax", "k_lsh=1,k_ks=300", "dense", "", t) < 1e-12);
  CHECK(RefDiff("dma", "w=200,bias=0", "dense", "", t) < 1e-12);
  CHECK(RefDiff("dma_decode", "w_kv=200,w_q=0,r=0,bias=0", "dense", "", t) < 1e-12);
  CHECK(RefDiff("hybrid", "w=7,full=2", "dense", "", t) < 1e-12);
  CHECK(RefDiff("hybrid", "w=7,full=0,sink=3", "swa", "w=7,sink=3", t) < 1e-12);
  // With a budget below L they differ (the check can fail).
  CHECK(RefDiff("ks", "k=20", "dense", "", t) > 1e-3);
  CHECK(RefDiff("dma", "w=200,bias=1", "dense", "", t) > 1e-3);  // the bias matters
}

TEST_CASE("hax is the union of lsh and ks, each key once") {
  const Tensors t = GaussianTensors(ParseShape("Hq=4,Hkv=2,L=300,d=64", "x"), 6);
  const Params p = {{"k_lsh", "8"}, {"k_ks", "12"}, {"bits", "3"}, {"rule", "sign"},
                    {"seed", "1"}};
  const auto hax = FindVariant("hax", "x").key_sets(t, p);
  const auto lsh = MakeLshKeySets(t, 3, false, 8, 1);
  const auto ks = MakeTopKKeySets(t.shape, KsScores(t), 12, false);
  std::vector<int64_t> a, b, c, u;
  int64_t overlap = 0;
  for (int64_t h = 0; h < 4; ++h) {
    for (int64_t i = 0; i < 300; ++i) {
      hax->Row(0, h, i, &a);
      lsh->Row(0, h, i, &b);
      ks->Row(0, h, i, &c);
      u.clear();
      std::set_union(b.begin(), b.end(), c.begin(), c.end(), std::back_inserter(u));
      REQUIRE(a == u);
      overlap += static_cast<int64_t>(b.size() + c.size() - u.size());
    }
  }
  CHECK(overlap > 0);  // the sets do meet, so "each key once" was exercised
}

// The selection functions against DESIGN.md s1 computed naively in fp64 (kernels and
// references share these functions, so a kernel-against-reference test cannot see an
// error in them).
TEST_CASE("ks default scores and LSH bins follow their definitions") {
  Tensors t = GaussianTensors(ParseShape("Hq=4,Hkv=2,Lq=50,Lk=90,d=40", "x"), 17);
  const Shape& s = t.shape;
  SECTION("ks: x_j = sum over the group's heads of k_j . normalize(sum_{p(i) <= j} q_i)") {
    const std::vector<double> x = KsScores(t);
    for (int64_t h = 0; h < s.Hkv; ++h) {
      for (int64_t j = 0; j < s.Lk; ++j) {
        double want = 0.0;
        for (int64_t hq = h * s.Group(); hq < (h + 1) * s.Group(); ++hq) {
          std::vector<double> sum(static_cast<size_t>(s.d), 0.0);
          for (int64_t i = 0; i < s.Lq && s.QueryPos(i) <= j; ++i) {
            for (int64_t c = 0; c < s.d; ++c) sum[c] += t.Q(0, hq, i)[c];
          }
          double norm = 0.0, dot = 0.0;
          for (int64_t c = 0; c < s.d; ++c) {
            norm += sum[c] * sum[c];
            dot += sum[c] * t.K(0, h, j)[c];
          }
          if (norm > 0.0) want += dot / std::sqrt(norm);
        }
        INFO("h " << h << " j " << j);
        CHECK(x[h * s.Lk + j] == Approx(want).epsilon(1e-9).margin(1e-12));
      }
    }
    // Keys before the first query (p(0) = 40) score 0; later ones do not.
    CHECK(x[0] == 0.0);
    CHECK(x[s.Lk - 1] != 0.0);
  }
  SECTION("bins: sign rule and argmax rule of u . R, u = x - mu") {
    t.mu.assign(static_cast<size_t>(s.Hkv * s.d), 0.1f);
    for (const bool argmax : {false, true}) {
      const int64_t bits = 5;
      const LshBins bins = ComputeLshBins(t, bits, argmax, 3);
      const std::vector<double> r = LshProjection(t, bits, 3);  // [Hkv][d][bits]
      auto want = [&](const float* x, int64_t h, double* margin) {
        std::vector<double> p(static_cast<size_t>(bits), 0.0);
        for (int64_t c = 0; c < bits; ++c) {
          for (int64_t e = 0; e < s.d; ++e) {
            p[c] += (x[e] - static_cast<double>(t.mu[h * s.d + e])) * r[(h * s.d + e) * bits + c];
          }
        }
        int32_t bin = 0;
        *margin = std::numeric_limits<double>::infinity();
        if (argmax) {
          for (int64_t c = 1; c < bits; ++c) bin = p[c] > p[bin] ? static_cast<int32_t>(c) : bin;
          for (int64_t c = 0; c < bits; ++c) {
            if (c != bin) *margin = std::min(*margin, p[bin] - p[c]);
          }
        } else {
          for (int64_t c = 0; c < bits; ++c) {
            bin = bin * 2 + (p[c] > 0.0 ? 1 : 0);
            *margin = std::min(*margin, std::fabs(p[c]));
          }
        }
        return bin;
      };
      int64_t checked = 0;
      for (int64_t h = 0; h < s.Hkv; ++h) {
        for (int64_t j = 0; j < s.Lk; ++j) {
          double margin = 0.0;
          const int32_t bin = want(t.K(0, h, j), h, &margin);
          if (margin < 1e-3) continue;  // the fp32 projection may round the other way
          CHECK(bins.key_bin[h * s.Lk + j] == bin);
          ++checked;
        }
        for (int64_t hq = h * s.Group(); hq < (h + 1) * s.Group(); ++hq) {
          for (int64_t i = 0; i < s.Lq; ++i) {
            double margin = 0.0;
            const int32_t bin = want(t.Q(0, hq, i), h, &margin);
            if (margin < 1e-3) continue;
            CHECK(bins.query_bin[hq * s.Lq + i] == bin);
            ++checked;
          }
        }
      }
      CHECK(checked > (s.Hkv * s.Lk + s.Hq * s.Lq) * 9 / 10);
      CHECK(bins.bins == (argmax ? bits : 32));
    }
  }
}

TEST_CASE("hax's one-pass selection equals the bins and the scores apart, bit for bit") {
  for (const char* shape : {"Hq=4,Hkv=2,L=577,d=64", "Hq=8,Hkv=2,Lq=37,Lk=300,d=40",
                            "Hq=3,Hkv=3,L=100,d=128,causal=0", "B=2,Hq=2,Hkv=1,L=65,d=64"}) {
    for (const bool argmax : {false, true}) {
      Tensors t = GaussianTensors(ParseShape(shape, "x"), 21);
      if (argmax) t.mu.assign(static_cast<size_t>(t.shape.Hkv * t.shape.d), 0.25f);
      const int64_t bits = argmax ? 5 : 3;
      const HaxSelection sel = ComputeHaxSelection(t, bits, argmax, 4);
      const LshBins bins = ComputeLshBins(t, bits, argmax, 4);
      INFO(shape << " argmax " << argmax);
      CHECK(sel.bins.bins == bins.bins);
      CHECK(sel.bins.key_bin == bins.key_bin);
      CHECK(sel.bins.query_bin == bins.query_bin);
      CHECK(sel.scores == KsScores(t));  // exact: the same additions in the same order
      CHECK(std::any_of(sel.scores.begin(), sel.scores.end(), [](double x) { return x != 0.0; }));
    }
  }
}

TEST_CASE("Reference sets follow the definitions on small cases") {
  Shape s = ParseShape("Hq=1,L=8,d=64", "x");
  SECTION("ks ties: the smaller j wins") {
    const auto sets = MakeTopKKeySets(s, {1, 3, 3, 0, 3, 2, 3, 1}, 3, false);
    std::vector<int64_t> keys;
    sets->Row(0, 0, 7, &keys);
    CHECK(keys == std::vector<int64_t>{1, 2, 4});
    sets->Row(0, 0, 1, &keys);
    CHECK(keys == std::vector<int64_t>{0, 1});
  }
  SECTION("dma_decode keeps ties and evicts the smaller j first") {
    Tensors t = GaussianTensors(s, 1);
    // b = 1, 2, 2, 5, 0, 2: w_kv = 2, no query slots.
    const auto sets = MakeDecodeKeySets(t, {1, 2, 2, 5, 0, 2, 9, 9}, 2, 0, 0, false);
    std::vector<int64_t> keys;
    const std::vector<std::vector<int64_t>> expect = {{0}, {0, 1}, {1, 2}, {2, 3}, {2, 3},
                                                      {2, 3}, {3, 6}, {6, 7}};
    for (int64_t step = 0; step < 8; ++step) {
      sets->Row(0, 0, step, &keys);
      INFO(step);
      CHECK(keys == expect[step]);
    }
  }
}

TEST_CASE("Structured inputs: each pattern recovers what it is built for") {
  const Shape shape = ParseShape("Hq=2,Hkv=1,L=1000,d=64", "x");
  auto recall = [&](const std::string& pattern, const std::string& variant,
                    const std::string& params) {
    const Tensors t = StructuredTensors(shape, pattern, 9, "x");
    const Variant& v = FindVariant(variant, "x");
    const Params p = ResolveParams(v, nullptr, shape, ParseParams(params, "x"), "x");
    return MassRecallFromDenseRows(t, *v.key_sets(t, p));
  };
  CHECK(recall("band", "swa", "w=64") > recall("gaussian", "swa", "w=64") + 0.3);
  CHECK(recall("sinks", "swa", "w=64,sink=4") > recall("sinks", "swa", "w=64") + 0.05);
  CHECK(recall("clusters", "lsh", "k=64,bits=6") > recall("clusters", "swa", "w=64") + 0.2);
  CHECK_THROWS(StructuredTensors(shape, "nope", 1, "--inputs"));
}

// The needle, on the rows that seek it (Lq = Lk / 10: every row), eight KV heads (each
// its own needle direction and LSH projection): content-based selection finds it far
// back; the window, ks's causal scorer (it sees no seeking query before the needle) and
// dma's query-blind bias do not. At seed 9: lsh 0.54, hax 0.54, swa 0.005, ks 0.007.
TEST_CASE("Structured inputs: LSH recovers the needle for the rows that seek it") {
  const Shape shape = ParseShape("Hq=8,Hkv=8,Lq=100,Lk=1000,d=64", "x");
  const Tensors t = StructuredTensors(shape, "needle", 9, "x");
  auto recall = [&](const std::string& variant, const std::string& params) {
    const Variant& v = FindVariant(variant, "x");
    const Params p = ResolveParams(v, nullptr, shape, ParseParams(params, "x"), "x");
    return MassRecallFromDenseRows(t, *v.key_sets(t, p));
  };
  const double swa = recall("swa", "w=64"), ks = recall("ks", "k=64");
  CHECK(swa < 0.05);
  CHECK(ks < 0.05);
  CHECK(recall("lsh", "k=64,bits=6") > swa + 0.3);
  CHECK(recall("hax", "k_lsh=32,k_ks=32,bits=6") > ks + 0.3);
}

// The needle generator's claim: the queries of the last tenth put, on average, a large
// share of their dense attention on the key at Lk / 7 (+10 on its logit in expectation);
// the rows before them put next to none there.
TEST_CASE("Structured inputs: the needle holds the seeking rows' attention") {
  const Shape shape = ParseShape("Hq=2,Hkv=1,L=1000,d=64", "x");
  const Tensors t = StructuredTensors(shape, "needle", 9, "x");
  auto needle_weight = [&](int64_t hq, int64_t i) {
    const float* q = t.Q(0, hq, i);
    std::vector<double> logit(static_cast<size_t>(shape.QueryPos(i) + 1));
    double m = -std::numeric_limits<double>::infinity();
    for (int64_t j = 0; j <= shape.QueryPos(i); ++j) {
      const float* k = t.K(0, 0, j);
      double dot = 0.0;
      for (int64_t c = 0; c < shape.d; ++c) dot += static_cast<double>(q[c]) * k[c];
      logit[j] = dot / std::sqrt(static_cast<double>(shape.d));
      m = std::max(m, logit[j]);
    }
    double sum = 0.0;
    for (double& x : logit) sum += (x = std::exp(x - m));
    return logit[static_cast<size_t>(shape.Lk / 7)] / sum;
  };
  auto mean_weight = [&](int64_t i0, int64_t i1) {
    double sum = 0.0;
    for (int64_t hq = 0; hq < shape.Hq; ++hq) {
      for (int64_t i = i0; i < i1; ++i) sum += needle_weight(hq, i);
    }
    return sum / static_cast<double>(shape.Hq * (i1 - i0));
  };
  const int64_t seek = shape.Lq - shape.Lq / 10;  // the first seeking row
  CHECK(mean_weight(seek, shape.Lq) > 0.6);  // 0.89 at this seed
  CHECK(mean_weight(shape.Lk / 7 + 1, seek) < 0.02);
}

}  // namespace
}  // namespace attntune
