// The CUDA implementations' refusals of shapes their selection on the device cannot take,
// without a device: each is one line from impl.check (what bench prints before exit 2 and
// what the tuner records as the candidate's refusal), and the shape just inside each
// limit passes.
#include <catch2/catch.hpp>
#include <string>

#include "core/shape.h"
#include "kernels/variant.h"
#include "tests/gpu/library_entries.h"

using namespace attntune;

namespace {

const Implementation& CudaEntry(const std::string& variant, const std::string& id) {
  const Implementation* found = test::LibraryEntry(id, variant, Dtype::kF16);
  REQUIRE(found != nullptr);
  return *found;
}

// Every parameter at its default (a required one at its first grid value).
Params Defaults(const std::string& variant, const Implementation& impl, const Shape& s) {
  Params p;
  auto set = [&p](const ParamDecl& d) {
    p[d.name] = d.default_value.empty() ? d.grid.front() : d.default_value;
  };
  for (const ParamDecl& d : FindVariant(variant, "test").params) set(d);
  for (const ParamDecl& d : impl.TunablesFor({impl.phases.front(), Dtype::kF16, s.d})) set(d);
  return p;
}

std::string Refusal(const std::string& variant, const std::string& id, const Shape& s,
                    const Params& extra = {}) {
  const Implementation& impl = CudaEntry(variant, id);
  REQUIRE(impl.check);
  Params p = Defaults(variant, impl, s);
  for (const auto& [name, value] : extra) p[name] = value;
  return impl.check(s, p);
}

}  // namespace

TEST_CASE("ks and hax scores on the device: d <= 256, at most 8 query heads per KV head") {
  for (const char* variant : {"ks", "hax"}) {
    INFO(variant);
    const std::string line =
        "ks scores on the device take d <= 256 and at most 8 query heads per KV head";
    CHECK(Refusal(variant, "cuda", test::LibraryShape(1, 16, 2, 512, 512, 128)) == "");
    CHECK(Refusal(variant, "cuda", test::LibraryShape(1, 18, 2, 512, 512, 128)) == line);
  }
  // dma scores a key from its value alone: no limit on the group.
  CHECK(Refusal("dma", "cuda", test::LibraryShape(1, 18, 2, 512, 512, 128)) == "");
}

TEST_CASE("The selection on the device takes B * Hkv <= 65535 KV heads") {
  for (const char* variant : {"ks", "dma", "lsh", "hax"}) {
    INFO(variant);
    CHECK(Refusal(variant, "cuda", test::LibraryShape(3, 21845, 21845, 64, 64, 128)) == "");
    CHECK(Refusal(variant, "cuda", test::LibraryShape(3, 21846, 21846, 64, 64, 128)) ==
          "the selection on the device takes B * Hkv <= 65535 (a grid axis)");
  }
  // ks's chunk sums put the query heads on the grid's y axis: the attention kernels'
  // own limit (Hq <= 65535) comes first and covers them.
  CHECK(Refusal("ks", "cuda", test::LibraryShape(1, 65536, 8192, 64, 64, 128)) ==
        "Hq and B must be at most 65535");
  CHECK(Refusal("ks", "cuda", test::LibraryShape(1, 65528, 8191, 64, 64, 128)) == "");
  Shape decode = test::LibraryShape(3, 21846, 21846, 16, 16, 128);
  CHECK(Refusal("dma_decode", "cuda_decode", decode) ==
        "the selection on the device takes B * Hkv <= 65535 (a grid axis)");
  decode.Hq = decode.Hkv = 21845;
  CHECK(Refusal("dma_decode", "cuda_decode", decode) == "");
}

TEST_CASE("The selection on the device takes fewer than 2^31 rows and keys") {
  // B * Hq * Lq = 2^31 - 1 + 1: one row past int32 indices.
  const Shape at = test::LibraryShape(1, 8, 8, int64_t{1} << 28, int64_t{1} << 28, 128);
  const Shape below = test::LibraryShape(1, 7, 7, int64_t{1} << 28, int64_t{1} << 28, 128);
  for (const char* variant : {"ks", "dma", "lsh", "hax"}) {
    INFO(variant);
    CHECK(Refusal(variant, "cuda", at) ==
          "the selection on the device takes fewer than 2^31 rows and keys");
    CHECK(Refusal(variant, "cuda", below) == "");
  }
}

TEST_CASE("dma_decode's selection on the device: r <= 2048 (one block's shared memory)") {
  const Shape s = test::LibraryShape(1, 16, 8, 4096, 4096, 128);
  CHECK(Refusal("dma_decode", "cuda_decode", s, {{"r", "2048"}}) == "");
  CHECK(Refusal("dma_decode", "cuda_decode", s, {{"r", "2049"}}) ==
        "dma_decode's selection on the device takes r <= 2048");
  // Only the candidates that exist count: r past Lk holds 2 * Lk of them.
  const Shape short_prefix = test::LibraryShape(1, 16, 8, 2048, 2048, 128);
  CHECK(Refusal("dma_decode", "cuda_decode", short_prefix, {{"r", "4096"}}) == "");
}
