// attntune tune: the flags of a tune, checked and handed to the tuner's stages.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/backends.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "core/error.h"
#include "core/json_text.h"
#include "core/params.h"
#include "core/shape.h"
#include "parallel/ranks.h"
#include "tuner/pool.h"
#include "tuner/session.h"

namespace attntune {
namespace {

struct TuneArgs {
  TuneOptions options;
  std::string device = "cpu";
  std::string variants = "dense,swa";
  std::string params;
  std::string seq_lens = "512,1024,2048";
  std::string batch = std::to_string(TuneOptions{}.batch);
  std::string budget = std::to_string(TuneOptions{}.budget);
  std::string time_budget;
  std::string dtype;
  std::string phase = ToString(TuneOptions{}.phase);
  std::string warm_start = TuneOptions{}.warm_start ? "on" : "off";
  std::string generic = TuneOptions{}.generic ? "on" : "off";
  std::string retime = TuneOptions{}.retime ? "on" : "off";
  std::string calib;
  std::string min_quality;
  CLI::Option* seq_lens_option = nullptr;     // whether --seq-lens was given
  CLI::Option* min_quality_option = nullptr;  // whether --min-quality was given
  CLI::Option* budget_option = nullptr;       // whether --budget was given
  CLI::Option* time_budget_option = nullptr;  // whether --time-budget was given
};

// The flags of tune, bound to `args`.
void AddTuneFlags(CLI::App* cmd, TuneArgs* args) {
  TuneOptions& o = args->options;
  cmd->add_option("--model", o.model, "Embedded model name or a Hugging Face config.json")
      ->capture_default_str();
  cmd->add_option("--device", args->device,
                  "cpu, cuda:N, or cuda:local (under MPI: the GPU of the rank's number on its node)")
      ->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "Input dtype: fp32 (cpu), fp16 or bf16 (cuda; default fp16)");
  cmd->add_flag("--flush-l2", o.flush_l2, "cuda: flush the L2 cache before every repetition");
  cmd->add_option("--variants", args->variants, "Comma-separated variants")->capture_default_str();
  cmd->add_option("--params", args->params,
                  "Variant parameters to search at given values instead of the table's grid, "
                  "NAME=V comma-separated, a name repeated for several values (w=1024,w=4096,"
                  "sink=0): every variant tuned that declares NAME searches those values");
  args->seq_lens_option =
      cmd->add_option("--seq-lens", args->seq_lens,
                      "Comma-separated sequence lengths (with --calib: the capture's length)")
          ->capture_default_str();
  cmd->add_option("--calib", args->calib,
                  "Captured q/k/v of the model (FILE[,FILE...], scripts/capture_qkv.py): each "
                  "candidate's quality is measured on every captured layer and head, on the "
                  "first L tokens, instead of on Gaussian inputs");
  args->min_quality_option = cmd->add_option("--min-quality", args->min_quality,
                  "Quality floor on the worst layer and head, mass_recall>=X and/or rel_err<=Y: "
                  "the search looks for the fastest candidate that keeps it");
  cmd->add_option("--phase", args->phase,
                  "prefill: every query row of each length (Lq = Lk = L); decode: one query "
                  "row per head against L keys (Lq = 1; dma_decode runs all L steps)")
      ->capture_default_str();
  cmd->add_option("--batch", args->batch, "Batch size")->capture_default_str();
  args->budget_option =
      cmd->add_option("--budget", args->budget, "Evaluations per (variant, sequence length)")
          ->capture_default_str();
  args->time_budget_option = cmd->add_option(
      "--time-budget", args->time_budget,
      "Wall time of all the searches (90s, 10m, 1.5h): each (variant, sequence length) gets "
      "an equal share of the time left when it starts, and at least one evaluation; without "
      "--budget, no limit on the number of evaluations");
  cmd->add_option("--strategy", o.strategy, "Search strategy (attntune replay judges them)")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the inputs and the search")
      ->check(kSeed)
      ->capture_default_str();
  cmd->add_option("--generic", args->generic,
                  "cpu: on: the generic block-sparse executor is one more implementation to "
                  "search beside each variant's own kernel; off: the variant's kernel only")
      ->capture_default_str();
  cmd->add_option("--retime", args->retime,
                  "on: after the searches, time each problem's fastest configuration again "
                  "beside the untuned default, back to back; one the default matches is not "
                  "an entry; off: the searches' fastest")
      ->capture_default_str();
  cmd->add_option("--warm-start", args->warm_start,
                  "on: ask first the best stored configurations of the same variant on this "
                  "device at the nearest other sequence length; off: no warm start")
      ->capture_default_str();
  cmd->add_option("--tolerance", o.evaluate.tolerance,
                  "Max relative error against the fp64 reference")
      ->check(kNonNegativeFinite)
      ->capture_default_str();
  cmd->add_option("--max-seconds", o.evaluate.policy.max_seconds,
                  "Time cap of one candidate's timed repetitions past the --min-reps floor "
                  "(the checked run, the warm-up and the floor are not capped)")
      ->check(kPositiveFinite)
      ->capture_default_str();
  cmd->add_flag("--metrics", o.metrics,
                "cuda: after every candidate is timed, read each ok one's roofline counters "
                "with CUPTI's range profiler and store them with its trial");
  cmd->add_option("--db", o.db_path, "SQLite database (default: <out>/attntune.db)");
  cmd->add_option("--out", o.out_dir, "Output folder")->capture_default_str();
}

// "w=1024,w=4096,sink=0" -> {w: [1024, 4096], sink: [0]} (values checked by PlanTune).
std::map<std::string, std::vector<std::string>> ParseVariantGrid(const std::string& text,
                                                                  const std::string& what) {
  std::map<std::string, std::vector<std::string>> grid;
  if (text.empty()) return grid;
  for (const std::string& item : SplitList(text)) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      throw UserError(what + ": '" + item + "' is not NAME=VALUE");
    CheckParamItem(item, what);
    grid[item.substr(0, eq)].push_back(item.substr(eq + 1));
  }
  if (grid.empty()) throw UserError(what + ": no NAME=VALUE given");
  return grid;
}

// The options of a tune from its flags (UserError naming the flag on bad input).
TuneOptions OptionsFromFlags(const TuneArgs& flags, const Backend& backend) {
  const TuneArgs* args = &flags;
  TuneOptions options = args->options;
  options.dtype = ResolveDtype(backend, args->dtype, "--dtype");
  options.variants = SplitList(args->variants);
  for (size_t i = 0; i < options.variants.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (options.variants[i] == options.variants[j])
        throw UserError("--variants: '" + options.variants[i] + "' is given twice");
  options.variant_grid = ParseVariantGrid(args->params, "--params");
  options.calib = args->calib.empty() ? std::vector<std::string>{} : SplitList(args->calib);
  if (!args->calib.empty() && options.calib.empty())
    throw UserError("--calib: no calibration file given");
  // With --calib and no --seq-lens, the capture's own length (PlanTune).
  options.seq_lens = options.calib.empty() || args->seq_lens_option->count() > 0
                         ? ParseSeqLens(args->seq_lens, "--seq-lens")
                         : std::vector<int64_t>{};
  options.floor = ParseQualityFloor(args->min_quality, "--min-quality");
  if (args->min_quality_option->count() > 0 && options.floor.Empty())
    throw UserError("--min-quality: empty (expected mass_recall>=X and/or rel_err<=Y)");
  const std::optional<Phase> phase = PhaseFromString(args->phase);
  if (!phase) throw UserError("--phase: '" + args->phase + "' is not prefill or decode");
  options.phase = *phase;
  options.batch = ParsePositiveInt(args->batch, "--batch");
  if (options.batch > kMaxBatch)
    throw UserError("--batch: " + args->batch + " is more than attntune takes (" +
                    std::to_string(kMaxBatch) + ")");
  options.budget = ParsePositiveInt(args->budget, "--budget");
  if (args->time_budget_option->count() > 0) {
    options.time_budget_s = ParseDuration(args->time_budget, "--time-budget");
    if (args->budget_option->count() == 0) options.budget = 0;  // the time alone decides
  }
  if (args->warm_start != "on" && args->warm_start != "off") {
    throw UserError("--warm-start: '" + args->warm_start + "' is not on or off");
  }
  options.warm_start = args->warm_start == "on";
  if (args->generic != "on" && args->generic != "off") {
    throw UserError("--generic: '" + args->generic + "' is not on or off");
  }
  options.generic = args->generic == "on";
  if (args->retime != "on" && args->retime != "off") {
    throw UserError("--retime: '" + args->retime + "' is not on or off");
  }
  options.retime = args->retime == "on";
  options.args_json = JsonText(nlohmann::json{{"model", options.model},
                                     {"device", backend.Id().ToString()},
                                     {"dtype", ToString(options.dtype)},
                                     {"flush_l2", options.flush_l2},
                                     {"metrics", options.metrics},
                                     {"variants", options.variants},
                                     {"params", options.variant_grid},
                                     {"seq_lens", options.seq_lens},
                                     {"phase", ToString(options.phase)},
                                     {"budget", options.budget},
                                     {"time_budget_s", options.time_budget_s},
                                     {"strategy", options.strategy},
                                     {"warm_start", options.warm_start},
                                     {"generic", options.generic},
                                     {"retime", options.retime},
                                     {"seed", options.seed},
                                     {"calib", options.calib},
                                     {"min_quality", options.floor.ToString()}});
  return options;
}

// Under a floor: per problem, the fastest candidate that keeps it, or that none does.
void PrintChoices(const TuneOptions& options, const TuneSummary& s) {
  const std::string floor = options.floor.ToString();
  std::printf("attntune: quality on %s, floor %s on the worst layer and head\n",
              s.quality_source.c_str(), floor.c_str());
  bool any_sparse = false, any_sparse_problem = false;
  for (const ProblemChoice& c : s.choices) {
    auto metric = [](const TrialResult& r, const char* name) {
      auto it = r.metrics.find(name);
      return it == r.metrics.end() ? 0.0 : it->second;
    };
    if (c.variant == "dense") {
      if (c.found)
        std::printf("  %s: %s %.4g ms (the baseline)\n", c.problem.c_str(), c.config.c_str(),
                    c.result.median_ms);
      continue;
    }
    any_sparse_problem = true;
    any_sparse = any_sparse || c.sparse_found;
    if (c.found && c.sparse) {
      std::printf("  %s: %s %.4g ms meets %s (mass_recall mean %.4f, worst %.4f at layer %lld "
                  "head %lld; %.3g of dense's pairs)\n",
                  c.problem.c_str(), c.config.c_str(), c.result.median_ms, floor.c_str(),
                  metric(c.result, "mass_recall"), metric(c.result, "mass_recall_worst"),
                  static_cast<long long>(metric(c.result, "mass_recall_worst_layer")),
                  static_cast<long long>(metric(c.result, "mass_recall_worst_head")),
                  metric(c.result, "pair_ratio"));
    } else if (c.sparse_found) {
      std::printf("  %s: %s %.4g ms meets %s but attends all of dense's pairs (a slower sparse "
                  "candidate meets it too)\n",
                  c.problem.c_str(), c.config.c_str(), c.result.median_ms, floor.c_str());
    } else if (!c.closest.empty()) {
      std::printf("  %s: no sparse configuration meets %s (closest: %s, mass_recall worst "
                  "%.4f, rel_err worst %.4f)\n",
                  c.problem.c_str(), floor.c_str(), c.closest.c_str(),
                  metric(c.closest_result, "mass_recall_worst"),
                  metric(c.closest_result, "rel_err_worst"));
    } else {
      std::printf("  %s: no sparse configuration meets %s (no ok candidate attended fewer pairs "
                  "than dense)\n", c.problem.c_str(), floor.c_str());
    }
  }
  if (any_sparse_problem && !any_sparse)
    std::printf("attntune: no sparse configuration meets %s on %s\n", floor.c_str(),
                s.quality_source.c_str());
}

// The summary of a finished tune on stdout.
void PrintSummary(const TuneOptions& options, const TuneSummary& s, int ranks) {
  std::string where;
  if (ranks > 1) {
    char loop[96];
    std::snprintf(loop, sizeof loop,  " (rank 0's searches and database: %.2f ms CPU per evaluation)",
                  1e3 * s.loop_seconds / static_cast<double>(std::max<int64_t>(s.evaluations, 1)));
    where = " on " + std::to_string(ranks) + " ranks" + loop;
  }
  std::printf("attntune: %lld evaluations (%lld measured, %lld from the database, %lld failed)%s\n",
              static_cast<long long>(s.evaluations), static_cast<long long>(s.measured),
              static_cast<long long>(s.reused), static_cast<long long>(s.failed), where.c_str());
  if (s.retimed > 0)
    std::printf("attntune: %lld fastest configurations re-timed against the default, %lld "
                "not faster than it (the default takes their place)\n",
                static_cast<long long>(s.retimed), static_cast<long long>(s.lost_to_default));
  if (!options.floor.Empty()) PrintChoices(options, s);
  if (options.metrics)
    std::printf("attntune: hardware counters stored for %lld trials (%lld failed)\n",
                static_cast<long long>(s.counted), static_cast<long long>(s.counter_failures));
  std::printf("  database: %s\n  header:   %s\n  json:     %s\n  report:   %s\n",
              s.db_path.c_str(), s.outputs.header.c_str(), s.outputs.json.c_str(),
              s.outputs.report.c_str());
}

// The first line of a tune on stderr: the model, the device, the timer.
void PrintStart(const TunePlan& plan, const std::string& timer_note, int ranks) {
  const DeviceInfo device = plan.backend->Device();
  std::fprintf(stderr, "attntune: tuning %s (%lld query heads, %lld KV heads, d=%lld) on %s (%s)%s\n",
               plan.model.name.c_str(), static_cast<long long>(plan.model.q_heads),
               static_cast<long long>(plan.model.kv_heads),
               static_cast<long long>(plan.model.head_dim), device.name.c_str(),
               (std::string(ToString(plan.options.dtype)) + ", timer " + timer_note).c_str(),
               ranks > 1 ? (" and " + std::to_string(ranks - 1) + " more ranks").c_str() : "");
}

// Plans and runs the tune of `options` on `backend`, printing progress and the summary.
void RunTuneCommand(const TuneOptions& options, Backend& backend) {
  TunePlan plan = PlanTune(options, backend);
  std::string timer_note;
  std::unique_ptr<Timer> timer = backend.MakeTimer(&timer_note);
  PrintStart(plan, timer_note, 1);
  ProgressPrinter printer;
  const TuneSummary s =
      RunTune(plan, *timer, [&](const ProgressEvent& ev) { printer(ev); });
  printer.Finish();
  PrintSummary(options, s, 1);
}

// What makes a tune's problems, candidates and their quality, which every rank of a job
// must share: the stored arguments but the device (each rank names its own under
// cuda:local), the options the arguments do not hold, and the content of the calibration
// set (the same path may hold another capture on another node).
std::string PlanKey(const TunePlan& plan) {
  const TuneOptions& options = plan.options;
  nlohmann::json key = nlohmann::json::parse(options.args_json);
  key.erase("device");
  key["batch"] = options.batch;
  key["tolerance"] = options.evaluate.tolerance;
  key["max_seconds"] = options.evaluate.policy.max_seconds;
  key["calibration"] = plan.calibration ? plan.calibration->hash : "";
  return JsonText(key);
}

// One rank of an MPI tune: every rank sets up its own device and plan (rank 0 alone opens
// the database), then rank 0 runs the searches and the others evaluate what it sends.
void RunRank(RankJob& job, const TuneArgs& args) {
  std::unique_ptr<Backend> backend;
  TuneOptions options;
  TunePlan plan;
  std::unique_ptr<Timer> timer;
  std::string timer_note;
  int code = 0;
  std::string error;
  try {
    const std::string device = ResolveLocalDevice(args.device, job.LocalRank());
    backend = OpenBackend(device, device == args.device ? "--device" : "--device cuda:local ->");
    options = OptionsFromFlags(args, *backend);
    if (options.metrics) {
      throw UserError("--metrics: counter passes run in a tune of one process, not on " +
                      std::to_string(job.Size()) +
                      " MPI ranks (tune here first, then run the same tune with --metrics on "
                      "each device: it reuses every stored trial and reads only the counters)");
    }
    plan = PlanTune(options, *backend, /*open_store=*/job.Rank() == 0);
    timer = backend->MakeTimer(&timer_note);
  } catch (const UserError& e) {
    code = 2;
    error = e.what();
  } catch (const std::exception& e) {
    code = 1;
    error = e.what();
  }
  job.Start(code, error, code == 0 ? backend->Device() : DeviceInfo{},
            code == 0 ? PlanKey(plan) : "");
  CandidateRunner runner(plan, *timer);
  if (job.Rank() != 0) {
    job.Serve(runner);
    return;
  }
  PrintStart(plan, timer_note, job.Size());
  ProgressPrinter printer;
  const TuneSummary s = job.Coordinate(plan, runner, [&](const ProgressEvent& ev) { printer(ev); });
  printer.Finish();
  PrintSummary(options, s, job.Size());
}

}  // namespace

void RegisterTune(CLI::App& app, int* rc) {
  auto args = std::make_shared<TuneArgs>();
  auto* cmd = app.add_subcommand("tune", "Tune the variants for a model's attention geometry");
  AddTuneFlags(cmd, args.get());
  cmd->callback([args, rc] {
    // Several MPI ranks (mpirun, srun): one RankJob per process; else a tune of its own.
    // The job lives until the process ends: its MPI_Finalize lets the other ranks end
    // (and the launcher stop the job on their exit codes) only after main() has printed
    // how the tune ended.
    static std::unique_ptr<RankJob> job;
    try {
      job = RankJob::Join();
      if (job) {
        RunRank(*job, *args);
        *rc = 0;
        return;
      }
    } catch (const RankStopped& stopped) {  // rank 0 prints why
      *rc = stopped.exit_code;
      return;
    }
    const std::string device = ResolveLocalDevice(args->device, 0);
    std::unique_ptr<Backend> backend =
        OpenBackend(device, device == args->device ? "--device" : "--device cuda:local ->");
    RunTuneCommand(OptionsFromFlags(*args, *backend), *backend);
    *rc = 0;
  });
}

}  // namespace attntune
