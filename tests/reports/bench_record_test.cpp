// The bench record's two renderings, from records built by hand.
#include "reports/bench_record.h"

#include <catch2/catch.hpp>
#include <string>

namespace attntune {
namespace {

// A record as `attntune bench --variant ks --params k=16 --shape B=1,Hq=2,Hkv=1,L=64,d=32`
// made it on a CPU.
BenchRecord KsRecord() {
  BenchRecord r;
  r.variant = "ks";
  r.implementation = "topk";
  r.params_json = R"({"k":16})";
  r.tunables_json = R"({"Bc":64,"Br":32})";
  r.shape.B = 1;
  r.shape.Hq = 2;
  r.shape.Hkv = 1;
  r.shape.Lq = r.shape.Lk = 64;
  r.shape.d = 32;
  r.device = "AMD EPYC";
  r.dtype = Dtype::kF32;
  r.timer = "cpu-steady-clock";
  r.inputs = "gaussian";
  r.status = TrialStatus::kOk;
  r.metrics = {{"check_err", 1.2491988090270424e-07}, {"gflops", 11.5712},
               {"io_bytes", 49152.0},  {"mass_recall", 0.5837426024344385},
               {"pair_ratio", 0.4346153846153846}, {"pairs", 1808.0},
               {"rel_err", 0.6310091286849386}, {"useful_flops", 231424.0}};
  r.median_ms = 0.02;
  r.p10_ms = 0.01993;
  r.p90_ms = 0.02041;
  r.cv = 0.017161673660421133;
  r.samples = 11;
  r.kernels = {{"attntune::select::scores", "parallel_for", 0.002644},
               {"attntune::select::topk", "parallel_for", 0.003124},
               {"attntune::attend::topk", "parallel_for", 0.059388}};
  r.peak_rss_bytes = 6819840.0;
  return r;
}

TEST_CASE("The bench JSON record is what bench --json printed") {
  // Printed by `attntune bench ... --json` before the record moved to reports/.
  const std::string expected = R"golden({
  "check_err": 1.2491988090270424e-07,
  "cv": 0.017161673660421133,
  "device": "AMD EPYC",
  "dtype": "fp32",
  "gflops": 11.5712,
  "implementation": "topk",
  "inputs": "gaussian",
  "io_bytes": 49152.0,
  "kernels": [
    {
      "kind": "parallel_for",
      "ms": 0.002644,
      "name": "attntune::select::scores"
    },
    {
      "kind": "parallel_for",
      "ms": 0.003124,
      "name": "attntune::select::topk"
    },
    {
      "kind": "parallel_for",
      "ms": 0.059388,
      "name": "attntune::attend::topk"
    }
  ],
  "mass_recall": 0.5837426024344385,
  "median_ms": 0.02,
  "p10_ms": 0.01993,
  "p90_ms": 0.02041,
  "pair_ratio": 0.4346153846153846,
  "pairs": 1808.0,
  "params": {
    "Bc": 64,
    "Br": 32,
    "k": 16
  },
  "peak_rss_bytes": 6819840.0,
  "rel_err": 0.6310091286849386,
  "samples": 11,
  "schema": 1,
  "select_from": "checked run",
  "select_ms": 0.0057680000000000006,
  "shape": "B=1,Hq=2,Hkv=1,L=64,d=32",
  "status": "ok",
  "timer": "cpu-steady-clock",
  "useful_flops": 231424.0,
  "variant": "ks"
}
)golden";
  CHECK(RenderBenchRecordJson(KsRecord()) == expected);
}

TEST_CASE("select_ms sums the kernels of the selection phase only") {
  CHECK(SelectPhaseMs(KsRecord().kernels) == 0.002644 + 0.003124);
  CHECK(SelectPhaseMs({{"attntune::attend::dense", "parallel_for", 1.0},
                       {"select::not_ours", "parallel_for", 2.0}}) == 0.0);
  CHECK(SelectPhaseMs({}) == 0.0);
}

TEST_CASE("The bench text output of an ok record") {
  CHECK(RenderBenchRecordText(KsRecord()) ==
        "ks topk Bc=64,Br=32,k=16 on B=1,Hq=2,Hkv=1,L=64,d=32: ok\n"
        "  median 0.020 ms (p10 0.020, p90 0.020, cv 0.017, 11 samples)\n"
        "  11.57 GFLOP/s useful, 1808 pairs (0.4346 of dense), rel_err 0.631, mass_recall 0.5837\n"
        "  selection phase 0.006 ms (of the checked run)\n"
        "  kernel attntune::select::scores (parallel_for) 0.003 ms\n"
        "  kernel attntune::select::topk (parallel_for) 0.003 ms\n"
        "  kernel attntune::attend::topk (parallel_for) 0.059 ms\n");
}

TEST_CASE("A device-timed record shows its kernels' span under the median") {
  BenchRecord r = KsRecord();
  r.metrics["span_ms"] = 0.0734;
  const std::string text = RenderBenchRecordText(r);
  CHECK(text.find("  median 0.020 ms (p10 0.020, p90 0.020, cv 0.017, 11 samples)\n"
                  "  kernels' span 0.073 ms (median, first start to last end: the gaps between "
                  "launches included)\n"
                  "  11.57 GFLOP/s") != std::string::npos);
  CHECK(RenderBenchRecordJson(r).find("  \"span_ms\": 0.0734,\n") != std::string::npos);
}

TEST_CASE("A device-timed record's select_ms is its timed repetitions' median") {
  // A CUPTI timer names the selection's kernels of each repetition (the metric); the
  // checked run's kernels (0.006 ms here) are a single, cold run's.
  BenchRecord r = KsRecord();
  r.metrics["select_ms"] = 0.0041;
  const std::string text = RenderBenchRecordText(r);
  CHECK(text.find("  selection phase 0.004 ms (median of the timed repetitions)\n") !=
        std::string::npos);
  CHECK(text.find("of the checked run") == std::string::npos);
  const std::string json = RenderBenchRecordJson(r);
  CHECK(json.find("  \"select_ms\": 0.0041,\n") != std::string::npos);
  CHECK(json.find("\"select_ms\": 0.005") == std::string::npos);
  CHECK(json.find("  \"select_from\": \"timed median\",\n") != std::string::npos);
}

TEST_CASE("A failed bench record: no statistics, the message, the counters' error") {
  BenchRecord r = KsRecord();
  r.status = TrialStatus::kWrongResult;
  r.message = "max abs error 0.5 > 1e-4";
  r.metrics = {{"check_err", 0.5}};
  r.kernels.clear();
  r.hardware = BenchHardware{"", {}, "CUPTI: no permission"};
  CHECK(RenderBenchRecordText(r) ==
        "ks topk Bc=64,Br=32,k=16 on B=1,Hq=2,Hkv=1,L=64,d=32: wrong_result\n"
        "  max abs error 0.5 > 1e-4\n"
        "  hardware counters: {\"error\":\"CUPTI: no permission\"}\n");
  const std::string json = RenderBenchRecordJson(r);
  CHECK(json.find("\"median_ms\"") == std::string::npos);
  CHECK(json.find("\"samples\"") == std::string::npos);
  CHECK(json.find("  \"message\": \"max abs error 0.5 > 1e-4\",\n") != std::string::npos);
  CHECK(json.find("  \"hardware\": {\n    \"error\": \"CUPTI: no permission\"\n  },\n") !=
        std::string::npos);
  CHECK(json.find("  \"kernels\": [],\n") != std::string::npos);
  CHECK(json.find("  \"select_ms\": 0.0,\n") != std::string::npos);
}

TEST_CASE("An unchecked bench record with hardware counters") {
  BenchRecord r = KsRecord();
  r.metrics.erase("rel_err");
  r.metrics.erase("mass_recall");
  r.hardware = BenchHardware{"GH100", {{"hw_dram_gb_per_s", 2000.0}, {"hw_passes", 10.0}}, ""};
  const std::string text = RenderBenchRecordText(r);
  CHECK(text.find("(0.4346 of dense), unchecked: no reference, no quality\n") !=
        std::string::npos);
  CHECK(text.find("  hardware counters: {\"chip\":\"GH100\",\"dram_gb_per_s\":2000.0,"
                  "\"passes\":10.0}\n") != std::string::npos);
  CHECK(RenderBenchRecordJson(r).find("  \"hardware\": {\n    \"chip\": \"GH100\",\n"
                                      "    \"dram_gb_per_s\": 2000.0,\n    \"passes\": 10.0\n  },\n") !=
        std::string::npos);
}

}  // namespace
}  // namespace attntune
