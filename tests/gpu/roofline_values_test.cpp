// The roofline point derived from a kernel's counters (RooflineValues): plain arithmetic,
// checked against hand-computed values; runs everywhere.
#include <catch2/catch.hpp>

#include "profiler/cuda/metric_set.h"

using attntune::RooflineValues;

TEST_CASE("RooflineValues: the roles under hw_ names and the roofline point of the dtype") {
  // 2 ms, 1e9 DRAM bytes, 4e12 fp16 tensor ops, 1e12 bf16 ops.
  const std::map<std::string, double> by_role = {{"duration", 2e6},
                                                 {"dram_bytes", 1e9},
                                                 {"tensor_ops_f16", 4e12},
                                                 {"tensor_ops_bf16", 1e12},
                                                 {"sm_throughput", 55.0}};
  const auto f16 = RooflineValues(by_role, 10, "fp16");
  CHECK(f16.at("hw_duration") == 2e6);
  CHECK(f16.at("hw_dram_bytes") == 1e9);
  CHECK(f16.at("hw_sm_throughput") == 55.0);
  CHECK(f16.at("hw_passes") == 10);
  CHECK(f16.at("hw_tensor_tflops") == Approx(2000.0));     // 4e12 ops / 2e-3 s = 2e15 /s
  CHECK(f16.at("hw_dram_gb_per_s") == Approx(500.0));      // 1e9 B / 2e-3 s
  CHECK(f16.at("hw_ops_per_dram_byte") == Approx(4000.0));  // 4e12 / 1e9
  const auto bf16 = RooflineValues(by_role, 10, "bf16");
  CHECK(bf16.at("hw_tensor_tflops") == Approx(500.0));
  CHECK(bf16.at("hw_ops_per_dram_byte") == Approx(1000.0));
}

TEST_CASE("RooflineValues: no ratio from a zero or missing denominator") {
  const auto zero = RooflineValues({{"duration", 0.0}, {"dram_bytes", 0.0}, {"tensor_ops_f16", 5.0}},
                                   2, "fp16");
  CHECK(zero.count("hw_tensor_tflops") == 0);
  CHECK(zero.count("hw_dram_gb_per_s") == 0);
  CHECK(zero.count("hw_ops_per_dram_byte") == 0);
  CHECK(zero.at("hw_passes") == 2);
  const auto no_ops = RooflineValues({{"duration", 1e6}, {"dram_bytes", 8.0}}, 1, "fp16");
  CHECK(no_ops.count("hw_tensor_tflops") == 0);
  CHECK(no_ops.at("hw_dram_gb_per_s") == Approx(8e-6));
  CHECK(no_ops.count("hw_ops_per_dram_byte") == 0);
}
