#include "tests/reports/fixture_rows.h"

#include <nlohmann/json.hpp>

namespace attntune {
namespace test {

namespace {
DeviceRecord TestDevice() {
  DeviceRecord d;
  d.id = 1;
  d.kind = "cpu";
  d.name = "Test CPU";
  d.fingerprint_json =
      R"({"backend":"OpenMP","cores":8,"isa":["avx2","fma"],"kokkos":"4.0.0","model":"Test CPU"})";
  return d;
}
}  // namespace

TrialRow MakeTrial(int64_t id, const std::string& variant, const std::string& params_json,
                   int64_t d, int64_t L, double median_ms, double mass_recall, TrialStatus status,
                   const std::string& message) {
  TrialRow t;
  t.id = id;
  t.run_id = 1;
  t.device = TestDevice();
  t.problem.id = d * 100000 + L;
  t.problem.shape.Hq = 8;
  t.problem.shape.Hkv = 2;
  t.problem.shape.d = d;
  t.problem.shape.Lq = L;
  t.problem.shape.Lk = L;
  t.config.variant = variant;
  t.config.implementation = "kokkos_windowed";
  // The fixture's implementation declares the tunables Br and Bc.
  const nlohmann::json all = nlohmann::json::parse(params_json);
  nlohmann::json params = nlohmann::json::object(), tunables = nlohmann::json::object();
  for (const auto& [key, value] : all.items())
    (key == "Br" || key == "Bc" ? tunables : params)[key] = value;
  t.config.params_json = params.dump();
  t.config.tunables_json = tunables.dump();
  t.build.version = "0.1.0";
  t.build.kernel_hash = "0123456789abcdef";
  t.result.status = status;
  t.result.message = message;
  if (status == TrialStatus::kOk) {
    t.result.median_ms = median_ms;
    t.result.p10_ms = median_ms * 0.97;
    t.result.p90_ms = median_ms * 1.05;
    t.result.cv = 0.02;
    t.result.samples_ms = {median_ms * 0.97, median_ms, median_ms * 1.05};
    t.sample_count = 3;
    const double pairs = 8.0 * L * (L + 1) / 2 * (variant == "dense" ? 1.0 : mass_recall);
    t.result.metrics = {{"rel_err", (1 - mass_recall) * 0.5},
                        {"mass_recall", mass_recall},
                        {"pairs", pairs},
                        {"useful_flops", 4.0 * d * pairs},
                        {"io_bytes", 4.0 * 2 * (8 + 2) * L * d}};
  } else {
    t.result.median_ms = median_ms;  // a failed trial's time must never count
  }
  return t;
}

ReportInput MakeFixtureInput() {
  ReportInput in;
  in.tool_version = "0.1.0";
  in.generated_at = "2025-01-02T03:04:05Z";
  in.db_path = "/tmp/attntune.db";
  in.devices = {TestDevice()};
  int64_t id = 0;
  auto add = [&](const std::string& variant, const std::string& params, int64_t d, int64_t L,
                 double ms, double recall) {
    in.trials.push_back(MakeTrial(++id, variant, params, d, L, ms, recall));
  };
  const char* kSmall = R"({"Bc":64,"Br":32})";
  const char* kLarge = R"({"Bc":64,"Br":64})";
  // dense, d=64: Br=64 wins at 512 and 4096, Br=32 at 1024.
  add("dense", kSmall, 64, 512, 0.30, 1.0);
  add("dense", kLarge, 64, 512, 0.25, 1.0);
  add("dense", kSmall, 64, 1024, 0.90, 1.0);
  add("dense", kLarge, 64, 1024, 1.10, 1.0);
  add("dense", kSmall, 64, 4096, 14.0, 1.0);
  add("dense", kLarge, 64, 4096, 12.0, 1.0);
  add("dense", kLarge, 128, 1024, 2.0, 1.0);
  // swa, d=64: w=256 is faster and keeps less mass; w=1024 only tuned at L=1024.
  add("swa", R"({"Bc":64,"Br":32,"sink":0,"w":256})", 64, 1024, 0.40, 0.80);
  add("swa", R"({"Bc":64,"Br":64,"sink":0,"w":256})", 64, 1024, 0.45, 0.80);
  add("swa", R"({"Bc":64,"Br":32,"sink":4,"w":1024})", 64, 1024, 0.85, 0.99);
  add("swa", R"({"Bc":64,"Br":32,"sink":0,"w":256})", 64, 4096, 1.6, 0.60);
  add("swa", R"({"Bc":32,"Br":32,"sink":0,"w":256})", 64, 4096, 1.9, 0.60);
  // Failed trials: faster than anything ok, and one with markup in its message.
  in.trials.push_back(MakeTrial(++id, "dense", R"({"Bc":128,"Br":128})", 64, 1024, 0.01, 1.0,
                                TrialStatus::kWrongResult, "max abs error 0.5 > 1e-4"));
  in.trials.push_back(MakeTrial(++id, "swa", R"({"Bc":256,"Br":256,"sink":0,"w":256})", 64, 4096,
                                0.01, 1.0, TrialStatus::kLaunchFailed,
                                "</script><b>x</b><!--<script>"));
  return in;
}

void AddCounters(TrialRow* trial, double dram_bytes, double ops) {
  auto& m = trial->result.metrics;
  m["hw_duration"] = 1e6;
  m["hw_dram_bytes"] = dram_bytes;
  m["hw_tensor_ops_f16"] = ops;
  m["hw_passes"] = 10;
  m["hw_tensor_tflops"] = ops / 1e6 / 1e3;
  m["hw_dram_gb_per_s"] = dram_bytes / 1e6;
  m["hw_ops_per_dram_byte"] = ops / dram_bytes;
}

ReportInput MakeFixtureInputWithDecode() {
  ReportInput in = MakeFixtureInput();
  int64_t id = static_cast<int64_t>(in.trials.size());
  auto add = [&](const std::string& params, int64_t L, double ms) {
    TrialRow t = MakeTrial(++id, "dense", params, 64, L, ms, 1.0);
    t.problem.id += 1000000;  // another problem than the prefill one of the same L
    t.problem.shape.Lq = 1;
    t.problem.phase = Phase::kDecode;
    t.result.metrics["pairs"] = 8.0 * static_cast<double>(L);  // Hq = 8 rows of L keys
    t.result.metrics["useful_flops"] = 4.0 * 64 * t.result.metrics["pairs"];
    in.trials.push_back(std::move(t));
  };
  add(R"({"Bc":32,"Br":16})", 1024, 0.05);
  add(R"({"Bc":64,"Br":16})", 1024, 0.07);
  add(R"({"Bc":128,"Br":16})", 4096, 0.2);
  return in;
}

ReportInput MakeFixtureInputWithCalibration() {
  ReportInput in = MakeFixtureInput();
  in.calibrations = {{1, "c0ffee0123456789abcdef", "org/tiny-model", "0,1", 1024, R"(["c.safetensors"])"}};
  int64_t id = static_cast<int64_t>(in.trials.size());
  auto add = [&](const std::string& params, double ms, double mean, double worst) {
    TrialRow t = MakeTrial(++id, "swa", params, 64, 1024, ms, mean);
    t.problem.id = 777;
    t.problem.calib_id = 1;
    t.result.metrics["mass_recall_worst"] = worst;
    t.result.metrics["rel_err_worst"] = (1 - worst) * 0.5;
    std::vector<QualityCell> cells;
    for (int64_t layer = 0; layer < 2; ++layer)
      for (int64_t head = 0; head < 8; ++head)
        cells.push_back({layer, head, layer == 1 && head == 3 ? worst : mean, 0.01});
    in.quality_cells[t.id] = cells;
    in.trials.push_back(t);
  };
  add(R"({"Bc":64,"Br":32,"sink":4,"w":256})", 0.30, 0.95, 0.90);
  add(R"({"Bc":64,"Br":32,"sink":4,"w":1024})", 0.70, 0.99, 0.97);
  in.run_problems = {{1, 777, "mass_recall>=0.95"}};
  return in;
}

}  // namespace test
}  // namespace attntune
