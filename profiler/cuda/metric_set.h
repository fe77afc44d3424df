// The hardware metrics attntune collects per kernel (a roofline point: DRAM bytes,
// tensor-pipe ops, SM throughput, duration) and their offline validation per chip with
// the CUPTI Profiler Host API (CUDA 13; the legacy event and metric APIs are gone).
// Plain C++ header: the choice of names is testable without CUPTI.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace attntune {

/// One quantity of the roofline and the metric names that measure it, in order of
/// preference: names differ between chips (GA100 "sm__ops_path_tensor_src_fp16_dst_fp32",
/// GH100 "sm__ops_path_tensor_op_hmma_src_fp16_dst_fp32").
struct MetricRole {
  std::string role;  // "dram_bytes"
  std::vector<std::string> names;
};

/// The roles attntune measures, each with its candidate names.
const std::vector<MetricRole>& RooflineMetricRoles();

/// The metric chosen for each role on one chip.
struct MetricSelection {
  std::vector<std::pair<std::string, std::string>> chosen;  // (role, metric name)
  std::vector<std::string> unresolved;                      // roles with no valid name
  std::vector<std::string> Names() const;
};

/// Picks, per role, the first name `valid` accepts.
MetricSelection ResolveMetrics(const std::vector<MetricRole>& roles,
                               const std::function<bool(const std::string&)>& valid);

/// Offline validation of the metric set for one chip ("GH100", "GA100").
struct MetricPlan {
  std::string chip;
  MetricSelection selection;
  size_t passes = 0;  // replay passes the config image needs
  size_t config_bytes = 0;
  std::string error;  // "" or the failing CUPTI call and its result
};

/// Runs the Profiler Host API offline (no device needed): initialise for `chip`,
/// validate every candidate name, build the config image of the chosen metrics and
/// read its pass count. Defined in profiler/cuda/metric_set_cupti.cpp; a build
/// without CUPTI has no definition.
MetricPlan PlanMetricsOffline(const std::string& chip);

/// Hardware counters of the work `fn` launches, on CUDA device `device_index` (made
/// current): CUPTI's range profiler with one user range and user replay, so `fn` runs once
/// per pass and must launch the same work every call; the metric set is the roofline one,
/// resolved for the device's chip with its counter-availability image. Separate from the
/// timed runs: call it after measuring.
struct MetricValues {
  MetricPlan plan;                          // chip, chosen names, passes
  std::map<std::string, double> by_role;    // "duration" -> ns, "dram_bytes" -> bytes, ...
  int replays = 0;                          // times fn ran
  std::string error;                        // "" or the failing call and its result
};
MetricValues CollectRooflineMetrics(int device_index, const std::function<void()>& fn);

/// The roofline point of one kernel from its counters, as metrics stored with a trial:
/// "hw_<role>" for every measured role (duration in ns, DRAM bytes, tensor ops of both
/// dtypes, the two percentages), "hw_passes", and, where their inputs were measured,
/// "hw_tensor_tflops" (ops of `dtype`'s tensor path per second / 1e12),
/// "hw_dram_gb_per_s" and "hw_ops_per_dram_byte" (the roofline's x axis). `dtype` is
/// "fp16" or "bf16". Zero durations and zero bytes give no ratio rather than inf.
std::map<std::string, double> RooflineValues(const std::map<std::string, double>& by_role,
                                             int passes, const std::string& dtype);

}  // namespace attntune
