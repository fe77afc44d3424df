#include "cli/commands.h"

#include <sys/resource.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "build_info.h"
#include "core/files.h"
#include "db/database.h"
#include "kernels/cuda/cuda_variants.h"
#include "kernels/kokkos/runtime.h"
#include "core/check.h"
#include "core/generators.h"
#include "core/safetensors.h"
#include "profiler/device.h"
#include "profiler/timer.h"
#ifdef ATTNTUNE_HAVE_CUPTI
#include "profiler/cuda/cupti_activity.h"
#include "profiler/cuda/metric_set.h"
#endif
#include "search/strategy.h"
#include "tuner/session.h"
#include "cli/replay_command.h"
#include "cli/allocate_command.h"

namespace attntune {

namespace {

// A CLI11 check: the option's text as a finite double with ok(value).
CLI::Validator FiniteCheck(bool (*ok)(double), const std::string& must) {
  return CLI::Validator(
      [ok, must](std::string& text) -> std::string {
        double value = 0.0;
        if (!CLI::detail::lexical_cast(text, value) || !std::isfinite(value) || !ok(value))
          return "'" + text + "' is not " + must;
        return "";
      },
      must);
}

}  // namespace

const CLI::Validator kPositiveFinite =
    FiniteCheck([](double v) { return v > 0.0; }, "a positive number");
const CLI::Validator kNonNegativeFinite =
    FiniteCheck([](double v) { return v >= 0.0; }, "a non-negative number");

namespace {

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) items.push_back(item);
  return items;
}

std::vector<int64_t> ParseSeqLens(const std::string& text) {
  std::vector<int64_t> lens;
  for (const auto& item : SplitList(text)) lens.push_back(ParsePositiveInt(item, "--seq-lens"));
  if (lens.empty()) throw UserError("--seq-lens: no sequence length given (e.g. 1024,4096)");
  return lens;
}

// --time-budget: a positive number of seconds, or of minutes or hours with the suffix
// s, m or h ("90", "90s", "1.5m", "2h").
double ParseDuration(const std::string& text, const std::string& what) {
  const std::string bad = what + ": '" + text + "' is not a duration (e.g. 90s, 10m, 1.5h)";
  if (text.empty()) throw UserError(bad);
  double unit = 1;
  std::string number = text;
  const char last = text.back();
  if (last == 's' || last == 'm' || last == 'h') {
    unit = last == 'h' ? 3600 : last == 'm' ? 60 : 1;
    number.pop_back();
  }
  if (number.empty() || number.find_first_not_of("0123456789.eE+-") != std::string::npos) {
    throw UserError(bad);  // also "nan", "inf" and hexadecimal, which strtod would take
  }
  char* end = nullptr;
  const double value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(value)) throw UserError(bad);
  if (!(value > 0)) throw UserError(what + ": '" + text + "' is not a positive duration");
  return value * unit;
}

// --device: "cpu" runs the Kokkos kernels; "cuda:N" the CUDA kernels on device N, which
// must exist and be usable (one clear line otherwise). Returns -1 for the CPU, else N
// (made the current device).
int ResolveDevice(const std::string& device) {
  if (device == "cpu") return -1;
  if (device.rfind("cuda", 0) == 0) {
    const std::string index = device.size() > 5 && device[4] == ':' ? device.substr(5) : "";
    if (index.empty() || index.size() > 6 || index.find_first_not_of("0123456789") != std::string::npos)
      throw UserError("--device: '" + device + "' is not a device (expected cpu or cuda:N)");
    const CudaProbe probe = ProbeCuda();
    if (!probe.usable) throw UserError("--device " + device + ": " + probe.reason);
    const int n = std::stoi(index);
    if (n >= probe.device_count)
      throw UserError("--device " + device + ": only " + std::to_string(probe.device_count) +
                      " CUDA device(s) present");
    if (!CudaKernelsBuilt())
      throw UserError("--device " + device + ": this attntune was built without CUDA kernels");
    const std::string error = SelectCudaDevice(n);
    if (!error.empty()) throw UserError("--device " + device + ": " + error);
    return n;
  }
  throw UserError("--device: '" + device + "' is not a device (expected cpu or cuda:N)");
}

// --dtype: the CPU kernels are fp32; the CUDA kernels take fp16 or bf16.
std::string ResolveDtype(const std::string& dtype, int cuda_index) {
  if (cuda_index < 0) {
    if (dtype.empty() || dtype == "fp32") return "fp32";
    throw UserError("--dtype: '" + dtype + "' is not available on the CPU (fp32 only)");
  }
  if (dtype.empty()) return "fp16";
  if (dtype == "fp16" || dtype == "bf16") return dtype;
  throw UserError("--dtype: '" + dtype + "' is not available on CUDA (fp16 or bf16)");
}

// The timer of a device: CpuTimer, or on a GPU CUPTI activity tracing (CUDA events when
// CUPTI cannot start; `note` says which and why).
std::unique_ptr<Timer> MakeDeviceTimer(int cuda_index, std::string* note) {
  if (cuda_index < 0) return std::make_unique<CpuTimer>();
#ifdef ATTNTUNE_HAVE_CUPTI
  std::string why;
  std::unique_ptr<Timer> timer = MakeGpuTimer(&why);
  *note = timer->Name() + (why.empty() ? "" : " (CUPTI unavailable: " + why + ")");
  return timer;
#else
  *note = "no GPU timer in this build";
  throw UserError("--device cuda: this attntune was built without CUPTI");
#endif
}

// Wires the GPU readings into the evaluation: clocks after each measurement, and an L2
// flush before each repetition when asked.
void ConfigureGpuEvaluation(int cuda_index, bool flush_l2, EvaluateOptions* options) {
  if (cuda_index < 0) {
    if (flush_l2) throw UserError("--flush-l2: only for --device cuda:N");
    return;
  }
  options->element_bytes = 2.0;  // fp16 or bf16
  if (flush_l2) options->policy.before_each = [] { FlushL2(); };
  options->after_measure = [cuda_index, flush_l2](std::map<std::string, double>* metrics) {
    for (const auto& [name, value] : ReadGpuClocks(cuda_index)) (*metrics)[name] = value;
    (*metrics)["l2_flushed"] = flush_l2 ? 1 : 0;
  };
}

#ifdef ATTNTUNE_HAVE_CUPTI
// The hardware counters of `launch` on CUDA device `cuda_index` (CUPTI's range profiler,
// one pass per replay, after the timing) as trial metrics "hw_*" (RooflineValues);
// `chip` receives the chip the metric names were resolved for. Throws
// std::runtime_error with the failing CUPTI call when the counters cannot be read.
std::map<std::string, double> ReadRooflineCounters(int cuda_index, const std::string& dtype,
                                                   const std::function<void()>& launch,
                                                   std::string* chip) {
  const MetricValues m = CollectRooflineMetrics(cuda_index, launch);
  if (!m.error.empty()) throw std::runtime_error(m.error);
  if (chip) *chip = m.plan.chip;
  return RooflineValues(m.by_role, m.replays, dtype);
}
#endif

// --metrics: only on a GPU, and only in a build with CUPTI.
void CheckMetricsFlag(bool metrics, int cuda_index) {
  if (!metrics) return;
  if (cuda_index < 0) throw UserError("--metrics: only for --device cuda:N");
#ifndef ATTNTUNE_HAVE_CUPTI
  throw UserError("--metrics: this attntune was built without CUPTI");
#endif
}

// Progress: one rewritten line on a terminal, plain lines otherwise.
class ProgressPrinter {
 public:
  ProgressPrinter() : tty_(isatty(fileno(stderr)) != 0) {}
  ~ProgressPrinter() { Finish(); }
  void operator()(const ProgressEvent& ev) {
    if (ev.status == "running" && !tty_) return;  // plain logs get one line per result
    char line[256];
    char eval[48] = "";  // the counter passes come after the search: no evaluation index
    if (ev.eval_index > 0 && ev.budget > 0) {
      std::snprintf(eval, sizeof eval, "eval %lld/%lld  ", static_cast<long long>(ev.eval_index),
                    static_cast<long long>(ev.budget));
    } else if (ev.eval_index > 0) {  // a time budget alone: no count to reach
      std::snprintf(eval, sizeof eval, "eval %lld  ", static_cast<long long>(ev.eval_index));
    }
    std::snprintf(line, sizeof line, "[%lld/%lld] %-16s %s%-28s %s",
                  static_cast<long long>(ev.problem_index), static_cast<long long>(ev.problem_count),
                  ev.problem.c_str(), eval, ev.config.c_str(), ev.status.c_str());
    std::string text = line;
    if (ev.status == "ok") {
      char t[64];
      std::snprintf(t, sizeof t, " %.3f ms", ev.median_ms);
      text += t;
    }
    if (ev.reused) text += " (stored)";
    if (!ev.message.empty()) text += ": " + ev.message;
    if (tty_) {
      std::fprintf(stderr, "\r\033[K%s", text.c_str());
      pending_ = true;
    } else {
      std::fprintf(stderr, "%s\n", text.c_str());
    }
    std::fflush(stderr);
  }
  void Finish() {
    if (pending_) std::fputc('\n', stderr);
    pending_ = false;
  }

 private:
  bool tty_;
  bool pending_ = false;
};

// --impl: the named implementation of `variant`, or its first when none is named.
const Implementation* FindImplementationArg(const Variant& variant, const std::string& id) {
  if (id.empty()) return &variant.implementations.front();
  if (const Implementation* impl = variant.FindImplementation(id)) return impl;
  std::string known;
  for (const auto& i : variant.implementations) known += (known.empty() ? "" : ", ") + i.id;
  throw UserError("--impl: unknown implementation '" + id + "' of " + variant.id + " (known: " +
                  known + ")");
}

void RegisterDevices(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("devices", "List the devices attntune can tune on");
  cmd->callback([rc] {
    const DeviceInfo cpu = CpuDevice();
    std::printf("cpu: %s\n  fingerprint: %s\n", cpu.name.c_str(), cpu.fingerprint_json.c_str());
    const CudaProbe probe = ProbeCuda();
    if (probe.usable) {
      std::printf("cuda: %d device(s)%s\n", probe.device_count,
                  CudaKernelsBuilt() ? "" : " (this attntune was built without CUDA kernels)");
      for (int n = 0; n < probe.device_count; ++n) {
        const DeviceInfo gpu = CudaDevice(n);
        std::printf("cuda:%d: %s\n  fingerprint: %s\n", n, gpu.name.c_str(),
                    gpu.fingerprint_json.c_str());
      }
    } else {
      std::printf("cuda: none usable: %s\n", probe.reason.c_str());
    }
    *rc = 0;
  });
}

struct TuneArgs {
  TuneOptions options;
  std::string device = "cpu";
  std::string variants = "dense,swa";
  std::string seq_lens = "512,1024,2048";
  std::string batch = std::to_string(TuneOptions{}.batch);
  std::string budget = std::to_string(TuneOptions{}.budget);
  std::string time_budget;
  std::string dtype;
  bool flush_l2 = false;
  bool metrics = false;
  std::string warm_start = TuneOptions{}.warm_start ? "on" : "off";
  std::string generic = TuneOptions{}.generic ? "on" : "off";
};

void RegisterTune(CLI::App& app, int* rc) {
  auto args = std::make_shared<TuneArgs>();
  auto* cmd = app.add_subcommand("tune", "Tune the variants for a model's attention geometry");
  TuneOptions& o = args->options;
  cmd->add_option("--model", o.model, "Embedded model name or a Hugging Face config.json")
      ->capture_default_str();
  cmd->add_option("--device", args->device, "cpu or cuda:N")->capture_default_str();
  cmd->add_option("--dtype", args->dtype, "Input dtype: fp32 (cpu), fp16 or bf16 (cuda; default fp16)");
  cmd->add_flag("--flush-l2", args->flush_l2, "cuda: flush the L2 cache before every repetition");
  cmd->add_option("--variants", args->variants, "Comma-separated variants")->capture_default_str();
  cmd->add_option("--seq-lens", args->seq_lens, "Comma-separated sequence lengths")
      ->capture_default_str();
  cmd->add_option("--phase", o.phase,
                  "prefill: every query row of each length (Lq = Lk = L); decode: one query "
                  "row per head against L keys (Lq = 1; dma_decode runs all L steps)")
      ->capture_default_str();
  cmd->add_option("--batch", args->batch, "Batch size")->capture_default_str();
  auto* budget_option =
      cmd->add_option("--budget", args->budget, "Evaluations per (variant, sequence length)")
          ->capture_default_str();
  auto* time_budget_option = cmd->add_option(
      "--time-budget", args->time_budget,
      "Wall time of all the searches (90s, 10m, 1.5h): each (variant, sequence length) gets "
      "an equal share of the time left when it starts, and at least one evaluation; without "
      "--budget, no limit on the number of evaluations");
  cmd->add_option("--strategy", o.strategy, "Search strategy (attntune replay judges them)")
      ->capture_default_str();
  cmd->add_option("--seed", o.seed, "Seed of the inputs and the search")->capture_default_str();
  cmd->add_option("--generic", args->generic,
                  "cpu: on: the generic block-sparse executor is one more implementation to "
                  "search beside each variant's own kernel; off: the variant's kernel only")
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
                  "Time cap of the repetitions of one candidate")
      ->check(kPositiveFinite)
      ->capture_default_str();
  cmd->add_flag("--metrics", args->metrics,
                "cuda: after every candidate is timed, read each ok one's roofline counters "
                "with CUPTI's range profiler and store them with its trial");
  cmd->add_option("--db", o.db_path, "SQLite database (default: <out>/attntune.db)");
  cmd->add_option("--out", o.out_dir, "Output folder")->capture_default_str();
  cmd->callback([args, rc, budget_option, time_budget_option] {
    const int cuda_index = ResolveDevice(args->device);
    TuneOptions options = args->options;
    options.device = args->device;
    options.dtype = ResolveDtype(args->dtype, cuda_index);
    ConfigureGpuEvaluation(cuda_index, args->flush_l2, &options.evaluate);
    CheckMetricsFlag(args->metrics, cuda_index);
#ifdef ATTNTUNE_HAVE_CUPTI
    if (args->metrics) {
      auto tracing = std::make_shared<bool>(true);
      options.counters = [cuda_index, dtype = options.dtype,
                          tracing](const std::function<void()>& launch) {
        if (*tracing) {  // the counter passes come after every timing: the profiler replays alone
          StopCuptiActivity();
          *tracing = false;
        }
        return ReadRooflineCounters(cuda_index, dtype, launch, nullptr);
      };
    }
#endif
    options.variants = SplitList(args->variants);
    options.seq_lens = ParseSeqLens(args->seq_lens);
    options.batch = ParsePositiveInt(args->batch, "--batch");
    options.budget = ParsePositiveInt(args->budget, "--budget");
    if (time_budget_option->count() > 0) {
      options.time_budget_s = ParseDuration(args->time_budget, "--time-budget");
      if (budget_option->count() == 0) options.budget = 0;  // the time alone decides
    }
    if (args->warm_start != "on" && args->warm_start != "off") {
      throw UserError("--warm-start: '" + args->warm_start + "' is not on or off");
    }
    options.warm_start = args->warm_start == "on";
    if (args->generic != "on" && args->generic != "off") {
      throw UserError("--generic: '" + args->generic + "' is not on or off");
    }
    options.generic = args->generic == "on";
    options.args_json = nlohmann::json{{"model", options.model},
                                       {"device", args->device},
                                       {"dtype", options.dtype},
                                       {"flush_l2", args->flush_l2},
                                       {"metrics", args->metrics},
                                       {"variants", options.variants},
                                       {"seq_lens", options.seq_lens},
                                       {"phase", options.phase},
                                       {"budget", options.budget},
                                       {"time_budget_s", options.time_budget_s},
                                       {"strategy", options.strategy},
                                       {"warm_start", options.warm_start},
                                       {"generic", options.generic},
                                       {"seed", options.seed}}
                            .dump();
    TunePlan plan = PlanTune(options);
    const DeviceInfo device = cuda_index < 0 ? CpuDevice() : CudaDevice(cuda_index);
    std::string timer_note;
    std::unique_ptr<Timer> timer = MakeDeviceTimer(cuda_index, &timer_note);
    std::fprintf(stderr, "attntune: tuning %s (%lld query heads, %lld KV heads, d=%lld) on %s (%s)\n",
                 plan.model.name.c_str(), static_cast<long long>(plan.model.q_heads),
                 static_cast<long long>(plan.model.kv_heads),
                 static_cast<long long>(plan.model.head_dim), device.name.c_str(),
                 cuda_index < 0 ? KokkosDescription().c_str()
                                : (options.dtype + ", timer " + timer_note).c_str());
    ProgressPrinter printer;
    const TuneSummary s =
        RunTune(plan, device, *timer, [&](const ProgressEvent& ev) { printer(ev); });
    printer.Finish();
    std::printf("attntune: %lld evaluations (%lld measured, %lld from the database, %lld failed)\n",
                static_cast<long long>(s.evaluations), static_cast<long long>(s.measured),
                static_cast<long long>(s.reused), static_cast<long long>(s.failed));
    if (args->metrics)
      std::printf("attntune: hardware counters stored for %lld trials (%lld failed)\n",
                  static_cast<long long>(s.counted), static_cast<long long>(s.counter_failures));
    std::printf("  database: %s\n  header:   %s\n  json:     %s\n  report:   %s\n",
                s.db_path.c_str(), s.outputs.header.c_str(), s.outputs.json.c_str(),
                s.outputs.report.c_str());
    *rc = 0;
  });
}

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

// Peak resident set of this process so far (getrusage: kilobytes on Linux).
double PeakRssBytes() {
  struct rusage u {};
  getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_maxrss) * 1024.0;
}

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
    const int cuda_index = ResolveDevice(args->device);
    const std::string dtype = ResolveDtype(args->dtype, cuda_index);
    const Shape shape = ParseShape(args->shape, "--shape");
    ValidateShape(shape, "--shape");
    CheckProblemFitsHost(shape, !args->unchecked, "--shape");
    std::optional<Implementation> gpu_impl;
    if (cuda_index >= 0) {
      if (args->impl == "cuda_decode") {
        gpu_impl = CudaDecodeImplementation(variant, dtype, shape.d);
        if (!gpu_impl)
          throw UserError("--impl cuda_decode: no split-KV decode for " + variant.id + ", " + dtype +
                          ", d=" + std::to_string(shape.d) + " (dense, swa, dma_decode; d = 64, 128)");
      } else {
        if (!args->impl.empty() && args->impl != "cuda")
          throw UserError("--impl: on --device cuda:N the implementation is 'cuda' or 'cuda_decode'");
        gpu_impl = CudaImplementation(variant, dtype, shape.d);
        if (!gpu_impl)
          throw UserError("--variant " + variant.id + ": no CUDA kernel for " + dtype + ", d=" +
                          std::to_string(shape.d) + " (CUDA: dense, swa, hybrid, ks, dma, lsh, hax; d = 64, 128)");
      }
    }
    const Implementation* impl = gpu_impl ? &*gpu_impl : FindImplementationArg(variant, args->impl);
    const Params params =
        ResolveParams(variant, impl, shape, ParseParams(args->params, "--params"), "--params");
    ProblemContext problem =
        args->inputs == "gaussian"
            ? ProblemContext(shape, args->seed)
            : ProblemContext(StructuredTensors(shape, args->inputs, args->seed, "--inputs"));
    std::string timer_note;
    std::unique_ptr<Timer> timer = MakeDeviceTimer(cuda_index, &timer_note);
    EvaluateOptions options;
    options.policy.max_seconds = args->max_seconds;
    options.policy.min_reps = args->min_reps;
    options.check = !args->unchecked;
    ConfigureGpuEvaluation(cuda_index, args->flush_l2, &options);
    CheckMetricsFlag(args->metrics, cuda_index);
    const Evaluated ev = EvaluateCandidate(problem, variant, *impl, params, *timer, options);
    const TrialResult& r = ev.result;
    nlohmann::json hw;  // hardware counters, in passes of their own after the timing
#ifdef ATTNTUNE_HAVE_CUPTI
    if (args->metrics && r.status == TrialStatus::kOk) {
      StopCuptiActivity();  // the range profiler replays alone
      try {
        std::string chip;
        const std::map<std::string, double> values = ReadRooflineCounters(
            cuda_index, dtype, [&] { impl->launch(problem.Inputs(), params); }, &chip);
        hw["chip"] = chip;
        for (const auto& [name, value] : values) hw[name.substr(3)] = value;  // drop "hw_"
      } catch (const std::runtime_error& e) {
        hw["error"] = e.what();
      }
    }
#endif
    nlohmann::json j;
    j["schema"] = 1;
    j["variant"] = variant.id;
    j["implementation"] = impl->id;
    j["params"] = nlohmann::json::parse(CanonicalVariantParamsJson(variant, params));
    j["params"].update(nlohmann::json::parse(CanonicalTunablesJson(*impl, params)));
    j["shape"] = shape.ToString();
    j["device"] = cuda_index < 0 ? CpuDevice().name : CudaDevice(cuda_index).name;
    j["dtype"] = dtype;
    j["timer"] = cuda_index < 0 ? timer->Name() : timer_note;
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

struct RunArgs {
  std::string variant;
  std::string impl;
  std::string params;
  std::string in;
  std::string out;
  bool non_causal = false;
};

const StTensor& RequireTensor(const StFile& file, const std::string& name, const std::string& path,
                              size_t rank) {
  auto it = file.find(name);
  if (it == file.end()) throw UserError(path + ": missing tensor '" + name + "'");
  if (it->second.dtype != "F32")
    throw UserError(path + ": tensor '" + name + "' is " + it->second.dtype + ", expected F32");
  if (it->second.shape.size() != rank)
    throw UserError(path + ": tensor '" + name + "' has rank " +
                    std::to_string(it->second.shape.size()) + ", expected " + std::to_string(rank));
  return it->second;
}

std::string ShapeText(const std::vector<int64_t>& shape) {
  std::string text = "[";
  for (size_t n = 0; n < shape.size(); ++n) text += (n ? "," : "") + std::to_string(shape[n]);
  return text + "]";
}

// An optional tensor of DESIGN.md s1 (scores, delta, a, mu, proj, windows): absent ->
// null; present -> checked for dtype and shape (`dims` names the expected extents).
const StTensor* OptionalTensor(const StFile& file, const std::string& name,
                               const std::string& path, const std::string& dtype,
                               const std::vector<int64_t>& shape, const std::string& dims) {
  auto it = file.find(name);
  if (it == file.end()) return nullptr;
  if (it->second.dtype != dtype)
    throw UserError(path + ": tensor '" + name + "' is " + it->second.dtype + ", expected " +
                    dtype);
  if (it->second.shape != shape)
    throw UserError(path + ": tensor '" + name + "' has shape " + ShapeText(it->second.shape) +
                    ", expected " + dims + " = " + ShapeText(shape));
  return &it->second;
}

// Reads the optional tensors into `t`; they replace the seeded defaults.
void ReadOptionalTensors(const StFile& file, const std::string& path, const Params& params,
                         Tensors* t) {
  const Shape& s = t->shape;
  if (auto* x = OptionalTensor(file, "scores", path, "F32", {s.B, s.Hkv, s.Lk}, "[B,Hkv,Lk]"))
    t->scores = x->AsF32();
  if (auto* x = OptionalTensor(file, "delta", path, "F32", {s.Hkv, s.d}, "[Hkv,d]"))
    t->delta = x->AsF32();
  if (auto* x = OptionalTensor(file, "a", path, "F32", {s.Hkv}, "[Hkv]")) t->a = x->AsF32();
  if (auto* x = OptionalTensor(file, "mu", path, "F32", {s.Hkv, s.d}, "[Hkv,d]"))
    t->mu = x->AsF32();
  auto proj = file.find("proj");
  if (proj != file.end()) {
    const auto bits = params.find("bits");
    const int64_t h = bits != params.end() ? ParamInt(params, "bits")
                      : proj->second.shape.size() == 3 ? proj->second.shape[2]
                                                       : 0;
    t->proj = OptionalTensor(file, "proj", path, "F32", {s.Hkv, s.d, h}, "[Hkv,d,bits]")->AsF32();
  }
  if (auto* x = OptionalTensor(file, "windows", path, "I32", {s.Hkv}, "[Hkv]")) {
    t->windows = x->AsI32();
    for (int32_t w : t->windows) {
      if (w < 0)
        throw UserError(path + ": tensor 'windows' holds " + std::to_string(w) +
                        ", expected windows >= 0 (0 = full attention)");
    }
  }
}

void RegisterRun(CLI::App& app, int* rc) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", "Run one variant on the tensors of a safetensors file");
  cmd->add_option("--variant", args->variant, "Variant id")->required();
  cmd->add_option("--impl", args->impl, "Implementation (default: the variant's first)");
  cmd->add_option("--params", args->params, "key=value,... (e.g. w=256,sink=4)");
  cmd->add_option("--in", args->in, "safetensors file with q [B,Hq,Lq,d], k, v [B,Hkv,Lk,d]")->required();
  cmd->add_option("--out", args->out, "safetensors file to write o [B,Hq,Lq,d] to")->required();
  cmd->add_flag("--non-causal", args->non_causal, "Every query sees every key");
  cmd->callback([args, rc] {
    const Variant& variant = FindVariant(args->variant, "--variant");
    const Implementation* impl = FindImplementationArg(variant, args->impl);
    const Params given = ParseParams(args->params, "--params");
    const StFile file = ReadSafetensors(args->in);
    const StTensor& q = RequireTensor(file, "q", args->in, 4);
    const StTensor& k = RequireTensor(file, "k", args->in, 4);
    const StTensor& v = RequireTensor(file, "v", args->in, 4);
    if (k.shape != v.shape) throw UserError(args->in + ": tensors 'k' and 'v' differ in shape");
    if (q.shape[0] != k.shape[0] || q.shape[3] != k.shape[3])
      throw UserError(args->in + ": 'q' and 'k' differ in batch or head dim");
    Tensors t;
    t.shape = Shape{q.shape[0], q.shape[1], k.shape[1], q.shape[2], k.shape[2], q.shape[3],
                    !args->non_causal};
    ValidateShape(t.shape, args->in);
    const Params params = ResolveParams(variant, impl, t.shape, given, "--params");
    t.q = q.AsF32();
    t.k = k.AsF32();
    t.v = v.AsF32();
    ReadOptionalTensors(file, args->in, params, &t);
    std::vector<float> o(static_cast<size_t>(t.shape.QElems()));
    impl->run(t, params, o.data());
    WriteSafetensors(args->out, {{"o", MakeF32(q.shape, o)}});
    *rc = 0;
  });
}

std::unique_ptr<Database> OpenExisting(const std::string& path) {
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    std::fclose(f);
  } else {
    throw UserError("--db: '" + path + "' does not exist");
  }
  return Database::Open(path);
}

void RegisterEmitReportDb(CLI::App& app, int* rc) {
  auto emit_db = std::make_shared<std::string>();
  auto emit_out = std::make_shared<std::string>("attntune_out");
  auto* emit = app.add_subcommand("emit", "Write attntune_config.h, .json and report.html from a database");
  emit->add_option("--db", *emit_db, "SQLite database")->required();
  emit->add_option("--out", *emit_out, "Output folder")->capture_default_str();
  emit->callback([emit_db, emit_out, rc] {
    auto db = OpenExisting(*emit_db);
    const OutputPaths p = EmitOutputs(*db, *emit_out);
    std::printf("  header: %s\n  json:   %s\n  report: %s\n", p.header.c_str(), p.json.c_str(),
                p.report.c_str());
    *rc = 0;
  });

  auto report_db = std::make_shared<std::string>();
  auto report_out = std::make_shared<std::string>("report.html");
  auto* report = app.add_subcommand("report", "Write the HTML report of a database");
  report->add_option("--db", *report_db, "SQLite database")->required();
  report->add_option("--out", *report_out, "HTML file")->capture_default_str();
  report->callback([report_db, report_out, rc] {
    auto db = OpenExisting(*report_db);
    WriteFileAtomic(*report_out, RenderHtmlReport(LoadReportInput(*db)));
    std::printf("  report: %s\n", report_out->c_str());
    *rc = 0;
  });

  auto* dbcmd = app.add_subcommand("db", "Inspect a database");
  dbcmd->require_subcommand(1);
  auto info_db = std::make_shared<std::string>();
  auto* info = dbcmd->add_subcommand("info", "Counts of what a database holds");
  info->add_option("--db", *info_db, "SQLite database")->required();
  info->callback([info_db, rc] {
    auto db = OpenExisting(*info_db);
    const DbInfo i = db->Info();
    std::printf("database: %s\nschema version: %d\n", i.path.c_str(), i.schema_version);
    std::printf("devices %lld, problems %lld, configs %lld, builds %lld, runs %lld\n",
                static_cast<long long>(i.devices), static_cast<long long>(i.problems),
                static_cast<long long>(i.configs), static_cast<long long>(i.builds),
                static_cast<long long>(i.runs));
    std::printf("trials %lld (samples %lld, metrics %lld)\n", static_cast<long long>(i.trials),
                static_cast<long long>(i.samples), static_cast<long long>(i.metrics));
    for (const auto& [status, n] : i.trials_by_status)
      std::printf("  %-15s %lld\n", status.c_str(), static_cast<long long>(n));
    *rc = 0;
  });
}

}  // namespace

void RegisterCommands(CLI::App& app, int* rc) {
  RegisterDevices(app, rc);
  RegisterTune(app, rc);
  RegisterBench(app, rc);
  RegisterRun(app, rc);
  RegisterEmitReportDb(app, rc);
  RegisterReplay(app, rc);
  RegisterAllocate(app, rc);
}

}  // namespace attntune
