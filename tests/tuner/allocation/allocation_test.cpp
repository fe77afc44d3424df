// Allocation strategies meet rho exactly; greedy and consa find a known optimum that
// rule misses; DuoAttention TSV and mask files round-trip; statistics match the spec.
#include "tuner/allocation/allocation.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdio>
#include <random>

#include "core/error.h"
#include "kernels/reference/reference.h"
#include "core/safetensors.h"
#include "kernels/variant.h"
#include "tuner/allocation/calibration.h"
#include "tuner/allocation/io.h"
#include "tests/user_error_text.h"

namespace attntune {
namespace {

const Granularity kAll[] = {Granularity::kLayer, Granularity::kHead, Granularity::kHeadGlobal};

HeadLoss RandomLoss(int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  HeadLoss loss;
  for (int64_t i = 0; i < n; ++i) loss.push_back(u(rng));
  return loss;
}

ConsaOptions FastConsa() {
  ConsaOptions o;
  o.outer_steps = 10;
  o.inner_steps = 60;
  return o;
}

}  // namespace

TEST_CASE("TargetSwaUnits rounds rho * n to the nearest count, halves up") {
  CHECK(TargetSwaUnits(0.0, 7) == 0);
  CHECK(TargetSwaUnits(1.0, 7) == 7);
  CHECK(TargetSwaUnits(0.5, 8) == 4);
  CHECK(TargetSwaUnits(0.5, 7) == 4);   // 3.5 -> 4
  CHECK(TargetSwaUnits(0.3, 10) == 3);  // 0.3 * 10 is 2.9999999999999996 in binary
  CHECK(TargetSwaUnits(5.0 / 6.0, 6) == 5);
  CHECK_THROWS_WITH(TargetSwaUnits(1.5, 4), "--rho: 1.500000 is not a fraction in [0, 1]");
  CHECK_THROWS_WITH(
      ParseGranularity("row", "--granularity"),
      "--granularity: 'row' is not a granularity (expected layer, head or head-global)");
}

TEST_CASE("every strategy meets rho exactly at every granularity") {
  const int64_t layers = 6, kv = 4;
  const HeadLoss loss = RandomLoss(layers * kv, 7);
  HeadScores scores{layers, kv, RandomLoss(layers * kv, 8)};
  for (Granularity g : kAll) {
    for (double rho : {0.0, 0.25, 0.5, 0.75, 1.0, 1.0 / 3.0, 5.0 / 6.0}) {
      const std::vector<Allocation> made = {AllocateRule(g, layers, kv, rho),
                                            AllocateGreedy(g, layers, kv, rho, loss),
                                            AllocateConsa(g, layers, kv, rho, loss, FastConsa()),
                                            AllocationFromScores(scores, g, rho)};
      for (size_t s = 0; s < made.size(); ++s) {
        const Allocation& a = made[s];
        INFO("granularity " << GranularityName(g) << " rho " << rho << " strategy " << s);
        CHECK(a.SwaHeads() == TargetSwaCount(g, layers, kv, rho));
        if (g == Granularity::kLayer) {
          CHECK(a.SwaHeads() == TargetSwaUnits(rho, layers) * kv);
          for (int64_t l = 0; l < layers; ++l) CHECK((a.SwaHeadsInLayer(l) % kv) == 0);
        }
        if (g == Granularity::kHead)
          for (int64_t l = 0; l < layers; ++l)
            CHECK(a.SwaHeadsInLayer(l) == TargetSwaUnits(rho, kv));
        if (g == Granularity::kHeadGlobal) CHECK(a.SwaHeads() == TargetSwaUnits(rho, layers * kv));
      }
    }
  }
}

TEST_CASE("rule interleaves like Mistral and Gemma") {
  // rho = 1: every layer slides (Mistral); rho = 5/6 over 12 layers: Gemma 3's pattern.
  CHECK(AllocateRule(Granularity::kLayer, 4, 2, 1.0).SwaHeads() == 8);
  const Allocation g3 = AllocateRule(Granularity::kLayer, 12, 1, 5.0 / 6.0);
  for (int64_t l = 0; l < 12; ++l) CHECK(g3.Swa(l, 0) == ((l + 1) % 6 != 0));
  const Allocation g2 = AllocateRule(Granularity::kLayer, 6, 1, 0.5);  // Gemma 2 alternation
  for (int64_t l = 0; l < 6; ++l) CHECK(g2.Swa(l, 0) == (l % 2 == 0));
}

TEST_CASE("greedy and consa find the allocation that is best by construction; rule does not") {
  // Retrieval heads lose much under a window, local heads nothing. They sit exactly where
  // rule's interleaving keeps SWA, so rule picks the worst allocation.
  GeneratorSpec spec;
  spec.layers = 4;
  spec.kv_heads = 2;
  spec.group = 2;
  spec.head_dim = 32;
  spec.length = 128;
  const HeadKind R = HeadKind::kRetrieval, L = HeadKind::kLocal;
  const int64_t window = 16;

  SECTION("layer-wise: retrieval layers 0 and 2") {
    spec.kinds = {R, R, L, L, R, R, L, L};
    const CalibStats st = GeneratorStats(spec, window, 0);
    const Allocation best = [] {
      Allocation a(4, 2);
      for (int64_t h = 0; h < 2; ++h) a.Set(1, h, true), a.Set(3, h, true);
      return a;
    }();
    CHECK(AllocateGreedy(Granularity::kLayer, 4, 2, 0.5, st.Loss()) == best);
    CHECK(AllocateConsa(Granularity::kLayer, 4, 2, 0.5, st.Loss()) == best);
    const Allocation rule = AllocateRule(Granularity::kLayer, 4, 2, 0.5);
    CHECK_FALSE(rule == best);
    CHECK(AllocationLoss(rule, st.Loss()) > 10 * AllocationLoss(best, st.Loss()));
  }
  SECTION("head-wise and head-global: head 0 of every layer retrieves") {
    spec.kinds = {R, L, R, L, R, L, R, L};
    const CalibStats st = GeneratorStats(spec, window, 0);
    Allocation best(4, 2);
    for (int64_t l = 0; l < 4; ++l) best.Set(l, 1, true);
    for (Granularity g : {Granularity::kHead, Granularity::kHeadGlobal}) {
      INFO(GranularityName(g));
      CHECK(AllocateGreedy(g, 4, 2, 0.5, st.Loss()) == best);
      CHECK(AllocateConsa(g, 4, 2, 0.5, st.Loss()) == best);
      CHECK_FALSE(AllocateRule(g, 4, 2, 0.5) == best);
    }
  }
}

TEST_CASE("head statistics agree with the spec's reference and classify the generated kinds") {
  GeneratorSpec spec;
  spec.group = 2;
  spec.head_dim = 32;
  spec.length = 96;
  const int64_t window = 12, sink = 2;
  for (HeadKind kind :
       {HeadKind::kLocal, HeadKind::kRetrieval, HeadKind::kBroad, HeadKind::kUniform}) {
    INFO(HeadKindName(kind));
    const Tensors t = GenerateHead(spec, kind, 3, 1);
    const HeadStats s = ComputeHeadStats(t, window, sink);
    const Variant& swa = FindVariant("swa", "test");
    const Variant& dense = FindVariant("dense", "test");
    const Params p = {{"w", std::to_string(window)}, {"sink", std::to_string(sink)}};
    CHECK(s.mass_kept == Approx(MassRecallFromDenseRows(t, *swa.key_sets(t, p))).epsilon(1e-9));
    const std::vector<double> ref = ReferenceOutput(dense, t, {});
    CHECK(s.swa_rel_err == Approx(RelErr(ReferenceOutput(swa, t, p), ref)).epsilon(1e-6));
    double share = 0;
    for (double b : s.range_share) share += b;
    CHECK(share == Approx(1.0));
  }
  CHECK(ComputeHeadStats(GenerateHead(spec, HeadKind::kLocal, 0, 0), window, 0).range_class ==
        RangeClass::kStronglyLocal);
  CHECK(ComputeHeadStats(GenerateHead(spec, HeadKind::kUniform, 0, 0), window, 0).range_class ==
        RangeClass::kUniform);
  CHECK(ComputeHeadStats(GenerateHead(spec, HeadKind::kRetrieval, 0, 0), window, 0).range_class ==
        RangeClass::kSparseBroad);
  // A window over the whole sequence keeps everything.
  const HeadStats all = ComputeHeadStats(GenerateHead(spec, HeadKind::kBroad, 0, 0), 96, 0);
  CHECK(all.mass_kept == Approx(1.0));
  CHECK(all.swa_rel_err == Approx(0.0).margin(1e-12));
}

TEST_CASE("captured q/k/v in safetensors give the same statistics as in memory") {
  GeneratorSpec spec;
  spec.group = 2;
  spec.head_dim = 16;
  spec.length = 48;
  const Tensors t = GenerateHead(spec, HeadKind::kRetrieval, 0, 0);
  const std::string path = "allocation_test_calib.safetensors";
  WriteSafetensors(path, {{"q.0", MakeF32({1, 2, 48, 16}, t.q.ToVector())},
                          {"k.0", MakeF32({1, 1, 48, 16}, t.k.ToVector())},
                          {"v.0", MakeF32({1, 1, 48, 16}, t.v.ToVector())}});
  ModelGeometry m{"one", 1, 2, 1, 16};
  // Window 1024 of context 4096 is 12 of the 48 captured tokens.
  const CalibStats st = SafetensorsStats(path, m, 1024, 4096, 0, "--calib");
  CHECK(st.window == 12);
  CHECK(st.length == 48);
  const HeadStats direct = ComputeHeadStats(t, 12, 0);
  CHECK(st.heads.at(0).mass_kept == Approx(direct.mass_kept));
  CHECK(st.heads.at(0).swa_rel_err == Approx(direct.swa_rel_err));
  ModelGeometry two{"two", 2, 2, 1, 16};
  CHECK_THROWS_WITH(
      SafetensorsStats(path, two, 1024, 4096, 0, "--calib"),
      "--calib: " + path + ": missing tensor 'q.1' (expected q.<l>, k.<l>, v.<l> for layers 0..1)");
  std::remove(path.c_str());
}

TEST_CASE("captured q/k/v that give no statistics are refused in one line") {
  // Empty sequences, an empty head dim and a NaN gave a quality loss of 0; a second
  // sequence was left out unsaid.
  const std::string path = "allocation_test_bad_calib.safetensors";
  const ModelGeometry m{"one", 1, 2, 1, 8};
  auto write = [&](int64_t B, int64_t L, int64_t d, float poison) {
    std::vector<float> q(static_cast<size_t>(B * 2 * L * d), 0.5f), kv(static_cast<size_t>(B * L * d), 0.25f);
    if (!q.empty()) q[3] = poison;
    WriteSafetensors(path, {{"q.0", MakeF32({B, 2, L, d}, q)},
                            {"k.0", MakeF32({B, 1, L, d}, kv)},
                            {"v.0", MakeF32({B, 1, L, d}, kv)}});
    return UserErrorText([&] { SafetensorsStats(path, m, 1024, 4096, 0, "--calib"); });
  };
  // Read as tune's --calib reads a capture (tuner/calibration_set.h).
  CHECK(write(1, 0, 8, 0.5f) == "--calib: " + path + ": layer 0 holds no tokens (q is [1,2,0,8])");
  CHECK(write(1, 16, 0, 0.5f) ==
        "--calib: " + path + ": layer 0 has head dim 0, but the model one has 8");
  CHECK(write(1, 16, 8, NAN) == "--calib: " + path +
                                   ": layer 0: tensor 'q' holds nan at element 3 (attention "
                                   "needs finite inputs)");
  CHECK(write(1, 16, 8, 0.5f) == "<no UserError>");
  std::remove(path.c_str());
}

TEST_CASE("a capture of several sequences gives the first one's statistics") {
  // docs/allocation.md: batch 0 is read (a batch of 2 was refused, which capture_qkv.py
  // writes).
  const std::string path = "allocation_test_batch_calib.safetensors";
  const ModelGeometry m{"one", 1, 2, 1, 8};
  const int64_t L = 24, d = 8;
  auto values = [](int64_t n, double phase) {
    std::vector<float> x(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[static_cast<size_t>(i)] = static_cast<float>(std::sin(0.37 * i + phase));
    return x;
  };
  auto stats = [&](int64_t B) {
    std::vector<float> q = values(2 * L * d, 0.0), k = values(L * d, 1.0), v = values(L * d, 2.0);
    for (int64_t b = 1; b < B; ++b) {  // other sequences: other values
      for (float x : values(2 * L * d, 5.0 * b)) q.push_back(x);
      for (float x : values(L * d, 7.0 * b)) k.push_back(x);
      for (float x : values(L * d, 9.0 * b)) v.push_back(x);
    }
    WriteSafetensors(path, {{"q.0", MakeF32({B, 2, L, d}, q)},
                            {"k.0", MakeF32({B, 1, L, d}, k)},
                            {"v.0", MakeF32({B, 1, L, d}, v)}});
    return SafetensorsStats(path, m, 1024, 4096, 0, "--calib");
  };
  const CalibStats one = stats(1), three = stats(3);
  REQUIRE(one.heads.size() == 1);
  REQUIRE(three.heads.size() == 1);
  CHECK(three.heads[0].mass_kept == one.heads[0].mass_kept);
  CHECK(three.heads[0].swa_rel_err == one.heads[0].swa_rel_err);
  CHECK(three.heads[0].row_entropy == one.heads[0].row_entropy);
  std::remove(path.c_str());
}

TEST_CASE("a capture of another model or geometry is refused as tune refuses it") {
  // allocate read its own way: another model_type or depth, another head dim and layers
  // of other lengths were taken without a word.
  const std::string path = "allocation_test_other_calib.safetensors";
  ModelGeometry m{"one", 2, 2, 1, 8};
  m.model_type = "llama";
  auto write = [&](int64_t d, int64_t L1, const StMetadata& meta) {
    StFile file;
    for (int64_t l = 0; l < 2; ++l) {
      const int64_t L = l == 1 ? L1 : 16;
      const std::vector<float> q(static_cast<size_t>(2 * L * d), 0.5f), kv(static_cast<size_t>(L * d), 0.25f);
      file["q." + std::to_string(l)] = MakeF32({1, 2, L, d}, q);
      file["k." + std::to_string(l)] = MakeF32({1, 1, L, d}, kv);
      file["v." + std::to_string(l)] = MakeF32({1, 1, L, d}, kv);
    }
    WriteSafetensors(path, file, meta);
    return UserErrorText([&] { SafetensorsStats(path, m, 1024, 4096, 0, "--calib"); });
  };
  CHECK(write(8, 16, {{"model", "org/x"}, {"model_type", "gemma2"}}) ==
        "--calib: " + path + ": captured from 'org/x' (model_type gemma2), but the model one is "
        "model_type llama");
  CHECK(write(8, 16, {{"num_hidden_layers", "40"}}) ==
        "--calib: " + path + ": captured from another model (40 layers), but the model one has "
        "2 layers");
  CHECK(write(16, 16, {}) == "--calib: " + path + ": layer 0 has head dim 16, but the model one has 8");
  CHECK(write(8, 12, {}) == "--calib: " + path + ": layer 1 holds 1 x 12 tokens, layer 0 1 x 16 "
                            "(every layer of a capture holds the same)");
  CHECK(write(8, 16, {{"model_type", "llama"}}) == "<no UserError>");
  std::remove(path.c_str());
}

TEST_CASE("DuoAttention TSV and mask files round-trip") {
  const int64_t layers = 5, kv = 3;
  for (Granularity g : kAll) {
    const Allocation a = AllocateGreedy(g, layers, kv, 0.4, RandomLoss(layers * kv, 3));
    const std::string tsv = FormatDuoAttentionTsv(a);
    const HeadScores s = ParseDuoAttentionTsv(tsv, "t.tsv");
    CHECK(s.layers == layers);
    CHECK(s.kv_heads == kv);
    CHECK(AllocationFromScores(s, g, -1.0) == a);
    CHECK(AllocationFromScores(s, g, 0.4) == a);  // re-binarising at the same rho
    CHECK(FormatDuoAttentionTsv(AllocationFromScores(s, g, -1.0)) == tsv);
    CHECK(AllocationFromScores(ParseConsaMask(FormatConsaMask(a), "m.json"), g, -1.0) == a);
  }
  // DuoAttention's own files hold gate values; the quantile rule keeps the largest.
  const HeadScores gates = ParseDuoAttentionTsv("0.9\t0.1\t0.5\n0.02\t1.3\t-0.2\n", "g.tsv");
  CHECK(gates.keep == std::vector<double>{0.9, 0.1, 0.5, 0.02, 1.0, 0.0});
  const Allocation half = AllocationFromScores(gates, Granularity::kHeadGlobal, 0.5);
  CHECK(FormatDuoAttentionTsv(half) == "1\t0\t1\n0\t1\t0\n");
  CHECK_THROWS_WITH(ParseDuoAttentionTsv("1\t0\n1\tx\n", "f.tsv"),
                    "f.tsv:2: 'x' is not a number (expected tab-separated gate values)");
  CHECK_THROWS_WITH(ParseDuoAttentionTsv("1\t0\n1\n", "f.tsv"),
                    "f.tsv: layer 1 has 1 heads, expected 2 (same count on every row)");
  CHECK_THROWS_WITH(ParseConsaMask(R"({"mask":[[1]]})", "m.json"),
                    "m.json: not a mask file (expected \"format\": \"attntune-consa-mask\")");
  // A format that is not a string was nlohmann's type_error (exit 1); a later version was
  // read as version 1.
  CHECK_THROWS_WITH(ParseConsaMask(R"({"format":7,"mask":[[1]]})", "m.json"),
                    "m.json: not a mask file (expected \"format\": \"attntune-consa-mask\")");
  CHECK_THROWS_WITH(
      ParseConsaMask(R"({"format":"attntune-consa-mask","version":99,"mask":[[1]]})", "m.json"),
      "m.json: mask file version 99 is not one this attntune reads (1)");
  const HeadScores logits = ParseConsaMask(
      R"({"format":"attntune-consa-mask","version":1,"log_alpha":[[3,-3]]})", "m.json");
  CHECK(AllocationFromScores(logits, Granularity::kHead, -1.0).swa == std::vector<uint8_t>{0, 1});
}

TEST_CASE("an import file is read to at most 64 MiB (a device never ended)") {
  CHECK_THROWS_WITH(ReadHeadScores("/dev/zero", "--import"),
                    "/dev/zero: holds more than attntune reads as an import file (64 MiB)");
}

}  // namespace attntune
