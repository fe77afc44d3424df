// How much of the block-skipping kernel's tensor work attends a pair, per compiled tile,
// computed on the host: the prefix top-k of ks or dma on `attntune bench`'s inputs
// (Gaussian, seed 1), the query blocks' gathered key lists (BuildKeyLists, as the device
// builds them) for each tile's Br, and each list padded to whole tiles of Bc keys:
//   key slots / attended pairs = sum over blocks of Br * Bc * ceil(list / Bc)
//                                / sum over rows of |S(i)|
// (1 for a list that fills its tiles exactly). The kernel multiplies every row of a block
// with the key slots of its tiles but those of a last tile's 16-key groups wholly past
// the list (in S = Q K^T with one row tile a warp, in O += P V always), so its tensor work
// over the useful work is the mean of the two products' slots over the pairs.
// No GPU: a planning figure, not a timing.
//
//   key_list_padding VARIANT PARAMS SHAPE      (VARIANT ks or dma)
//   e.g. key_list_padding ks k=64 B=1,Hq=16,Hkv=8,L=16384,d=128
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "benchmarks/variant_problem.h"
#include "core/error.h"
#include "kernels/cuda/plan.h"
#include "kernels/selection/selection.h"

int main(int argc, char** argv) {
  using namespace attntune;
  if (argc != 4) {
    std::fprintf(stderr, "usage: key_list_padding VARIANT PARAMS SHAPE (VARIANT ks or dma)\n");
    return 2;
  }
  try {
    const std::string id = argv[1];
    if (id != "ks" && id != "dma") throw UserError("VARIANT: ks or dma, got '" + id + "'");
    const VariantProblem problem(argv[1], argv[2], argv[3]);
    const Shape& s = problem.shape;
    if (!s.causal || s.Lq > s.Lk) throw UserError("SHAPE: causal with Lq <= Lk");
    const std::vector<double> scores =
        id == "ks" ? KsScores(problem.tensors)
                   : DmaScores(problem.tensors, static_cast<uint64_t>(ParamInt(problem.params, "seed")));
    const int64_t k = ParamInt(problem.params, id == "ks" ? "k" : "w");
    std::vector<int32_t> evict;
    double pairs = 0;  // attended pairs of one query head of each KV head
    for (int64_t bh = 0; bh < s.B * s.Hkv; ++bh) {
      const std::vector<int32_t> e = PrefixTopKEvictions(scores.data() + bh * s.Lk, s.Lk, k);
      evict.insert(evict.end(), e.begin(), e.end());
      for (int64_t i = 0; i < s.Lq; ++i) pairs += static_cast<double>(std::min(k, s.QueryPos(i) + 1));
    }
    std::printf("%s %s on %s: attended pairs per query head %.0f\n", argv[1], argv[2], argv[3],
                pairs / static_cast<double>(s.B * s.Hkv));
    std::printf("tile | Br | Bc | mean list | largest list | tiles per block | key slots / attended pairs"
                " | tensor work / useful\n");
    for (const cuda_plan::WindowedTile& tile : cuda_plan::WindowedTiles()) {
      if (tile.d != s.d || tile.dtype != cuda_plan::Dtype::kF16) continue;
      const cuda_plan::KeyLists lists = cuda_plan::BuildKeyLists(s, evict, tile.br);
      const int64_t count = s.B * s.Hkv * lists.query_blocks;
      const bool one_row_tile = tile.br == 16 * tile.warps;
      double keys = 0, slots = 0, tiles = 0, work = 0;
      int64_t largest = 0;
      for (int64_t x = 0; x < count; ++x) {
        const int64_t n = lists.offsets[x + 1] - lists.offsets[x];
        const int64_t t = (n + tile.bc - 1) / tile.bc;
        keys += static_cast<double>(n);
        tiles += static_cast<double>(t);
        // The last query block's rows past Lq compute nothing useful either.
        slots += static_cast<double>(t * tile.bc * tile.br);
        // The kernel's slots: whole tiles, then the last tile's 16-key groups.
        const int64_t rest = n % tile.bc, groups = (rest + 15) / 16 * 16;
        const int64_t qk = n / tile.bc * tile.bc + (rest == 0 ? 0 : one_row_tile ? groups : tile.bc);
        const int64_t pv = n / tile.bc * tile.bc + groups;
        work += static_cast<double>((qk + pv) * tile.br) / 2.0;
        largest = std::max(largest, n);
      }
      std::printf("%s | %d | %d | %.1f | %lld | %.2f | %.3f | %.3f\n",
                  cuda_plan::KernelName(tile, cuda_plan::Family::kTopK).c_str(), tile.br, tile.bc,
                  keys / static_cast<double>(count), static_cast<long long>(largest),
                  tiles / static_cast<double>(count), slots / pairs, work / pairs);
    }
    return 0;
  } catch (const UserError& e) {
    std::fprintf(stderr, "key_list_padding: %s\n", e.what());
    return 2;
  }
}
