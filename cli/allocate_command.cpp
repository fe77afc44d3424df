#include "cli/allocate_command.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "cli/commands.h"
#include "core/error.h"
#include "core/files.h"
#include "core/json_text.h"
#include "db/database.h"
#include "kernels/kokkos/runtime.h"
#include "profiler/device.h"
#include "profiler/timer.h"
#include "tuner/allocation/allocate.h"
#include "tuner/allocation/emit.h"

namespace attntune {
namespace {

struct AllocateArgs {
  AllocateOptions options;
  std::string granularity = "head";
  std::string out = "attntune_out";
  std::string db;  // empty: <out>/attntune.db
  std::string min_quality;
  bool no_measure = false;
  CLI::Option* granularity_option = nullptr;  // its count tells given from the default
};

// The allocate flags into `args` (`*rho_option` set to --rho's option: its count tells given
// from unset).
CLI::App* AddAllocateFlags(CLI::App& app, AllocateArgs* args, CLI::Option** rho_option) {
  AllocateOptions& o = args->options;
  auto* cmd = app.add_subcommand(
      "allocate", "Choose the full-attention and sliding-window heads of a model under a budget");
  cmd->add_option("--model", o.model, "Embedded model name or a Hugging Face config.json")
      ->capture_default_str();
  CLI::Option* rho =
      cmd->add_option("--rho", o.rho, "Share of units that use the sliding window, in [0, 1]")
          ->check(kFraction);
  cmd->add_option("--latency-ms", o.latency_ms, "Budget: prefill time of all layers (ms)")
      ->check(kPositiveFinite);
  cmd->add_option("--kv-bytes", o.kv_bytes, "Budget: KV-cache bytes at --context")
      ->check(kNonNegativeInteger);
  args->granularity_option =
      cmd->add_option("--granularity", args->granularity, "layer, head or head-global")
          ->capture_default_str();
  cmd->add_option("--strategy", o.strategy, "rule, greedy, consa or import")->capture_default_str();
  cmd->add_option("--calib", o.calib,
                  "Captured q.<l>, k.<l>, v.<l> (safetensors); default: generator");
  cmd->add_option("--min-quality", args->min_quality,
                  "With --calib and --rho: choose the smallest window (16, 32, ...) under which "
                  "every SWA KV head keeps mass_recall>=X and/or rel_err<=Y");
  cmd->add_option("--import", o.import_path,
                  "full_attention_heads.tsv (DuoAttention) or a mask JSON (--strategy import)");
  cmd->add_option("--window", o.window,
                  "SWA window (default: the model's sliding_window, else context/4)")
      ->check(kPositiveInteger);
  cmd->add_option("--sink", o.sink, "Sink tokens every SWA head keeps")
      ->check(kNonNegativeInteger)
      ->capture_default_str();
  cmd->add_option("--context", o.context, "Prefill length and decode context")
      ->check(kPositiveInteger)
      ->capture_default_str();
  cmd->add_option("--calib-len", o.calib_len, "Generator sequence length")
      ->check(kPositiveInteger)
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the generator and of consa")
      ->check(kSeed)
      ->capture_default_str();
  cmd->add_option("--max-seconds", o.cost.policy.max_seconds, "Time cap per measured layer")
      ->check(kPositiveFinite)
      ->capture_default_str();
  cmd->add_option("--min-reps", o.cost.policy.min_reps,
                  "Minimum timed repetitions per layer pattern")
      ->check(kRepetitions)
      ->capture_default_str();
  cmd->add_option("--tune-budget", o.tune_budget,
                  "Timed points of the hybrid tile search for the chosen allocation (0: skip)")
      ->check(kNonNegativeInteger)
      ->capture_default_str();
  cmd->add_flag("--no-measure", args->no_measure, "Skip timing (pairs and KV bytes only)");
  cmd->add_option("--out", args->out, "Output folder")->capture_default_str();
  cmd->add_option("--db", args->db,
                  "SQLite database of the measurements (default: <out>/attntune.db)");
  *rho_option = rho;
  return cmd;
}

// The options the flags give, checked where a check needs the flag's own text (--rho
// given negative, --sink, --calib-len, --min-reps, --window, --min-quality), with the command line as
// JSON for the run's record.
AllocateOptions OptionsFromFlags(const AllocateArgs& args, bool rho_given) {
  AllocateOptions options = args.options;
  if (rho_given) TargetSwaUnits(options.rho, 1, "--rho");  // a negative rho is not "unset"
  options.granularity = ParseGranularity(args.granularity, "--granularity");
  // Without a budget, --strategy import keeps the file's allocation as it is: each KV
  // head by its own value (docs/allocation.md), which is head-global; a layer or an equal
  // count per layer needs a budget to allocate.
  if (options.strategy == "import" && !rho_given && options.kv_bytes < 0 &&
      options.latency_ms < 0) {
    const bool given = args.granularity_option != nullptr && args.granularity_option->count() > 0;
    if (given && options.granularity != Granularity::kHeadGlobal)
      throw UserError("--granularity: " + args.granularity + " needs a budget with --strategy "
                      "import (without --rho, --kv-bytes or --latency-ms each KV head is taken "
                      "as the file has it: head-global)");
    options.granularity = Granularity::kHeadGlobal;
  }
  options.measure = !args.no_measure;
  if (options.sink < 0) throw UserError("--sink: must be a non-negative integer");
  if (options.calib_len < 2) throw UserError("--calib-len: must be at least 2");
  if (options.cost.policy.min_reps < 1) throw UserError("--min-reps: must be a positive integer");
  options.cost.policy.max_reps =
      std::max(options.cost.policy.max_reps, options.cost.policy.min_reps);
  if (options.window < 0) throw UserError("--window: must be a positive integer");
  options.floor = ParseQualityFloor(args.min_quality, "--min-quality");
  options.args_json = JsonText(nlohmann::json{{"command", "allocate"},
                                     {"model", options.model},
                                     {"granularity", args.granularity},
                                     {"strategy", options.strategy},
                                     {"rho", options.rho},
                                     {"latency_ms", options.latency_ms},
                                     {"kv_bytes", options.kv_bytes},
                                     {"calib", options.calib},
                                     {"window", options.window},
                                     {"min_quality", options.floor.ToString()},
                                     {"sink", options.sink},
                                     {"context", options.context},
                                     {"tune_budget", options.tune_budget},
                                     {"seed", options.seed}});
  return options;
}

// What allocate prints: the choice, the cost, the tiles, the front, the trials and the
// outputs' paths.
void PrintAllocation(const AllocateResult& r, const AllocateOptions& options,
                     const DeviceInfo& device, const std::string& db_path,
                     const AllocationOutputs& out) {
  std::printf(
      "attntune: %s, %s, %s: %lld of %lld KV heads SWA (rho %.4g, target %.4g), window %lld\n",
      r.model.name.c_str(), GranularityName(options.granularity).c_str(),
      options.strategy.c_str(), static_cast<long long>(r.chosen.SwaHeads()),
      static_cast<long long>(r.chosen.swa.size()), r.chosen.SwaFraction(), r.rho_target,
      static_cast<long long>(r.window));
  if (!r.window_choice.empty())
    std::printf("  window %lld: %s\n", static_cast<long long>(r.window), r.window_choice.c_str());
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
  if (options.measure)
    std::printf("  %lld evaluations (%lld measured, %lld from the database, %lld failed)\n",
                static_cast<long long>(r.trials.evaluations),
                static_cast<long long>(r.trials.measured),
                static_cast<long long>(r.trials.reused),
                static_cast<long long>(r.trials.failed));
  std::printf("  database: %s\n  json: %s\n  header: %s\n  tsv: %s\n  report: %s\n",
              db_path.c_str(), out.json.c_str(), out.header.c_str(), out.tsv.c_str(),
              out.report.c_str());
}

}  // namespace

void RegisterAllocate(CLI::App& app, int* rc) {
  auto args = std::make_shared<AllocateArgs>();
  CLI::Option* rho = nullptr;
  CLI::App* cmd = AddAllocateFlags(app, args.get(), &rho);
  cmd->callback([args, rc, rho] {
    const AllocateOptions options = OptionsFromFlags(*args, rho->count() > 0);
    ValidateAllocate(options);  // before the folder and the database are made
    CreateOutputFolder(args->out);
    const std::string db_path = args->db.empty()
                                    ? (std::filesystem::path(args->out) / "attntune.db").string()
                                    : args->db;
    const std::unique_ptr<Database> db = Database::Open(db_path);
    RefuseAllocationOverDatabase(args->out, db_path);
    const DeviceInfo device = CpuDevice();
    CpuTimer timer;
    const AllocateResult r = RunAllocate(options, *db, device, timer);
    const AllocationOutputs out =
        EmitAllocation(*db, MakeAllocationRecord(r, options, device.name), r.chosen, args->out);
    PrintAllocation(r, options, device, db_path, out);
    *rc = 0;
  });
}

}  // namespace attntune
