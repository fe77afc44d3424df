// A minimal NVTX injection library: NVTX loads it from NVTX_INJECTION64_PATH and calls
// InitializeInjectionNvtx2, which replaces the domain create / push / pop entries of
// the core function tables. Each push and pop is appended, one line each, to the file
// named by ATTNTUNE_NVTX_LOG ("push attntune:tune", "pop attntune").
#include <nvtx3/nvToolsExt.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

namespace {

std::mutex g_mutex;

void Log(const std::string& line) {
  const char* path = std::getenv("ATTNTUNE_NVTX_LOG");
  if (path == nullptr) return;
  std::lock_guard<std::mutex> lock(g_mutex);
  if (FILE* f = std::fopen(path, "a")) {
    std::fprintf(f, "%s\n", line.c_str());
    std::fclose(f);
  }
}

// A domain handle is a pointer to a leaked copy of its name.
nvtxDomainHandle_t DomainCreateA(const char* name) {
  return reinterpret_cast<nvtxDomainHandle_t>(new std::string(name));
}

std::string DomainName(nvtxDomainHandle_t domain) {
  return domain == nullptr ? "default" : *reinterpret_cast<std::string*>(domain);
}

int DomainRangePushEx(nvtxDomainHandle_t domain, const nvtxEventAttributes_t* attributes) {
  std::string message = "?";
  if (attributes != nullptr && attributes->messageType == NVTX_MESSAGE_TYPE_ASCII) {
    message = attributes->message.ascii;
  }
  Log("push " + DomainName(domain) + ":" + message);
  return 0;
}

int DomainRangePop(nvtxDomainHandle_t domain) {
  Log("pop " + DomainName(domain));
  return 0;
}

int RangePushA(const char* message) {
  Log(std::string("push default:") + message);
  return 0;
}

int RangePop() {
  Log("pop default");
  return 0;
}

bool Set(const NvtxExportTableCallbacks* callbacks, NvtxCallbackModule module, unsigned id,
         NvtxFunctionPointer fn) {
  NvtxFunctionTable table = nullptr;
  unsigned int size = 0;
  if (!callbacks->GetModuleFunctionTable(module, &table, &size) || table == nullptr) return false;
  if (id >= size) return false;
  *table[id] = fn;
  return true;
}

}  // namespace

extern "C" __attribute__((visibility("default"))) int InitializeInjectionNvtx2(
    NvtxGetExportTableFunc_t get) {
  const auto* callbacks = static_cast<const NvtxExportTableCallbacks*>(get(NVTX_ETID_CALLBACKS));
  if (callbacks == nullptr) return 0;
  bool ok = Set(callbacks, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainCreateA,
                reinterpret_cast<NvtxFunctionPointer>(&DomainCreateA));
  ok = ok && Set(callbacks, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePushEx,
                 reinterpret_cast<NvtxFunctionPointer>(&DomainRangePushEx));
  ok = ok && Set(callbacks, NVTX_CB_MODULE_CORE2, NVTX_CBID_CORE2_DomainRangePop,
                 reinterpret_cast<NvtxFunctionPointer>(&DomainRangePop));
  ok = ok && Set(callbacks, NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePushA,
                 reinterpret_cast<NvtxFunctionPointer>(&RangePushA));
  ok = ok && Set(callbacks, NVTX_CB_MODULE_CORE, NVTX_CBID_CORE_RangePop,
                 reinterpret_cast<NvtxFunctionPointer>(&RangePop));
  Log(ok ? "injection initialised" : "injection failed");
  return ok ? 1 : 0;
}
