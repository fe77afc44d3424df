// attntune bench: one candidate on one shape, checked and timed, as text or one JSON record.
#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/backends.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/generators.h"
#include "core/shape.h"
#include "profiler/device.h"
#include "tuner/evaluate.h"

namespace attntune {
namespace {

struct BenchArgs {
  std::string variant;
  std::string impl;
  std::string params;
  std::string shape = "B=1,Hq=16,Hkv=8,L=1024,d=128";
  uint64_t seed = 1;
  std::string inputs = "gaussian";
  bool json = false;
  bool unchecked = false;
  double max_seconds = 3.0;
  std::string device = "cpu";
  std::string dtype;
  bool flush_l2 = false;
  bool metrics = false;
  int min_reps = 5;
};

}  // namespace

void RegisterBench(CLI::App& app, int* rc) {
  auto args = std::make_shared<BenchArgs>();
  auto* cmd = app.add_subcommand("bench", "Check and time one variant on one shape");
  cmd->add_option("--variant", args->variant, "Variant id")->required();
  cmd->add_option("--impl", args->impl, "Implementation (default: the variant's first)");
  cmd->add_option("--params", args->params, "key=value,... (e.g. w=1024,sink=4)");
  cmd->add_option("--shape", args->shape, "B=..,Hq=..,Hkv=..,L=..,d=..")->capture_default_str();
  cmd->add_option("--seed", args->seed, "Seed of the Gaussian inputs")->capture_default_str();
  cmd->add_option("--inputs", args->inputs,
                  "Input pattern: gaussian, band, sinks, clusters or needle")
      ->capture_default_str();
  cmd->add_option("--max-seconds", args->max_seconds, "Time cap of the repetitions")
      ->check(kPositiveFinite)
      ->capture_default_str();
  cmd->add_option("--min-reps", args->min_reps,
                  "Floor of timed repetitions (1: one warm-up and one timed run, e.g. to "
                  "measure peak memory at long lengths)")
      ->check(kPositiveFinite)
      ->capture_default_str();
  cmd->add_flag("--json", args->json, "Print one JSON object");
  cmd->add_flag("--unchecked", args->unchecked,
                "Time without the fp64 reference (long lengths): no rel_err, no mass_recall");
  cmd->add_option("--device", args->device, "cpu or cuda:N")->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "Input dtype: fp32 (cpu), fp16 or bf16 (cuda; default fp16)");
  cmd->add_flag("--flush-l2", args->flush_l2, "cuda: flush the L2 cache before every repetition");
  cmd->add_flag("--metrics", args->metrics,
                "cuda: after timing, read the roofline counters with CUPTI's range profiler");
  cmd->callback([args, rc] {
    const Variant& variant = FindVariant(args->variant, "--variant");
    std::unique_ptr<Backend> backend = OpenBackend(args->device, "--device");
    const Dtype dtype = ResolveDtype(*backend, args->dtype, "--dtype");
    const Shape shape = ParseShape(args->shape, "--shape");
    ValidateShape(shape, "--shape");
    CheckProblemFitsHost(shape, !args->unchecked, "--shape");
    const Implementation* impl = FindImplementationArg(*backend, variant, dtype, shape.d, args->impl);
    const Params params =
        ResolveParams(variant, impl, shape, ParseParams(args->params, "--params"), "--params");
    ProblemContext problem =
        args->inputs == "gaussian"
            ? ProblemContext(shape, args->seed)
            : ProblemContext(StructuredTensors(shape, args->inputs, args->seed, "--inputs"));
    std::string timer_note;
    std::unique_ptr<Timer> timer = backend->MakeTimer(&timer_note);
    EvaluateOptions options;
    options.policy.max_seconds = args->max_seconds;
    options.policy.min_reps = args->min_reps;
    // A floor above the default ceiling raises the ceiling: the repetitions asked for run.
    options.policy.max_reps = std::max(options.policy.max_reps, args->min_reps);
    options.check = !args->unchecked;
    options.element_bytes = ElementBytes(dtype);
    const MeasureHooks hooks = backend->Hooks(args->flush_l2);
    options.policy.before_each = hooks.before_each;
    options.after_measure = hooks.after_measure;
    std::unique_ptr<CounterSource> counters;
    if (args->metrics) {
      std::string why;
      counters = backend->MakeCounters(dtype, &why);
      if (!counters) throw UserError("--metrics: " + why);
    }
    const Evaluated ev = EvaluateCandidate(problem, variant, *impl, params, *timer, options);
    const TrialResult& r = ev.result;
    nlohmann::json hw;  // hardware counters, in passes of their own after the timing
    if (counters && r.status == TrialStatus::kOk) {
      try {
        std::string chip;
        const std::map<std::string, double> values =
            counters->Read([&] { impl->launch(problem.Inputs(), params); }, &chip);
        hw["chip"] = chip;
        for (const auto& [name, value] : values) hw[name.substr(3)] = value;  // drop "hw_"
      } catch (const std::runtime_error& e) {
        hw["error"] = e.what();
      }
    }
    nlohmann::json j;
    j["schema"] = 1;
    j["variant"] = variant.id;
    j["implementation"] = impl->id;
    j["params"] = nlohmann::json::parse(CanonicalVariantParamsJson(variant, params));
    j["params"].update(nlohmann::json::parse(CanonicalTunablesJson(*impl, params)));
    j["shape"] = shape.ToString();
    j["device"] = backend->Device().name;
    j["dtype"] = ToString(dtype);
    j["timer"] = timer_note;
    j["status"] = ToString(r.status);
    if (!r.message.empty()) j["message"] = r.message;
    for (const auto& [name, value] : r.metrics) j[name] = value;
    if (r.status == TrialStatus::kOk) {
      j["median_ms"] = r.median_ms;
      j["p10_ms"] = r.p10_ms;
      j["p90_ms"] = r.p90_ms;
      j["cv"] = r.cv;
      j["samples"] = r.samples_ms.size();
    }
    nlohmann::json kernels = nlohmann::json::array();
    double select_ms = 0.0;  // the selection phase: kernels named attntune::select::*
    for (const auto& k : ev.kernels) {
      kernels.push_back({{"name", k.name}, {"kind", k.kind}, {"ms", k.ms}});
      if (k.name.rfind("attntune::select::", 0) == 0) select_ms += k.ms;
    }
    j["kernels"] = kernels;
    j["inputs"] = args->inputs;
    j["select_ms"] = select_ms;
    if (!hw.is_null()) j["hardware"] = hw;
    // Whole process (binary, Kokkos, inputs, reference when checked, kernel buffers).
    j["peak_rss_bytes"] = PeakRssBytes();
    if (args->json) {
      std::printf("%s\n", j.dump(2).c_str());
    } else {
      std::printf("%s %s %s on %s: %s\n", variant.id.c_str(), impl->id.c_str(),
                  ParamsToString(params).c_str(), shape.ToString().c_str(), ToString(r.status));
      if (r.status == TrialStatus::kOk) {
        std::printf("  median %.3f ms (p10 %.3f, p90 %.3f, cv %.3f, %zu samples)\n", r.median_ms,
                    r.p10_ms, r.p90_ms, r.cv, r.samples_ms.size());
        std::printf("  %.2f GFLOP/s useful, %.0f pairs (%.4f of dense)", r.metrics.at("gflops"),
                    r.metrics.at("pairs"), r.metrics.at("pair_ratio"));
        if (r.metrics.count("rel_err")) {
          std::printf(", rel_err %.3g, mass_recall %.4f\n", r.metrics.at("rel_err"),
                      r.metrics.at("mass_recall"));
        } else {
          std::printf(", unchecked: no reference, no quality\n");
        }
      } else {
        std::printf("  %s\n", r.message.c_str());
      }
      if (!ev.kernels.empty())
        std::printf("  selection phase %.3f ms (of the checked run)\n", select_ms);
      for (const auto& k : ev.kernels) std::printf("  kernel %s (%s) %.3f ms\n", k.name.c_str(), k.kind.c_str(), k.ms);
      if (!hw.is_null()) std::printf("  hardware counters: %s\n", hw.dump().c_str());
    }
    *rc = r.status == TrialStatus::kOk ? 0 : 1;
  });
}

}  // namespace attntune
