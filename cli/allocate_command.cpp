#include "cli/allocate_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>

#include "build_info.h"
#include "cli/commands.h"
#include "kernels/kokkos/runtime.h"
#include "core/error.h"
#include "core/files.h"
#include "profiler/device.h"
#include "profiler/timer.h"
#include "reports/allocation.h"
#include "reports/reports.h"
#include "tuner/allocation/allocate.h"
#include "tuner/allocation/io.h"
#include "tuner/evaluate.h"

namespace attntune {
namespace {

struct AllocateArgs {
  AllocateOptions options;
  std::string granularity = "head";
  std::string out = "attntune_out";
  bool no_measure = false;
};

AllocationRecord Record(const AllocateResult& r, const AllocateOptions& o,
                        const std::string& device) {
  AllocationRecord rec;
  rec.tool_version = ATTNTUNE_VERSION;
  rec.generated_at = UtcNow();
  rec.device = device;
  rec.model = r.model.name;
  rec.model_type = r.model.model_type;
  rec.layers = r.model.layers;
  rec.q_heads = r.model.q_heads;
  rec.kv_heads = r.model.kv_heads;
  rec.head_dim = r.model.head_dim;
  rec.granularity = GranularityName(o.granularity);
  rec.strategy = o.strategy;
  rec.budget = r.budget;
  rec.rho_target = r.rho_target;
  rec.rho = r.chosen.SwaFraction();
  rec.window = r.window;
  rec.sink = o.sink;
  rec.context = o.context;
  rec.br = o.cost.br;
  rec.bc = o.cost.bc;
  rec.calib_source = r.stats.source;
  rec.calib_length = r.stats.length;
  rec.calib_window = r.calib_window;
  rec.cost_method = r.cost_method;
  for (int64_t l = 0; l < r.chosen.layers; ++l) {
    rec.swa.emplace_back();
    for (int64_t h = 0; h < r.chosen.kv_heads; ++h)
      rec.swa.back().push_back(r.chosen.Swa(l, h) ? 1 : 0);
  }
  for (const HeadStats& h : r.stats.heads) {
    rec.head_class.push_back(RangeClassName(h.range_class));
    rec.head_mass_kept.push_back(h.mass_kept);
    rec.head_swa_rel_err.push_back(h.swa_rel_err);
  }
  rec.quality_loss = r.quality_loss;
  rec.prefill_ms = r.cost.prefill_ms;
  rec.decode_ms = r.cost.decode_ms;
  rec.kv_bytes = r.cost.kv_bytes;
  rec.prefill_pairs = r.cost.prefill_pairs;
  rec.decode_pairs = r.cost.decode_pairs;
  rec.tuned.tuned = r.tuned.tuned;
  rec.tuned.br = r.tuned.br;
  rec.tuned.bc = r.tuned.bc;
  rec.tuned.window = r.tuned.window;
  rec.tuned.layer_swa_heads = r.tuned.layer_swa_heads;
  rec.tuned.evaluations = r.tuned.evaluations;
  rec.tuned.budget = o.tune_budget;
  rec.tuned.prefill_ms = r.tuned.prefill_ms;
  rec.tuned.default_prefill_ms = r.tuned.default_prefill_ms;
  rec.tuned.quality_loss = r.quality_loss;  // w is not searched: the chosen one's loss
  for (const SweepPoint& p : r.sweep)
    rec.sweep.push_back({p.rho, p.quality_loss, p.cost.prefill_ms, p.cost.decode_ms,
                         p.cost.kv_bytes, p.cost.prefill_pairs, p.on_front});
  return rec;
}

}  // namespace

void RegisterAllocate(CLI::App& app, int* rc) {
  auto args = std::make_shared<AllocateArgs>();
  AllocateOptions& o = args->options;
  auto* cmd = app.add_subcommand(
      "allocate", "Choose the full-attention and sliding-window heads of a model under a budget");
  cmd->add_option("--model", o.model, "Embedded model name or a Hugging Face config.json")
      ->capture_default_str();
  CLI::Option* rho =
      cmd->add_option("--rho", o.rho, "Share of units that use the sliding window, in [0, 1]");
  cmd->add_option("--latency-ms", o.latency_ms, "Budget: prefill time of all layers (ms)");
  cmd->add_option("--kv-bytes", o.kv_bytes, "Budget: KV-cache bytes at --context");
  cmd->add_option("--granularity", args->granularity, "layer, head or head-global")
      ->capture_default_str();
  cmd->add_option("--strategy", o.strategy, "rule, greedy, consa or import")->capture_default_str();
  cmd->add_option("--calib", o.calib,
                  "Captured q.<l>, k.<l>, v.<l> (safetensors); default: generator");
  cmd->add_option("--import", o.import_path,
                  "full_attention_heads.tsv (DuoAttention) or a mask JSON (--strategy import)");
  cmd->add_option("--window", o.window,
                  "SWA window (default: the model's sliding_window, else context/4)");
  cmd->add_option("--sink", o.sink, "Sink tokens every SWA head keeps")->capture_default_str();
  cmd->add_option("--context", o.context, "Prefill length and decode context")
      ->capture_default_str();
  cmd->add_option("--calib-len", o.calib_len, "Generator sequence length")->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the generator and of consa")->capture_default_str();
  cmd->add_option("--max-seconds", o.cost.policy.max_seconds, "Time cap per measured layer")
      ->check(kPositiveFinite)
      ->capture_default_str();
  cmd->add_option("--min-reps", o.cost.policy.min_reps,
                  "Minimum timed repetitions per layer pattern")
      ->check(kPositiveFinite)
      ->capture_default_str();
  cmd->add_option("--tune-budget", o.tune_budget,
                  "Timed points of the hybrid tile search for the chosen allocation (0: skip)")
      ->capture_default_str();
  cmd->add_flag("--no-measure", args->no_measure, "Skip timing (pairs and KV bytes only)");
  cmd->add_option("--out", args->out, "Output folder")->capture_default_str();
  cmd->callback([args, rc, rho] {
    AllocateOptions options = args->options;
    if (rho->count() > 0) TargetSwaUnits(options.rho, 1, "--rho");  // a negative rho is not "unset"
    options.granularity = ParseGranularity(args->granularity, "--granularity");
    options.measure = !args->no_measure;
    if (options.sink < 0) throw UserError("--sink: must be a non-negative integer");
    if (options.calib_len < 2) throw UserError("--calib-len: must be at least 2");
    if (options.cost.policy.min_reps < 1) throw UserError("--min-reps: must be a positive integer");
    options.cost.policy.max_reps =
        std::max(options.cost.policy.max_reps, options.cost.policy.min_reps);
    if (options.window < 0) throw UserError("--window: must be a positive integer");
    CreateOutputFolder(args->out);
    const DeviceInfo device = CpuDevice();
    CpuTimer timer;
    const AllocateResult r = RunAllocate(options, timer);
    const AllocationRecord rec = Record(r, options, device.name);
    const std::string dir = args->out + "/";
    ReportInput input;
    input.tool_version = rec.tool_version;
    input.generated_at = rec.generated_at;
    input.allocations = {rec};
    WriteFileAtomic(dir + "attntune_config.json", RenderConfigJson(input));
    WriteFileAtomic(dir + "attntune_allocation.h", RenderAllocationHeader(rec));
    WriteFileAtomic(dir + "full_attention_heads.tsv", FormatDuoAttentionTsv(r.chosen));
    WriteFileAtomic(dir + "allocation_mask.json", FormatConsaMask(r.chosen));
    WriteFileAtomic(dir + "allocation.html", RenderAllocationHtml(rec));
    std::printf(
        "attntune: %s, %s, %s: %lld of %lld KV heads SWA (rho %.4g, target %.4g), window %lld\n",
        r.model.name.c_str(), GranularityName(options.granularity).c_str(),
        options.strategy.c_str(), static_cast<long long>(r.chosen.SwaHeads()),
        static_cast<long long>(r.chosen.swa.size()), r.chosen.SwaFraction(), r.rho_target,
        static_cast<long long>(r.window));
    if (std::abs(r.chosen.SwaFraction() - r.rho_target) > 1e-9 && r.budget.rfind("rho=", 0) == 0)
      std::printf(
          "  note: rho %.4g is not a whole number of units at this granularity; the nearest "
          "count gives %.4g (docs/allocation.md)\n",
          r.rho_target, r.chosen.SwaFraction());
    std::printf("  measured on %s (%s)\n", device.name.c_str(), KokkosDescription().c_str());
    std::printf(
        "  quality loss %.4g, prefill %.3f ms, decode %.4f ms/token, KV %lld bytes at %lld tokens "
        "(%s)\n",
        r.quality_loss, r.cost.prefill_ms, r.cost.decode_ms,
        static_cast<long long>(r.cost.kv_bytes), static_cast<long long>(options.context),
        r.cost_method.c_str());
    if (r.tuned.tuned)
      std::printf(
          "  tuned tiles: Br %lld, Bc %lld at w %lld: %.3f ms per layer with %lld SWA KV heads "
          "(defaults Br %lld, Bc %lld: %.3f ms; %lld points)\n",
          static_cast<long long>(r.tuned.br), static_cast<long long>(r.tuned.bc),
          static_cast<long long>(r.tuned.window), r.tuned.prefill_ms,
          static_cast<long long>(r.tuned.layer_swa_heads),
          static_cast<long long>(options.cost.br), static_cast<long long>(options.cost.bc),
          r.tuned.default_prefill_ms, static_cast<long long>(r.tuned.evaluations));
    else
      std::printf("  tiles: not tuned (Br %lld, Bc %lld)\n",
                  static_cast<long long>(options.cost.br), static_cast<long long>(options.cost.bc));
    std::printf("  front (rho, quality loss, prefill ms, decode ms, KV bytes):\n");
    for (const SweepPoint& p : r.sweep)
      std::printf("   %s %.4f %.5f %10.3f %8.4f %lld\n", p.on_front ? "*" : " ", p.rho,
                  p.quality_loss, p.cost.prefill_ms, p.cost.decode_ms,
                  static_cast<long long>(p.cost.kv_bytes));
    std::printf(
        "  json: %sattntune_config.json\n  header: %sattntune_allocation.h\n"
        "  tsv: %sfull_attention_heads.tsv\n  report: %sallocation.html\n",
        dir.c_str(), dir.c_str(), dir.c_str(), dir.c_str());
    *rc = 0;
  });
}

}  // namespace attntune
