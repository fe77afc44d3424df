// Allocation measures on the tuner's stages: its costs and tiles are trials in the
// database, reused by a re-run; a wrong output is stored as wrong_result and never chosen;
// its attntune_config.json is tune's schema with the allocation in "allocations".
#include "tuner/allocation/measure.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

#include <catch2/catch.hpp>

#include "db/database.h"
#include "kernels/variant.h"
#include "tuner/allocation/allocate.h"
#include "tuner/allocation/emit.h"

namespace attntune {

namespace {

// A small allocation of the tiny fixture (2 layers x 2 KV heads) that measures quickly.
AllocateOptions TinyOptions() {
  AllocateOptions o;
  o.model = std::string(ATTNTUNE_FIXTURES_DIR) + "/models/tiny/config.json";
  o.granularity = Granularity::kHead;
  o.context = 256;
  o.window = 32;
  o.calib_len = 64;
  o.rho = 0.5;
  o.cost.policy = {1, 3, 5, 0.2, 0.05};
  o.tune_budget = 0;
  return o;
}

std::vector<TrialRow> AllTrials(const Database& db) { return db.Trials(TrialFilter{}); }

}  // namespace

TEST_CASE(
    "allocation: cost measurements are checked trials in the database; a re-run reuses them") {
  auto db = Database::Open(":memory:");
  const DeviceInfo device = CpuDevice();
  CpuTimer timer;
  const AllocateOptions o = TinyOptions();
  const AllocateResult first = RunAllocate(o, *db, device, timer);
  // Head-wise over 2 KV heads: layers with 0, 1 and 2 SWA heads, each timed at the prefill
  // and at one decode step.
  CHECK(first.trials.measured == 6);
  CHECK(first.trials.reused == 0);
  CHECK(first.trials.failed == 0);
  const std::vector<TrialRow> trials = AllTrials(*db);
  REQUIRE(trials.size() == 6);
  int prefill = 0;
  for (const TrialRow& t : trials) {
    CHECK(t.config.variant == "hybrid");
    CHECK(t.config.implementation == "tiled");
    CHECK(t.result.status == TrialStatus::kOk);
    CHECK(t.result.metrics.count("check_err") == 1);  // gated against the fp64 reference
    prefill += t.problem.phase == Phase::kPrefill;
  }
  CHECK(prefill == 3);

  const AllocateResult again = RunAllocate(o, *db, device, timer);
  CHECK(again.trials.measured == 0);
  CHECK(again.trials.reused == 6);
  CHECK(AllTrials(*db).size() == 6);
  CHECK(again.cost.prefill_ms == first.cost.prefill_ms);  // the stored medians
  CHECK(again.cost.decode_ms == first.cost.decode_ms);
  CHECK(db->Runs().size() == 2);

  AllocateOptions none = o;
  none.measure = false;  // --no-measure: nothing stored, no run
  CHECK(RunAllocate(none, *db, device, timer).trials.evaluations == 0);
  CHECK(db->Runs().size() == 2);
}

TEST_CASE("allocation: the tile search stores its points and reuses them") {
  auto db = Database::Open(":memory:");
  const DeviceInfo device = CpuDevice();
  CpuTimer timer;
  AllocateOptions o = TinyOptions();
  o.tune_budget = 3;
  const AllocateResult r = RunAllocate(o, *db, device, timer);
  REQUIRE(r.tuned.tuned);
  CHECK(r.tuned.evaluations == 3);
  // Six cost trials and three searched points, one of which may be the defaults' trial.
  CHECK(r.trials.evaluations == 6 + 3);
  CHECK(static_cast<int64_t>(AllTrials(*db).size()) == r.trials.measured);
  CHECK(r.trials.measured + r.trials.reused == 9);
  const AllocateResult again = RunAllocate(o, *db, device, timer);
  CHECK(again.trials.measured == 0);
  CHECK(again.tuned.br == r.tuned.br);
  CHECK(again.tuned.bc == r.tuned.bc);
}

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
  ProblemContext problem(Shape{1, 4, 2, 64, 64, 16, true}, 3, Dtype::kF32);
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

TEST_CASE("allocation outputs: attntune_config.json is tune's schema with \"allocations\"") {
  const std::string dir = (std::filesystem::temp_directory_path() /
                           ("attntune_allocation_emit_test." + std::to_string(::getpid())))
                              .string();
  std::filesystem::remove_all(dir);
  auto db = Database::Open(":memory:");
  const DeviceInfo device = CpuDevice();
  CpuTimer timer;
  const AllocateOptions o = TinyOptions();
  const AllocateResult r = RunAllocate(o, *db, device, timer);
  const AllocationOutputs out =
      EmitAllocation(*db, MakeAllocationRecord(r, o, device.name), r.chosen, dir);
  std::ifstream in(out.json);
  std::stringstream text;
  text << in.rdbuf();
  const nlohmann::json doc = nlohmann::json::parse(text.str());
  CHECK(doc.at("schema") == 1);
  CHECK(doc.at("trials") == 6);
  REQUIRE(doc.at("devices").size() == 1);
  CHECK(doc.at("devices")[0].at("name") == device.name);
  // The measured layers are entries as tune's are: hybrid at L = 256, prefill and decode.
  REQUIRE(!doc.at("entries").empty());
  for (const auto& e : doc.at("entries")) {
    CHECK(e.at("variant") == "hybrid");
    CHECK(e.at("seq_len") == 256);
  }
  REQUIRE(doc.at("allocations").size() == 1);
  const auto& a = doc.at("allocations")[0];
  CHECK(a.at("transformers").at("sliding_window") == 32);
  CHECK(a.at("transformers").at("layer_types") ==
        nlohmann::json::array({"full_attention", "full_attention"}));
  for (const auto& layer : a.at("kv_head_windows"))  // one of two KV heads slides per layer
    CHECK((layer == nlohmann::json::array({0, 32}) || layer == nlohmann::json::array({32, 0})));
  CHECK(a.at("rho") == 0.5);
  for (const std::string& path : {out.header, out.tsv, out.mask, out.report})
    CHECK(std::filesystem::exists(path));
  std::filesystem::remove_all(dir);
}

}  // namespace attntune
