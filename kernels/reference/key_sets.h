// The fp64 reference definitions of S(i) for every variant of DESIGN.md s1, written
// naively (per row, from the definitions) so that they check the kernels' structured
// selections rather than share them. Per-key quantities come from selection.h.
#pragma once

#include <memory>
#include <vector>

#include "kernels/variant.h"

namespace attntune {

/// dense / swa / hybrid: [0, min(sink, lo)) ∪ [lo, p(i)], lo = p(i) - w_h + 1 (w_h = 0:
/// all j <= p(i)); `windows` per KV head.
std::unique_ptr<KeySets> MakeWindowKeySets(const Shape& shape, std::vector<int64_t> windows,
                                           int64_t sink);

/// lsh: the k most recent j <= p(i) whose key bin equals the query's bin.
std::unique_ptr<KeySets> MakeLshKeySets(const Tensors& t, int64_t bits, bool argmax_rule,
                                        int64_t k, uint64_t seed);

/// ks / dma: the k keys j <= p(i) with the largest score x[B,Hkv,Lk] (ties: smaller j);
/// logits get + x_j when `bias`.
std::unique_ptr<KeySets> MakeTopKKeySets(const Shape& shape, std::vector<double> scores,
                                         int64_t k, bool bias);

/// hax: a ∪ b (each key once); bias of `a`.
std::unique_ptr<KeySets> MakeUnionKeySets(std::unique_ptr<KeySets> a, std::unique_ptr<KeySets> b);

/// dma_decode: step t = query row t (Lq = Lk, causal) simulated from an empty cache.
std::unique_ptr<KeySets> MakeDecodeKeySets(const Tensors& t, std::vector<double> scores,
                                           int64_t w_kv, int64_t w_q, int64_t r, bool bias);

}  // namespace attntune
