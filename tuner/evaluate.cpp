#include "tuner/evaluate.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <exception>
#include <limits>

#include "core/check.h"
#include "core/error.h"
#include "profiler/device.h"
#include "profiler/nvtx.h"
#include "tuner/quality.h"

namespace attntune {

ProblemContext::ProblemContext(const Shape& shape, uint64_t seed, Dtype dtype)
    : shape_(shape), seed_(seed), dtype_(dtype) {}

ProblemContext::ProblemContext(Tensors tensors, Dtype dtype)
    : shape_(tensors.shape),
      dtype_(dtype),
      tensors_(std::make_unique<Tensors>(std::move(tensors))) {
  RoundInputs(tensors_.get(), dtype_);
}

const Tensors& ProblemContext::Inputs() {
  if (!tensors_) {
    tensors_ = std::make_unique<Tensors>(GaussianTensors(shape_, seed_));
    RoundInputs(tensors_.get(), dtype_);
  }
  return *tensors_;
}

Params VariantParams(const Variant& variant, const Params& params) {
  Params own;
  for (const auto& decl : variant.params) {
    auto it = params.find(decl.name);
    if (it != params.end()) own[decl.name] = it->second;
  }
  return own;
}

const ProblemContext::Truth& ProblemContext::Dense() {
  return TruthOf(FindVariant("dense", "internal"), {});
}

const ProblemContext::Truth& ProblemContext::TruthOf(const Variant& variant, const Params& params) {
  const Params own = VariantParams(variant, params);
  const std::string key = variant.id + "|" + ParamsToString(own);
  auto it = truths_.find(key);
  if (it != truths_.end()) return it->second;

  NvtxRange range("reference " + key);
  const Tensors& in = Inputs();
  Truth truth;
  auto sets = variant.key_sets(in, own);
  const bool dense = variant.id == "dense";
  truth.reference = ReferenceAttention(in, *sets, dense ? &truth.row_lse : nullptr);
  truth.pairs = AttendedPairs(variant, in, own);
  if (dense) {
    // By definition dense keeps all of its own mass.
    truth.mass_recall = 1.0;
    truth.head_mass_recall.assign(static_cast<size_t>(shape_.Hq), 1.0);
    truth.ref_rel_err = 0.0;
  } else {
    const Truth& dense_truth = Dense();
    // From the dense rows' log-sum-exp: a cost in this variant's pairs, not dense's.
    truth.head_mass_recall = MassRecallByHead(in, *sets, dense_truth.row_lse);
    double sum = 0.0;  // every head has B * Lq rows: the mean of the heads is the rows'
    for (double x : truth.head_mass_recall) sum += x;
    truth.mass_recall = sum / static_cast<double>(truth.head_mass_recall.size());
    truth.ref_rel_err = RelErr(truth.reference, dense_truth.reference);
  }
  return truths_.emplace(key, std::move(truth)).first->second;
}

double ProblemHostBytes(const Shape& shape, bool checked) {
  // In doubles: a mistyped length must not overflow the estimate.
  const double q = static_cast<double>(shape.B) * shape.Hq * shape.Lq * shape.d;
  const double kv = static_cast<double>(shape.B) * shape.Hkv * shape.Lk * shape.d;
  // Checked: dense's fp64 reference and its rows' log-sum-exp, and the variant's own
  // reference beside it (a sparse bench measured 1.51x the estimate of one reference).
  const double rows = static_cast<double>(shape.B) * shape.Hq * shape.Lq;
  return 4.0 * (2.0 * q + 2.0 * kv) + (checked ? 16.0 * q + 8.0 * rows : 0.0);
}

void CheckProblemFitsHost(const Shape& shape, bool checked, const std::string& what) {
  const double need = ProblemHostBytes(shape, checked), have = HostMemoryBytes();
  if (have <= 0.0 || need <= have) return;
  char text[160];
  std::snprintf(text, sizeof text, "needs %.1f GiB for its inputs and output%s, more than "
                "this machine's %.1f GiB of memory", need / 1073741824.0,
                checked ? " and two fp64 references" : "", have / 1073741824.0);
  throw UserError(what + ": " + shape.ToString() + " " + text);
}

std::string UtcNow() {
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

namespace {

/// Ends `ev` as a failed trial of `status` with `message`.
Evaluated& Fail(Evaluated& ev, TrialStatus status, std::string message) {
  ev.result.status = status;
  ev.result.message = std::move(message);
  ev.result.finished_at = UtcNow();
  return ev;
}

/// The correctness gate: one run on a NaN-poisoned output. Returns "" and leaves the
/// output in `out` when the candidate ran, else the exception's text.
std::string GateRun(const Variant& variant, const Implementation& impl, const Tensors& in,
                    const Params& params, const EvaluateOptions& options,
                    std::vector<float>* out, Evaluated* ev) {
  std::fill(out->begin(), out->end(), std::numeric_limits<float>::quiet_NaN());
  try {
    NvtxRange range("check " + variant.id + "/" + impl.id);
    std::unique_ptr<LaunchRecorder> recorder;
    if (options.record_launches) recorder = options.record_launches();
    impl.run(in, params, out->data());
    if (recorder) ev->kernels = recorder->Events();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

/// Why `out` is not an acceptable output ("" when it is): beyond the tolerance against
/// the fp64 reference, or (unchecked) not finite. Records check_err / checked = 0.
std::string JudgeOutput(const std::vector<float>& out, const ProblemContext::Truth* truth,
                        double tolerance, std::map<std::string, double>* metrics) {
  if (!truth) {
    (*metrics)["checked"] = 0;
    for (float x : out) {
      if (!std::isfinite(x)) {
        return "output has a non-finite value (unchecked run: no reference computed)";
      }
    }
    return "";
  }
  const double check_err = RelErr(out.data(), truth->reference);
  (*metrics)["check_err"] = check_err;
  if (check_err <= tolerance) return "";
  char msg[128];
  std::snprintf(msg, sizeof msg, "relative error %.3g against the fp64 reference exceeds %.3g",
                check_err, tolerance);
  return msg;
}

/// The quality step: the candidate's quality on `source` (null: the problem's own inputs),
/// from its checked output before timing reuses `out`.
void MeasureQuality(QualitySource* source, const Variant& variant, const Params& params,
                    ProblemContext& problem, const std::vector<float>& out, TrialResult* r) {
  GaussianQuality gaussian;
  QualitySource& from = source ? *source : gaussian;
  QualityReport report = from.Measure(variant, params, problem, out);
  report.Record(&r->metrics);
  r->quality_cells = std::move(report.cells);
}

/// Times the candidate: its launch alone when it has one, else the whole run.
Stats MeasureCandidate(const Variant& variant, const Implementation& impl, const Tensors& in,
                       const Params& params, std::vector<float>* out, Timer& timer,
                       const MeasurePolicy& policy) {
  NvtxRange range("measure " + variant.id + "/" + impl.id);
  if (impl.launch) return Measure(timer, [&] { impl.launch(in, params); }, policy);
  return Measure(timer, [&] { impl.run(in, params, out->data()); }, policy);
}

/// The time and size metrics of an ok trial.
void RecordOk(const Stats& stats, const Shape& shape, const ProblemContext::Truth& truth,
              const ProblemContext::Truth& dense, double element_bytes, TrialResult* r) {
  r->status = TrialStatus::kOk;
  r->median_ms = stats.median_ms;
  r->p10_ms = stats.p10_ms;
  r->p90_ms = stats.p90_ms;
  r->cv = stats.cv;
  r->samples_ms = stats.samples_ms;
  auto& m = r->metrics;
  const double flops = UsefulFlops(shape, truth.pairs);
  m["pairs"] = static_cast<double>(truth.pairs);
  m["pair_ratio"] =
      dense.pairs > 0 ? static_cast<double>(truth.pairs) / static_cast<double>(dense.pairs) : 0.0;
  m["useful_flops"] = flops;
  m["gflops"] = stats.median_ms > 0 ? flops / (stats.median_ms * 1e6) : 0.0;
  // The kernels' span beside their summed time (a CUPTI timer's): what the gaps between
  // launches add for a caller that launches this way.
  if (stats.span_median_ms) m["span_ms"] = *stats.span_median_ms;
  // The selection's part of each timed repetition (a device timer's, from its kernels'
  // names): bench's select_ms, where the checked run's would be a cold run's.
  if (stats.select_median_ms) m["select_ms"] = *stats.select_median_ms;
  m["io_bytes"] = element_bytes * static_cast<double>(2 * shape.QElems() + 2 * shape.KvElems());
}

}  // namespace

Evaluated EvaluateCandidate(ProblemContext& problem, const Variant& variant,
                            const Implementation& impl, const Params& params, Timer& timer,
                            const EvaluateOptions& options) {
  Evaluated ev;
  TrialResult& r = ev.result;
  r.started_at = UtcNow();
  const Shape& shape = problem.GetShape();
  if (std::string why = CheckParams(variant, impl, shape, params); !why.empty()) {
    return Fail(ev, TrialStatus::kInvalid, why);
  }

  const Tensors& in = problem.Inputs();
  ProblemContext::Truth unchecked;  // pair counts only, when options.check is off
  ProblemContext::Truth unchecked_dense;
  if (!options.check) {
    unchecked.pairs = AttendedPairs(variant, in, VariantParams(variant, params));
    unchecked_dense.pairs = AttendedPairs(FindVariant("dense", "internal"), in, {});
  }
  const ProblemContext::Truth& truth = options.check ? problem.TruthOf(variant, params) : unchecked;
  const ProblemContext::Truth& dense = options.check ? problem.Dense() : unchecked_dense;

  std::vector<float> out(static_cast<size_t>(shape.QElems()));
  if (std::string why = GateRun(variant, impl, in, params, options, &out, &ev); !why.empty()) {
    return Fail(ev, TrialStatus::kLaunchFailed, why);
  }
  const double tolerance =
      impl.tolerance ? std::max(options.tolerance, impl.tolerance(params)) : options.tolerance;
  if (std::string why = JudgeOutput(out, options.check ? &truth : nullptr, tolerance, &r.metrics);
      !why.empty()) {
    return Fail(ev, TrialStatus::kWrongResult, why);
  }
  if (options.check) MeasureQuality(options.quality, variant, params, problem, out, &r);
  // A failure while timing (a launch that fails on a later repetition, the CUPTI timer's
  // lost or untimed records) fails this candidate, which is stored like any other: thrown
  // on, it ended the tune, and a re-run met the same candidate again.
  Stats stats;
  try {
    stats = MeasureCandidate(variant, impl, in, params, &out, timer, options.policy);
    if (options.after_measure) options.after_measure(&r.metrics);
  } catch (const std::exception& e) {
    return Fail(ev, TrialStatus::kLaunchFailed, std::string("timed repetitions: ") + e.what());
  }
  RecordOk(stats, shape, truth, dense, options.element_bytes, &r);
  r.finished_at = UtcNow();
  return ev;
}

}  // namespace attntune
