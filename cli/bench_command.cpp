// attntune bench: one candidate on one shape, checked and timed, as text or one JSON record.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include "cli/backends.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/params.h"
#include "reports/bench_record.h"
#include "tuner/bench.h"

namespace attntune {
namespace {

struct BenchArgs {
  BenchRequest request;
  std::string device = "cpu";
  bool json = false;
  bool unchecked = false;
  std::string calib;
};

}  // namespace

void RegisterBench(CLI::App& app, int* rc) {
  auto args = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "Check and time one variant on one shape");
  cmd->add_option("--variant", args->request.variant, "Variant id")->required();
  cmd->add_option("--impl", args->request.impl, "Implementation (default: the variant's first)");
  cmd->add_option("--params", args->request.params, "key=value,... (e.g. w=1024,sink=4)");
  cmd->add_option("--shape", args->request.shape, "B=..,Hq=..,Hkv=..,L=..,d=..")->capture_default_str();
  cmd->add_option("--seed", args->request.seed, "Seed of the Gaussian inputs")
      ->check(kSeed)
      ->capture_default_str();
  cmd->add_option("--inputs", args->request.inputs,
                  "Input pattern: gaussian, band, sinks, clusters or needle")
      ->capture_default_str();
  cmd->add_option("--max-seconds", args->request.max_seconds, "Time cap of the timed repetitions past the --min-reps floor")
      ->check(kPositiveFinite)
      ->capture_default_str();
  cmd->add_option("--min-reps", args->request.min_reps,
                  "Floor of timed repetitions (1: one warm-up and one timed run, e.g. to "
                  "measure peak memory at long lengths)")
      ->check(kRepetitions)
      ->capture_default_str();
  cmd->add_option("--calib", args->calib,
                  "Captured q/k/v (FILE[,FILE...], scripts/capture_qkv.py) with the shape's heads "
                  "and head dim: quality is measured on every captured layer and head");
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->add_flag("--unchecked", args->unchecked,
                "Time without the fp64 reference (long lengths): no rel_err, no mass_recall");
  cmd->add_option("--device", args->device, "cpu or cuda:N")->capture_default_str();
  cmd->add_option("--dtype", args->request.dtype, "Input dtype: fp32 (cpu), fp16 or bf16 (cuda; default fp16)");
  cmd->add_flag("--flush-l2", args->request.flush_l2, "cuda: flush the L2 cache before every repetition");
  cmd->add_flag("--metrics", args->request.metrics,
                "cuda: after timing, read the roofline counters with CUPTI's range profiler");
  cmd->callback([args, rc] {
    std::unique_ptr<Backend> backend = OpenBackend(args->device, "--device");
    BenchRequest request = args->request;
    request.check = !args->unchecked;
    if (!args->calib.empty()) {
      request.calib = SplitList(args->calib);
      if (request.calib.empty()) throw UserError("--calib: no calibration file given");
      if (args->unchecked) throw UserError("--calib: quality needs the checked run (drop --unchecked)");
    }
    const BenchRecord record = Bench(request, *backend);
    std::fputs((args->json ? RenderBenchRecordJson(record) : RenderBenchRecordText(record)).c_str(),
               stdout);
    *rc = record.status == TrialStatus::kOk ? 0 : 1;
  });
}

}  // namespace attntune
