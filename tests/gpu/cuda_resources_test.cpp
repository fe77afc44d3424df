// The static resource table produced at build time from ptxas: complete, consistent
// with the CSV in the build tree, and the default tiles free of spills on every arch.
#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

#include "kernels/cuda/plan.h"
#include "kernels/cuda/select_core.h"

namespace cp = attntune::cuda_plan;

TEST_CASE("The resource table covers every compiled tile on every arch") {
  const auto& table = cp::CompiledResources();
  // Three families per tile (windowed, top-k block-skipping, bucketed) plus the decode
  // kernels (split-KV split and combine, gathered; f16/bf16, d 64/128); the selection
  // kernels (select.cu) and CUB's sorts and scans besides.
  size_t attention = 0, selection = 0;
  for (const cp::KernelResources& r : table) {
    if (!cp::SelectionPhaseOf(r.kernel).empty()) {
      ++selection;
    } else {
      ++attention;
    }
  }
  CHECK(attention == (3 * cp::WindowedTiles().size() + 12) * cp::SupportedArchs().size());
  CHECK(selection >= 30 * cp::SupportedArchs().size());
  for (const cp::ArchLimits& arch : cp::SupportedArchs()) {
    for (const char* name :
         {"attntune_select_topk_chunks", "attntune_select_lists",
          "attntune_select_ks_scores", "attntune_select_dma_scores", "attntune_select_lsh_bins",
          "attntune_select_block_key_fill", "attntune_select_decode_evict",
          "attntune_select_decode_chosen"}) {
      INFO(name << " sm_" << arch.sm);
      REQUIRE(cp::FindResources(table, arch.sm, name) != nullptr);
    }
  }
  for (const cp::ArchLimits& arch : cp::SupportedArchs()) {
    for (const char* name :
         {"attntune_decode_split_f16_d128", "attntune_decode_combine_bf16_d64",
          "attntune_decode_gathered_f16_d64", "attntune_decode_gathered_f16_d128",
          "attntune_decode_gathered_bf16_d64", "attntune_decode_gathered_bf16_d128"}) {
      INFO(name << " sm_" << arch.sm);
      REQUIRE(cp::FindResources(table, arch.sm, name) != nullptr);
    }
  }
  for (const cp::ArchLimits& arch : cp::SupportedArchs()) {
    for (const cp::WindowedTile& tile : cp::WindowedTiles()) {
      for (const cp::Family family : cp::kFamilies) {
        const std::string name = cp::KernelName(tile, family);
        INFO(name << " sm_" << arch.sm);
        const cp::KernelResources* r = cp::FindResources(table, arch.sm, name);
        REQUIRE(r != nullptr);
        CHECK(r->registers > 0);
        CHECK(r->registers <= 255);
      }
    }
  }
}

TEST_CASE("The selection kernels' static shared memory is what their launches leave it") {
  // Each launch keeps static plus dynamic shared memory within the 48 KB that need no
  // opt-in (a launch past it fails): topk_chunks and lists leave their static part room
  // (kTopKChunksStaticBytes, kListStaticBytes); the others let the dynamic part take the
  // whole 48 KB (top_merge's staged lists, the LSH projections, dma's Δ, dma_decode's
  // candidates) and so must have none.
  struct Static {
    const char* kernel;
    int64_t bytes;
  };
  const Static kernels[] = {{"attntune_select_topk_chunks", cp::kTopKChunksStaticBytes},
                            {"attntune_select_lists", cp::kListStaticBytes},
                            {"attntune_select_top_merge", 0},
                            {"attntune_select_lsh_bins", 0},
                            {"attntune_select_lsh_bins_f16", 0},
                            {"attntune_select_lsh_bins_bf16", 0},
                            {"attntune_select_lsh_bins_wide", 0},
                            {"attntune_select_lsh_bins_wide_f16", 0},
                            {"attntune_select_lsh_bins_wide_bf16", 0},
                            {"attntune_select_dma_scores", 0},
                            {"attntune_select_dma_scores_f16", 0},
                            {"attntune_select_dma_scores_bf16", 0},
                            {"attntune_select_decode_chosen", 0},
                            {"attntune_select_decode_chosen_f16", 0},
                            {"attntune_select_decode_chosen_bf16", 0}};
  for (const cp::ArchLimits& arch : cp::SupportedArchs()) {
    for (const Static& k : kernels) {
      INFO(k.kernel << " sm_" << arch.sm);
      const cp::KernelResources* r = cp::FindResources(cp::CompiledResources(), arch.sm, k.kernel);
      REQUIRE(r != nullptr);
      CHECK(r->static_smem == k.bytes);
    }
  }
}

TEST_CASE("The CSV in the build tree holds the same table") {
  std::ifstream csv(ATTNTUNE_CUDA_RESOURCES_CSV);
  REQUIRE(csv.good());
  std::stringstream text;
  text << csv.rdbuf();
  const auto rows = cp::ResourcesFromCsv(text.str());
  REQUIRE(rows.size() == cp::CompiledResources().size());
  for (const cp::KernelResources& r : rows) {
    const cp::KernelResources* same = cp::FindResources(cp::CompiledResources(), r.sm, r.kernel);
    REQUIRE(same != nullptr);
    CHECK(same->registers == r.registers);
  }
}

TEST_CASE("Default tiles exist for every dtype and head dim on every arch, without spills") {
  for (const cp::ArchLimits& arch : cp::SupportedArchs()) {
    for (const cp::Family family : cp::kFamilies) {
      for (cp::Dtype dtype : {cp::Dtype::kF16, cp::Dtype::kBf16}) {
        for (int d : {64, 128}) {
          INFO("sm_" << arch.sm << " family " << static_cast<int>(family) << " "
                     << cp::DtypeTag(dtype) << " d=" << d);
          const cp::WindowedTile* tile =
              cp::DefaultTile(dtype, d, arch, cp::CompiledResources(), family);
          REQUIRE(tile != nullptr);
          const cp::KernelResources* r =
              cp::FindResources(cp::CompiledResources(), arch.sm, cp::KernelName(*tile, family));
          REQUIRE(r != nullptr);
          CHECK(r->spill_stores == 0);
          CHECK(r->spill_loads == 0);
          CHECK(r->stack == 0);
        }
      }
    }
  }
  // fp16 d = 128 takes its measured default (two row tiles a warp) where it is feasible,
  // except in the bucketed family; the tunable Tile defaults to the same.
  const cp::ArchLimits* h100 = cp::FindArch(90);
  REQUIRE(h100 != nullptr);
  for (const cp::Family family : cp::kFamilies) {
    const cp::WindowedTile* tile =
        cp::DefaultTile(cp::Dtype::kF16, 128, *h100, cp::CompiledResources(), family);
    REQUIRE(tile != nullptr);
    const bool preferred = family != cp::Family::kBucketed;
    CHECK(cp::PreferredTile(*tile, family) == preferred);
    CHECK((tile->br == 128 && tile->bc == 32 && tile->warps == 4) == preferred);
    // Over every compiled tile (the Tile parameter's default) the same tile, and for bf16
    // (no preferred tile) the first compiled one.
    CHECK(cp::DefaultTile(cp::Dtype::kF16, 128, family) == tile);
    const cp::WindowedTile* bf16 = cp::DefaultTile(cp::Dtype::kBf16, 128, family);
    REQUIRE(bf16 != nullptr);
    for (const cp::WindowedTile& t : cp::WindowedTiles()) {
      if (t.dtype != cp::Dtype::kBf16 || t.d != 128) continue;
      CHECK(&t == bf16);
      break;
    }
  }
  // Every compiled kernel is free of spills too (the search would prune tiles that
  // spill), the selection's and CUB's included, and the selection's use no stack.
  for (const cp::KernelResources& r : cp::CompiledResources()) {
    INFO(r.kernel << " sm_" << r.sm);
    CHECK(r.spill_stores + r.spill_loads == 0);
    if (r.kernel.rfind("attntune_select_", 0) == 0) CHECK(r.stack == 0);
  }
}
