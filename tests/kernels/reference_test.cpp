// The fp64 references are the oracle for every kernel, so they are checked against
// independent, naive implementations of DESIGN.md s1 and against each other.
#include <catch2/catch.hpp>

#include <chrono>
#include <cmath>

#include "kernels/kokkos/runtime.h"
#include "kernels/reference/reference.h"
#include "kernels/variant.h"

namespace attntune {
namespace {

Shape MakeShape(int64_t B, int64_t Hq, int64_t Hkv, int64_t Lq, int64_t Lk, int64_t d,
                bool causal = true) {
  Shape s;
  s.B = B;
  s.Hq = Hq;
  s.Hkv = Hkv;
  s.Lq = Lq;
  s.Lk = Lk;
  s.d = d;
  s.causal = causal;
  return s;
}

// Dense attention written straight from the definition, with no KeySets.
std::vector<double> NaiveDense(const Tensors& t) {
  const Shape& s = t.shape;
  std::vector<double> out(s.QElems(), 0.0);
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t h = 0; h < s.Hq; ++h) {
      for (int64_t i = 0; i < s.Lq; ++i) {
        const int64_t last = s.causal ? s.Lk - s.Lq + i : s.Lk - 1;
        std::vector<double> w(last + 1);
        double mx = -INFINITY, sum = 0.0;
        for (int64_t j = 0; j <= last; ++j) {
          double dot = 0.0;
          for (int64_t c = 0; c < s.d; ++c) {
            dot += double(t.Q(b, h, i)[c]) * double(t.K(b, h / (s.Hq / s.Hkv), j)[c]);
          }
          w[j] = dot / std::sqrt(double(s.d));
          mx = std::max(mx, w[j]);
        }
        for (double& x : w) sum += (x = std::exp(x - mx));
        for (int64_t j = 0; j <= last; ++j) {
          for (int64_t c = 0; c < s.d; ++c) {
            out[OutIndex(s, b, h, i, c)] += w[j] / sum * t.V(b, h / (s.Hq / s.Hkv), j)[c];
          }
        }
      }
    }
  }
  return out;
}

TEST_CASE("Kokkos runtime describes itself") {
  const std::string text = KokkosDescription();
  CHECK(text.rfind("Kokkos ", 0) == 0);
  CHECK(text.find(" (") != std::string::npos);
  CHECK(text.back() == ')');
}

TEST_CASE("GaussianTensors is deterministic and pinned") {
  const Shape s = MakeShape(1, 2, 1, 3, 5, 4);
  const Tensors a = GaussianTensors(s, 42), b = GaussianTensors(s, 42);
  CHECK(a.q == b.q);
  CHECK(a.k == b.k);
  CHECK(a.v == b.v);
  CHECK(a.q.size() == 24);
  CHECK(a.k.size() == 20);
  CHECK(a.v.size() == 20);
  CHECK(GaussianTensors(s, 43).q != a.q);
  // Pinned so that a change of generator (and so of every stored result) is noticed.
  CHECK(a.q[0] == -0.481217712f);
  CHECK(a.q[1] == -0.57453686f);
  CHECK(a.k[0] == 1.63427925f);
  CHECK(a.v[19] == 0.0321198404f);
  double mean = 0.0, var = 0.0;
  const Tensors big = GaussianTensors(MakeShape(1, 1, 1, 1000, 1000, 64), 7);
  for (float x : big.q) mean += x;
  mean /= big.q.size();
  for (float x : big.q) var += (x - mean) * (x - mean);
  var /= big.q.size();
  CHECK(std::abs(mean) < 0.02);
  CHECK(std::abs(var - 1.0) < 0.03);
}

TEST_CASE("Dense reference equals a naive implementation") {
  for (const Shape& s : {MakeShape(2, 4, 2, 9, 9, 8), MakeShape(1, 3, 1, 5, 12, 16),
                         MakeShape(1, 2, 2, 6, 11, 8, /*causal=*/false)}) {
    INFO(s.ToString());
    const Tensors t = GaussianTensors(s, 3);
    const std::vector<double> ref = ReferenceOutput(FindVariant("dense", "x"), t, {});
    CHECK(RelErr(ref, NaiveDense(t)) < 1e-14);
  }
}

TEST_CASE("swa with a window covering every key equals dense") {
  const Shape s = MakeShape(1, 4, 2, 40, 70, 16);
  const Tensors t = GaussianTensors(s, 5);
  const std::vector<double> dense = ReferenceOutput(FindVariant("dense", "x"), t, {});
  const Variant& swa = FindVariant("swa", "x");
  CHECK(RelErr(ReferenceOutput(swa, t, {{"w", "70"}, {"sink", "0"}}), dense) == 0.0);
  CHECK(RelErr(ReferenceOutput(swa, t, {{"w", "1000"}, {"sink", "3"}}), dense) == 0.0);
  CHECK(RelErr(ReferenceOutput(swa, t, {{"w", "8"}, {"sink", "0"}}), dense) > 1e-3);
}

TEST_CASE("swa key sets follow the definition") {
  const Shape s = MakeShape(1, 1, 1, 10, 10, 4);
  const Tensors t = GaussianTensors(s, 1);
  const auto sets = FindVariant("swa", "x").key_sets(t, {{"w", "3"}, {"sink", "2"}});
  std::vector<int64_t> keys;
  sets->Row(0, 0, 0, &keys);
  CHECK(keys == std::vector<int64_t>{0});
  sets->Row(0, 0, 2, &keys);
  CHECK(keys == std::vector<int64_t>{0, 1, 2});
  sets->Row(0, 0, 4, &keys);
  CHECK(keys == std::vector<int64_t>{0, 1, 2, 3, 4});
  sets->Row(0, 0, 5, &keys);
  CHECK(keys == std::vector<int64_t>{0, 1, 3, 4, 5});
  sets->Row(0, 0, 9, &keys);
  CHECK(keys == std::vector<int64_t>{0, 1, 7, 8, 9});
}

TEST_CASE("Closed-form pair counts equal the counts of the key sets") {
  const std::vector<std::pair<std::string, Params>> configs = {
      {"dense", {}},
      {"swa", {{"w", "1"}, {"sink", "0"}}},
      {"swa", {{"w", "5"}, {"sink", "4"}}},
      {"swa", {{"w", "3"}, {"sink", "9"}}},
      {"swa", {{"w", "64"}, {"sink", "4"}}},
      {"swa", {{"w", "1000"}, {"sink", "0"}}},
      {"swa", {{"w", "30"}, {"sink", "1000000"}}},
      {"swa", {{"w", "1000000000000"}, {"sink", "3"}}},
      {"ks", {{"k", "1"}}},
      {"ks", {{"k", "7"}}},
      {"ks", {{"k", "100000"}}},
      {"dma", {{"w", "6"}, {"bias", "1"}, {"seed", "2"}}},
  };
  const std::vector<Shape> shapes = {MakeShape(1, 1, 1, 1, 1, 4), MakeShape(2, 3, 1, 37, 37, 4),
                                     MakeShape(1, 2, 2, 37, 577, 4),
                                     MakeShape(1, 2, 1, 20, 90, 4, false),
                                     MakeShape(1, 1, 1, 1, 64, 4),
                                     MakeShape(1, 1, 1, 64, 64, 4, false)};
  for (const Shape& s : shapes) {
    const Tensors t = GaussianTensors(s, 1);
    for (const auto& [id, params] : configs) {
      Variant counted = FindVariant(id, "x");
      counted.pairs = nullptr;  // AttendedPairs then counts from the key sets
      INFO(s.ToString() << " " << id << " " << ParamsToString(params));
      CHECK(AttendedPairs(FindVariant(id, "x"), t, params) == AttendedPairs(counted, t, params));
    }
  }
  // Counts from the selection's structures (hax, dma_decode) against the key sets, ties
  // included (ks scores of few values; dma's b all equal).
  const std::vector<std::pair<std::string, Params>> counted_configs = {
      {"hax", {{"k_lsh", "3"}, {"k_ks", "5"}, {"bits", "2"}}},
      {"hax", {{"k_lsh", "100"}, {"k_ks", "1"}, {"bits", "1"}, {"rule", "argmax"}}},
      {"hax", {{"k_lsh", "1"}, {"k_ks", "1000"}, {"bits", "3"}}},
      {"dma_decode", {{"w_kv", "5"}, {"w_q", "3"}, {"r", "4"}}},
      {"dma_decode", {{"w_kv", "1000"}, {"w_q", "2"}, {"r", "9"}}},
      {"dma_decode", {{"w_kv", "2"}, {"w_q", "0"}, {"r", "0"}}},
  };
  for (const Shape& shape : {MakeShape(1, 1, 1, 1, 1, 4), MakeShape(2, 4, 2, 37, 37, 8),
                             MakeShape(1, 2, 1, 30, 90, 8)}) {
    for (const bool tied : {false, true}) {
      Tensors t = GaussianTensors(shape, 3);
      if (tied) {
        t.scores.assign(static_cast<size_t>(shape.B * shape.Hkv * shape.Lk), 0.f);
        for (size_t n = 0; n < t.scores.size(); ++n) t.scores[n] = static_cast<float>(n % 3);
        t.delta.assign(static_cast<size_t>(shape.Hkv * shape.d), 0.f);
      }
      for (const auto& [id, given] : counted_configs) {
        if (id == "dma_decode" && shape.Lq != shape.Lk) continue;
        const Variant& variant = FindVariant(id, "x");
        const Params params = ResolveParams(variant, nullptr, shape, given, "x");
        Variant by_sets = variant;
        by_sets.count_pairs = nullptr;
        INFO(shape.ToString() << " " << id << " " << ParamsToString(params) << " tied=" << tied);
        REQUIRE(variant.count_pairs);
        CHECK(AttendedPairs(variant, t, params) == AttendedPairs(by_sets, t, params));
      }
    }
  }
  const Shape s = MakeShape(2, 4, 2, 100, 100, 8);
  CHECK(FindVariant("dense", "x").pairs(s, {}) == 2 * 4 * 100 * 101 / 2);

  // In closed form: 2^31 rows count at once (a loop over the rows took seconds, and at
  // allocate --context 99999999999999 never ended).
  const int64_t L = int64_t{1} << 31;
  const Shape huge = MakeShape(1, 1, 1, L, L, 4);
  const auto start = std::chrono::steady_clock::now();
  CHECK(FindVariant("dense", "x").pairs(huge, {}) == L / 2 * (L + 1));
  CHECK(FindVariant("swa", "x").pairs(huge, {{"w", "100"}, {"sink", "4"}}) ==
        100 * 101 / 2 + (L - 100) * 100 + 4 * (L - 100) - 6);  // sink: 1 + 2 + 3 + 4 + 4 ...
  CHECK(FindVariant("ks", "x").pairs(huge, {{"k", "64"}}) == 64 * 65 / 2 + (L - 64) * 64);
  CHECK(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() < 0.5);
  CHECK(UsefulFlops(s, 10) == 4.0 * 8 * 10);
}

TEST_CASE("mass_recall is 1 for dense and the kept share for swa") {
  const Shape s = MakeShape(1, 2, 1, 64, 64, 16);
  const Tensors t = GaussianTensors(s, 9);
  const Variant& dense = FindVariant("dense", "x");
  const Variant& swa = FindVariant("swa", "x");
  const std::vector<double> dense_ref = ReferenceOutput(dense, t, {});
  CHECK(MassRecallFromDenseRows(t, *dense.key_sets(t, {})) == Approx(1.0).epsilon(1e-12));
  const Quality dq = QualityAgainstDense(dense, t, {}, dense_ref);
  CHECK(dq.rel_err == 0.0);
  CHECK(dq.mass_recall == Approx(1.0).epsilon(1e-12));

  const Params small = {{"w", "4"}, {"sink", "0"}};
  const Quality q = QualityAgainstDense(swa, t, small, dense_ref);
  CHECK(q.rel_err > 0.01);
  CHECK(q.mass_recall > 0.05);
  CHECK(q.mass_recall < 0.9);
  // A larger window keeps more of the dense probability.
  CHECK(MassRecallFromDenseRows(t, *swa.key_sets(t, {{"w", "32"}, {"sink", "0"}})) > q.mass_recall);
}

TEST_CASE("RelErr handles zeros and non-finite outputs") {
  const std::vector<double> ref = {1.0, 2.0};
  CHECK(RelErr(std::vector<double>{1.0, 2.0}, ref) == 0.0);
  CHECK(RelErr(std::vector<double>{0.0, 0.0}, std::vector<double>{0.0, 0.0}) == 0.0);
  CHECK(std::isinf(RelErr(std::vector<double>{1.0, 0.0}, std::vector<double>{0.0, 0.0})));
  const float bad[] = {1.0f, NAN};
  CHECK(std::isinf(RelErr(bad, ref)));
  const float off[] = {1.0f, 3.0f};
  CHECK(RelErr(off, ref) == Approx(1.0 / std::sqrt(5.0)));
}

}  // namespace
}  // namespace attntune

TEST_CASE("MassRecall from the dense rows' log-sum-exp equals the definition, for every variant") {
  using namespace attntune;
  for (const char* shape_text : {"Hq=4,Hkv=2,L=37,d=64", "Hq=2,Hkv=1,Lq=37,Lk=577,d=64", "Hq=1,L=1,d=64"}) {
    const Shape shape = ParseShape(shape_text, "test");
    const Tensors t = GaussianTensors(shape, 7);
    std::vector<double> lse;
    ReferenceAttention(t, *FindVariant("dense", "test").key_sets(t, {}), &lse);
    const std::pair<const char*, Params> cases[] = {
        {"dense", {}},
        {"swa", {{"w", "5"}, {"sink", "2"}}},
        {"hybrid", {{"w", "7"}, {"full", "1"}, {"sink", "0"}}},
        {"lsh", {{"k", "6"}, {"bits", "3"}, {"rule", "sign"}, {"seed", "1"}}},
        {"ks", {{"k", "4"}}},
        {"hax", {{"k_lsh", "3"}, {"k_ks", "3"}, {"bits", "2"}, {"rule", "argmax"}, {"seed", "0"}}},
        {"dma", {{"w", "6"}, {"bias", "1"}, {"seed", "2"}}},
    };
    for (const auto& [id, params] : cases) {
      const Variant& v = FindVariant(id, "test");
      if (shape.Lq != shape.Lk && v.token_by_token) continue;
      INFO(id << " " << shape_text);
      const double fast = MassRecall(t, *v.key_sets(t, params), lse);
      CHECK(fast == Approx(MassRecallFromDenseRows(t, *v.key_sets(t, params))).epsilon(1e-12));
    }
  }
}

namespace {

// Query head `hq` of `t` (every batch) with its KV head, as a problem of its own: the
// swa key sets do not depend on the head's index, so its metrics are the head's.
attntune::Tensors OneHead(const attntune::Tensors& t, int64_t hq) {
  using namespace attntune;
  const Shape& s = t.shape;
  Tensors h;
  h.shape = s;
  h.shape.Hq = 1;
  h.shape.Hkv = 1;
  const int64_t hkv = hq / s.Group();
  std::vector<float> q, k, v;
  for (int64_t b = 0; b < s.B; ++b) {
    q.insert(q.end(), t.Q(b, hq, 0), t.Q(b, hq, 0) + s.Lq * s.d);
    k.insert(k.end(), t.K(b, hkv, 0), t.K(b, hkv, 0) + s.Lk * s.d);
    v.insert(v.end(), t.V(b, hkv, 0), t.V(b, hkv, 0) + s.Lk * s.d);
  }
  h.q = std::move(q);
  h.k = std::move(k);
  h.v = std::move(v);
  return h;
}

}  // namespace

TEST_CASE("MassRecallByHead and RelErrByHead give each query head's own metric") {
  using namespace attntune;
  const Shape shape = ParseShape("B=2,Hq=4,Hkv=2,Lq=37,Lk=53,d=16", "test");
  const Tensors t = GaussianTensors(shape, 11);
  const Variant& dense = FindVariant("dense", "test");
  const Variant& swa = FindVariant("swa", "test");
  const Params params{{"w", "9"}, {"sink", "2"}};
  std::vector<double> lse;
  const std::vector<double> dense_ref = ReferenceAttention(t, *dense.key_sets(t, {}), &lse);
  const std::vector<double> swa_ref = ReferenceAttention(t, *swa.key_sets(t, params));
  const std::vector<double> recall = MassRecallByHead(t, *swa.key_sets(t, params), lse);
  const std::vector<double> err = RelErrByHead(shape, swa_ref, dense_ref);
  std::vector<float> swa_f(swa_ref.begin(), swa_ref.end());
  const std::vector<double> err_f = RelErrByHead(shape, swa_f.data(), dense_ref);
  REQUIRE(recall.size() == 4);
  REQUIRE(err.size() == 4);
  double mean = 0;
  for (int64_t hq = 0; hq < 4; ++hq) {
    INFO("head " << hq);
    const Tensors h = OneHead(t, hq);
    const double own = MassRecallFromDenseRows(h, *swa.key_sets(h, params));
    CHECK(recall[static_cast<size_t>(hq)] == Approx(own).epsilon(1e-12));
    const double own_err = RelErr(ReferenceAttention(h, *swa.key_sets(h, params)),
                                  ReferenceAttention(h, *dense.key_sets(h, {})));
    CHECK(err[static_cast<size_t>(hq)] == Approx(own_err).epsilon(1e-12));
    CHECK(err_f[static_cast<size_t>(hq)] == Approx(own_err).epsilon(1e-5));
    mean += recall[static_cast<size_t>(hq)] / 4;
  }
  CHECK(mean == Approx(MassRecall(t, *swa.key_sets(t, params), lse)).epsilon(1e-12));
  // The heads differ: a per-head value is not the mean copied.
  CHECK(*std::max_element(recall.begin(), recall.end()) >
        *std::min_element(recall.begin(), recall.end()) + 1e-3);
}
