#include "core/types.h"

#include <cstdlib>

namespace attntune {

const char* ToString(Dtype dtype) {
  switch (dtype) {
    case Dtype::kF32: return "fp32";
    case Dtype::kF16: return "fp16";
    case Dtype::kBf16: return "bf16";
  }
  return "?";
}

std::optional<Dtype> DtypeFromString(const std::string& text) {
  for (Dtype d : {Dtype::kF32, Dtype::kF16, Dtype::kBf16}) {
    if (text == ToString(d)) return d;
  }
  return std::nullopt;
}

double ElementBytes(Dtype dtype) { return dtype == Dtype::kF32 ? 4.0 : 2.0; }

const char* ToString(Phase phase) { return phase == Phase::kPrefill ? "prefill" : "decode"; }

std::optional<Phase> PhaseFromString(const std::string& text) {
  if (text == "prefill") return Phase::kPrefill;
  if (text == "decode") return Phase::kDecode;
  return std::nullopt;
}

std::string DeviceId::ToString() const {
  return backend == "cpu" ? backend : backend + ":" + std::to_string(index);
}

std::optional<DeviceId> ParseDeviceId(const std::string& text) {
  const size_t colon = text.find(':');
  DeviceId id;
  id.backend = text.substr(0, colon);
  if (id.backend.empty() || id.backend.find_first_not_of("abcdefghijklmnopqrstuvwxyz0123456789_") !=
                                std::string::npos)
    return std::nullopt;
  if (colon == std::string::npos) return id;
  const std::string index = text.substr(colon + 1);
  // Six digits at most: a device index, never a number that overflows an int.
  if (index.empty() || index.size() > 6 || index.find_first_not_of("0123456789") != std::string::npos)
    return std::nullopt;
  id.index = std::atoi(index.c_str());
  return id;
}

}  // namespace attntune
