// Offline validation of the roofline metric set with the CUPTI Profiler Host API: no
// device needed, only the chip name.
#include <catch2/catch.hpp>

#include "profiler/cuda/metric_set.h"

using attntune::MetricPlan;
using attntune::PlanMetricsOffline;

TEST_CASE("The roofline metric set validates offline for GH100 and GA100") {
  for (const char* chip : {"GH100", "GA100"}) {
    const MetricPlan plan = PlanMetricsOffline(chip);
    INFO(chip << ": " << plan.error);
    REQUIRE(plan.error.empty());
    CHECK(plan.selection.unresolved.empty());
    CHECK(plan.selection.chosen.size() == attntune::RooflineMetricRoles().size());
    CHECK(plan.passes >= 1);
    CHECK(plan.config_bytes > 0);
    std::string names;
    for (const auto& c : plan.selection.chosen) names += " " + c.first + "=" + c.second;
    WARN(chip << ": " << plan.passes << " passes, config image " << plan.config_bytes << " bytes;"
              << names);
  }
}

TEST_CASE("Metric names differ per chip and are chosen per chip") {
  const MetricPlan gh = PlanMetricsOffline("GH100");
  const MetricPlan ga = PlanMetricsOffline("GA100");
  REQUIRE(gh.error.empty());
  REQUIRE(ga.error.empty());
  auto chosen = [](const MetricPlan& p, const std::string& role) {
    for (const auto& c : p.selection.chosen) {
      if (c.first == role) return c.second;
    }
    return std::string();
  };
  CHECK(chosen(gh, "tensor_ops_f16") == "sm__ops_path_tensor_op_hmma_src_fp16_dst_fp32.sum");
  CHECK(chosen(ga, "tensor_ops_f16") == "sm__ops_path_tensor_src_fp16_dst_fp32.sum");
}

TEST_CASE("An unknown chip is reported by the failing CUPTI call") {
  const MetricPlan plan = PlanMetricsOffline("GX999");
  CHECK(plan.error.rfind("cuptiProfilerHostInitialize(GX999): ", 0) == 0);
}

TEST_CASE("Range-profiler collection fails cleanly without a device and never runs the work") {
  int runs = 0;
  const attntune::MetricValues m = attntune::CollectRooflineMetrics(0, [&] { ++runs; });
  if (m.error.empty()) {  // a device is present: the work ran once per pass, values came back
    CHECK(runs == static_cast<int>(m.plan.passes));
    CHECK(m.by_role.size() == attntune::RooflineMetricRoles().size());
    return;
  }
  // No usable device (this machine, CI): the one error this path may give, nothing ran.
  INFO(m.error);
  CHECK(m.error.rfind("no usable CUDA device: ", 0) == 0);
  CHECK(runs == 0);
  CHECK(m.by_role.empty());
}
