#include "profiler/cuda/metric_set.h"

namespace attntune {

const std::vector<MetricRole>& RooflineMetricRoles() {
  // Ops counters count tensor-path math ops; FLOP rate = ops / duration.
  static const std::vector<MetricRole> roles = {
      {"duration", {"gpu__time_duration.sum"}},
      {"dram_bytes", {"dram__bytes.sum"}},
      {"tensor_ops_f16",
       {"sm__ops_path_tensor_op_hmma_src_fp16_dst_fp32.sum",
        "sm__ops_path_tensor_src_fp16_dst_fp32.sum"}},
      {"tensor_ops_bf16",
       {"sm__ops_path_tensor_op_hmma_src_bf16_dst_fp32.sum",
        "sm__ops_path_tensor_src_bf16_dst_fp32.sum"}},
      {"tensor_active", {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed"}},
      {"sm_throughput", {"sm__throughput.avg.pct_of_peak_sustained_elapsed"}},
  };
  return roles;
}

std::vector<std::string> MetricSelection::Names() const {
  std::vector<std::string> names;
  for (const auto& c : chosen) names.push_back(c.second);
  return names;
}

MetricSelection ResolveMetrics(const std::vector<MetricRole>& roles,
                               const std::function<bool(const std::string&)>& valid) {
  MetricSelection selection;
  for (const MetricRole& role : roles) {
    bool found = false;
    for (const std::string& name : role.names) {
      if (valid(name)) {
        selection.chosen.emplace_back(role.role, name);
        found = true;
        break;
      }
    }
    if (!found) selection.unresolved.push_back(role.role);
  }
  return selection;
}

}  // namespace attntune
