// NVTX3 ranges around the tuner's phases and candidates. Without a tool attached (or
// in a build without NVTX headers) they cost next to nothing.
#pragma once

#include <string>

namespace attntune {

/// Pushes an NVTX range in the "attntune" domain for its lifetime.
class NvtxRange {
 public:
  explicit NvtxRange(const std::string& name);
  ~NvtxRange();
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

/// True when this build emits NVTX ranges.
bool NvtxCompiledIn();

}  // namespace attntune
