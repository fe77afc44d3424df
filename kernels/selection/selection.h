// The per-key and per-query quantities that select S(i) (DESIGN.md s1): LSH bins,
// ks scores, dma's value-driven bias, hybrid's windows. Computed in fp64 from the
// supplied tensors or the seeded defaults; both the fp64 references and the kernels'
// selection phases use them, so that a kernel selects exactly the reference's keys.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "core/params.h"
#include "core/tensors.h"

namespace attntune {

struct LshBins {
  int64_t bins = 1;                // 2^h (sign) or h (argmax)
  std::vector<int32_t> key_bin;    // [B,Hkv,Lk]
  std::vector<int32_t> query_bin;  // [B,Hq,Lq]
};

/// R[Hkv,d,h] from `seed` (or the supplied `proj`, which must have h = bits).
std::vector<double> LshProjection(const Tensors& t, int64_t bits, uint64_t seed);

/// Bins of every key and query: u = x - mu (normalisation changes neither the signs nor
/// the argmax), P = u·R; sign rule sum_j [P_j > 0] 2^(h-1-j), argmax rule argmax_j P_j
/// (first maximum).
LshBins ComputeLshBins(const Tensors& t, int64_t bits, bool argmax_rule, uint64_t seed);

/// The projections ComputeLshBins bins from: proj[c] = u·R_c for c < h (1 <= h <= 16),
/// rt = R of one head as [h][d] in fp32. In fp32 with 16 partial sums (lane l: the terms
/// e = l mod 16 below d / 16 * 16, ascending), then in fp64 lanes l and l + 8 added, those
/// eight as ((0+4)+(2+6)) + ((1+5)+(3+7)), then the tail e >= d / 16 * 16 in order: the
/// order the device's selection repeats (kernels/cuda/select_core.h, LshTree).
void LshProjections(const float* u, const float* rt, int64_t d, int64_t h, double* proj);

/// ks scores x[B,Hkv,Lk]: the supplied `scores`, else x_j = sum over the group's query
/// heads of k_j · normalize(sum_{p(i) <= j} q_i) (0 while no query precedes j).
std::vector<double> KsScores(const Tensors& t);

/// hax's selection: the bins of ComputeLshBins and the scores of KsScores, equal to them
/// bit for bit, in one pass over K and Q (the default scorer and the bins each read
/// every row).
struct HaxSelection {
  LshBins bins;
  std::vector<double> scores;
};
HaxSelection ComputeHaxSelection(const Tensors& t, int64_t bits, bool argmax_rule,
                                 uint64_t seed);

/// dma's Delta [Hkv,d] and A [Hkv]: supplied, or drawn from `seed` (Delta ~
/// N(0,1)/sqrt(d), A = 0.5 + |N(0,1)|/2).
void DmaDeltaA(const Tensors& t, uint64_t seed, std::vector<double>* delta,
               std::vector<double>* a);

/// dma's b[B,Hkv,Lk] = A_h * softplus(v_j · Delta_h), Delta and A of DmaDeltaA.
std::vector<double> DmaScores(const Tensors& t, uint64_t seed);

/// With `params`' bias on (dma, dma_decode): UserError "<what>: ..." when a bias b_j of
/// DmaScores exceeds kMaxLogit in magnitude, as q and k are refused (CheckAttentionInputs):
/// added to fp32 logits it overflows them, and the kernels would write NaN rows, or zeros
/// where -inf hid every key. Finite a and delta of 1e35 reach it.
void CheckDmaBias(const Tensors& t, const Params& params, const std::string& what);

/// Windows of hybrid per KV head: the supplied `windows`, else 0 (full) for the first
/// `full` heads and `w` for the others.
std::vector<int64_t> HybridWindows(const Tensors& t, const Params& params);

/// Top-k order: key a ranks before key b (larger score; ties: smaller index wins).
inline bool RanksBefore(const double* x, int64_t a, int64_t b) {
  return x[a] > x[b] || (x[a] == x[b] && a < b);
}

/// Prefix top-k of scores x[0, n) under RanksBefore: key j belongs to the top-k of the
/// prefix [0, p] iff j <= p < evict[j]; evict[j] = the position at which it drops out (n
/// if never, j if it never enters). One heap pass, O(n log k).
std::vector<int32_t> PrefixTopKEvictions(const double* x, int64_t n, int64_t k);

/// Last key row i may see: p(i) when causal, else every key.
inline int64_t LastKey(const Shape& s, int64_t i) {
  return s.causal ? s.QueryPos(i) : s.Lk - 1;
}

}  // namespace attntune
