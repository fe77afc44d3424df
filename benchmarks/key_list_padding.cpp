// How much of the gathered kernels' tensor work attends a pair, per compiled tile,
// computed on the host on `attntune bench`'s inputs (Gaussian, seed 1). ks, dma: the
// prefix top-k and the query blocks' gathered key lists (BuildKeyLists, as the device
// builds them) for each tile's Br; lsh, hax: the bucketed blocks (BuildBucketLists: rows
// of a KV head sorted by bin, at most Br a block, each with the union of its rows' keys).
// Each list is padded to whole tiles of Bc keys:
//   key slots / attended pairs = sum over blocks of Br * Bc * ceil(list / Bc)
//                                / attended pairs
// (1 for full blocks whose lists fill their tiles and every row of which attends every
// listed key). The kernel multiplies every row of a block with the key slots of its tiles
// but those of a last tile's 16-key groups wholly past the list (in S = Q K^T with one row
// tile a warp, in O += P V always), so its tensor work over the useful work is the mean
// of the two products' slots over the pairs. ks, dma: the share of a warp's tiles that take
// the mask (some key of the tile not HeldThrough the warp's rows, or a last tile short of
// Bc keys), with the lists as the device orders them (KeyOrder::kHeldFirst) and in
// ascending j. No GPU: planning figures, not timings.
//
//   key_list_padding VARIANT PARAMS SHAPE      (VARIANT ks, dma, lsh or hax)
//   e.g. key_list_padding ks k=64 B=1,Hq=16,Hkv=8,L=16384,d=128
//        key_list_padding lsh k=64 B=1,Hq=16,Hkv=8,L=16384,d=128
#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "benchmarks/variant_problem.h"
#include "core/error.h"
#include "kernels/cuda/plan.h"
#include "kernels/selection/selection.h"

namespace {

using namespace attntune;
namespace cp = cuda_plan;

// One block's list of n keys for `tile`: its key slots and its tensor work (the mean of
// S = Q K^T's and O += P V's slots), both times Br.
void AddBlock(const cp::WindowedTile& tile, int64_t n, double* slots, double* work) {
  const bool one_row_tile = tile.br == 16 * tile.warps;
  const int64_t t = (n + tile.bc - 1) / tile.bc;
  slots[0] += static_cast<double>(t * tile.bc * tile.br);
  const int64_t rest = n % tile.bc, groups = (rest + 15) / 16 * 16;
  const int64_t qk = n / tile.bc * tile.bc + (rest == 0 ? 0 : one_row_tile ? groups : tile.bc);
  const int64_t pv = n / tile.bc * tile.bc + groups;
  work[0] += static_cast<double>((qk + pv) * tile.br) / 2.0;
}

// The share of (warp, tile) steps of a query block's list whose tile takes the mask in the
// block-skipping kernel: a tile short of Bc keys, or one with a key that some row of the
// warp (positions first .. first + rows a warp - 1) does not attend.
double MaskedShare(const Shape& s, const std::vector<int32_t>& evict,
                   const cp::WindowedTile& tile, cp::KeyOrder order) {
  const cp::KeyLists lists = cp::BuildKeyLists(s, evict, tile.br, order);
  const int64_t warp_rows = tile.br / tile.warps;
  double steps = 0, masked = 0;
  for (int64_t x = 0; x < s.B * s.Hkv * lists.query_blocks; ++x) {
    const int32_t* e = evict.data() + x / lists.query_blocks * s.Lk;
    const int64_t begin = lists.offsets[x], end = lists.offsets[x + 1];
    const int64_t p0 = s.QueryPos(x % lists.query_blocks * tile.br);
    for (int64_t w = 0; w < tile.warps; ++w) {
      const int64_t first = p0 + w * warp_rows, last = first + warp_rows - 1;
      for (int64_t a = begin; a < end; a += tile.bc) {
        bool held = a + tile.bc <= end;
        for (int64_t c = a; held && c < a + tile.bc; ++c) {
          const int32_t j = lists.keys[c];
          held = cp::HeldThrough<int64_t>(j, e[j], first, last);
        }
        steps += 1;
        masked += held ? 0 : 1;
      }
    }
  }
  return steps > 0 ? masked / steps : 0.0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr,
                 "usage: key_list_padding VARIANT PARAMS SHAPE (VARIANT ks, dma, lsh or hax)\n");
    return 2;
  }
  try {
    const std::string id = argv[1];
    if (id != "ks" && id != "dma" && id != "lsh" && id != "hax") {
      throw UserError("VARIANT: ks, dma, lsh or hax, got '" + id + "'");
    }
    const VariantProblem problem(argv[1], argv[2], argv[3]);
    const Shape& s = problem.shape;
    const Params& p = problem.params;
    if (!s.causal || s.Lq > s.Lk) throw UserError("SHAPE: causal with Lq <= Lk");
    const bool bucketed = id == "lsh" || id == "hax";
    // Every query head's attended pairs (bench's `pairs`).
    const double pairs = static_cast<double>(AttendedPairs(*problem.variant, problem.tensors, p));
    std::vector<int32_t> evict;
    const int64_t k = bucketed ? (id == "hax" ? ParamInt(p, "k_ks") : 0)
                               : ParamInt(p, id == "ks" ? "k" : "w");
    if (id != "lsh") {
      const std::vector<double> scores =
          id == "dma" ? DmaScores(problem.tensors, static_cast<uint64_t>(ParamInt(p, "seed")))
                      : KsScores(problem.tensors);
      for (int64_t bh = 0; bh < s.B * s.Hkv; ++bh) {
        const std::vector<int32_t> e = PrefixTopKEvictions(scores.data() + bh * s.Lk, s.Lk, k);
        evict.insert(evict.end(), e.begin(), e.end());
      }
    }
    LshBins bins;
    int64_t chunk = 0;
    if (bucketed) {
      bins = ComputeLshBins(problem.tensors, ParamInt(p, "bits"), p.at("rule") == "argmax",
                            static_cast<uint64_t>(ParamInt(p, "seed")));
      // hax's rows a chunk of positions at a time: the CUDA implementation's Chunk (its
      // default 512 where PARAMS give none or the CPU union's 0, its own choice).
      if (id == "hax") chunk = p.count("Chunk") != 0 ? ParamInt(p, "Chunk") : 0;
      if (id == "hax" && chunk == 0) chunk = 512;
    }
    std::printf("%s %s on %s: attended pairs %.0f%s\n", argv[1], argv[2], argv[3], pairs,
                id == "hax" ? (" (Chunk=" + std::to_string(chunk) + ")").c_str() : "");
    std::printf("tile | Br | Bc | blocks | mean rows | mean list | largest list | tiles per block"
                " | key slots / attended pairs | tensor work / useful%s\n",
                bucketed ? "" : " | warp tiles masked (held first) | (ascending)");
    for (const cp::WindowedTile& tile : cp::WindowedTiles()) {
      if (tile.d != s.d || tile.dtype != cp::Dtype::kF16) continue;
      std::vector<int64_t> list_sizes;
      double rows = 0;
      if (bucketed) {
        const cp::BucketLists lists =
            cp::BuildBucketLists(s, bins, ParamInt(p, id == "hax" ? "k_lsh" : "k"), evict,
                                 tile.br, chunk);
        for (int64_t b = 0; b < lists.Blocks(); ++b) {
          list_sizes.push_back(lists.key_offsets[b + 1] - lists.key_offsets[b]);
          rows += static_cast<double>(lists.row_offsets[b + 1] - lists.row_offsets[b]);
        }
      } else {
        // A query block's list serves each query head of the group: one block per head.
        const cp::KeyLists lists = cp::BuildKeyLists(s, evict, tile.br, cp::KeyOrder::kHeldFirst);
        for (int64_t x = 0; x < s.B * s.Hkv * lists.query_blocks; ++x) {
          for (int64_t g = 0; g < s.Group(); ++g) {
            list_sizes.push_back(lists.offsets[x + 1] - lists.offsets[x]);
          }
        }
        rows = static_cast<double>(s.B * s.Hq * s.Lq);
      }
      double keys = 0, slots = 0, tiles = 0, work = 0;
      int64_t largest = 0;
      for (const int64_t n : list_sizes) {
        keys += static_cast<double>(n);
        tiles += static_cast<double>((n + tile.bc - 1) / tile.bc);
        AddBlock(tile, n, &slots, &work);
        largest = std::max(largest, n);
      }
      const double count = static_cast<double>(list_sizes.size());
      const cp::Family family = bucketed ? cp::Family::kBucketed : cp::Family::kTopK;
      std::printf("%s | %d | %d | %.0f | %.1f | %.1f | %lld | %.2f | %.3f | %.3f",
                  cp::KernelName(tile, family).c_str(), tile.br, tile.bc, count, rows / count,
                  keys / count, static_cast<long long>(largest), tiles / count, slots / pairs,
                  work / pairs);
      if (!bucketed) {
        std::printf(" | %.3f | %.3f", MaskedShare(s, evict, tile, cp::KeyOrder::kHeldFirst),
                    MaskedShare(s, evict, tile, cp::KeyOrder::kAscending));
      }
      std::printf("\n");
    }
    return 0;
  } catch (const UserError& e) {
    std::fprintf(stderr, "key_list_padding: %s\n", e.what());
    return 2;
  }
}
