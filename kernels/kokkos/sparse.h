// The sparse kernel families on Kokkos (DESIGN.md s2): prefix top-k by a per-key score
// (ks, dma), the bucketed window (lsh), their union (hax), and the generic block-sparse
// executor. Each run has a selection phase (Kokkos kernels named "attntune::select::*",
// timed with the run) and an attention phase ("attntune::attend::*").
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "kernels/selection/selection.h"
#include "kernels/variant.h"

namespace attntune {

struct SparseTiles {
  int64_t br = 32;  // query rows per block
  int64_t bc = 64;  // keys per tile (<= 512)
  // hax: query positions per chunk (rounded up to whole blocks): the ks union is gathered
  // once per chunk and the chunk's rows are sorted by (bin, position, head) within it.
  // 0: HaxChunk's choice.
  int64_t chunk = 0;
};

/// ks / dma: S(i) = the k keys j <= p(i) with the largest score (ties: smaller j); the
/// logits get + score_j when `bias`. `scores` [B,Hkv,Lk].
void RunTopKKokkos(const Tensors& t, const std::vector<double>& scores, int64_t k, bool bias,
                   const SparseTiles& tiles, float* out);

/// lsh: keys and queries sorted by (bin, position); each bin is a sliding window of k.
void RunLshKokkos(const Tensors& t, const LshBins& bins, int64_t k, const SparseTiles& tiles,
                  float* out);

/// hax: lsh(k_lsh) ∪ ks(k_ks), each key once: one pass in (bin, position) order per chunk
/// of `tiles.chunk` query positions; a row group attends its lsh window, then the part of
/// the chunk's prefix top-k union (gathered once per chunk) that its positions reach,
/// under its rows' predicates.
void RunHaxKokkos(const Tensors& t, const LshBins& bins, int64_t k_lsh,
                  const std::vector<double>& scores, int64_t k_ks, const SparseTiles& tiles,
                  float* out);

/// hax's chunk of query positions when SparseTiles::chunk is 0: 512, or more where the
/// bins are small, so that a bin holds about 16 of a KV head's query rows per chunk on
/// average (the rows of a bin's lsh window, read from memory once per chunk), at most
/// 4096 (the chunk's ks union grows with it). 8 hash bits (256 bins), 2 query heads per
/// KV head: 2048 (L=16384, 32+32: 451-495 ms CPU against 676-795 at 512, under load).
int64_t HaxChunk(const Shape& s, int64_t bins);

/// Generic block-sparse executor: the variant's own key sets give, per query block, the
/// key blocks of width Bc that hold a selected key (the block list) and the element
/// predicate; any variant runs on it.
void RunGenericKokkos(const Tensors& t, const Variant& variant, const Params& params,
                      const SparseTiles& tiles, float* out);

/// dma_decode: token by token from an empty cache, resident set per KV head, query
/// slots per query head (DESIGN.md s1). `scores` = b [B,Hkv,Lk]. With `step_ns`, each
/// step's time per (batch, KV head) is written to (*step_ns)[(b * Hkv + hkv) * Lk + t].
void RunDecodeKokkos(const Tensors& t, const std::vector<double>& scores, int64_t w_kv,
                     int64_t w_q, int64_t r, bool bias, float* out,
                     std::vector<float>* step_ns = nullptr);

/// dma_decode's selection alone, by RunDecodeKokkos' own code: evict[(b * Hkv + hkv) * Lk
/// + j] = the step at which key j leaves its KV head's resident set (Lk: never; j: it
/// never enters), so j is resident at step t iff j <= t < evict[j]; the keys query head
/// hq chooses at step t (never resident then) are chosen[offsets[x] .. offsets[x+1]), x =
/// (b * Hq + hq) * Lk + t. S(t) = the resident keys plus the chosen ones.
struct DecodeSelection {
  std::vector<int32_t> evict, offsets, chosen;
};
DecodeSelection SelectDecodeKokkos(const Tensors& t, const std::vector<double>& scores,
                                   int64_t w_kv, int64_t w_q, int64_t r);

/// Runs `fn` as a one-iteration Kokkos kernel named `name`, so that the Kokkos Tools
/// hooks time serial selection work (scores, bins) as its own phase.
void RunPhase(const char* name, const std::function<void()>& fn);

}  // namespace attntune
