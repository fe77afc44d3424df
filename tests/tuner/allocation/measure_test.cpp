// Allocation measures on the tuner's stages: a wrong output is stored as wrong_result and
// never chosen.
#include "tuner/allocation/measure.h"

#include <string>

#include <catch2/catch.hpp>

#include "db/database.h"
#include "kernels/variant.h"

namespace attntune {

namespace {

std::vector<TrialRow> AllTrials(const Database& db) { return db.Trials(TrialFilter{}); }

}  // namespace

TEST_CASE("MeasureProblem: a wrong output is stored as wrong_result and not chosen") {
  auto db = Database::Open(":memory:");
  CpuTimer timer;
  EvaluateOptions evaluate;
  evaluate.policy = {1, 3, 5, 0.2, 0.05};
  MeasureRun run = BeginMeasureRun(*db, CpuDevice(), timer, evaluate, "{}");
  Variant pinned =
      PinParams(FindVariant("hybrid", "test"),
                {{"w", "16"}, {"full", "1"}, {"sink", "0"}, {"Br", "16"}, {"Bc", "32"}});
  const Implementation* tiled = pinned.FindImplementation("tiled");
  REQUIRE(tiled != nullptr);
  Implementation garbage = *tiled;  // the same tunables; the fastest by far, and wrong
  garbage.id = "garbage";
  garbage.run = [](const Tensors& t, const Params&, float* out) {
    for (int64_t n = 0; n < t.shape.QElems(); ++n) out[n] = 1.0f;
  };
  ProblemContext problem(Shape{1, 4, 2, 64, 64, 16, true}, 3);
  const ProblemSearch all{"exhaustive", 10, 1};
  const ProblemMeasurement m =
      MeasureProblem(run, problem, Phase::kPrefill, pinned, {&garbage, tiled}, all);
  CHECK(m.evaluations == 2);  // every parameter pinned: one point per implementation
  CHECK(m.failed == 1);
  REQUIRE(m.found);
  CHECK(m.impl == tiled);
  CHECK(m.params.at("Br") == "16");
  const std::vector<TrialRow> trials = AllTrials(*db);
  REQUIRE(trials.size() == 2);
  for (const TrialRow& t : trials) {
    INFO(t.config.implementation);
    if (t.config.implementation == "garbage") {
      CHECK(t.result.status == TrialStatus::kWrongResult);
      CHECK(t.sample_count == 0);  // never timed
    } else {
      CHECK(t.result.status == TrialStatus::kOk);
    }
  }
  // Deterministic outcomes are reused, the wrong one included.
  const ProblemMeasurement again =
      MeasureProblem(run, problem, Phase::kPrefill, pinned, {&garbage, tiled}, all);
  CHECK(again.measured == 0);
  CHECK(again.reused == 2);
  CHECK(again.impl == tiled);
}

TEST_CASE("PinParams: a pinned parameter or tunable has one value; the others keep their grid") {
  const Variant& hybrid = FindVariant("hybrid", "test");
  const Variant pinned = PinParams(hybrid, {{"w", "48"}, {"Bc", "128"}});
  for (const ParamDecl& d : pinned.params) {
    if (d.name == "w") {
      CHECK(d.grid == std::vector<std::string>{"48"});
      CHECK(d.default_value == "48");
    } else {
      CHECK(d.grid.size() > 1);
    }
  }
  const Implementation* tiled = pinned.FindImplementation("tiled");
  REQUIRE(tiled != nullptr);
  for (const ParamDecl& d : tiled->tunables)
    CHECK((d.name == "Bc") == (d.grid == std::vector<std::string>{"128"}));
}

}  // namespace attntune
