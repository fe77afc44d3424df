// The CUDA implementations' refusals of shapes their selection on the device cannot take,
// without a device: each is one line from impl.check, through CheckParams (what the tuner
// records as the candidate's refusal; bench's ResolveParams prints it after "--params: "
// before exit 2), at the first shape past each limit that reaches it, and the shape just inside
// the limit passes.
#include <catch2/catch.hpp>
#include <functional>
#include <string>

#include "core/shape.h"
#include "kernels/variant.h"
#include "kernels/cuda/select_core.h"
#include "kernels/cuda/select_cuda.h"
#include "kernels/cuda/windowed_cuda.h"
#include "tests/gpu/library_entries.h"

using namespace attntune;

namespace {

// What the tuner stores for this candidate (CheckParams: the parameters completed with
// their defaults, then the variant's and the implementation's checks); "" when it runs.
// A required parameter not given takes its first grid value.
std::string Refusal(const std::string& variant, const std::string& id, const Shape& s,
                    Params given = {}) {
  const Implementation* impl = test::LibraryEntry(id, variant, Dtype::kF16);
  REQUIRE(impl != nullptr);
  const Variant& v = FindVariant(variant, "test");
  for (const ParamDecl& d : v.params) {
    if (d.default_value.empty() && given.count(d.name) == 0) given[d.name] = d.grid.front();
  }
  return CheckParams(v, *impl, s, given);
}

}  // namespace

TEST_CASE("ks and hax scores on the device: at most 8 query heads per KV head") {
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
    CHECK(Refusal(variant, "cuda", test::LibraryShape(2, 32768, 32768, 64, 64, 128)) ==
          "the selection on the device takes B * Hkv <= 65535 (a grid axis)");
  }
  // ks's chunk sums put the query heads on the grid's y axis: the attention kernels'
  // own limit (Hq <= 65535) comes first and covers them.
  CHECK(Refusal("ks", "cuda", test::LibraryShape(1, 65536, 8192, 64, 64, 128)) ==
        "Hq and B must be at most 65535");
  CHECK(Refusal("ks", "cuda", test::LibraryShape(1, 65528, 8191, 64, 64, 128)) == "");
  Shape decode = test::LibraryShape(2, 32768, 32768, 16, 16, 128);
  CHECK(Refusal("dma_decode", "cuda_decode", decode) ==
        "the selection on the device takes B * Hkv <= 65535 (a grid axis)");
  decode.Hq = decode.Hkv = 21845;
  CHECK(Refusal("dma_decode", "cuda_decode", decode) == "");
}

TEST_CASE("The selection on the device takes fewer than 2^31 rows and keys") {
  // 2^31 - 1 is prime and the attention kernels refuse Lk past 2^31 - 1024 first, so the
  // first count that reaches the selection's check is 2^31 (2 heads of 2^30), the last
  // inside it 2^31 - 2; rows (B x Hq x Lq) and keys (B x Hkv x Lk) each on their own.
  // Inside the rows' bound, 2^30 - 1 query rows a head make key lists of 2^31 entries or
  // more (the next case), so only keys are checked inside it.
  const int64_t half = int64_t{1} << 30;
  const std::string line = "the selection on the device takes fewer than 2^31 rows and keys";
  for (const char* variant : {"ks", "dma", "lsh", "hax"}) {
    INFO(variant);
    CHECK(Refusal(variant, "cuda", test::LibraryShape(1, 2, 2, half, half, 128)) == line);
    CHECK(Refusal(variant, "cuda", test::LibraryShape(1, 2, 2, half - 1, half - 1, 128)) ==
          "the selection's key lists on the device take fewer than 2^31 entries (a smaller "
          "budget, Tile or shape)");
    CHECK(Refusal(variant, "cuda", test::LibraryShape(1, 2, 2, 64, half, 128)) == line);
    CHECK(Refusal(variant, "cuda", test::LibraryShape(1, 2, 2, 64, half - 1, 128)) == "");
  }
}

TEST_CASE("The selection's key lists on the device take fewer than 2^31 entries") {
  // Refused by the check, before the candidate runs, where the launchers refuse them: at
  // the first budget whose lists reach 2^31 entries (the launcher's line there), and the
  // budget below it passes. ks and dma: B=4, Hq=32, Hkv=8, L=131072 at Br=64; lsh: 4 bits.
  const std::string line =
      "the selection's key lists on the device take fewer than 2^31 entries (a smaller "
      "budget, Tile or shape)";
  const Shape s = test::LibraryShape(4, 32, 8, 131072, 131072, 128);
  const int64_t heads = s.B * s.Hkv;
  // The smallest budget in [1, top] for which `over` holds (it grows with the budget).
  const auto first_over = [](int64_t top, const std::function<bool(int64_t)>& over) {
    int64_t lo = 1, hi = top;
    REQUIRE(over(hi));
    REQUIRE(!over(lo));
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      (over(mid) ? hi : lo) = mid;
    }
    return hi;
  };
  const int64_t k = first_over(s.Lk, [&](int64_t b) {
    return cuda_plan::ListBegin(heads, 0, 64, s.Lq, s.Lk, b) >= INT32_MAX;
  });
  CHECK(k == 38314);  // the bound docs/reliability.md quotes
  for (const char* variant : {"ks", "dma"}) {
    INFO(variant << " k=" << k);
    const std::string budget = std::string(variant) == "ks" ? "k" : "w";
    const std::string tile = "attntune_blocksparse_f16_d128_br64_bc64_w4_s2";
    const Params at = {{budget, std::to_string(k)}, {"Tile", tile}};
    const Params below = {{budget, std::to_string(k - 1)}, {"Tile", tile}};
    CHECK(Refusal(variant, "cuda", s, at) == line);
    CHECK(Refusal(variant, "cuda", s, below) == "");
  }
  cuda_plan::TopKDevice topk;
  topk.heads = heads;
  topk.n = s.Lk;
  topk.k = k;
  cuda_plan::SelectWorkspace ws;
  cuda_plan::ListsDevice lists;
  CHECK(cuda_plan::EnqueueKeyLists(topk, s.Lq, 64, cuda_plan::KeyOrder::kHeldFirst, &lists, ws,
                                   "lists", nullptr) == "lists: key lists of 2^31 entries or more");
  // lsh: the bucketed layout's keys (sign rule, 16 bins).
  const int64_t k_lsh = first_over(s.Lk, [&](int64_t b) {
    return cuda_plan::BucketLayoutSizes(heads, s.Group(), s.Lq, s.Lk, 16, b, 64, s.Lq, -1).keys >=
           INT32_MAX;
  });
  INFO("lsh k=" << k_lsh);
  CHECK(k_lsh == 8144);
  const std::string bucketed = "attntune_bucketed_f16_d128_br64_bc64_w4_s2";
  CHECK(Refusal("lsh", "cuda", s, {{"k", std::to_string(k_lsh)}, {"bits", "4"}, {"Tile", bucketed}}) ==
        line);
  CHECK(Refusal("lsh", "cuda", s,
                {{"k", std::to_string(k_lsh - 1)}, {"bits", "4"}, {"Tile", bucketed}}) == "");
  cuda_plan::BucketDevice bucket;
  CHECK(cuda_plan::EnqueueBucketLayout(s, 16, nullptr, nullptr, k_lsh, nullptr, 64, 0, &bucket, ws,
                                       nullptr) ==
        "bucketed layout: key lists of 2^31 entries or more");
  // dma_decode: the resident sets' lists, 32 steps a list, at L = 2^24 (no chosen keys,
  // whose own bound would come first).
  Shape decode = test::LibraryShape(1, 16, 8, int64_t{1} << 24, int64_t{1} << 24, 128);
  const int64_t w_kv = first_over(decode.Lk, [&](int64_t b) {
    return cuda_plan::ListBegin(8, 0, cuda_plan::kDecodeListSteps, decode.Lk, decode.Lk, b) >=
           INT32_MAX;
  });
  INFO("dma_decode w_kv=" << w_kv);
  CHECK(w_kv == 482);
  CHECK(Refusal("dma_decode", "cuda_decode", decode,
                {{"w_kv", std::to_string(w_kv)}, {"w_q", "0"}, {"r", "0"}}) == line);
  CHECK(Refusal("dma_decode", "cuda_decode", decode,
                {{"w_kv", std::to_string(w_kv - 1)}, {"w_q", "0"}, {"r", "0"}}) == "");
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

TEST_CASE("The prefix top-k on the device refuses k < 1 before it touches the device") {
  // The variant table's budgets start at 1; a direct caller's k = 0 gets a line, not a
  // launch of merges without threads. No buffer is read: null pointers will do.
  cuda_plan::SelectWorkspace ws;
  for (int64_t k : {0, -1}) {
    cuda_plan::TopKDevice topk;
    topk.heads = 2;
    topk.n = 100;
    topk.k = k;
    CHECK(cuda_plan::EnqueueTopK(&topk, ws, "refused", nullptr) ==
          "the prefix top-k on the device takes k >= 1");
  }
}

TEST_CASE("dma_decode's chosen keys on the device: their int32 offsets hold every row's") {
  // A row chooses at most min(w_q, 2 min(r, Lk)) keys: at w_q = 2048, r = 1024 that is
  // 2048, and 16 query heads of Lk = 65536 rows reach 2^31 of them (65535 stay below).
  const std::string line =
      "dma_decode's selection on the device takes B * Hq * Lk * min(w_q, 2 * min(r, Lk)) "
      "below 2^31 (its chosen keys' offsets)";
  const Params wide = {{"w_q", "2048"}, {"r", "1024"}};
  CHECK(Refusal("dma_decode", "cuda_decode", test::LibraryShape(1, 16, 8, 65536, 65536, 128),
                wide) == line);
  CHECK(Refusal("dma_decode", "cuda_decode", test::LibraryShape(1, 16, 8, 65535, 65535, 128),
                wide) == "");
  // The smaller of w_q and the candidates counts: r = 512 leaves 1024 a row.
  CHECK(Refusal("dma_decode", "cuda_decode", test::LibraryShape(1, 16, 8, 65536, 65536, 128),
                {{"w_q", "2048"}, {"r", "512"}}) == "");
  CHECK(Refusal("dma_decode", "cuda_decode", test::LibraryShape(1, 16, 8, 65536, 65536, 128),
                {{"w_q", "1024"}, {"r", "1024"}}) == "");
}

TEST_CASE("A dma_decode step on the device takes its selection's w_q and r") {
  // The chosen lists were sized by the selection's budgets; others are refused before the
  // step touches the device (no buffer is read: null pointers will do).
  const Shape s = test::LibraryShape(1, 16, 8, 4096, 4096, 128);
  cuda_plan::SelectWorkspace ws;
  cuda_plan::TopKDevice topk;
  cuda_plan::DecodeDevice sel;
  sel.w_q = 32;
  sel.r = 64;
  const std::string line = "dma_decode's step takes its selection's w_q and r";
  CHECK(cuda_plan::EnqueueDecodeStep(s, {}, {}, topk, 64, 64, 100, sel, ws, nullptr) == line);
  CHECK(cuda_plan::EnqueueDecodeStep(s, {}, {}, topk, 32, 128, 100, sel, ws, nullptr) == line);
}

TEST_CASE("The gathered decode refuses steps outside [0, Lk) before it launches") {
  // Its lists are only addresses here (nothing is launched on a refusal); first_step +
  // steps past Lk, first_step near INT64_MAX (where that sum overflowed) and a negative
  // number of steps are refused, the last step alone is not refused by the range check.
  const Shape s = test::LibraryShape(1, 16, 8, 4096, 4096, 128);
  int32_t dummy = 0;
  cuda_plan::WindowedDeviceArgs args;
  args.list_offsets = args.list_keys = args.evict = args.chosen_offsets = args.chosen = &dummy;
  const std::string past = "gathered decode steps past Lk";
  auto launch = [&](int64_t first, int64_t steps) {
    args.first_step = first;
    args.steps = steps;
    return cuda_plan::LaunchGatheredDecode(s, Dtype::kF16, args);
  };
  CHECK(launch(4096, 1) == past);
  CHECK(launch(4000, 97) == past);
  CHECK(launch(1, 0) == past);  // 0 steps: every step, from step 1
  CHECK(launch(-1, 1) == past);
  CHECK(launch(INT64_MAX, 1) == past);
  CHECK(launch(INT64_MAX - 100, 200) == past);
  CHECK(launch(0, -1) == "gathered decode of a negative number of steps");
}
