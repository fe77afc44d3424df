// PlanMetricsOffline over the CUPTI Profiler Host API.
#include <cuda_runtime_api.h>
#include <cupti.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_target.h>
#include <dlfcn.h>

#include <cstdint>
#include <vector>

#include "profiler/cuda/metric_set.h"

namespace attntune {
namespace {

std::string Failure(CUptiResult result, const std::string& call) {
  const char* text = nullptr;
  if (cuptiGetResultString(result, &text) != CUPTI_SUCCESS || text == nullptr) text = "?";
  return call + ": " + text + " (" + std::to_string(static_cast<int>(result)) + ")";
}

// Initialises the Profiler Host API for `chip` (with the device's counter-availability
// image when given), resolves the roofline roles, builds the config image and reads its
// pass count. The caller deinitialises plan->host when it is not null.
struct HostConfig {
  CUpti_Profiler_Host_Object* host = nullptr;
  std::vector<uint8_t> image;
};

HostConfig BuildHostConfig(const std::string& chip, const uint8_t* availability, MetricPlan* plan) {
  HostConfig config;
  plan->chip = chip;
  CUpti_Profiler_Host_Initialize_Params init = {CUpti_Profiler_Host_Initialize_Params_STRUCT_SIZE};
  init.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
  init.pChipName = chip.c_str();
  init.pCounterAvailabilityImage = availability;  // null offline: every counter of the chip
  CUptiResult r = cuptiProfilerHostInitialize(&init);
  if (r != CUPTI_SUCCESS) {
    plan->error = Failure(r, "cuptiProfilerHostInitialize(" + chip + ")");
    return config;
  }
  CUpti_Profiler_Host_Object* host = init.pHostObject;
  config.host = host;
  plan->selection = ResolveMetrics(RooflineMetricRoles(), [&](const std::string& name) {
    CUpti_Profiler_Host_GetMetricProperties_Params props = {
        CUpti_Profiler_Host_GetMetricProperties_Params_STRUCT_SIZE};
    props.pHostObject = host;
    props.pMetricName = name.c_str();
    return cuptiProfilerHostGetMetricProperties(&props) == CUPTI_SUCCESS;
  });
  const std::vector<std::string> names = plan->selection.Names();
  std::vector<const char*> c_names;
  for (const std::string& n : names) c_names.push_back(n.c_str());
  std::vector<uint8_t>& image = config.image;
  CUpti_Profiler_Host_ConfigAddMetrics_Params add = {
      CUpti_Profiler_Host_ConfigAddMetrics_Params_STRUCT_SIZE};
  add.pHostObject = host;
  add.ppMetricNames = c_names.data();
  add.numMetrics = c_names.size();
  r = cuptiProfilerHostConfigAddMetrics(&add);
  if (r != CUPTI_SUCCESS) plan->error = Failure(r, "cuptiProfilerHostConfigAddMetrics");
  if (plan->error.empty()) {
    CUpti_Profiler_Host_GetConfigImageSize_Params size = {
        CUpti_Profiler_Host_GetConfigImageSize_Params_STRUCT_SIZE};
    size.pHostObject = host;
    r = cuptiProfilerHostGetConfigImageSize(&size);
    if (r != CUPTI_SUCCESS) plan->error = Failure(r, "cuptiProfilerHostGetConfigImageSize");
    image.resize(size.configImageSize);
  }
  if (plan->error.empty()) {
    CUpti_Profiler_Host_GetConfigImage_Params get = {
        CUpti_Profiler_Host_GetConfigImage_Params_STRUCT_SIZE};
    get.pHostObject = host;
    get.configImageSize = image.size();
    get.pConfigImage = image.data();
    r = cuptiProfilerHostGetConfigImage(&get);
    if (r != CUPTI_SUCCESS) plan->error = Failure(r, "cuptiProfilerHostGetConfigImage");
    plan->config_bytes = image.size();
  }
  if (plan->error.empty()) {
    CUpti_Profiler_Host_GetNumOfPasses_Params passes = {
        CUpti_Profiler_Host_GetNumOfPasses_Params_STRUCT_SIZE};
    passes.configImageSize = image.size();
    passes.pConfigImage = image.data();
    r = cuptiProfilerHostGetNumOfPasses(&passes);
    if (r != CUPTI_SUCCESS) plan->error = Failure(r, "cuptiProfilerHostGetNumOfPasses");
    plan->passes = passes.numOfPasses;
  }
  return config;
}

void FreeHost(CUpti_Profiler_Host_Object* host) {
  if (host == nullptr) return;
  CUpti_Profiler_Host_Deinitialize_Params deinit = {
      CUpti_Profiler_Host_Deinitialize_Params_STRUCT_SIZE};
  deinit.pHostObject = host;
  cuptiProfilerHostDeinitialize(&deinit);
}

}  // namespace

MetricPlan PlanMetricsOffline(const std::string& chip) {
  MetricPlan plan;
  HostConfig config = BuildHostConfig(chip, nullptr, &plan);
  FreeHost(config.host);
  return plan;
}

namespace {

// The current CUcontext through the driver library loaded at run time (attntune must start
// on machines without libcuda).
CUcontext CurrentContext(std::string* error) {
  using GetCurrent = int (*)(CUcontext*);
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    *error = "libcuda.so.1 not found";
    return nullptr;
  }
  auto get = reinterpret_cast<GetCurrent>(dlsym(lib, "cuCtxGetCurrent"));
  CUcontext ctx = nullptr;
  if (get == nullptr || get(&ctx) != 0 || ctx == nullptr) *error = "cuCtxGetCurrent failed";
  return ctx;
}

}  // namespace

// Longer than a screen on purpose: one range-profiler session in the order CUPTI requires
// (initialise, configure, replay per pass, decode, evaluate), every failure falling
// through to the one Disable and FreeHost at the end. Split, the session's state would
// travel through a struct to gain nothing, in code that only a GPU can re-test.
MetricValues CollectRooflineMetrics(int device_index, const std::function<void()>& fn) {
  MetricValues out;
  cudaError_t ce = cudaSetDevice(device_index);
  if (ce == cudaSuccess) ce = cudaFree(nullptr);  // creates the primary context
  if (ce != cudaSuccess) {
    out.error = std::string("no usable CUDA device: ") + cudaGetErrorName(ce);
    return out;
  }
  CUcontext ctx = CurrentContext(&out.error);
  if (!out.error.empty()) return out;
  CUpti_Profiler_Initialize_Params pinit = {CUpti_Profiler_Initialize_Params_STRUCT_SIZE};
  CUptiResult r = cuptiProfilerInitialize(&pinit);
  if (r != CUPTI_SUCCESS) {
    out.error = Failure(r, "cuptiProfilerInitialize");
    return out;
  }
  CUpti_Device_GetChipName_Params chip = {CUpti_Device_GetChipName_Params_STRUCT_SIZE};
  chip.deviceIndex = static_cast<size_t>(device_index);
  r = cuptiDeviceGetChipName(&chip);
  if (r != CUPTI_SUCCESS) {
    out.error = Failure(r, "cuptiDeviceGetChipName");
    return out;
  }
  CUpti_Profiler_GetCounterAvailability_Params avail = {
      CUpti_Profiler_GetCounterAvailability_Params_STRUCT_SIZE};
  avail.ctx = ctx;
  r = cuptiProfilerGetCounterAvailability(&avail);
  std::vector<uint8_t> availability(avail.counterAvailabilityImageSize);
  if (r == CUPTI_SUCCESS) {
    avail.pCounterAvailabilityImage = availability.data();
    r = cuptiProfilerGetCounterAvailability(&avail);
  }
  if (r != CUPTI_SUCCESS) {
    out.error = Failure(r, "cuptiProfilerGetCounterAvailability");
    return out;
  }
  HostConfig config = BuildHostConfig(chip.pChipName, availability.data(), &out.plan);
  if (!out.plan.error.empty()) {
    out.error = out.plan.error;
    FreeHost(config.host);
    return out;
  }
  const std::vector<std::string> names = out.plan.selection.Names();
  std::vector<const char*> c_names;
  for (const std::string& n : names) c_names.push_back(n.c_str());

  CUpti_RangeProfiler_Enable_Params enable = {CUpti_RangeProfiler_Enable_Params_STRUCT_SIZE};
  enable.ctx = ctx;
  r = cuptiRangeProfilerEnable(&enable);
  if (r != CUPTI_SUCCESS) {
    out.error = Failure(r, "cuptiRangeProfilerEnable");
    FreeHost(config.host);
    return out;
  }
  CUpti_RangeProfiler_Object* object = enable.pRangeProfilerObject;
  std::vector<uint8_t> counter_data;
  auto step = [&](CUptiResult result, const char* call) {
    if (result != CUPTI_SUCCESS && out.error.empty()) out.error = Failure(result, call);
    return out.error.empty();
  };
  CUpti_RangeProfiler_GetCounterDataSize_Params size = {
      CUpti_RangeProfiler_GetCounterDataSize_Params_STRUCT_SIZE};
  size.pRangeProfilerObject = object;
  size.pMetricNames = c_names.data();
  size.numMetrics = c_names.size();
  size.maxNumOfRanges = 1;
  size.maxNumRangeTreeNodes = 1;
  if (step(cuptiRangeProfilerGetCounterDataSize(&size), "cuptiRangeProfilerGetCounterDataSize")) {
    counter_data.resize(size.counterDataSize);
    CUpti_RangeProfiler_CounterDataImage_Initialize_Params cinit = {
        CUpti_RangeProfiler_CounterDataImage_Initialize_Params_STRUCT_SIZE};
    cinit.pRangeProfilerObject = object;
    cinit.counterDataSize = counter_data.size();
    cinit.pCounterData = counter_data.data();
    step(cuptiRangeProfilerCounterDataImageInitialize(&cinit),
         "cuptiRangeProfilerCounterDataImageInitialize");
  }
  if (out.error.empty()) {
    CUpti_RangeProfiler_SetConfig_Params set = {CUpti_RangeProfiler_SetConfig_Params_STRUCT_SIZE};
    set.pRangeProfilerObject = object;
    set.configSize = config.image.size();
    set.pConfig = config.image.data();
    set.counterDataImageSize = counter_data.size();
    set.pCounterDataImage = counter_data.data();
    set.range = CUPTI_UserRange;
    set.replayMode = CUPTI_UserReplay;
    set.maxRangesPerPass = 1;
    set.numNestingLevels = 1;
    set.minNestingLevel = 1;
    set.passIndex = 0;
    set.targetNestingLevel = 1;
    step(cuptiRangeProfilerSetConfig(&set), "cuptiRangeProfilerSetConfig");
  }
  // One pass per replay of fn, until CUPTI says every pass was submitted.
  for (int pass = 0; out.error.empty() && pass < 128; ++pass) {
    CUpti_RangeProfiler_Start_Params start = {CUpti_RangeProfiler_Start_Params_STRUCT_SIZE};
    start.pRangeProfilerObject = object;
    if (!step(cuptiRangeProfilerStart(&start), "cuptiRangeProfilerStart")) break;
    CUpti_RangeProfiler_PushRange_Params push = {CUpti_RangeProfiler_PushRange_Params_STRUCT_SIZE};
    push.pRangeProfilerObject = object;
    push.pRangeName = "attntune";
    if (!step(cuptiRangeProfilerPushRange(&push), "cuptiRangeProfilerPushRange")) break;
    fn();
    ++out.replays;
    ce = cudaDeviceSynchronize();
    if (ce != cudaSuccess) out.error = std::string("cudaDeviceSynchronize: ") + cudaGetErrorName(ce);
    CUpti_RangeProfiler_PopRange_Params pop = {CUpti_RangeProfiler_PopRange_Params_STRUCT_SIZE};
    pop.pRangeProfilerObject = object;
    step(cuptiRangeProfilerPopRange(&pop), "cuptiRangeProfilerPopRange");
    CUpti_RangeProfiler_Stop_Params stop = {CUpti_RangeProfiler_Stop_Params_STRUCT_SIZE};
    stop.pRangeProfilerObject = object;
    if (!step(cuptiRangeProfilerStop(&stop), "cuptiRangeProfilerStop")) break;
    if (stop.isAllPassSubmitted) break;
    if (pass == 127) out.error = "the range profiler asked for more than 128 passes";
  }
  if (out.error.empty()) {
    CUpti_RangeProfiler_DecodeData_Params decode = {
        CUpti_RangeProfiler_DecodeData_Params_STRUCT_SIZE};
    decode.pRangeProfilerObject = object;
    if (step(cuptiRangeProfilerDecodeData(&decode), "cuptiRangeProfilerDecodeData") &&
        decode.numOfRangeDropped > 0) {
      out.error = "the range profiler dropped " + std::to_string(decode.numOfRangeDropped) + " range(s)";
    }
  }
  if (out.error.empty()) {
    CUpti_RangeProfiler_GetCounterDataInfo_Params info = {
        CUpti_RangeProfiler_GetCounterDataInfo_Params_STRUCT_SIZE};
    info.pCounterDataImage = counter_data.data();
    info.counterDataImageSize = counter_data.size();
    if (step(cuptiRangeProfilerGetCounterDataInfo(&info), "cuptiRangeProfilerGetCounterDataInfo") &&
        info.numTotalRanges < 1) {
      out.error = "the range profiler recorded no range";
    }
  }
  if (out.error.empty()) {
    std::vector<double> values(c_names.size(), 0.0);
    CUpti_Profiler_Host_EvaluateToGpuValues_Params eval = {
        CUpti_Profiler_Host_EvaluateToGpuValues_Params_STRUCT_SIZE};
    eval.pHostObject = config.host;
    eval.pCounterDataImage = counter_data.data();
    eval.counterDataImageSize = counter_data.size();
    eval.rangeIndex = 0;
    eval.ppMetricNames = c_names.data();
    eval.numMetrics = c_names.size();
    eval.pMetricValues = values.data();
    if (step(cuptiProfilerHostEvaluateToGpuValues(&eval), "cuptiProfilerHostEvaluateToGpuValues")) {
      size_t n = 0;
      for (const auto& chosen : out.plan.selection.chosen) out.by_role[chosen.first] = values[n++];
    }
  }
  CUpti_RangeProfiler_Disable_Params disable = {CUpti_RangeProfiler_Disable_Params_STRUCT_SIZE};
  disable.pRangeProfilerObject = object;
  cuptiRangeProfilerDisable(&disable);
  FreeHost(config.host);
  return out;
}

}  // namespace attntune
