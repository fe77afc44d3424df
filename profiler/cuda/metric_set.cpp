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

std::map<std::string, double> RooflineValues(const std::map<std::string, double>& by_role,
                                             int passes, const std::string& dtype) {
  std::map<std::string, double> out;
  for (const auto& [role, value] : by_role) out["hw_" + role] = value;
  out["hw_passes"] = passes;
  auto get = [&](const char* role) {
    auto it = by_role.find(role);
    return it == by_role.end() ? -1.0 : it->second;
  };
  const double ns = get("duration");
  const double ops = get(dtype == "bf16" ? "tensor_ops_bf16" : "tensor_ops_f16");
  const double bytes = get("dram_bytes");
  if (ns > 0 && ops >= 0) out["hw_tensor_tflops"] = ops / ns / 1e3;
  if (ns > 0 && bytes >= 0) out["hw_dram_gb_per_s"] = bytes / ns;
  if (ops >= 0 && bytes > 0) out["hw_ops_per_dram_byte"] = ops / bytes;
  return out;
}

}  // namespace attntune
