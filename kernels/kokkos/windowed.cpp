// Tiled online softmax (FlashAttention-style) for dense and swa on Kokkos, fp32.
//
// Per (batch, KV head): K is transposed once into panels of 32 keys (K^T[d][32] each,
// contiguous), shared by every query block of the head's query heads. Then one team per
// (query head of the group, block of Br query rows): the block walks only the key
// blocks that cover the union of its rows' windows [p(i)-w+1, p(i)] and the sink keys
// [0, sink); other keys are never read. Key blocks start on panel boundaries and are
// Bc rounded up to whole panels wide; keys a row may not see are masked (only in the
// blocks that hold such keys). S = Q·K^T and O += P·V run as kWideRowTile x 32 register
// tiles (Q pre-scaled) so that the compiler vectorises the unit-stride inner loops (the
// file is built with -O3 -march=native -mprefer-vector-width=512).
#include "kernels/kokkos/windowed.h"

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/kokkos/tiles.h"
#include "core/check.h"

namespace attntune {

namespace {

using namespace tiles;  // NOLINT: kRowTile, TileQK, ... (kernels/kokkos/tiles.h)

// Sizes (in floats) of one team's scratch, padded to whole register tiles.
struct Plan {
  int64_t brp, bcp, dp;  // Br, Bc, d rounded up to whole tiles
  int64_t q, s, v, acc, ml;
  int64_t Floats() const { return q + s + v + acc + 2 * ml; }

  Plan(const Shape& shape, const WindowedArgs& a) {
    brp = RoundUp(a.br, kWideRowTile);
    bcp = RoundUp(a.bc, kColTile);
    dp = RoundUp(shape.d, kColTile);
    const int64_t pad = kAlign / sizeof(float);  // keep each array cache-line aligned
    q = RoundUp(brp * shape.d, pad);
    s = RoundUp(brp * bcp, pad);
    v = shape.d % kColTile == 0 ? 0 : RoundUp(bcp * dp, pad);  // V is read in place then
    acc = RoundUp(brp * dp, pad);
    ml = RoundUp(brp, pad);
  }
};

// One query block of one (batch, head): the body of a team.
class QueryBlock {
 public:
  // kpanels: this (b, hkv)'s keys as panels of 32, panel p at kpanels + p * 32 * d; null:
  // the scores are dot products with the K rows read in place.
  QueryBlock(const Tensors& t, const WindowedArgs& a, const Plan& plan, const float* kpanels,
             float* scratch, int64_t b, int64_t hq, int64_t qb)
      : t_(t), s_(t.shape), a_(a), plan_(plan), kpanels_(kpanels), b_(b), hq_(hq),
        hkv_(hq / t.shape.Group()) {
    window_ = a.head_windows != nullptr ? a.head_windows[hkv_] : a.window;
    i0_ = qb * a.br;
    nr_ = std::min(a.br, s_.Lq - i0_);
    nrp_ = RoundUp(nr_, kWideRowTile);
    q_ = scratch;
    sc_ = q_ + plan.q;
    vs_ = sc_ + plan.s;
    acc_ = vs_ + plan.v;
    m_ = acc_ + plan.acc;
    l_ = m_ + plan.ml;
  }

  void Run(float* out) {
    LoadQ();
    const int64_t first = Pos(0), last = Pos(nr_ - 1);
    // Keys of the union of the rows' sets: [0, sink_end) ∪ [lo, last], lo rounded down to
    // a panel boundary (the extra keys are masked unless they are sinks, which the sink
    // range then stops short of).
    const int64_t step = plan_.bcp;
    const int64_t lo =
        window_ > 0 ? std::max<int64_t>(0, first - window_ + 1) / kColTile * kColTile : 0;
    const int64_t sink_end = window_ > 0 ? std::min(a_.sink, lo) : 0;
    for (int64_t j = 0; j < sink_end; j += step) Block(j, std::min(step, sink_end - j));
    for (int64_t j = lo; j <= last; j += step) Block(j, std::min(step, last + 1 - j));
    Store(out);
  }

 private:
  // Last key row r may see: p(i) when causal, else all keys.
  int64_t Pos(int64_t r) const { return s_.causal ? s_.QueryPos(i0_ + r) : s_.Lk - 1; }

  bool Allowed(int64_t r, int64_t j) const {
    const int64_t p = Pos(r);
    return j <= p && (window_ == 0 || j > p - window_ || j < a_.sink);
  }

  void LoadQ() {
    const int64_t d = s_.d;
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)));
    for (int64_t r = 0; r < nrp_; ++r) {
      float* __restrict dst = q_ + r * d;
      if (r < nr_) {
        const float* __restrict src = t_.Q(b_, hq_, i0_ + r);
        for (int64_t c = 0; c < d; ++c) dst[c] = src[c] * scale;
      } else {
        std::fill(dst, dst + d, 0.0f);  // padding rows of the last register tile
      }
    }
    std::fill(acc_, acc_ + nrp_ * plan_.dp, 0.0f);
    std::fill(m_, m_ + nrp_, -std::numeric_limits<float>::infinity());
    std::fill(l_, l_ + nrp_, 0.0f);
  }

  // Keys [j0, j0 + nc), j0 on a panel boundary: score, mask, online-softmax update,
  // accumulate.
  void Block(int64_t j0, int64_t nc) {
    const int64_t d = s_.d, bcp = plan_.bcp, dp = plan_.dp;
    const int64_t ncp = RoundUp(nc, kColTile);
    const float* v = t_.V(b_, hkv_, j0);
    int64_t ldv = d;
    if (plan_.v > 0) {  // d is not a whole number of tiles: copy V with zero padding
      for (int64_t j = 0; j < nc; ++j) {
        std::copy(v + j * d, v + (j + 1) * d, vs_ + j * dp);
        std::fill(vs_ + j * dp + d, vs_ + (j + 1) * dp, 0.0f);
      }
      v = vs_;
      ldv = dp;
    }
    if (kpanels_ == nullptr) {  // few rows: dot products with the K rows in place
      for (int64_t r = 0; r < nr_; ++r) {
        for (int64_t j = 0; j < nc; ++j) {
          sc_[r * bcp + j] = Dot(q_ + r * d, t_.K(b_, hkv_, j0 + j), d);
        }
      }
    } else {
      const float* kt = kpanels_ + j0 * d;  // panel j0 / 32; its padding keys are zero
      for (int64_t r = 0; r < nrp_; r += kWideRowTile) {
        for (int64_t j = 0; j < ncp; j += kColTile) {
          TileQK<kWideRowTile>(q_ + r * d, d, kt + j * d, kColTile, d, sc_ + r * bcp + j, bcp);
        }
      }
    }
    Mask(j0, nc, ncp);
    Softmax(ncp);
    for (int64_t r = 0; r < nrp_; r += kWideRowTile) {
      for (int64_t c = 0; c < dp; c += kColTile) {
        TilePV<kWideRowTile>(sc_ + r * bcp, bcp, v + c, ldv, nc, acc_ + r * dp + c, dp);
      }
    }
  }

  void Mask(int64_t j0, int64_t nc, int64_t ncp) {
    const float kNegInf = -std::numeric_limits<float>::infinity();
    const int64_t first = Pos(0), last = Pos(nr_ - 1);
    // Every row sees every key of the block when the block ends at or before the first
    // row's position and lies inside the last row's window (or inside the sinks).
    const bool whole = j0 + nc - 1 <= first &&
                       (window_ == 0 || j0 > last - window_ || j0 + nc <= a_.sink);
    for (int64_t r = 0; r < nr_; ++r) {
      float* row = sc_ + r * plan_.bcp;
      if (!whole) {
        for (int64_t j = 0; j < nc; ++j) {
          if (!Allowed(r, j0 + j)) row[j] = kNegInf;
        }
      }
      std::fill(row + nc, row + ncp, kNegInf);
    }
  }

  // Online softmax: scores -> probabilities relative to the running max; rescales
  // acc_ and l_ when the max grows. Rows that have seen no key yet keep P = 0.
  void Softmax(int64_t ncp) {
    const int64_t dp = plan_.dp;
    for (int64_t r = 0; r < nrp_; ++r) {
      float* __restrict row = sc_ + r * plan_.bcp;
      if (r >= nr_) {
        std::fill(row, row + ncp, 0.0f);  // padding rows contribute nothing
        continue;
      }
      OnlineSoftmaxRow(row, ncp, m_[r], l_[r], acc_ + r * dp, dp);
    }
  }

  void Store(float* out) const {
    for (int64_t r = 0; r < nr_; ++r) {
      float* __restrict o = out + OutIndex(s_, b_, hq_, i0_ + r, 0);
      const float* __restrict acc = acc_ + r * plan_.dp;
      if (l_[r] != 0.0f) {  // NaN (a non-finite input, unchecked) stays NaN
        const float inv = 1.0f / l_[r];
        for (int64_t c = 0; c < s_.d; ++c) o[c] = acc[c] * inv;
      } else {
        std::fill(o, o + s_.d, 0.0f);  // no attended key: S(i) is empty
      }
    }
  }

  const Tensors& t_;
  const Shape& s_;
  const WindowedArgs& a_;
  const Plan& plan_;
  const float* kpanels_;
  int64_t b_, hq_, hkv_;
  int64_t window_;  // this head's window (0: full)
  int64_t i0_, nr_, nrp_;
  float *q_, *sc_, *vs_, *acc_, *m_, *l_;
};

}  // namespace

void RunWindowedKokkos(const Tensors& tensors, const WindowedArgs& args, float* out) {
  const Shape& s = tensors.shape;
  ATTNTUNE_CHECK(args.br >= 1 && args.bc >= 1 && args.window >= 0 && args.sink >= 0);
  ATTNTUNE_CHECK(s.Hkv > 0 && s.Hq % s.Hkv == 0 && s.Lq <= s.Lk);
  ATTNTUNE_CHECK(static_cast<int64_t>(tensors.q.size()) == s.QElems());
  ATTNTUNE_CHECK(static_cast<int64_t>(tensors.k.size()) == s.KvElems());
  ATTNTUNE_CHECK(static_cast<int64_t>(tensors.v.size()) == s.KvElems());
  const Plan plan(s, args);
  const int64_t blocks = (s.Lq + args.br - 1) / args.br;
  const int64_t group = s.Group();
  const size_t bytes = static_cast<size_t>(plan.Floats()) * sizeof(float) + kAlign;
  // One KV head's keys as panels of 32 (the last one zero-padded): O(Lk d), reused for
  // every (b, hkv), so that no buffer grows with B * Hkv. Not when all the head's query
  // rows fit in one register tile (decode: Lq = 1): transposing every key for them cost
  // more than the attention (dense decode at Lk = 16384 took 3-4x the time of one read
  // of K and V), so the scores are dot products with the K rows in place.
  const bool panelled = s.Lq * group > kWideRowTile;
  const int64_t panels = panelled ? (s.Lk + kColTile - 1) / kColTile : 0;
  Kokkos::View<float*, Kokkos::HostSpace> kpanels(
      Kokkos::view_alloc(Kokkos::WithoutInitializing, "attntune::windowed_kpanels"),
      static_cast<size_t>(panels * kColTile * s.d));
  float* kp = panelled ? kpanels.data() : nullptr;

  using Policy = Kokkos::TeamPolicy<Kokkos::DefaultHostExecutionSpace>;
  using Member = Policy::member_type;
  const Policy policy = Policy(static_cast<int>(group * blocks), 1)
                            .set_scratch_size(1, Kokkos::PerTeam(bytes));
  const Tensors* t = &tensors;
  const WindowedArgs a = args;
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t hkv = 0; hkv < s.Hkv; ++hkv) {
      const int64_t d = s.d, lk = s.Lk;
      if (panelled) {
        Kokkos::parallel_for(
            "attntune::windowed_kpanels",
            Kokkos::RangePolicy<Kokkos::DefaultHostExecutionSpace>(0, panels),
            [=](int64_t p) {
              const float* rows[kColTile];
              const int64_t nc = std::min(kColTile, lk - p * kColTile);
              for (int64_t u = 0; u < nc; ++u) rows[u] = t->K(b, hkv, p * kColTile + u);
              TransposeRows(rows, nc, kColTile, d, kp + p * kColTile * d, kColTile);
            });
      }
      Kokkos::parallel_for(
          "attntune::windowed", policy, [=, &plan](const Member& team) {
            auto raw = reinterpret_cast<uintptr_t>(team.team_scratch(1).get_shmem(bytes));
            float* scratch = reinterpret_cast<float*>((raw + kAlign - 1) / kAlign * kAlign);
            const int64_t task = team.league_rank();
            const int64_t qb = task % blocks;
            const int64_t hq = hkv * group + task / blocks;
            QueryBlock(*t, a, plan, kp, scratch, b, hq, qb).Run(out);
          });
      Kokkos::fence();  // the panels are overwritten for the next head
    }
  }
}

}  // namespace attntune
