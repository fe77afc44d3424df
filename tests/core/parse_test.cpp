// Parsing and validation of user input: shapes, parameter lists, the variant table's
// parameter declarations. Error texts are asserted exactly (STYLE.md).
#include <catch2/catch.hpp>

#include "core/error.h"
#include "tests/user_error_text.h"
#include "core/shape.h"
#include "core/types.h"
#include "kernels/variant.h"

namespace attntune {
namespace {

TEST_CASE("ParsePositiveInt accepts positive integers and names bad input") {
  CHECK(ParsePositiveInt("4096", "--seq-lens") == 4096);
  CHECK(UserErrorText([] { ParsePositiveInt("4k", "--seq-lens"); }) ==
        "--seq-lens: '4k' is not a positive integer");
  CHECK(UserErrorText([] { ParsePositiveInt("0", "--seq-lens"); }) ==
        "--seq-lens: '0' is not a positive integer");
  CHECK(UserErrorText([] { ParsePositiveInt("-3", "--b"); }) ==
        "--b: '-3' is not a positive integer");
  CHECK(UserErrorText([] { ParsePositiveInt("", "--b"); }) == "--b: '' is not a positive integer");
  CHECK(UserErrorText([] { ParsePositiveInt("99999999999999999999", "--b"); }) ==
        "--b: '99999999999999999999' is not a positive integer");
}

TEST_CASE("ParseShape reads every key and round-trips through ToString") {
  const Shape s = ParseShape("B=2,Hq=16,Hkv=8,L=4096,d=128", "--shape");
  CHECK(s.B == 2);
  CHECK(s.Hq == 16);
  CHECK(s.Hkv == 8);
  CHECK(s.Lq == 4096);
  CHECK(s.Lk == 4096);
  CHECK(s.d == 128);
  CHECK(s.causal);
  CHECK(s.Group() == 2);
  CHECK(s.ToString() == "B=2,Hq=16,Hkv=8,L=4096,d=128");
  CHECK(ParseShape(s.ToString(), "x") == s);

  const Shape t = ParseShape("Hq=4,Lq=37,Lk=577,d=64,causal=0", "--shape");
  CHECK(t.B == 1);
  CHECK(t.Hkv == 4);  // defaults to Hq
  CHECK(t.QueryPos(0) == 540);
  CHECK_FALSE(t.causal);
  CHECK(t.ToString() == "B=1,Hq=4,Hkv=4,Lq=37,Lk=577,d=64,causal=0");
  CHECK(ParseShape(t.ToString(), "x") == t);
}

TEST_CASE("ParseShape and ValidateShape error texts") {
  auto err = [](const std::string& text) {
    return UserErrorText([&] { ParseShape(text, "--shape"); });
  };
  CHECK(err("Hq=6,Hkv=4,L=16,d=64") == "--shape: Hq=6 is not divisible by Hkv=4");
  CHECK(err("Hq=4,Lq=20,Lk=10,d=64") == "--shape: Lq=20 must not exceed Lk=10");
  CHECK(err("Hq=4,L=16,d=64,X=3") ==
        "--shape: unknown key 'X' (expected B, Hq, Hkv, L, Lq, Lk, d, causal)");
  CHECK(err("Hq=4,L=16,d") ==
        "--shape: 'd' is not key=value (expected B, Hq, Hkv, L, Lq, Lk, d, causal)");
  CHECK(err("Hq=4,L=16,d=64,d=32") == "--shape: duplicate key 'd'");
  CHECK(err("Hq=4,L=4k,d=64") == "--shape: L='4k' is not a positive integer");
  CHECK(err("Hq=4,L=0,d=64") == "--shape: L='0' is not a positive integer");
  CHECK(err("L=16,d=64") == "--shape: missing Hq (e.g. B=1,Hq=16,Hkv=8,L=4096,d=128)");
  CHECK(err("Hq=4,d=64") == "--shape: missing L (e.g. B=1,Hq=16,Hkv=8,L=4096,d=128)");
  CHECK(err("Hq=4,L=16") == "--shape: missing d (e.g. B=1,Hq=16,Hkv=8,L=4096,d=128)");
  CHECK(err("Hq=4,Lq=16,d=64") == "--shape: missing Lk (e.g. B=1,Hq=16,Hkv=8,L=4096,d=128)");
  CHECK(err("Hq=4,L=16,Lk=16,d=64") == "--shape: give either L or Lq and Lk, not both");
  CHECK(err("Hq=4,L=16,d=64,causal=2") == "--shape: causal='2' must be 0 or 1");

  Shape s;
  s.d = 0;
  CHECK(UserErrorText([&] { ValidateShape(s, "--shape"); }) == "--shape: d=0 must be positive");

  // Each extent within what attntune takes (docs/reliability.md "Limits"): counts of
  // elements and pairs stay far from int64's end.
  CHECK(ParseShape("B=65536,Hq=1024,Hkv=1024,L=16777216,d=1024", "--shape").Lk == 16777216);
  CHECK(err("Hq=4,L=16777217,d=64") ==
        "--shape: Lq=16777217 is longer than attntune takes (16777216 tokens)");
  CHECK(err("Hq=4,Lq=16,Lk=99999999999,d=64") ==
        "--shape: Lk=99999999999 is longer than attntune takes (16777216 tokens)");
  CHECK(err("Hq=1025,Hkv=1,L=16,d=64") == "--shape: Hq=1025 is more than attntune takes (1024)");
  CHECK(err("Hq=4,L=16,d=1025") == "--shape: d=1025 is more than attntune takes (1024)");
  CHECK(err("B=65537,Hq=4,L=16,d=64") == "--shape: B=65537 is more than attntune takes (65536)");
  CHECK(ParseSeqLens("64,16777216", "--seq-lens").back() == 16777216);
  CHECK(UserErrorText([&] { ParseSeqLens("64,16777217", "--seq-lens"); }) ==
        "--seq-lens: 16777217 is longer than attntune takes (16777216 tokens)");
}

TEST_CASE("ParseParams, ParamsToString and ParamInt") {
  const Params p = ParseParams("w=256,sink=4", "--params");
  CHECK(p.size() == 2);
  CHECK(p.at("w") == "256");
  CHECK(ParamInt(p, "sink") == 4);
  CHECK(ParamsToString(p) == "sink=4,w=256");
  CHECK(ParseParams("", "--params").empty());
  CHECK(UserErrorText([] { ParseParams("w256", "--params"); }) ==
        "--params: 'w256' is not key=value");
  CHECK(UserErrorText([] { ParseParams("w=", "--params"); }) == "--params: 'w=' is not key=value");
  CHECK(UserErrorText([] { ParseParams("w=1,", "--params"); }) ==
        "--params: '' is not key=value");
  CHECK(UserErrorText([] { ParseParams("w=1,w=2", "--params"); }) ==
        "--params: parameter 'w' given twice");
}

TEST_CASE("FindVariant lists the known variants") {
  CHECK(FindVariant("swa", "--variant").id == "swa");
  CHECK(UserErrorText([] { FindVariant("x", "--variant"); }) ==
        "--variant: unknown variant 'x' (known: dense, swa, hybrid, lsh, ks, hax, dma, "
        "dma_decode)");
  CHECK(FindVariant("dense", "x").FindImplementation("tiled") != nullptr);
  CHECK(FindVariant("dense", "x").FindImplementation("nope") == nullptr);
}

TEST_CASE("ResolveParams fills defaults and names every kind of bad value") {
  Shape shape;
  shape.Lq = shape.Lk = 128;
  const Variant& swa = FindVariant("swa", "x");
  const Implementation* tiled = swa.FindImplementation("tiled");
  const Params full = ResolveParams(swa, tiled, shape, ParseParams("w=0064", "x"), "--params");
  CHECK(ParamsToString(full) == "Bc=64,Br=32,sink=0,w=64");
  CHECK(CanonicalVariantParamsJson(swa, full) == R"({"sink":0,"w":64})");
  CHECK(CanonicalTunablesJson(*tiled, full) == R"({"Bc":64,"Br":32})");
  // Split by the declarations, not by spelling: an undeclared name is in neither.
  Params odd = full;
  odd["Extra"] = "1";
  odd["extra"] = "2";
  CHECK(CanonicalVariantParamsJson(swa, odd) == R"({"sink":0,"w":64})");
  CHECK(CanonicalTunablesJson(*tiled, odd) == R"({"Bc":64,"Br":32})");
  CHECK(CanonicalTunablesJson(*tiled, {}) == "{}");
  const Params variant_only = ResolveParams(swa, nullptr, shape, {{"w", "8"}}, "x");
  CHECK(ParamsToString(variant_only) == "sink=0,w=8");

  auto err = [&](const std::string& text) {
    return UserErrorText([&] { ResolveParams(swa, tiled, shape, ParseParams(text, "x"), "--params"); });
  };
  CHECK(err("w=abc") == "--params: w='abc' is not an integer");
  CHECK(err("w=+5") == "--params: w='+5' is not an integer");
  CHECK(err("w=0") == "--params: w=0 is out of range (w >= 1)");
  CHECK(err("w=8,Br=0") == "--params: Br=0 is out of range (1 <= Br <= 256)");
  CHECK(err("w=8,Bc=513") == "--params: Bc=513 is out of range (1 <= Bc <= 512)");
  CHECK(err("w=8,sink=-1") == "--params: sink=-1 is out of range (sink >= 0)");
  // Digits past int64 (a seed of 2^63) are out of range, not "not an integer".
  CHECK(err("w=9223372036854775808") == "--params: w=9223372036854775808 is out of range (w >= 1)");
  CHECK(err("w=8,sink=-99999999999999999999") ==
        "--params: sink=-99999999999999999999 is out of range (sink >= 0)");
  CHECK(err("w=-") == "--params: w='-' is not an integer");
  CHECK(err("w=8,k=3") ==
        "--params: unknown parameter 'k' for swa/tiled (known: w, sink, Br, Bc)");
  CHECK(err("sink=4") == "--params: swa/tiled requires parameter w (e.g. w=128)");

  const Variant& dense = FindVariant("dense", "x");
  CHECK(UserErrorText([&] { ResolveParams(dense, nullptr, shape, {{"w", "8"}}, "--params"); }) ==
        "--params: unknown parameter 'w' for dense (it takes none)");
  CHECK(CheckParams(dense, *dense.FindImplementation("tiled"), shape, {{"Br", "300"}}) ==
        "Br=300 is out of range (1 <= Br <= 256)");
  CHECK(CheckParams(dense, *dense.FindImplementation("tiled"), shape, {}).empty());
}

TEST_CASE("ResolveParams takes the tunables of the shape's kind where they depend on it") {
  // As a CUDA implementation's Tile: every tile in `tunables`, the ones compiled for the
  // shape's head dim (with their own default) from `tunables_for`.
  Implementation impl;
  impl.id = "per_d";
  impl.phases = {Phase::kPrefill};
  impl.dtypes = {Dtype::kF16};
  const auto tile = [](std::vector<std::string> choices) {
    return ParamDecl{"Tile", ParamKind::kEnum, 0, 0, choices, choices.front(), choices, "tile"};
  };
  impl.tunables = {tile({"t64", "t128"})};
  impl.tunables_for = [tile](const ProblemKind& kind) {
    return std::vector<ParamDecl>{tile({kind.head_dim == 128 ? "t128" : "t64"})};
  };
  const Variant& dense = FindVariant("dense", "x");
  Shape shape;
  shape.Lq = shape.Lk = 128;
  shape.d = 128;
  CHECK(ParamsToString(ResolveParams(dense, &impl, shape, {}, "--params")) == "Tile=t128");
  shape.d = 64;
  CHECK(ParamsToString(ResolveParams(dense, &impl, shape, {}, "--params")) == "Tile=t64");
  CHECK(UserErrorText([&] { ResolveParams(dense, &impl, shape, {{"Tile", "t128"}}, "--params"); }) ==
        "--params: Tile='t128' is not one of t64");
}

TEST_CASE("Every declared default and grid value passes its own declaration") {
  // Each implementation's tunables for the problem kind of `shape` (the CUDA tiles of its
  // dtype and head dimension), on a shape every implementation takes.
  Shape shape;
  shape.Lq = shape.Lk = 256;
  for (const int64_t d : {64, 128}) {
   shape.d = d;
   for (const Variant& v : Variants()) {
    for (const Implementation& impl : v.implementations) {
      const ProblemKind kind{impl.phases.front(), impl.dtypes.front(), d};
      if (!impl.Refuses(kind).empty()) continue;
      if (!v.token_by_token && kind.phase == Phase::kDecode && impl.platform != kKokkosPlatform)
        shape.Lq = 1;  // a decode kernel takes one step
      const std::vector<ParamDecl> tunables = impl.TunablesFor(kind);
      std::vector<const ParamDecl*> decls;
      for (const ParamDecl& p : v.params) decls.push_back(&p);
      for (const ParamDecl& p : tunables) decls.push_back(&p);
      for (const ParamDecl* p : decls) {
        REQUIRE_FALSE(p->grid.empty());
        for (const std::string& value : p->grid) {
          Params given;
          for (const ParamDecl* q : decls) given[q->name] = q->grid.front();
          given[p->name] = value;
          INFO(v.id << "/" << impl.id << " " << p->name << "=" << value << " d=" << d);
          // An implementation may refuse a value of the variant's own parameters, naming
          // it (cuDNN's SDPA: "sink=4: ..."); its own tunables' values must all pass.
          bool variant_param = false;
          for (const ParamDecl& q : v.params) variant_param = variant_param || q.name == p->name;
          const std::string why = CheckParams(v, impl, shape, given);
          const std::string refusal = impl.check ? impl.check(shape, given) : "";
          if (variant_param && refusal.rfind(p->name + "=" + value + ": ", 0) == 0 &&
              why.find(refusal) != std::string::npos) {
            continue;
          }
          CHECK(why.empty());
        }
      }
      shape.Lq = shape.Lk;
    }
   }
  }
}

}  // namespace
}  // namespace attntune

TEST_CASE("dtype, phase and device ids have one spelling each", "[core][types]") {
  using namespace attntune;
  for (Dtype d : {Dtype::kF32, Dtype::kF16, Dtype::kBf16}) REQUIRE(DtypeFromString(ToString(d)) == d);
  CHECK_FALSE(DtypeFromString("float32").has_value());
  CHECK(ElementBytes(Dtype::kF32) == 4.0);
  CHECK(ElementBytes(Dtype::kBf16) == 2.0);
  for (Phase p : {Phase::kPrefill, Phase::kDecode}) REQUIRE(PhaseFromString(ToString(p)) == p);
  CHECK_FALSE(PhaseFromString("Decode").has_value());
  CHECK(ParseDeviceId("cpu")->ToString() == "cpu");
  CHECK(ParseDeviceId("cuda:3")->index == 3);
  CHECK(ParseDeviceId("cuda:3")->ToString() == "cuda:3");
  CHECK_FALSE(ParseDeviceId("cuda:").has_value());
  CHECK_FALSE(ParseDeviceId("cuda:-1").has_value());
  CHECK_FALSE(ParseDeviceId("cuda:9999999").has_value());
  CHECK_FALSE(ParseDeviceId("CUDA:0").has_value());
  CHECK_FALSE(ParseDeviceId("").has_value());
}

TEST_CASE("durations: units, and the refusals with their exact lines", "[core][parse]") {
  using namespace attntune;
  CHECK(ParseDuration("90", "--t") == 90.0);
  CHECK(ParseDuration("1.5m", "--t") == 90.0);
  CHECK(ParseDuration("2h", "--t") == 7200.0);
  CHECK_THROWS_WITH(ParseDuration("10x", "--t"), "--t: '10x' is not a duration (e.g. 90s, 10m, 1.5h)");
  CHECK_THROWS_WITH(ParseDuration("nan", "--t"), "--t: 'nan' is not a duration (e.g. 90s, 10m, 1.5h)");
  CHECK_THROWS_WITH(ParseDuration("0m", "--t"), "--t: '0m' is not a positive duration");
  // 1e308 hours is finite as a number of hours and infinite in seconds.
  CHECK_THROWS_WITH(ParseDuration("1e308h", "--t"),
                    "--t: '1e308h' is longer than the limit of 1e7 s (116 days)");
  CHECK_THROWS_WITH(ParseDuration("2778h", "--t"),
                    "--t: '2778h' is longer than the limit of 1e7 s (116 days)");
  CHECK(ParseDuration("2777h", "--t") == 2777.0 * 3600);
}
