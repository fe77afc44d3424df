// Tiled online softmax (FlashAttention-style) for dense and swa on Kokkos, fp32.
//
// One team per (batch, query head, block of Br query rows). The block walks only the
// key blocks of width Bc that cover the union of its rows' windows [p(i)-w+1, p(i)]
// and the sink keys [0, sink); other keys are never loaded. Tiles whose keys all rows
// may see skip the per-element mask. S = Q·K^T and O += P·V run as 4 x 32 register
// tiles over contiguous scratch (Q pre-scaled, K transposed) so that the compiler
// vectorises the unit-stride inner loops (the file is built with -O3 -march=native).
#include "kernels/kokkos/windowed.h"

#include <Kokkos_Core.hpp>
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/kokkos/tiles.h"
#include "kernels/spec/check.h"

namespace attntune {

namespace {

using namespace tiles;  // NOLINT: kRowTile, TileQK, ... (kernels/kokkos/tiles.h)

// Sizes (in floats) of one team's scratch, padded to whole register tiles.
struct Plan {
  int64_t brp, bcp, dp;  // Br, Bc, d rounded up to whole tiles
  int64_t q, kt, s, v, acc, ml;
  int64_t Floats() const { return q + kt + s + v + acc + 2 * ml; }

  Plan(const Shape& shape, const WindowedArgs& a) {
    brp = RoundUp(a.br, kRowTile);
    bcp = RoundUp(a.bc, kColTile);
    dp = RoundUp(shape.d, kColTile);
    const int64_t pad = kAlign / sizeof(float);  // keep each array cache-line aligned
    q = RoundUp(brp * shape.d, pad);
    kt = RoundUp(shape.d * bcp, pad);
    s = RoundUp(brp * bcp, pad);
    v = shape.d % kColTile == 0 ? 0 : RoundUp(bcp * dp, pad);  // V is read in place then
    acc = RoundUp(brp * dp, pad);
    ml = RoundUp(brp, pad);
  }
};

// One query block of one (batch, head): the body of a team.
class QueryBlock {
 public:
  QueryBlock(const Tensors& t, const WindowedArgs& a, const Plan& plan, float* scratch,
             int64_t b, int64_t hq, int64_t qb)
      : t_(t), s_(t.shape), a_(a), plan_(plan), b_(b), hq_(hq), hkv_(hq / t.shape.Group()) {
    window_ = a.head_windows != nullptr ? a.head_windows[hkv_] : a.window;
    i0_ = qb * a.br;
    nr_ = std::min(a.br, s_.Lq - i0_);
    nrp_ = RoundUp(nr_, kRowTile);
    q_ = scratch;
    kt_ = q_ + plan.q;
    sc_ = kt_ + plan.kt;
    vs_ = sc_ + plan.s;
    acc_ = vs_ + plan.v;
    m_ = acc_ + plan.acc;
    l_ = m_ + plan.ml;
  }

  void Run(float* out) {
    LoadQ();
    const int64_t first = Pos(0), last = Pos(nr_ - 1);
    // Keys of the union of the rows' sets: [0, sink_end) ∪ [lo, last].
    const int64_t lo = window_ > 0 ? std::max<int64_t>(0, first - window_ + 1) : 0;
    const int64_t sink_end = window_ > 0 ? std::min(a_.sink, lo) : 0;
    for (int64_t j = 0; j < sink_end; j += a_.bc) Block(j, std::min(a_.bc, sink_end - j));
    for (int64_t j = lo; j <= last; j += a_.bc) Block(j, std::min(a_.bc, last + 1 - j));
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

  // Keys [j0, j0 + nc): load, score, mask, online-softmax update, accumulate.
  void Block(int64_t j0, int64_t nc) {
    const int64_t d = s_.d, bcp = plan_.bcp, dp = plan_.dp;
    const int64_t ncp = RoundUp(nc, kColTile);
    // K^T into kt_[d][bcp]; padding columns are zero (finite) and masked below.
    // Column by column: contiguous stores, strided loads (gathers once vectorised),
    // which beats the scalar strided stores of row by row.
    const float* __restrict k = t_.K(b_, hkv_, j0);
    for (int64_t c = 0; c < d; ++c) {
      float* __restrict dst = kt_ + c * bcp;
      for (int64_t j = 0; j < nc; ++j) dst[j] = k[j * d + c];
      for (int64_t j = nc; j < ncp; ++j) dst[j] = 0.0f;
    }
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
    for (int64_t r = 0; r < nrp_; r += kRowTile) {
      for (int64_t j = 0; j < ncp; j += kColTile) {
        TileQK(q_ + r * d, d, kt_ + j, bcp, d, sc_ + r * bcp + j, bcp);
      }
    }
    Mask(j0, nc, ncp);
    Softmax(ncp);
    for (int64_t r = 0; r < nrp_; r += kRowTile) {
      for (int64_t c = 0; c < dp; c += kColTile) {
        TilePV(sc_ + r * bcp, bcp, v + c, ldv, nc, acc_ + r * dp + c, dp);
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
    const float kNegInf = -std::numeric_limits<float>::infinity();
    const int64_t dp = plan_.dp;
    for (int64_t r = 0; r < nrp_; ++r) {
      float* __restrict row = sc_ + r * plan_.bcp;
      if (r >= nr_) {
        std::fill(row, row + ncp, 0.0f);  // padding rows contribute nothing
        continue;
      }
      float lane[kLanes];
      std::fill(lane, lane + kLanes, kNegInf);
      for (int64_t j = 0; j < ncp; j += kLanes) {
        for (int64_t t = 0; t < kLanes; ++t) lane[t] = row[j + t] > lane[t] ? row[j + t] : lane[t];
      }
      float mnew = m_[r];
      for (int64_t t = 0; t < kLanes; ++t) mnew = std::max(mnew, lane[t]);
      if (mnew == kNegInf) {
        std::fill(row, row + ncp, 0.0f);
        continue;
      }
      float sum[kLanes] = {};
      for (int64_t j = 0; j < ncp; j += kLanes) {
        for (int64_t t = 0; t < kLanes; ++t) {
          row[j + t] = ExpNonPositive(row[j + t] - mnew);
          sum[t] += row[j + t];
        }
      }
      float total = 0.0f;
      for (int64_t t = 0; t < kLanes; ++t) total += sum[t];
      if (mnew != m_[r]) {
        const float alpha = std::exp(m_[r] - mnew);  // 0 on the first keys (m = -inf)
        float* __restrict acc = acc_ + r * dp;
        for (int64_t c = 0; c < dp; ++c) acc[c] *= alpha;
        l_[r] *= alpha;
        m_[r] = mnew;
      }
      l_[r] += total;
    }
  }

  void Store(float* out) const {
    for (int64_t r = 0; r < nr_; ++r) {
      float* __restrict o = out + OutIndex(s_, b_, hq_, i0_ + r, 0);
      const float* __restrict acc = acc_ + r * plan_.dp;
      if (l_[r] > 0.0f) {
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
  int64_t b_, hq_, hkv_;
  int64_t window_;  // this head's window (0: full)
  int64_t i0_, nr_, nrp_;
  float *q_, *kt_, *sc_, *vs_, *acc_, *m_, *l_;
};

}  // namespace

void RunWindowedKokkos(const Tensors& tensors, const WindowedArgs& args, float* out) {
  const Shape& s = tensors.shape;
  CHECK(args.br >= 1 && args.bc >= 1 && args.window >= 0 && args.sink >= 0);
  CHECK(s.Hkv > 0 && s.Hq % s.Hkv == 0 && s.Lq <= s.Lk);
  CHECK(static_cast<int64_t>(tensors.q.size()) == s.QElems());
  CHECK(static_cast<int64_t>(tensors.k.size()) == s.KvElems());
  CHECK(static_cast<int64_t>(tensors.v.size()) == s.KvElems());
  const Plan plan(s, args);
  const int64_t blocks = (s.Lq + args.br - 1) / args.br;
  const size_t bytes = static_cast<size_t>(plan.Floats()) * sizeof(float) + kAlign;

  using Policy = Kokkos::TeamPolicy<Kokkos::DefaultHostExecutionSpace>;
  using Member = Policy::member_type;
  const Policy policy =
      Policy(static_cast<int>(s.B * s.Hq * blocks), 1).set_scratch_size(1, Kokkos::PerTeam(bytes));
  const Tensors* t = &tensors;
  const WindowedArgs a = args;
  Kokkos::parallel_for(
      "attntune::windowed", policy, [=, &plan](const Member& team) {
        auto raw = reinterpret_cast<uintptr_t>(team.team_scratch(1).get_shmem(bytes));
        float* scratch = reinterpret_cast<float*>((raw + kAlign - 1) / kAlign * kAlign);
        const int64_t task = team.league_rank();
        const int64_t qb = task % blocks;
        const int64_t hq = task / blocks % s.Hq;
        const int64_t b = task / blocks / s.Hq;
        QueryBlock(*t, a, plan, scratch, b, hq, qb).Run(out);
      });
  Kokkos::fence();
}

}  // namespace attntune
