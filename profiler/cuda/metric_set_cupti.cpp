// PlanMetricsOffline over the CUPTI Profiler Host API.
#include <cupti.h>
#include <cupti_profiler_host.h>

#include <cstdint>

#include "profiler/cuda/metric_set.h"

namespace attntune {
namespace {

std::string Failure(CUptiResult result, const std::string& call) {
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr) text = "?";
  return call + ": " + text + " (" + std::to_string(static_cast<int>(result)) + ")";
}

}  // namespace

MetricPlan PlanMetricsOffline(const std::string& chip) {
  MetricPlan plan;
  plan.chip = chip;
  CUpti_Profiler_Host_Initialize_Params init = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
  init.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  init.pChipName = chip.c_str();
  init.pCounterAvailabilityImage = nullptr;  // offline: every counter of the chip
  CUptiResult r = cuptiProfilerHostInitialize(&init);
  if (r != CUPTI_SUCCESS) {
    plan.error = Failure(r, "cuptiProfilerHostInitialize(" + chip + ")");
    return plan;
  }
  CUpti_Profiler_Host_Object* host = init.pHostObject;
  plan.selection = ResolveMetrics(RooflineMetricRoles(), [&](const std::string& name) {
    CUpti_Profiler_Host_GetMetricProperties_Params props = {
        CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE};
    props.pHostObject = host;
    props.pMetricName = name.c_str();
    return cuptiProfilerHostGetMetricProperties(&props) == CUPTI_SUCCESS;
  });
  const std::vector<std::string> names = plan.selection.Names();
  std::vector<const char*> c_names;
  for (const std::string& n : names) c_names.push_back(n.c_str());
  std::vector<uint8_t> image;
  CUpti_Profiler_Host_ConfigAddMetrics_Params add = {
      CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
  add.pHostObject = host;
  add.ppMetricNames = c_names.data();
  add.numMetrics = c_names.size();
  r = cuptiProfilerHostConfigAddMetrics(&add);
  if (r != CUPTI_SUCCESS) plan.error = Failure(r, "cuptiProfilerHostConfigAddMetrics");
  if (plan.error.empty()) {
    CUpti_Profiler_Host_GetConfigImageSize_Params size = {
        CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    size.pHostObject = host;
    r = cuptiProfilerHostGetConfigImageSize(&size);
    if (r != CUPTI_SUCCESS) plan.error = Failure(r, "cuptiProfilerHostGetConfigImageSize");
    image.resize(size.configImageSize);
  }
  if (plan.error.empty()) {
    CUpti_Profiler_Host_GetConfigImage_Params get = {
        CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    get.pHostObject = host;
    get.configImageSize = image.size();
    get.pConfigImage = image.data();
    r = cuptiProfilerHostGetConfigImage(&get);
    if (r != CUPTI_SUCCESS) plan.error = Failure(r, "cuptiProfilerHostGetConfigImage");
    plan.config_bytes = image.size();
  }
  if (plan.error.empty()) {
    CUpti_Profiler_Host_GetNumOfPasses_Params passes = {
        CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
    passes.configImageSize = image.size();
    passes.pConfigImage = image.data();
    r = cuptiProfilerHostGetNumOfPasses(&passes);
    if (r != CUPTI_SUCCESS) plan.error = Failure(r, "cuptiProfilerHostGetNumOfPasses");
    plan.passes = passes.numOfPasses;
  }
  CUpti_Profiler_Host_Deinitialize_Params deinit = {
      CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
  deinit.pHostObject = host;
  cuptiProfilerHostDeinitialize(&deinit);
  return plan;
}

}  // namespace attntune
