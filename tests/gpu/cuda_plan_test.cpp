// The CUDA planning logic and the pure halves of GPU measurement: run on every machine.
#include <algorithm>
#include <array>
#include <catch2/catch.hpp>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>

#include "kernels/cuda/plan.h"
#include "kernels/kokkos/sparse.h"
#include "core/params.h"
#include "kernels/selection/selection.h"
#include "core/shape.h"
#include "core/tensors.h"
#include "kernels/variant.h"
#include "profiler/cuda/activity_ledger.h"
#include "profiler/cuda/metric_set.h"

namespace cp = attntune::cuda_plan;
using attntune::ActivityLedger;
using attntune::KernelRecord;

namespace {

// Key blocks that some valid row of query block qb attends, by brute force over Attends.
std::set<int64_t> NeededBlocks(int64_t qb, int64_t br, int64_t bc, int64_t lq, int64_t lk,
                               int64_t w, int64_t sink) {
  std::set<int64_t> blocks;
  for (int64_t i = qb * br; i < std::min(lq, qb * br + br); ++i) {
    for (int64_t j = 0; j < lk; ++j) {
      if (cp::Attends(lk - lq + i, j, w, sink)) blocks.insert(j / bc);
    }
  }
  return blocks;
}

std::set<int64_t> Listed(const cp::BlockSpans& s) {
  std::set<int64_t> blocks;
  for (int64_t k = 0; k < s.Count(); ++k) {
    INFO("k=" << k);
    REQUIRE(blocks.insert(s.At(k)).second);     // no block listed twice
    if (k > 0) REQUIRE(s.At(k) > s.At(k - 1));  // ascending
  }
  return blocks;
}

}  // namespace

TEST_CASE("Attends follows DESIGN.md s1 for dense and swa with sinks") {
  CHECK(cp::Attends(10, 10, 0, 0));
  CHECK_FALSE(cp::Attends(10, 11, 0, 0));  // causal
  CHECK(cp::Attends(10, 0, 0, 0));         // dense sees everything before
  CHECK(cp::Attends(10, 8, 3, 0));         // 10-3 < 8 <= 10
  CHECK_FALSE(cp::Attends(10, 7, 3, 0));
  CHECK(cp::Attends(10, 1, 3, 2));  // sink
  CHECK_FALSE(cp::Attends(10, 2, 3, 2));
  CHECK_FALSE(cp::Attends(1, 1 + 1, 3, 4));  // a sink key is still causal
}

namespace {

// One warp's registers as the PTX ISA lays them out, values as floats (small integers,
// exact in fp16): [lane][register][low, high half].
using WarpRegs = std::array<std::array<std::array<float, 2>, 4>, 32>;
using WarpAcc = std::array<std::array<float, 4>, 32>;  // [lane][c0..c3]

// ldmatrix.sync.aligned.m8n8.x4(.trans).b16: lane l gives the address of row l % 8 of
// matrix l / 8; register m of lane T holds matrix m's row T / 4, columns 2 (T % 4) and
// 2 (T % 4) + 1 (with .trans: its column T / 4, rows 2 (T % 4) and 2 (T % 4) + 1).
template <class Addr>
WarpRegs LdMatrix4(const std::vector<float>& smem, const Addr& addr, bool trans) {
  WarpRegs r{};
  for (int lane = 0; lane < 32; ++lane) {
    for (int m = 0; m < 4; ++m) {
      for (int h = 0; h < 2; ++h) {
        const int row = trans ? 2 * (lane % 4) + h : lane / 4;
        const int col = trans ? lane / 4 : 2 * (lane % 4) + h;
        r[lane][m][h] = smem.at(static_cast<size_t>(addr(8 * m + row) + col));
      }
    }
  }
  return r;
}

// mma.sync.aligned.m16n8k16.row.col: lane T, g = T / 4, t = T % 4, holds A (16 x 16) as
// a0 = A[g][2t, 2t+1], a1 = A[g+8][2t..], a2 = A[g][2t+8..], a3 = A[g+8][2t+8..], B (16 x 8)
// as b0 = B[2t, 2t+1][g], b1 = B[2t+8, 2t+9][g] (registers b_lo, b_hi of `b`) and C (16 x
// 8) as c0, c1 = C[g][2t, 2t+1], c2, c3 = C[g+8][2t, 2t+1]; c += A B.
void Mma(WarpAcc& c, const WarpRegs& a, const WarpRegs& b, int b_lo, int b_hi) {
  float A[16][16], B[16][8];
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int h = 0; h < 2; ++h) {
      A[g][2 * t + h] = a[lane][0][h];
      A[g + 8][2 * t + h] = a[lane][1][h];
      A[g][2 * t + 8 + h] = a[lane][2][h];
      A[g + 8][2 * t + 8 + h] = a[lane][3][h];
      B[2 * t + h][g] = b[lane][b_lo][h];
      B[2 * t + 8 + h][g] = b[lane][b_hi][h];
    }
  }
  for (int lane = 0; lane < 32; ++lane) {
    const int g = lane / 4, t = lane % 4;
    for (int x = 0; x < 4; ++x) {
      const int row = g + 8 * (x / 2), col = 2 * t + x % 2;
      for (int kk = 0; kk < 16; ++kk) c[lane][x] += A[row][kk] * B[kk][col];
    }
  }
}

}  // namespace

TEST_CASE("The kernel's ldmatrix addresses give the mma fragments of S = Q K^T and O = P V") {
  // One warp of two row tiles (32 query rows), d = 32, Bc = 32, tiles padded as the
  // kernel's (LD = d + 8; the padding NaN, so reading it shows), run through the kernel's
  // loops with ldmatrix and mma as the PTX ISA defines them.
  constexpr int kD = 32, kBc = 32, kRows = 32, kLd = kD + 8, kTiles = 2;
  const float nan = std::numeric_limits<float>::quiet_NaN();
  std::vector<float> q(kRows * kLd, nan), k(kBc * kLd, nan), v(kBc * kLd, nan);
  std::mt19937 rng(3);
  std::uniform_int_distribution<int> small(-3, 3);
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kD; ++c) q[r * kLd + c] = static_cast<float>(small(rng));
  }
  for (int r = 0; r < kBc; ++r) {
    for (int c = 0; c < kD; ++c) {
      k[r * kLd + c] = static_cast<float>(small(rng));
      v[r * kLd + c] = static_cast<float>(small(rng));
    }
  }
  // S = Q K^T: for each 16 dims, each row tile's A fragment, then K's B fragments of key
  // tiles nt and nt + 1 from one ldmatrix.
  WarpAcc s[kTiles][kBc / 8] = {};
  for (int kc = 0; kc < kD / 16; ++kc) {
    for (int mi = 0; mi < kTiles; ++mi) {
      const WarpRegs qf =
          LdMatrix4(q, [&](int lane) { return cp::LdmQ(kLd, mi * 16, kc, lane); }, false);
      for (int nt = 0; nt < kBc / 8; nt += 2) {
        const WarpRegs kb =
            LdMatrix4(k, [&](int lane) { return cp::LdmK(kLd, nt, kc, lane); }, false);
        Mma(s[mi][nt], qf, kb, 0, 1);
        Mma(s[mi][nt + 1], qf, kb, 2, 3);
      }
    }
  }
  // O += P V with P = S: the S accumulators of key tiles 2kk and 2kk + 1 are P's A fragment.
  WarpAcc o[kTiles][kD / 8] = {};
  for (int mi = 0; mi < kTiles; ++mi) {
    for (int kk = 0; kk < kBc / 16; ++kk) {
      WarpRegs pa{};
      for (int lane = 0; lane < 32; ++lane) {
        pa[lane][0] = {s[mi][2 * kk][lane][0], s[mi][2 * kk][lane][1]};
        pa[lane][1] = {s[mi][2 * kk][lane][2], s[mi][2 * kk][lane][3]};
        pa[lane][2] = {s[mi][2 * kk + 1][lane][0], s[mi][2 * kk + 1][lane][1]};
        pa[lane][3] = {s[mi][2 * kk + 1][lane][2], s[mi][2 * kk + 1][lane][3]};
      }
      for (int dt = 0; dt < kD / 8; dt += 2) {
        const WarpRegs vb =
            LdMatrix4(v, [&](int lane) { return cp::LdmV(kLd, kk, dt, lane); }, true);
        Mma(o[mi][dt], pa, vb, 0, 1);
        Mma(o[mi][dt + 1], pa, vb, 2, 3);
      }
    }
  }
  // Against the products computed directly (exact: small integers).
  std::vector<float> S(kRows * kBc, 0.f), O(kRows * kD, 0.f);
  for (int r = 0; r < kRows; ++r) {
    for (int j = 0; j < kBc; ++j) {
      for (int c = 0; c < kD; ++c) S[r * kBc + j] += q[r * kLd + c] * k[j * kLd + c];
    }
  }
  for (int r = 0; r < kRows; ++r) {
    for (int c = 0; c < kD; ++c) {
      for (int j = 0; j < kBc; ++j) O[r * kD + c] += S[r * kBc + j] * v[j * kLd + c];
    }
  }
  int mismatches = 0;
  for (int mi = 0; mi < kTiles; ++mi) {
    for (int lane = 0; lane < 32; ++lane) {
      const int g = lane / 4, t = lane % 4;
      for (int x = 0; x < 4; ++x) {
        const int row = mi * 16 + g + 8 * (x / 2), col = 2 * t + x % 2;
        for (int nt = 0; nt < kBc / 8; ++nt) {
          mismatches += s[mi][nt][lane][x] != S[row * kBc + nt * 8 + col];
        }
        for (int dt = 0; dt < kD / 8; ++dt) {
          mismatches += o[mi][dt][lane][x] != O[row * kD + dt * 8 + col];
        }
      }
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("The kernel's 32-bit predicates, window and sink clamped, answer as the 64-bit ones") {
  // Positions up to the largest CanImplement takes; windows and sinks of every sign and
  // size, past 2^31 and at the int64 extremes.
  const int64_t top = (int64_t{1} << 31) - 1025;
  const int64_t ps[] = {0, 1, 2, 5, 100, 65536, top - 1, top};
  const int64_t limits[] = {INT64_MIN, -(int64_t{1} << 40), -5, -1, 0, 1, 2, 3, 7, 100,
                            top, INT32_MAX - 1, INT32_MAX, int64_t{1} << 31, int64_t{1} << 40,
                            INT64_MAX};
  int64_t checked = 0, attended = 0;
  for (const int64_t p : ps) {
    std::vector<int64_t> js = {0, 1, 2, 3, 6, 7, 8, 99, 100, 101};
    for (int64_t d = -3; d <= 3; ++d) {
      if (p + d >= 0 && p + d <= top + 1023) js.push_back(p + d);
    }
    for (const int64_t j : js) {
      for (const int64_t w : limits) {
        for (const int64_t sink : limits) {
          const bool wide = cp::Attends<int64_t>(p, j, w, sink);
          const bool narrow = cp::Attends<int32_t>(static_cast<int32_t>(p), static_cast<int32_t>(j),
                                                   cp::Clamp32(w), cp::Clamp32(sink));
          if (wide != narrow) FAIL("Attends(" << p << ", " << j << ", " << w << ", " << sink << ")");
          for (const int64_t j_hi : {j, j + 1, j + 31, p}) {
            if (j_hi < j) continue;
            const bool all = cp::AttendsAll<int64_t>(p, p + 7, j, j_hi, w, sink);
            const bool all32 = cp::AttendsAll<int32_t>(
                static_cast<int32_t>(p), static_cast<int32_t>(p + 7), static_cast<int32_t>(j),
                static_cast<int32_t>(j_hi), cp::Clamp32(w), cp::Clamp32(sink));
            if (all != all32) {
              FAIL("AttendsAll(" << p << ", " << p + 7 << ", " << j << ", " << j_hi << ", " << w
                                 << ", " << sink << ")");
            }
          }
          ++checked;
          attended += wide;
        }
      }
    }
  }
  CHECK(attended > checked / 4);  // both answers occur
  CHECK(attended < checked * 3 / 4);
  CHECK(cp::Clamp32(INT64_MIN) == 0);
  CHECK(cp::Clamp32(-1) == 0);
  CHECK(cp::Clamp32(7) == 7);
  CHECK(cp::Clamp32(int64_t{1} << 31) == INT32_MAX);
}

TEST_CASE("AttendsAll holds exactly when Attends holds for every row and key of the ranges") {
  // Every range of rows and keys within [0, 24), windows 0 (dense) to 9, sinks 0 to 4.
  int64_t both = 0, only_some = 0;
  for (int64_t window = 0; window <= 9; ++window) {
    for (int64_t sink = 0; sink <= 4; ++sink) {
      for (int64_t p_lo = 0; p_lo < 24; ++p_lo) {
        for (int64_t p_hi = p_lo; p_hi < 24; p_hi += 3) {
          for (int64_t j_lo = -1; j_lo < 24; ++j_lo) {
            for (int64_t j_hi = j_lo; j_hi < 24; j_hi += 2) {
              bool all = true;
              for (int64_t p = p_lo; p <= p_hi && all; ++p) {
                for (int64_t j = j_lo; j <= j_hi && all; ++j) all = cp::Attends(p, j, window, sink);
              }
              const bool got = cp::AttendsAll(p_lo, p_hi, j_lo, j_hi, window, sink);
              if (got != all) {
                FAIL("AttendsAll(" << p_lo << ", " << p_hi << ", " << j_lo << ", " << j_hi << ", "
                                   << window << ", " << sink << ") = " << got);
              }
              (all ? both : only_some) += 1;
            }
          }
        }
      }
    }
  }
  CHECK(both > 1000);  // both answers occur often
  CHECK(only_some > 1000);
}

TEST_CASE("Attends agrees with the variant table's key sets for dense, swa and hybrid") {
  const attntune::Shape shape = attntune::ParseShape("B=1,Hq=4,Hkv=2,Lq=61,Lk=90,d=16", "test");
  const attntune::Tensors tensors = attntune::GaussianTensors(shape, 5);
  const std::vector<std::pair<std::string, attntune::Params>> cases = {
      {"dense", {}},
      {"swa", {{"w", "7"}, {"sink", "3"}}},
      {"swa", {{"w", "1"}, {"sink", "0"}}},
      {"hybrid", {{"w", "20"}, {"full", "1"}, {"sink", "2"}}},
  };
  for (const auto& [id, params] : cases) {
    const attntune::Variant& variant = attntune::FindVariant(id, "test");
    const auto sets = variant.key_sets(tensors, params);
    std::vector<int64_t> windows(shape.Hkv, 0);
    if (id == "swa") windows.assign(shape.Hkv, std::stoll(params.at("w")));
    if (id == "hybrid") windows = attntune::HybridWindows(tensors, params);
    const int64_t sink = params.count("sink") ? std::stoll(params.at("sink")) : 0;
    for (int64_t h = 0; h < shape.Hq; ++h) {
      for (int64_t i = 0; i < shape.Lq; ++i) {
        std::vector<int64_t> expected, got;
        sets->Row(0, h, i, &expected);
        for (int64_t j = 0; j < shape.Lk; ++j) {
          if (cp::Attends(shape.QueryPos(i), j, windows[h / shape.Group()], sink)) got.push_back(j);
        }
        INFO(id << " h=" << h << " i=" << i);
        REQUIRE(got == expected);
      }
    }
  }
}

TEST_CASE("KeyBlocks lists exactly the key blocks some row attends") {
  std::mt19937 rng(7);
  int cases = 0;
  for (int64_t lk : {1, 37, 64, 65, 577}) {
    for (int64_t lq : {int64_t{1}, int64_t{17}, lk}) {
      if (lq > lk) continue;
      for (int64_t w : {0, 1, 5, 64, 100, 1000}) {
        for (int64_t sink : {0, 1, 4, 70}) {
          for (auto [br, bc] : {std::pair<int64_t, int64_t>{64, 64}, {128, 32}, {16, 48}}) {
            for (int64_t qb = 0; qb * br < lq; ++qb) {
              INFO("lq=" << lq << " lk=" << lk << " w=" << w << " sink=" << sink << " br=" << br
                         << " bc=" << bc << " qb=" << qb);
              const cp::BlockSpans s = cp::KeyBlocks(qb, br, bc, lq, lk, w, sink);
              REQUIRE(Listed(s) == NeededBlocks(qb, br, bc, lq, lk, w, sink));
              ++cases;
            }
          }
        }
      }
    }
  }
  CHECK(cases > 1000);
}

TEST_CASE("KeyBlocks skips out-of-window blocks and keeps the sink block apart") {
  // Lq = Lk = 4096, w = 256, sink = 4, 64 x 64 tiles: the last query block (rows
  // 4032..4095) needs keys 3777..4095 -> blocks 59..63, and the sink block 0.
  const cp::BlockSpans s = cp::KeyBlocks(63, 64, 64, 4096, 4096, 256, 4);
  CHECK(s.lo0 == 0);
  CHECK(s.hi0 == 1);
  CHECK(s.lo1 == 59);
  CHECK(s.hi1 == 64);
  CHECK(s.Count() == 6);
  CHECK(s.At(0) == 0);
  CHECK(s.At(1) == 59);
  // Dense: every block up to the diagonal.
  CHECK(cp::KeyBlocks(63, 64, 64, 4096, 4096, 0, 0).Count() == 64);
}

TEST_CASE("The tile table matches instantiations.def and the shared-memory model") {
  const auto& tiles = cp::WindowedTiles();
  REQUIRE(tiles.size() == 9);
  CHECK(cp::KernelName(tiles[1]) == "attntune_windowed_f16_d128_br64_bc64_w4_s2");
  CHECK(cp::KernelName(tiles[4]) == "attntune_windowed_f16_d128_br32_bc64_w2_s2");
  CHECK(cp::KernelName(tiles[5]) == "attntune_windowed_bf16_d64_br64_bc64_w4_s2");
  CHECK(cp::BlockSparseKernelName(tiles[5]) == "attntune_blocksparse_bf16_d64_br64_bc64_w4_s2");
  CHECK(cp::KernelName(tiles[7]) == "attntune_windowed_f16_d128_br128_bc32_w4_s2");
  for (const cp::WindowedTile& t : tiles) {
    CHECK((t.br == 16 * t.warps || t.br == 32 * t.warps));  // one or two row tiles a warp
    CHECK(t.d % 16 == 0);
    CHECK(t.bc % 16 == 0);
  }
  // (128 + 8) * 2 bytes per row x (64 Q rows + 2 stages x 2 x 64 K/V rows).
  CHECK(cp::SmemBytes(tiles[1]) == 272 * (64 + 256));
  CHECK(cp::Threads(tiles[2]) == 256);
  CHECK(cp::Threads(tiles[4]) == 64);
  CHECK(cp::SmemBytes(tiles[7]) == 272 * (128 + 128));  // 128 Q rows, 2 x 2 x 32 K/V rows
  CHECK(cp::Threads(tiles[7]) == 128);
}

TEST_CASE("PlanWindowed sizes the grid; CanImplement names what does not fit") {
  cp::WindowedProblem problem;
  problem.shape = attntune::ParseShape("B=2,Hq=16,Hkv=4,Lq=577,Lk=1000,d=128", "test");
  problem.window = 256;
  const cp::WindowedTile& tile = cp::WindowedTiles()[1];
  REQUIRE(cp::CanImplement(problem, tile).empty());
  const cp::WindowedLaunchPlan plan = cp::PlanWindowed(problem, tile);
  CHECK(plan.grid_x == 10);  // ceil(577 / 64)
  CHECK(plan.grid_y == 16);
  CHECK(plan.grid_z == 2);
  CHECK(plan.threads == 128);
  CHECK(plan.workspace_bytes == 0);
  problem.shape.d = 96;
  CHECK(cp::CanImplement(problem, tile) == "head dim 96 != compiled 128");
  problem.shape.d = 128;
  problem.shape.causal = false;
  CHECK(cp::CanImplement(problem, tile) == "non-causal attention is not implemented on CUDA");
  problem.shape.causal = true;
  problem.shape.Lk = int64_t{1} << 31;  // positions past 32 bits
  CHECK(cp::CanImplement(problem, tile) == "Lk must be below 2^31 - 1024");
  problem.shape.Lk = INT32_MAX - 1024;
  CHECK(cp::CanImplement(problem, tile).empty());
  problem.shape.Lq = problem.shape.Lk;  // 2^25 - 16 query blocks of 64 rows
  problem.shape.Hq = 65 * problem.shape.Hkv;
  CHECK(cp::CanImplement(problem, tile) ==
        "query blocks x query heads per KV head must be below 2^31");
  problem.shape.Hq = 64 * problem.shape.Hkv;
  CHECK(cp::CanImplement(problem, tile).empty());
}

TEST_CASE("BlockOfLaunch visits every (query block, head) once, longest causal blocks first") {
  for (int64_t blocks : {1, 2, 7, 128}) {
    for (int64_t hkv : {1, 3}) {
      for (int64_t group : {1, 2, 3, 8}) {
        const int64_t hq = hkv * group;
        INFO("blocks=" << blocks << " hkv=" << hkv << " group=" << group);
        std::set<std::pair<int64_t, int64_t>> seen;
        int64_t prev_hk = 0, prev_qb = blocks;
        for (int64_t y = 0; y < hq; ++y) {
          for (int64_t x = 0; x < blocks; ++x) {  // launch order: x fastest
            const cp::LaunchSlot s = cp::BlockOfLaunch(x, y, blocks, hq / hkv);
            REQUIRE(s.qb >= 0);
            REQUIRE(s.qb < blocks);
            REQUIRE(s.h >= 0);
            REQUIRE(s.h < hq);
            REQUIRE(seen.insert({s.qb, s.h}).second);
            // One KV head's blocks together, query blocks descending within it.
            const int64_t hk = s.h / group;
            REQUIRE(hk >= prev_hk);
            if (hk == prev_hk) REQUIRE(s.qb <= prev_qb);
            if (hk > prev_hk) REQUIRE(s.qb == blocks - 1);
            prev_hk = hk;
            prev_qb = s.qb;
          }
        }
        CHECK(static_cast<int64_t>(seen.size()) == blocks * hq);
        const cp::LaunchSlot first = cp::BlockOfLaunch(0, 0, blocks, group);
        CHECK(first.qb == blocks - 1);
        CHECK(first.h == 0);
      }
    }
  }
}

TEST_CASE("ParseResourceUsage reads ptxas -v logs, with and without smem and spills") {
  const std::string log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'k_a' for 'sm_80'\n"
      "ptxas info    : Function properties for k_a\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 223 registers, used 1 barriers, 440 bytes cmem[0]\n"
      "ptxas info    : Compile time = 673.487 ms\n"
      "ptxas info    : Compiling entry function 'k_b' for 'sm_90'\n"
      "ptxas info    : Function properties for k_b\n"
      "    24 bytes stack frame, 20 bytes spill stores, 16 bytes spill loads\n"
      "ptxas info    : Used 255 registers, used 1 barriers, 1024 bytes smem\n";
  const auto rows = cp::ParseResourceUsage(log);
  REQUIRE(rows.size() == 2);
  CHECK(rows[0].sm == 80);
  CHECK(rows[0].kernel == "k_a");
  CHECK(rows[0].registers == 223);
  CHECK(rows[0].static_smem == 0);
  CHECK(rows[0].spill_stores == 0);
  CHECK(rows[1].sm == 90);
  CHECK(rows[1].registers == 255);
  CHECK(rows[1].stack == 24);
  CHECK(rows[1].spill_stores == 20);
  CHECK(rows[1].spill_loads == 16);
  CHECK(rows[1].static_smem == 1024);
  const auto again = cp::ResourcesFromCsv(cp::ResourcesToCsv(rows));
  REQUIRE(again.size() == 2);
  CHECK(again[1].spill_loads == 16);
  CHECK(again[1].kernel == "k_b");
  CHECK_THROWS_WITH(
      cp::ParseResourceUsage("ptxas info    : Compiling entry function 'x' for 'sm_80'\n"),
      "ptxas log ends inside the record of x");
}

TEST_CASE("TileInfeasibleReason prunes spills, register and shared-memory overflows") {
  const cp::WindowedTile& tile = cp::WindowedTiles()[1];  // 87040 bytes of smem
  const std::string name = cp::KernelName(tile);
  std::vector<cp::KernelResources> table = {{86, name, 200, 0, 0, 0, 0},
                                            {80, name, 200, 8, 8, 8, 0}};
  CHECK(cp::TileInfeasibleReason(tile, *cp::FindArch(86), table).empty());
  CHECK(cp::TileInfeasibleReason(tile, *cp::FindArch(80), table) ==
        name + " on sm_80: spills (8 bytes stored, 8 bytes loaded per thread)");
  CHECK(cp::TileInfeasibleReason(tile, *cp::FindArch(90), table) ==
        name + " on sm_90: not compiled");
  table[0].static_smem = 20000;  // 87040 + 20000 > 99 KB on sm_86
  CHECK(cp::TileInfeasibleReason(tile, *cp::FindArch(86), table) ==
        name + " on sm_86: 107040 bytes of shared memory exceed 101376");
  cp::WindowedTile big = cp::WindowedTiles()[2];  // 256 threads
  table.push_back({89, cp::KernelName(big), 255, 0, 0, 0, 0});
  CHECK(cp::TileInfeasibleReason(big, *cp::FindArch(89), table).empty());  // 65280 fit
  table.back().registers = 300;
  CHECK(cp::TileInfeasibleReason(big, *cp::FindArch(89), table) ==
        cp::KernelName(big) + " on sm_89: 300 registers per thread exceed 255");
  CHECK(cp::FindArch(75) == nullptr);
}

TEST_CASE("ActivityLedger joins kernels and external ids in any arrival order") {
  ActivityLedger ledger;
  ledger.AddKernel({11, 3000, 3500, "b"});  // before its external record
  ledger.AddKernel({10, 1000, 1400, "a"});
  ledger.AddExternalCorrelation(7, 10);
  ledger.AddExternalCorrelation(7, 11);
  ledger.AddKernel({12, 0, 0, "untimed"});
  ledger.AddExternalCorrelation(8, 12);
  ledger.AddKernel({99, 5000, 6000, "orphan"});
  const auto by = ledger.Attribute();
  REQUIRE(by.count(7) == 1);
  REQUIRE(by.at(7).kernels.size() == 2);
  CHECK(by.at(7).kernels[0].name == "a");       // start order
  CHECK(by.at(7).TotalMs() == Approx(0.0009));  // 400 + 500 ns
  CHECK(by.at(8).kernels.empty());
  CHECK(by.at(8).untimed == 1);
  CHECK(ledger.Unattributed() == 1);
  CHECK(ledger.Problems().empty());
  ledger.AddDropped(3);
  CHECK(ledger.Problems() ==
        "CUPTI lost activity records: 3 dropped, 0 buffers with invalid records");
  // The timer takes them: the repetition that finds them fails, the next one does not.
  ledger.AddMalformedBuffer();
  CHECK(ledger.TakeProblems() ==
        "CUPTI lost activity records: 3 dropped, 1 buffers with invalid records");
  CHECK(ledger.TakeProblems().empty());
  CHECK(ledger.Problems().empty());
}

TEST_CASE("A repetition's kernels give its time only when every one was timed") {
  attntune::CandidateKernels c;
  CHECK(c.TimingProblem() == "no timed kernel");
  c.kernels.push_back({1, 1000, 1400, "select"});
  c.kernels.push_back({2, 1500, 2500, "attention"});
  CHECK(c.TimingProblem() == "");
  CHECK(c.TotalMs() == Approx(0.0014));
  // The selection's part: the kernels the predicate takes (bench's select_ms).
  CHECK(c.MsWhere([](const std::string& n) { return n == "select"; }) == Approx(0.0004));
  CHECK(c.MsWhere([](const std::string&) { return false; }) == 0.0);
  c.untimed = 2;  // zero timestamps: counted apart, not in kernels
  CHECK(c.TimingProblem() ==
        "2 kernels without timestamps (CUPTI had no device memory to time them)");
  c.untimed = 0;
  c.kernels.push_back({3, 3000, 3000, "empty"});
  CHECK(c.TimingProblem() == "a kernel (empty) that does not end after it starts");
  c.kernels.back().end_ns = 2999;  // ends before it starts
  CHECK(c.TimingProblem() == "a kernel (empty) that does not end after it starts");
}

TEST_CASE("ActivityLedger::Take returns one id's kernels and keeps the others'") {
  ActivityLedger ledger;
  ledger.AddKernel({21, 3000, 3500, "second"});
  ledger.AddKernel({20, 1000, 1400, "first"});
  ledger.AddKernel({22, 0, 0, "untimed"});
  ledger.AddKernel({30, 2000, 2100, "other"});
  for (uint32_t c : {20u, 21u, 22u}) ledger.AddExternalCorrelation(7, c);
  ledger.AddExternalCorrelation(8, 30);
  const attntune::CandidateKernels taken = ledger.Take(7);
  REQUIRE(taken.kernels.size() == 2);
  CHECK(taken.kernels[0].name == "first");  // start order
  CHECK(taken.untimed == 1);
  CHECK(taken.TotalMs() == Approx(0.0009));
  // Its time would leave the untimed kernel out: the timer refuses it.
  CHECK(taken.TimingProblem() ==
        "1 kernel without timestamps (CUPTI had no device memory to time them)");
  const auto by = ledger.Attribute();
  CHECK(by.count(7) == 0);  // gone, with its correlation records
  REQUIRE(by.count(8) == 1);
  CHECK(by.at(8).kernels.size() == 1);
  CHECK(ledger.Take(7).kernels.empty());
  CHECK(ledger.Unattributed() == 0);
}

TEST_CASE("CandidateKernels::SpanMs runs from the first start to the last end") {
  attntune::CandidateKernels c;
  CHECK(c.SpanMs() == 0.0);  // nothing timed
  c.kernels = {{1, 1000, 1400, "a"}, {2, 3000, 3500, "b"}};
  CHECK(c.TotalMs() == Approx(0.0009));
  CHECK(c.SpanMs() == Approx(0.0025));  // the 1,600 ns gap between them counts
  c.kernels.push_back({3, 1200, 5000, "overlapping"});  // concurrent with both
  CHECK(c.TotalMs() == Approx(0.0047));
  CHECK(c.SpanMs() == Approx(0.004));  // less than the sum: the overlap counts once
  c.kernels.push_back({4, 0, 0, "untimed"});  // no timestamps: not the first start
  CHECK(c.SpanMs() == Approx(0.004));
  c.kernels.push_back({5, 500, 600, "listed last, started first"});
  CHECK(c.SpanMs() == Approx(0.0045));
}

TEST_CASE("ResolveMetrics picks each role's first valid name and reports the rest") {
  const std::vector<attntune::MetricRole> roles = {{"a", {"x.sum", "y.sum"}}, {"b", {"z.sum"}}};
  const auto sel =
      attntune::ResolveMetrics(roles, [](const std::string& n) { return n == "y.sum"; });
  REQUIRE(sel.chosen.size() == 1);
  CHECK(sel.chosen[0].first == "a");
  CHECK(sel.chosen[0].second == "y.sum");
  REQUIRE(sel.unresolved.size() == 1);
  CHECK(sel.unresolved[0] == "b");
}

TEST_CASE("Prefix top-k evictions and gathered key lists match the ks and dma key sets") {
  using attntune::Params;
  using attntune::Shape;
  struct Case {
    const char* variant;
    Params params;
    int64_t lq, lk;
    int br, bc;
  };
  const Case cases[] = {
      {"ks", {{"k", "7"}}, 130, 130, 64, 64},     {"ks", {{"k", "200"}}, 97, 97, 16, 32},
      {"ks", {{"k", "3"}}, 1, 1, 64, 64},         {"ks", {{"k", "5"}}, 37, 37, 128, 32},
      {"ks", {{"k", "16"}}, 300, 577, 64, 64},
      {"dma", {{"w", "20"}, {"bias", "1"}, {"seed", "0"}}, 60, 150, 32, 16},
      {"dma", {{"w", "1"}, {"bias", "0"}, {"seed", "2"}}, 77, 77, 64, 32},
  };
  for (const Case& c : cases) {
    const Shape shape = attntune::ParseShape(
        "B=2,Hq=4,Hkv=2,Lq=" + std::to_string(c.lq) + ",Lk=" + std::to_string(c.lk) + ",d=16",
        "test");
    attntune::Tensors t = attntune::GaussianTensors(shape, 13);
    if (std::string(c.variant) == "ks") {  // ties: scores in few distinct values
      t.scores.resize(static_cast<size_t>(shape.B * shape.Hkv * shape.Lk));
      for (size_t n = 0; n < t.scores.size(); ++n) t.scores[n] = static_cast<float>((n * 7) % 5);
    }
    const attntune::Variant& variant = attntune::FindVariant(c.variant, "test");
    const auto sets = variant.key_sets(t, c.params);
    const std::vector<double> x = std::string(c.variant) == "ks"
                                      ? attntune::KsScores(t)
                                      : attntune::DmaScores(t, std::stoull(c.params.at("seed")));
    const int64_t k = std::stoll(c.params.count("k") ? c.params.at("k") : c.params.at("w"));
    std::vector<int32_t> evict;
    for (int64_t head = 0; head < shape.B * shape.Hkv; ++head) {
      const auto e = attntune::PrefixTopKEvictions(x.data() + head * shape.Lk, shape.Lk, k);
      evict.insert(evict.end(), e.begin(), e.end());
    }
    const cp::KeyLists lists = cp::BuildKeyLists(shape, evict, c.br);
    const cp::KeyLists held_first =
        cp::BuildKeyLists(shape, evict, c.br, cp::KeyOrder::kHeldFirst);
    REQUIRE(lists.offsets.size() ==
            static_cast<size_t>(shape.B * shape.Hkv * lists.query_blocks + 1));
    REQUIRE(held_first.offsets == lists.offsets);
    std::vector<int64_t> row;
    for (int64_t b = 0; b < shape.B; ++b) {
      for (int64_t hq = 0; hq < shape.Hq; ++hq) {
        const int64_t hk = hq / (shape.Hq / shape.Hkv);
        const int32_t* e = evict.data() + (b * shape.Hkv + hk) * shape.Lk;
        for (int64_t qb = 0; qb < lists.query_blocks; ++qb) {
          std::set<int64_t> needed;
          std::map<int64_t, int64_t> rows_attending;  // key -> rows of the block attending it
          const int64_t rows = std::min(shape.Lq, (qb + 1) * c.br) - qb * c.br;
          for (int64_t i = qb * c.br; i < std::min(shape.Lq, (qb + 1) * c.br); ++i) {
            sets->Row(b, hq, i, &row);
            for (int64_t j : row) ++rows_attending[j];
            const std::set<int64_t> in(row.begin(), row.end());
            const int64_t p = shape.QueryPos(i);
            for (int64_t j = 0; j < shape.Lk; ++j) {
              INFO(c.variant << " b=" << b << " hq=" << hq << " i=" << i << " j=" << j);
              REQUIRE(cp::InTopK(p, j, e) == (in.count(j) == 1));
            }
            needed.insert(row.begin(), row.end());
          }
          const int64_t list = (b * shape.Hkv + hk) * lists.query_blocks + qb;
          const std::vector<int64_t> listed(lists.keys.begin() + lists.offsets[list],
                                            lists.keys.begin() + lists.offsets[list + 1]);
          INFO(c.variant << " qb=" << qb);
          CHECK(listed == std::vector<int64_t>(needed.begin(), needed.end()));  // ascending
          // Held first: the keys every row attends, ascending, then the others, ascending.
          std::vector<int64_t> want_held, want_rest;
          for (int64_t j : needed) (rows_attending[j] == rows ? want_held : want_rest).push_back(j);
          want_held.insert(want_held.end(), want_rest.begin(), want_rest.end());
          const std::vector<int64_t> got(held_first.keys.begin() + held_first.offsets[list],
                                         held_first.keys.begin() + held_first.offsets[list + 1]);
          CHECK(got == want_held);
        }
      }
    }
  }
}

TEST_CASE("PlanDecode covers exactly the attended keys with at most the asked splits") {
  cp::WindowedProblem problem;
  problem.shape = attntune::ParseShape("B=2,Hq=8,Hkv=2,Lq=1,Lk=1,d=128", "test");
  for (int64_t lk : {1, 2, 37, 1000, 65536}) {
    for (int64_t w : {0, 1, 100, 5000}) {
      for (int64_t sink : {0, 4}) {
        for (int64_t splits : {1, 3, 64, 5000}) {
          problem.shape.Lk = lk;
          problem.window = w;
          problem.sink = sink;
          REQUIRE(cp::CanImplementDecode(problem, splits) == "");
          const cp::DecodePlan plan = cp::PlanDecode(problem, splits);
          INFO("Lk=" << lk << " w=" << w << " sink=" << sink << " splits=" << splits);
          CHECK(plan.splits >= 1);
          CHECK(plan.splits <= splits);
          // Splits tile [first_key, Lk) and every split holds at least one key.
          CHECK(plan.first_key + (plan.splits - 1) * plan.keys_per_split < lk);
          CHECK(plan.first_key + plan.splits * plan.keys_per_split >= lk);
          // Keys before first_key are never attended by the row at p = Lk - 1.
          for (int64_t j = 0; j < plan.first_key; ++j) CHECK_FALSE(cp::Attends(lk - 1, j, w, sink));
          CHECK(plan.workspace_bytes == 4 * 2 * 8 * plan.splits * (128 + 2));
          CHECK(plan.grid_y == 2);
        }
      }
    }
  }
  problem.shape.Lq = 2;
  CHECK(cp::CanImplementDecode(problem, 8) == "split-KV decode computes one query row (Lq = 1)");
  problem.shape.Lq = 1;
  problem.shape.Hq = 16;
  problem.shape.Hkv = 1;
  CHECK(cp::CanImplementDecode(problem, 8) == "split-KV decode handles at most 8 query heads per KV head");
}

namespace {

// lsh or hax inputs: Gaussian tensors, optionally ks scores in few distinct values (ties)
// and a zero projection (every key and query in bin 0 under the sign rule).
attntune::Tensors BucketTensors(const attntune::Shape& shape, bool tied_scores, bool zero_proj,
                                int64_t bits) {
  attntune::Tensors t = attntune::GaussianTensors(shape, 17);
  if (tied_scores) {
    t.scores.resize(static_cast<size_t>(shape.B * shape.Hkv * shape.Lk));
    for (size_t n = 0; n < t.scores.size(); ++n) t.scores[n] = static_cast<float>((n * 7) % 3);
  }
  if (zero_proj) t.proj.assign(static_cast<size_t>(shape.Hkv * shape.d * bits), 0.0f);
  return t;
}

// Checks BucketLists against the variant's own key sets: the blocks' rows are every
// (b, hq, i) exactly once, at most br per block, of the block's KV head; each row's keys,
// the block's listed keys that BucketAttends keeps, are exactly its reference set; the
// list is ascending and holds no key that none of its rows attends.
void CheckBucketLists(const attntune::Shape& shape, const cp::BucketLists& lists,
                      const attntune::KeySets& sets, const std::vector<int32_t>& evict, int br) {
  const int64_t group = shape.Group();
  const int64_t blocks = lists.Blocks();
  REQUIRE(lists.row_offsets.size() == static_cast<size_t>(blocks + 1));
  REQUIRE(lists.key_offsets.size() == static_cast<size_t>(blocks + 1));
  REQUIRE(lists.rows.size() == static_cast<size_t>(shape.B * shape.Hq * shape.Lq));
  REQUIRE(lists.lo.size() == lists.rows.size());
  REQUIRE(lists.hi.size() == lists.rows.size());
  REQUIRE(lists.spos.size() == static_cast<size_t>(shape.B * shape.Hkv * shape.Lk));
  for (int64_t head = 0; head < shape.B * shape.Hkv; ++head) {  // spos: a permutation
    std::vector<int32_t> sorted(lists.spos.begin() + head * shape.Lk,
                                lists.spos.begin() + (head + 1) * shape.Lk);
    std::sort(sorted.begin(), sorted.end());
    for (int64_t n = 0; n < shape.Lk; ++n) REQUIRE(sorted[n] == n);
  }
  std::vector<int> seen(static_cast<size_t>(shape.B * shape.Hq * shape.Lq), 0);
  std::vector<int64_t> expected, got;
  for (int64_t x = 0; x < blocks; ++x) {
    const int64_t head = lists.head[x], b = head / shape.Hkv, hkv = head % shape.Hkv;
    const int64_t nr = lists.row_offsets[x + 1] - lists.row_offsets[x];
    INFO("block " << x << " head " << head);
    REQUIRE(nr >= 1);
    REQUIRE(nr <= br);
    const std::vector<int32_t> keys(lists.keys.begin() + lists.key_offsets[x],
                                    lists.keys.begin() + lists.key_offsets[x + 1]);
    for (size_t n = 1; n < keys.size(); ++n) REQUIRE(keys[n - 1] < keys[n]);
    std::set<int64_t> attended;
    for (int64_t r = lists.row_offsets[x]; r < lists.row_offsets[x + 1]; ++r) {
      const int64_t m = lists.rows[r], g = m / shape.Lq, i = m % shape.Lq;
      REQUIRE(g < group);
      const int64_t hq = hkv * group + g, p = shape.QueryPos(i);
      ++seen[(b * shape.Hq + hq) * shape.Lq + i];
      got.clear();
      for (const int32_t j : keys) {
        const int32_t* e = evict.empty() ? nullptr : evict.data() + head * shape.Lk;
        const int32_t spos = lists.spos[head * shape.Lk + j];
        const bool attends = cp::BucketAttends(p, j, lists.lo[r], lists.hi[r], spos, e);
        // The kernel's form, with j's eviction read beside it in the list.
        REQUIRE(cp::BucketAttendsKey<int64_t>(p, j, lists.lo[r], lists.hi[r], spos, e != nullptr,
                                              e != nullptr ? e[j] : -1) == attends);
        if (attends) got.push_back(j);
      }
      sets.Row(b, hq, i, &expected);
      INFO("b=" << b << " hq=" << hq << " i=" << i);
      REQUIRE(got == expected);
      attended.insert(got.begin(), got.end());
    }
    CHECK(attended.size() == keys.size());  // every listed key is attended by some row
  }
  for (size_t n = 0; n < seen.size(); ++n) {
    INFO("row " << n);
    REQUIRE(seen[n] == 1);
  }
}

}  // namespace

TEST_CASE("BucketAttends is the lsh window or the prefix top-k interval, each key once") {
  std::vector<int32_t> evict(12, 0);
  evict[4] = 11;  // key 4 is held for positions 4..10
  CHECK(cp::BucketAttends(10, 4, 2, 5, 3, nullptr));        // spos in [lo, hi)
  CHECK_FALSE(cp::BucketAttends(10, 4, 2, 5, 5, nullptr));  // hi is exclusive
  CHECK_FALSE(cp::BucketAttends(10, 4, 2, 2, 2, nullptr));  // empty window
  CHECK_FALSE(cp::BucketAttends(10, 4, 0, 0, 9, nullptr));  // lsh: no ks part
  CHECK(cp::BucketAttends(10, 4, 0, 0, 9, evict.data()));   // ks: 4 <= 10 < 11
  CHECK_FALSE(cp::BucketAttends(11, 4, 0, 0, 9, evict.data()));  // evicted at 11
  CHECK_FALSE(cp::BucketAttends(3, 4, 0, 0, 9, evict.data()));   // the ks part is causal
  CHECK(cp::BucketAttends(10, 4, 2, 5, 3, evict.data()));   // in both: true once
}

TEST_CASE("Bucketed row and key lists give exactly the lsh and hax key sets") {
  using attntune::Params;
  using attntune::Shape;
  struct Case {
    const char* variant;
    const char* shape;
    Params params;
    int br;
    int64_t chunk;
    bool tied_scores, zero_proj;
  };
  const Case cases[] = {
      {"lsh", "B=2,Hq=6,Hkv=3,L=37,d=16", {{"k", "4"}, {"bits", "2"}, {"rule", "sign"}}, 16, 0},
      {"lsh", "B=1,Hq=2,Hkv=1,L=1,d=16", {{"k", "4"}, {"bits", "3"}, {"rule", "sign"}}, 64, 0},
      {"lsh", "B=1,Hq=4,Hkv=2,Lq=300,Lk=577,d=16", {{"k", "9"}, {"bits", "4"}, {"rule", "sign"}},
       64, 0},
      {"lsh", "B=1,Hq=8,Hkv=2,L=577,d=16", {{"k", "32"}, {"bits", "3"}, {"rule", "argmax"}}, 128,
       0},
      // all keys in one bin: argmax over one projection; the window is then the last k keys
      {"lsh", "B=1,Hq=3,Hkv=1,L=200,d=16", {{"k", "17"}, {"bits", "1"}, {"rule", "argmax"}}, 64, 0},
      // k > L: every same-bin key; one bin through a zero projection (sign rule)
      {"lsh", "B=2,Hq=2,Hkv=2,L=37,d=16", {{"k", "1000"}, {"bits", "2"}, {"rule", "sign"}}, 16, 0,
       false, true},
      {"hax", "B=2,Hq=6,Hkv=3,L=37,d=16",
       {{"k_lsh", "3"}, {"k_ks", "5"}, {"bits", "2"}, {"rule", "sign"}}, 16, 512, true},
      {"hax", "B=1,Hq=1,Hkv=1,L=1,d=16",
       {{"k_lsh", "3"}, {"k_ks", "3"}, {"bits", "2"}, {"rule", "sign"}}, 64, 512},
      {"hax", "B=1,Hq=4,Hkv=2,Lq=300,Lk=577,d=16",
       {{"k_lsh", "8"}, {"k_ks", "8"}, {"bits", "3"}, {"rule", "sign"}}, 64, 100, true},
      {"hax", "B=1,Hq=4,Hkv=1,L=577,d=16",
       {{"k_lsh", "16"}, {"k_ks", "16"}, {"bits", "4"}, {"rule", "argmax"}}, 128, 512},
      {"hax", "B=1,Hq=2,Hkv=1,L=577,d=16",
       {{"k_lsh", "5"}, {"k_ks", "7"}, {"bits", "2"}, {"rule", "sign"}}, 16, 0, true},
      // budgets > L, one bin: both parts hold every key j <= p (each key once)
      {"hax", "B=1,Hq=2,Hkv=1,L=37,d=16",
       {{"k_lsh", "100"}, {"k_ks", "1000"}, {"bits", "1"}, {"rule", "argmax"}}, 16, 7, true},
      {"hax", "B=1,Hq=2,Hkv=2,L=130,d=16",
       {{"k_lsh", "6"}, {"k_ks", "40"}, {"bits", "2"}, {"rule", "sign"}}, 32, 64, false, true},
  };
  for (const Case& c : cases) {
    const Shape shape = attntune::ParseShape(c.shape, "test");
    Params params = c.params;
    params["seed"] = "5";
    const int64_t bits = std::stoll(params.at("bits"));
    const attntune::Tensors t = BucketTensors(shape, c.tied_scores, c.zero_proj, bits);
    const bool hax = std::string(c.variant) == "hax";
    const auto sets = attntune::FindVariant(c.variant, "test").key_sets(t, params);
    const attntune::LshBins bins =
        attntune::ComputeLshBins(t, bits, params.at("rule") == "argmax", 5);
    std::vector<int32_t> evict;
    if (hax) {
      const std::vector<double> x = attntune::KsScores(t);
      for (int64_t head = 0; head < shape.B * shape.Hkv; ++head) {
        const auto e = attntune::PrefixTopKEvictions(x.data() + head * shape.Lk, shape.Lk,
                                                     std::stoll(params.at("k_ks")));
        evict.insert(evict.end(), e.begin(), e.end());
      }
    }
    const cp::BucketLists lists = cp::BuildBucketLists(
        shape, bins, std::stoll(params.at(hax ? "k_lsh" : "k")), evict, c.br, c.chunk);
    INFO(c.variant << " " << c.shape << " " << attntune::ParamsToString(params) << " br=" << c.br
                   << " chunk=" << c.chunk);
    CheckBucketLists(shape, lists, *sets, evict, c.br);
    if (c.zero_proj || params.at("bits") == "1") {  // the one-bin cases are one bin
      for (const int32_t bin : bins.key_bin) REQUIRE(bin == 0);
      for (const int32_t bin : bins.query_bin) REQUIRE(bin == 0);
    }
  }
}

TEST_CASE("dma_decode's selection and gathered lists give exactly the reference sets") {
  using attntune::Params;
  struct Case {
    const char* shape;
    Params params;
    bool tied;  // Delta = 0: every b_j equal, so the resident sets break ties
  };
  const Case cases[] = {
      {"B=2,Hq=4,Hkv=2,L=37,d=16", {{"w_kv", "5"}, {"w_q", "3"}, {"r", "4"}}},
      {"B=1,Hq=2,Hkv=1,L=1,d=16", {{"w_kv", "4"}, {"w_q", "2"}, {"r", "2"}}},
      {"B=1,Hq=8,Hkv=1,L=200,d=16", {{"w_kv", "16"}, {"w_q", "4"}, {"r", "8"}}},
      {"B=1,Hq=6,Hkv=3,L=130,d=16", {{"w_kv", "1000"}, {"w_q", "5"}, {"r", "3"}}},  // w_kv > L
      {"B=1,Hq=3,Hkv=3,L=100,d=16", {{"w_kv", "7"}, {"w_q", "0"}, {"r", "0"}}},
      {"B=1,Hq=4,Hkv=2,L=77,d=16", {{"w_kv", "6"}, {"w_q", "40"}, {"r", "30"}}, true},
  };
  for (const Case& c : cases) {
    const attntune::Shape shape = attntune::ParseShape(c.shape, "test");
    attntune::Tensors t = attntune::GaussianTensors(shape, 23);
    if (c.tied) t.delta.assign(static_cast<size_t>(shape.Hkv * shape.d), 0.0f);
    Params params = c.params;
    params["bias"] = "1";
    params["seed"] = "4";
    const auto sets = attntune::FindVariant("dma_decode", "test").key_sets(t, params);
    const std::vector<double> x = attntune::DmaScores(t, 4);
    const attntune::DecodeSelection sel =
        attntune::SelectDecodeKokkos(t, x, std::stoll(params.at("w_kv")),
                                     std::stoll(params.at("w_q")), std::stoll(params.at("r")));
    const cp::KeyLists lists = cp::BuildKeyLists(shape, sel.evict, cp::kDecodeListSteps);
    REQUIRE(sel.offsets.size() == static_cast<size_t>(shape.B * shape.Hq * shape.Lk + 1));
    const int64_t group = shape.Group();
    std::vector<int64_t> expected;
    std::vector<std::vector<int64_t>> got(static_cast<size_t>(group));
    for (int64_t b = 0; b < shape.B; ++b) {
      for (int64_t hkv = 0; hkv < shape.Hkv; ++hkv) {
        const int64_t head = b * shape.Hkv + hkv;
        for (int64_t step = 0; step < shape.Lk; ++step) {
          INFO(c.shape << " " << attntune::ParamsToString(params) << " b=" << b
                       << " hkv=" << hkv << " t=" << step);
          // What the kernel attends: 4 warps, each walking every 4th key with its own walk.
          for (auto& g : got) g.clear();
          const int64_t list = head * lists.query_blocks + step / cp::kDecodeListSteps;
          // Warps 2 and 3 read each listed key's eviction beside it (resident_evict), as
          // the kernel does; 0 and 1 read it through the key.
          std::vector<int32_t> key_evict;
          for (int32_t x = lists.offsets[list]; x < lists.offsets[list + 1]; ++x) {
            key_evict.push_back(sel.evict[head * shape.Lk + lists.keys[x]]);
          }
          for (int warp = 0; warp < 4; ++warp) {
            cp::DecodeWalk walk;
            walk.resident = lists.keys.data() + lists.offsets[list];
            walk.n_resident = lists.offsets[list + 1] - lists.offsets[list];
            walk.evict = sel.evict.data() + head * shape.Lk;
            if (warp >= 2) {
              walk.evict = nullptr;
              walk.resident_evict = key_evict.data();
            }
            walk.step = step;
            walk.chosen_offsets = sel.offsets.data();
            walk.chosen = sel.chosen.data();
            walk.row0 = (b * shape.Hq + hkv * group) * shape.Lk + step;
            walk.stride = shape.Lk;
            walk.group = static_cast<int>(group);
            for (int64_t x = warp;; x += 4) {
              int64_t j = -1;
              int only = -2;
              const int what = walk.At(x, &j, &only);
              if (what == cp::DecodeWalk::kEnd) break;
              if (what == cp::DecodeWalk::kSkip) continue;
              REQUIRE(j >= 0);
              REQUIRE(j <= step);
              REQUIRE(only >= -1);
              REQUIRE(only < group);
              for (int64_t g = 0; g < group; ++g) {
                if (only < 0 || only == g) got[g].push_back(j);
              }
            }
          }
          for (int64_t g = 0; g < group; ++g) {
            std::sort(got[g].begin(), got[g].end());
            INFO("group head " << g);
            REQUIRE(std::adjacent_find(got[g].begin(), got[g].end()) == got[g].end());  // once
            sets->Row(b, hkv * group + g, step, &expected);
            REQUIRE(got[g] == expected);
          }
        }
      }
    }
  }
}
