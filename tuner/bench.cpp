#include "tuner/bench.h"

#include <algorithm>
#include <memory>
#include <stdexcept>

#include "core/error.h"
#include "core/generators.h"
#include "core/shape.h"
#include "tuner/calibration_set.h"
#include "tuner/evaluate.h"
#include "tuner/quality.h"

namespace attntune {
namespace {

EvaluateOptions MeasureOptions(const BenchRequest& r, Dtype dtype, const Backend& backend) {
  EvaluateOptions options;
  options.policy.max_seconds = r.max_seconds;
  options.policy.min_reps = r.min_reps;
  // A floor above the default ceiling raises the ceiling: the repetitions asked for run.
  options.policy.max_reps = std::max(options.policy.max_reps, r.min_reps);
  options.check = r.check;
  options.element_bytes = ElementBytes(dtype);
  const MeasureHooks hooks = backend.Hooks(r.flush_l2);
  options.policy.before_each = hooks.before_each;
  options.after_measure = hooks.after_measure;
  options.record_launches = hooks.record_launches;
  return options;
}

// The calibration set of `r` read against the shape's geometry (any number of layers),
// or null without --calib.
std::unique_ptr<CalibrationSet> BenchCalibration(const BenchRequest& r, const Shape& shape) {
  if (r.calib.empty()) return nullptr;
  if (!shape.causal)  // the quality would be the causal capture's, beside a non-causal time
    throw UserError("--calib: a capture is causal attention; --shape causal=0 cannot be "
                    "measured on it (drop causal=0, or --calib)");
  ModelGeometry geometry;
  geometry.name = "given by --shape";
  geometry.layers = 0;  // a bench is one layer's problem: any captured layer serves
  geometry.q_heads = shape.Hq;
  geometry.kv_heads = shape.Hkv;
  geometry.head_dim = shape.d;
  auto set = std::make_unique<CalibrationSet>(ReadCalibrationSet(r.calib, geometry, "--calib"));
  if (shape.Lk > set->tokens)
    throw UserError("--shape: Lk=" + std::to_string(shape.Lk) + " is longer than the calibration "
                    "set's " + std::to_string(set->tokens) + " tokens (quality is measured on the "
                    "first Lk captured tokens)");
  return set;
}

}  // namespace

ProblemContext BenchProblem(const BenchRequest& request, const Shape& shape, Dtype dtype) {
  if (request.inputs == "gaussian") return ProblemContext(shape, request.seed, dtype);
  return ProblemContext(StructuredTensors(shape, request.inputs, request.seed, "--inputs"), dtype);
}

BenchRecord Bench(const BenchRequest& request, Backend& backend) {
  const Variant& variant = FindVariant(request.variant, "--variant");
  const Dtype dtype = ResolveDtype(backend, request.dtype, "--dtype");
  const Shape shape = ParseShape(request.shape, "--shape");
  ValidateShape(shape, "--shape");
  CheckProblemFitsHost(shape, request.check, "--shape");
  // Without --impl, the implementation a tune of the shape's phase starts from: one query
  // row against the keys is decode (on CUDA the prefill kernel came first).
  const Phase phase = shape.Lq == 1 && shape.Lk > 1 ? Phase::kDecode : Phase::kPrefill;
  const Implementation& impl =
      ImplementationNamed(backend, variant, dtype, shape.d, request.impl, phase);
  const Params params =
      ResolveParams(variant, &impl, shape, ParseParams(request.params, "--params"), "--params");
  ProblemContext problem = BenchProblem(request, shape, dtype);
  BenchRecord rec;
  const std::unique_ptr<CalibrationSet> calibration = BenchCalibration(request, shape);
  std::unique_ptr<CalibrationQuality> quality;
  std::unique_ptr<Timer> timer = backend.MakeTimer(&rec.timer);
  EvaluateOptions options = MeasureOptions(request, dtype, backend);
  if (calibration) {
    quality = std::make_unique<CalibrationQuality>(*calibration);
    options.quality = quality.get();
  }
  std::unique_ptr<CounterSource> counters;
  if (request.metrics) {
    std::string why;
    counters = backend.MakeCounters(dtype, &why);
    if (!counters) throw UserError("--metrics: " + why);
  }
  const Evaluated ev = EvaluateCandidate(problem, variant, impl, params, *timer, options);
  const TrialResult& r = ev.result;
  if (counters && r.status == TrialStatus::kOk) {  // in passes of their own, after the timing
    BenchHardware hw;
    try {
      hw.counters = counters->Read([&] { impl.launch(problem.Inputs(), params); }, &hw.chip);
    } catch (const std::runtime_error& e) {
      hw.error = e.what();
    }
    rec.hardware = hw;
  }
  rec.variant = variant.id;
  rec.implementation = impl.id;
  rec.params_json = CanonicalVariantParamsJson(variant, params);
  rec.tunables_json = CanonicalTunablesJson(impl, params);
  rec.shape = shape;
  rec.device = backend.Device().name;
  rec.dtype = dtype;
  rec.inputs = request.inputs;
  if (calibration) rec.calibration = calibration->Describe();
  rec.status = r.status;
  rec.message = r.message;
  rec.metrics = r.metrics;
  rec.median_ms = r.median_ms;
  rec.p10_ms = r.p10_ms;
  rec.p90_ms = r.p90_ms;
  rec.cv = r.cv;
  rec.samples = static_cast<int64_t>(r.samples_ms.size());
  for (const KernelEvent& k : ev.kernels) rec.kernels.push_back({k.name, k.kind, k.ms});
  // Whole process (binary, Kokkos, inputs, reference when checked, kernel buffers).
  rec.peak_rss_bytes = PeakRssBytes();
  return rec;
}

}  // namespace attntune
