#include "profiler/nvtx.h"

#ifdef ATTNTUNE_HAVE_NVTX
#include <nvtx3/nvToolsExt.h>
#endif

namespace attntune {

#ifdef ATTNTUNE_HAVE_NVTX

namespace {

nvtxDomainHandle_t Domain() {
  static const nvtxDomainHandle_t domain = nvtxDomainCreateA("attntune");
  return domain;
}

}  // namespace

NvtxRange::NvtxRange(const std::string& name) {
  nvtxEventAttributes_t attributes = {};
  attributes.version = NVTX_VERSION;
  attributes.size = NVTX_EVENT_ATTRIB_STRUCT_SIZE;
  attributes.messageType = NVTX_MESSAGE_TYPE_ASCII;
  attributes.message.ascii = name.c_str();  // NVTX copies the text during the call
  nvtxDomainRangePushEx(Domain(), &attributes);
}

NvtxRange::~NvtxRange() { nvtxDomainRangePop(Domain()); }

bool NvtxCompiledIn() { return true; }

#else

NvtxRange::NvtxRange(const std::string& /*name*/) {}
NvtxRange::~NvtxRange() = default;
bool NvtxCompiledIn() { return false; }

#endif

}  // namespace attntune
