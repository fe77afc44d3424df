// One candidate on one problem: check its output against the fp64 reference, then
// measure it. Shared by `tune` and `bench`.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "db/records.h"
#include "kernels/reference/reference.h"
#include "kernels/variant.h"
#include "profiler/launches.h"
#include "profiler/measure.h"

namespace attntune {

/// The inputs of one problem and the truths derived from them, each built on first use
/// and kept: a re-run that reuses every trial never generates inputs or references. The
/// inputs are those of the problem's dtype (RoundInputs): the kernels read them, the fp64
/// references are of them, and the device selection reads the kernels' own copies.
class ProblemContext {
 public:
  ProblemContext(const Shape& shape, uint64_t seed, Dtype dtype);
  /// Wraps given tensors (attntune run / captured inputs).
  ProblemContext(Tensors tensors, Dtype dtype);

  const Shape& GetShape() const { return shape_; }
  const Tensors& Inputs();

  struct Truth {
    std::vector<double> reference;  // fp64 output of the variant's definition
    double mass_recall = 1.0;       // against dense
    std::vector<double> head_mass_recall;  // per query head [Hq]; mass_recall is their mean
    double ref_rel_err = 0.0;       // the definition's own output against dense
    int64_t pairs = 0;              // attended (i, j) pairs
    std::vector<double> row_lse;    // dense only: each row's log softmax denominator
  };
  /// The truth of (variant, its own params); tunables in `params` are ignored.
  const Truth& TruthOf(const Variant& variant, const Params& params);
  const Truth& Dense();

 private:
  Shape shape_;
  uint64_t seed_ = 0;
  Dtype dtype_ = Dtype::kF32;
  std::unique_ptr<Tensors> tensors_;
  std::map<std::string, Truth> truths_;  // key: "variant|params"
};

class QualitySource;

/// The variant's own params out of a complete params map (tunables dropped).
Params VariantParams(const Variant& variant, const Params& params);

struct EvaluateOptions {
  MeasurePolicy policy;
  double tolerance = 1e-5;  // max relative error against the fp64 reference
  /// false (bench --unchecked only, never tune): no fp64 reference and no quality
  /// metrics, only a finite-output check, so that long lengths can be timed; the result
  /// carries metric checked = 0.
  bool check = true;
  /// Bytes per element of Q, K, V and O as the implementation reads them (io_bytes):
  /// 4 for the fp32 CPU kernels, 2 for fp16/bf16 on CUDA.
  double element_bytes = 4.0;
  /// Where quality is measured (tuner/quality.h; not owned): null, the problem's own
  /// inputs (GaussianQuality); else a calibration set's.
  QualitySource* quality = nullptr;
  /// Optional: adds device readings taken right after the measurement (the GPU path
  /// records its SM and memory clocks and temperature here).
  std::function<void(std::map<std::string, double>* metrics)> after_measure;
  /// Optional: the backend's recorder of what the checked run launches (Evaluated::kernels).
  std::function<std::unique_ptr<LaunchRecorder>()> record_launches;
};

struct Evaluated {
  TrialResult result;
  std::vector<KernelEvent> kernels;  // what the checked run launched (record_launches)
};

/// Runs the candidate once on a poisoned output and checks it against the reference
/// (wrong_result on mismatch, launch_failed if it throws), measures its quality on
/// options.quality, then times it. Metrics: check_err, rel_err and mass_recall (vs dense:
/// the mean) with rel_err_worst and mass_recall_worst (the worst layer and head), pairs,
/// pair_ratio, useful_flops, gflops, io_bytes; a calibration set's quality per (layer,
/// head) in quality_cells.
Evaluated EvaluateCandidate(ProblemContext& problem, const Variant& variant,
                            const Implementation& impl, const Params& params, Timer& timer,
                            const EvaluateOptions& options);

/// Host memory one problem needs at least: the fp32 inputs and output (q, k, v, o) and,
/// when candidates are checked, dense's fp64 reference with its rows' log-sum-exp and one
/// variant's reference beside it (a tune of several variant parameter sets at a length
/// keeps one more reference per set).
double ProblemHostBytes(const Shape& shape, bool checked);
/// Throws UserError ("<what>: <shape> needs ... more than this machine's ... of memory")
/// when ProblemHostBytes exceeds this machine's physical memory, so that a mistyped
/// length fails in one line before anything is allocated or stored.
void CheckProblemFitsHost(const Shape& shape, bool checked, const std::string& what);

/// Current UTC time, ISO-8601 with seconds ("2026-11-22T07:44:52Z").
std::string UtcNow();

}  // namespace attntune
