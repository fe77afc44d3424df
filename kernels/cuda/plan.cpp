#include "kernels/cuda/plan.h"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <stdexcept>

#include "core/check.h"

namespace attntune {
namespace cuda_plan {

const char* DtypeTag(Dtype dtype) {
  return dtype == Dtype::kF16 ? "f16" : dtype == Dtype::kBf16 ? "bf16" : "f32";
}

const std::vector<ArchLimits>& SupportedArchs() {
  // CUDA C Programming Guide, "Technical Specifications per Compute Capability":
  // opt-in shared memory per block 163 KB (8.0), 99 KB (8.6, 8.9), 227 KB (9.0);
  // per SM 164, 100, 100, 228 KB; threads per SM 2048, 1536, 1536, 2048.
  static const std::vector<ArchLimits> archs = {
      {80, "GA100", 163 * 1024, 164 * 1024, 65536, 2048, 255},
      {86, "GA102", 99 * 1024, 100 * 1024, 65536, 1536, 255},
      {89, "AD102", 99 * 1024, 100 * 1024, 65536, 1536, 255},
      {90, "GH100", 227 * 1024, 228 * 1024, 65536, 2048, 255},
  };
  return archs;
}

const ArchLimits* FindArch(int sm) {
  for (const ArchLimits& arch : SupportedArchs()) {
    if (arch.sm == sm) return &arch;
  }
  return nullptr;
}

const std::vector<WindowedTile>& WindowedTiles() {
  static const std::vector<WindowedTile> tiles = {
#define ATTNTUNE_WINDOWED_TILE(dtype, tag, d, br, bc, warps, stages) \
  {Dtype::k##dtype, d, br, bc, warps, stages},
#include "kernels/cuda/instantiations.def"
#undef ATTNTUNE_WINDOWED_TILE
  };
  return tiles;
}

std::string KernelName(const WindowedTile& t, Family family) {
  const char* prefix = family == Family::kWindowed ? "attntune_windowed_"
                       : family == Family::kTopK   ? "attntune_blocksparse_"
                                                   : "attntune_bucketed_";
  std::ostringstream name;
  name << prefix << DtypeTag(t.dtype) << "_d" << t.d << "_br" << t.br << "_bc" << t.bc << "_w"
       << t.warps << "_s" << t.stages;
  return name.str();
}

std::string BlockSparseKernelName(const WindowedTile& t) { return KernelName(t, Family::kTopK); }

std::string SelectionPhaseOf(const std::string& name) {
  const std::string prefix = "attntune_select_";
  if (name.rfind(prefix, 0) == 0) return "attntune::select::" + name.substr(prefix.size());
  // CUB's kernels, mangled ("_ZN3cub...") or demangled ("cub::...").
  if (name.find("3cub") != std::string::npos || name.find("cub::") != std::string::npos) {
    return "attntune::select::cub";
  }
  return "";
}

KeyLists BuildKeyLists(const Shape& s, const std::vector<int32_t>& evict, int br,
                       KeyOrder order) {
  ATTNTUNE_CHECK(br > 0 && s.Lq <= s.Lk && s.causal);
  ATTNTUNE_CHECK(static_cast<int64_t>(evict.size()) == s.B * s.Hkv * s.Lk);
  KeyLists lists;
  lists.query_blocks = (s.Lq + br - 1) / br;
  lists.offsets.push_back(0);
  for (int64_t head = 0; head < s.B * s.Hkv; ++head) {
    const int32_t* e = evict.data() + head * s.Lk;
    for (int64_t qb = 0; qb < lists.query_blocks; ++qb) {
      const int64_t i0 = qb * br, i1 = std::min(s.Lq, i0 + br) - 1;
      const int64_t p0 = s.QueryPos(i0), p1 = s.QueryPos(i1);
      // kHeldFirst: pass 0 lists the keys held through the block, pass 1 the others.
      const bool split = order == KeyOrder::kHeldFirst;
      for (int pass = split ? 0 : 1; pass < 2; ++pass) {
        for (int64_t j = 0; j <= p1; ++j) {
          if (!(e[j] > j && e[j] > p0)) continue;
          if (split && HeldThrough<int64_t>(j, e[j], p0, p1) != (pass == 0)) continue;
          lists.keys.push_back(static_cast<int32_t>(j));
        }
      }
      ATTNTUNE_CHECK(lists.keys.size() < static_cast<size_t>(INT32_MAX));
      lists.offsets.push_back(static_cast<int32_t>(lists.keys.size()));
    }
  }
  return lists;
}

int64_t SmemBytes(const WindowedTile& t) {
  const int64_t row = (t.d + 8) * 2;  // 2-byte elements, 8 elements of padding
  return row * (t.br + 2 * static_cast<int64_t>(t.stages) * t.bc);
}

int Threads(const WindowedTile& t) { return 32 * t.warps; }

namespace {

/// The integer right before `unit` in `line` ("223 registers" -> 223), or -1.
int64_t NumberBefore(const std::string& line, const std::string& unit) {
  const size_t at = line.find(unit);
  if (at == std::string::npos || at < 2) return -1;
  size_t begin = at - 1;  // the space before the unit
  while (begin > 0 && std::isdigit(static_cast<unsigned char>(line[begin - 1]))) --begin;
  if (begin == at - 1) return -1;
  return std::stoll(line.substr(begin, at - 1 - begin));
}

}  // namespace

std::vector<KernelResources> ParseResourceUsage(const std::string& text) {
  std::vector<KernelResources> rows;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  bool open = false;  // a "Compiling entry function" awaits its "Used" line
  bool have_frame = false;
  KernelResources r;
  auto fail = [&](const std::string& why) {
    throw std::runtime_error("ptxas log line " + std::to_string(line_no) + ": " + why + ": '" +
                             line + "'");
  };
  const std::string kEntry = "Compiling entry function '";
  while (std::getline(in, line)) {
    ++line_no;
    const size_t entry = line.find(kEntry);
    if (entry != std::string::npos) {
      if (open) fail("previous kernel has no 'Used N registers' line");
      const size_t name_begin = entry + kEntry.size();
      const size_t name_end = line.find('\'', name_begin);
      const size_t sm_at = line.find("'sm_", name_end + 1);
      if (name_end == std::string::npos || sm_at == std::string::npos) fail("malformed entry");
      r = KernelResources();
      r.kernel = line.substr(name_begin, name_end - name_begin);
      r.sm = std::stoi(line.substr(sm_at + 4));
      open = true;
      have_frame = false;
      continue;
    }
    if (!open) continue;
    if (line.find("bytes stack frame") != std::string::npos) {
      r.stack = NumberBefore(line, "bytes stack frame");
      r.spill_stores = NumberBefore(line, "bytes spill stores");
      r.spill_loads = NumberBefore(line, "bytes spill loads");
      if (r.stack < 0 || r.spill_stores < 0 || r.spill_loads < 0) fail("malformed frame line");
      have_frame = true;
      continue;
    }
    if (line.find(" registers") != std::string::npos && line.find("Used ") != std::string::npos) {
      if (!have_frame) fail("'Used' line before the stack frame line");
      r.registers = static_cast<int>(NumberBefore(line, "registers"));
      if (r.registers < 0) fail("malformed register count");
      const int64_t smem = NumberBefore(line, "bytes smem");
      r.static_smem = smem < 0 ? 0 : smem;  // ptxas omits "0 bytes smem"
      rows.push_back(r);
      open = false;
    }
  }
  if (open) throw std::runtime_error("ptxas log ends inside the record of " + r.kernel);
  return rows;
}

std::string ResourcesToCsv(const std::vector<KernelResources>& rows) {
  std::ostringstream out;
  out << "sm,kernel,registers,stack,spill_stores,spill_loads,static_smem\n";
  for (const KernelResources& r : rows) {
    out << r.sm << ',' << r.kernel << ',' << r.registers << ',' << r.stack << ',' << r.spill_stores
        << ',' << r.spill_loads << ',' << r.static_smem << '\n';
  }
  return out.str();
}

std::vector<KernelResources> ResourcesFromCsv(const std::string& csv) {
  std::vector<KernelResources> rows;
  std::istringstream in(csv);
  std::string line;
  std::getline(in, line);  // header
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    std::istringstream cells(line);
    std::string cell[7];
    for (std::string& c : cell) {
      if (!std::getline(cells, c, ',')) throw std::runtime_error("short CSV row: '" + line + "'");
    }
    KernelResources r;
    r.sm = std::stoi(cell[0]);
    r.kernel = cell[1];
    r.registers = std::stoi(cell[2]);
    r.stack = std::stoll(cell[3]);
    r.spill_stores = std::stoll(cell[4]);
    r.spill_loads = std::stoll(cell[5]);
    r.static_smem = std::stoll(cell[6]);
    rows.push_back(r);
  }
  return rows;
}

const KernelResources* FindResources(const std::vector<KernelResources>& table, int sm,
                                     const std::string& kernel) {
  for (const KernelResources& r : table) {
    if (r.sm == sm && r.kernel == kernel) return &r;
  }
  return nullptr;
}

std::string TileInfeasibleReason(const WindowedTile& tile, const ArchLimits& arch,
                                 const std::vector<KernelResources>& table, Family family) {
  const std::string name = KernelName(tile, family);
  const std::string where = name + " on sm_" + std::to_string(arch.sm) + ": ";
  const KernelResources* r = FindResources(table, arch.sm, name);
  if (r == nullptr) return where + "not compiled";
  if (r->spill_stores > 0 || r->spill_loads > 0) {
    return where + "spills (" + std::to_string(r->spill_stores) + " bytes stored, " +
           std::to_string(r->spill_loads) + " bytes loaded per thread)";
  }
  const int64_t regs = static_cast<int64_t>(r->registers) * Threads(tile);
  if (r->registers > arch.max_regs_thread) {
    return where + std::to_string(r->registers) + " registers per thread exceed " +
           std::to_string(arch.max_regs_thread);
  }
  if (regs > arch.regs_sm) {
    return where + std::to_string(r->registers) + " registers x " + std::to_string(Threads(tile)) +
           " threads exceed " + std::to_string(arch.regs_sm);
  }
  const int64_t smem = SmemBytes(tile) + r->static_smem;
  if (smem > arch.max_smem_block) {
    return where + std::to_string(smem) + " bytes of shared memory exceed " +
           std::to_string(arch.max_smem_block);
  }
  return "";
}

std::string CanImplement(const WindowedProblem& problem, const WindowedTile& tile) {
  const Shape& s = problem.shape;
  if (s.d != tile.d) {
    return "head dim " + std::to_string(s.d) + " != compiled " + std::to_string(tile.d);
  }
  if (!s.causal) return "non-causal attention is not implemented on CUDA";
  if (s.Hkv <= 0 || s.Hq % s.Hkv != 0) return "Hq must be a multiple of Hkv";
  if (s.Lq > s.Lk) return "Lq must not exceed Lk";
  if (problem.window < 0 || problem.sink < 0) return "window and sink must be >= 0";
  // The kernel holds positions (up to Lk + Br) in 32 bits.
  if (s.Lk > INT32_MAX - 1024) return "Lk must be below 2^31 - 1024";
  // grid.y and grid.z are limited to 65535 blocks.
  if (s.Hq > 65535 || s.B > 65535) return "Hq and B must be at most 65535";
  // BlockOfLaunch counts one KV head's blocks in 32 bits.
  if ((s.Lq + tile.br - 1) / tile.br * (s.Hq / s.Hkv) > INT32_MAX) {
    return "query blocks x query heads per KV head must be below 2^31";
  }
  return "";
}

std::string CanImplementDecode(const WindowedProblem& problem, int64_t splits) {
  const Shape& s = problem.shape;
  if (s.Lq != 1) return "split-KV decode computes one query row (Lq = 1)";
  if (s.d != 64 && s.d != 128) return "split-KV decode is compiled for d = 64 and 128";
  if (!s.causal) return "non-causal attention is not implemented on CUDA";
  if (s.Hkv <= 0 || s.Hq % s.Hkv != 0) return "Hq must be a multiple of Hkv";
  if (s.Hq / s.Hkv > kDecodeMaxGroup) {
    return "split-KV decode handles at most " + std::to_string(kDecodeMaxGroup) +
           " query heads per KV head";
  }
  if (problem.per_head_windows) return "split-KV decode takes one window for every head";
  if (problem.window < 0 || problem.sink < 0) return "window and sink must be >= 0";
  if (splits < 1 || splits > 65535) return "splits must be in 1..65535";
  if (s.Hkv > 65535 || s.B > 65535) return "Hkv and B must be at most 65535";
  return "";
}

std::string CanImplementGatheredDecode(const Shape& s) {
  if (s.Lq != s.Lk || !s.causal) return "gathered decode runs every step: it needs Lq == Lk, causal";
  if (s.d != 64 && s.d != 128) return "gathered decode is compiled for d = 64 and 128";
  if (s.Hkv <= 0 || s.Hq % s.Hkv != 0) return "Hq must be a multiple of Hkv";
  if (s.Hq / s.Hkv > kDecodeMaxGroup) {
    return "gathered decode handles at most " + std::to_string(kDecodeMaxGroup) +
           " query heads per KV head";
  }
  // grid (Lk, Hkv, B); int32 lists and offsets.
  if (s.Hkv > 65535 || s.B > 65535) return "Hkv and B must be at most 65535";
  if (s.B * s.Hq * s.Lk >= INT32_MAX) return "B * Hq * Lk must be below 2^31";
  return "";
}

DecodePlan PlanDecode(const WindowedProblem& problem, int64_t splits) {
  ATTNTUNE_CHECK(CanImplementDecode(problem, splits).empty());
  const Shape& s = problem.shape;
  const int64_t p = s.Lk - 1;  // the one row's position
  DecodePlan plan;
  // With a window and no sink the keys before p - w + 1 are never attended: the splits
  // cover [first_key, p] only. With a sink they cover [0, p] (the sink blocks are few).
  plan.first_key = problem.window > 0 && problem.sink == 0 ? std::max<int64_t>(0, p - problem.window + 1) : 0;
  const int64_t keys = p + 1 - plan.first_key;
  plan.splits = std::min(splits, keys);
  plan.keys_per_split = (keys + plan.splits - 1) / plan.splits;
  plan.splits = (keys + plan.keys_per_split - 1) / plan.keys_per_split;
  plan.grid_x = plan.splits;
  plan.grid_y = s.Hkv;
  plan.grid_z = s.B;
  plan.workspace_bytes = 4 * s.B * s.Hq * plan.splits * (s.d + 2);
  return plan;
}

WindowedLaunchPlan PlanWindowed(const WindowedProblem& problem, const WindowedTile& tile) {
  ATTNTUNE_CHECK(CanImplement(problem, tile).empty());
  WindowedLaunchPlan plan;
  plan.tile = tile;
  plan.grid_x = (problem.shape.Lq + tile.br - 1) / tile.br;
  plan.grid_y = problem.shape.Hq;
  plan.grid_z = problem.shape.B;
  plan.threads = Threads(tile);
  plan.smem_bytes = SmemBytes(tile);
  plan.workspace_bytes = 0;
  return plan;
}

bool PreferredTile(const WindowedTile& tile, Family family) {
  // fp16, d = 128, two 16-row tiles a warp: the fastest dense and block-skipping tile on the
  // H200 (2026-11-27, scripts/gpu-checks.sh's sparse step: dense 4.14 ms where Br = Bc = 64
  // took 4.32, ks k=64 0.392 where 0.432, dma w=1024 1.030 where 1.295). The bucketed
  // kernel ran 2.6% slower with it than with the first tile, which stays its default.
  return family != Family::kBucketed && tile.dtype == Dtype::kF16 && tile.d == 128 &&
         tile.br == 128 && tile.bc == 32 && tile.warps == 4 && tile.stages == 2;
}

namespace {

// The first PreferredTile of (dtype, d) that `usable` takes, else its first usable tile.
template <class Usable>
const WindowedTile* PreferredOrFirst(Dtype dtype, int d, Family family, const Usable& usable) {
  const WindowedTile* first = nullptr;
  for (const WindowedTile& tile : WindowedTiles()) {
    if (tile.dtype == dtype && tile.d == d && usable(tile)) {
      if (PreferredTile(tile, family)) return &tile;
      if (first == nullptr) first = &tile;
    }
  }
  return first;
}

}  // namespace

const WindowedTile* DefaultTile(Dtype dtype, int d, const ArchLimits& arch,
                                const std::vector<KernelResources>& table, Family family) {
  return PreferredOrFirst(dtype, d, family, [&](const WindowedTile& tile) {
    return TileInfeasibleReason(tile, arch, table, family).empty();
  });
}

const WindowedTile* DefaultTile(Dtype dtype, int d, Family family) {
  return PreferredOrFirst(dtype, d, family, [](const WindowedTile&) { return true; });
}

}  // namespace cuda_plan
}  // namespace attntune
