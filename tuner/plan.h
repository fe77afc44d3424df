// The first stage of a tune: the user's options checked and turned into a plan (the
// model's geometry, the variants and the implementations the backend runs for them, the
// database), before any work starts.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "backends/backend.h"
#include "db/database.h"
#include "search/strategy.h"
#include "tuner/calibration_set.h"
#include "tuner/evaluate.h"
#include "tuner/model.h"
#include "tuner/quality.h"

namespace attntune {

struct TuneOptions {
  std::string model = "qwen3-1.7b";
  std::vector<std::string> variants = {"dense", "swa"};
  /// `--params`: the values searched of a variant parameter instead of the table's grid
  /// (name -> values, canonical; every variant that declares the name searches them), so
  /// that a model's own window or budget is tuned at that value. Empty: the grids.
  std::map<std::string, std::vector<std::string>> variant_grid;
  /// Empty with `calib`: the calibration set's length.
  std::vector<int64_t> seq_lens = {512, 1024, 2048};
  // "prefill": the problem of each length L is every query row, Lq = Lk = L. "decode": one
  // query row per head against L keys, Lq = 1, Lk = L (a token_by_token variant such as
  // dma_decode runs all L steps, Lq = Lk = L). Stored as the problems' phase.
  Phase phase = Phase::kPrefill;
  int64_t batch = 1;
  int64_t budget = 6;  // evaluations per (variant, sequence length); 0: no limit (needs a
                       // time budget)
  /// > 0: wall-time budget, in seconds, of the run's searches. Each (variant, sequence
  /// length) gets an equal share of the time left when its search starts (what a fast
  /// problem leaves goes to the later ones), and at least one evaluation; the counter
  /// passes and the outputs come after and are not counted. With `budget` > 0 too, each
  /// search stops at whichever limit comes first.
  double time_budget_s = 0;
  SecondsClock clock;  // the time budget's clock; empty: SteadySeconds
  std::string strategy = "auto";
  // Ask first the best stored configurations of the same variant on the same device
  // (fingerprint) at the nearest other sequence length of the same shape otherwise.
  bool warm_start = true;
  /// Also search the generic block-sparse executor where the backend offers it, as an
  /// implementation of every variant (DESIGN.md s2: the implementation is a search
  /// dimension); false: each variant's specialised kernels only, so that a small budget
  /// is not spent on the baseline.
  bool generic = true;
  uint64_t seed = 1;
  std::string out_dir = "attntune_out";
  std::string db_path;  // empty: <out_dir>/attntune.db
  EvaluateOptions evaluate;
  std::string args_json;  // the command line, stored with the run
  Dtype dtype = Dtype::kF32;  // the problems' dtype: one the backend takes
  /// Cold L2 before every repetition (a backend that cannot flush refuses it).
  bool flush_l2 = false;
  /// Captured attention of the model (`--calib FILE[,FILE...]`): each candidate's quality
  /// is measured on it (CalibrationQuality), cropped to the problem's length; its trials
  /// are kept apart from those measured on Gaussian inputs. Empty: the Gaussian inputs.
  std::vector<std::string> calib;
  /// `--min-quality`: the search optimises time among candidates whose worst (layer,
  /// head) meets the floor; an infeasible candidate is stored with its numbers, and told
  /// to the strategy as no answer. Empty: no floor.
  QualityFloor floor;
  /// After every candidate was timed, read the hardware counters of each ok trial of the
  /// run that has none stored yet, in passes of their own (counters never mix with timed
  /// runs, DESIGN.md s6), from the backend's counter source.
  bool metrics = false;
  /// After the searches, re-time each problem's fastest configuration against the untuned
  /// default, back to back (tuner/confirm.h), so that no entry loses to the default.
  bool retime = true;
};

/// A validated tuning session: everything a user could have got wrong is checked
/// (model, variants, lengths, budget, strategy, output folder, database, what the
/// backend runs) before any work starts.
struct TunePlan {
  TuneOptions options;
  Backend* backend = nullptr;  // not owned
  ModelGeometry model;
  std::vector<const Variant*> variants;
  /// Per variant (same order): the implementations the backend runs for the options'
  /// phase, dtype and the model's head dimension, all searched (DESIGN.md s2).
  std::vector<std::vector<const Implementation*>> impls;
  std::unique_ptr<CounterSource> counters;  // options.metrics only
  std::string db_path;
  std::unique_ptr<Database> db;
  /// options.calib read and checked against the model; its row in the database (0: none)
  /// and the quality source options.evaluate.quality points at.
  std::unique_ptr<CalibrationSet> calibration;
  int64_t calib_id = 0;
  std::unique_ptr<CalibrationQuality> quality;

  /// The problem kind of every problem of the plan.
  ProblemKind Kind() const;
};

/// Validates the options against `backend` (UserError on bad input), opens the database.
/// `open_store` false (an MPI rank other than rank 0, which only evaluates): neither the
/// output folder nor the database is touched, and `db` stays empty.
TunePlan PlanTune(const TuneOptions& options, Backend& backend, bool open_store = true);

/// The problem of `variant` on `model` at length L in the options' phase (causal): every
/// query row in prefill and for a token-by-token variant, else one decode step (Lq = 1).
Shape TuneShape(const TuneOptions& options, const ModelGeometry& model, const Variant& variant,
                int64_t L);

}  // namespace attntune
