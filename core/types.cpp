#include "core/types.h"

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>

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

float RoundToDtype(float x, Dtype dtype) {
  if (dtype == Dtype::kF32 || !std::isfinite(x)) return x;
  if (dtype == Dtype::kBf16) {  // keep the top 16 bits, rounding the low 16 to even
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;  // a carry into the exponent is right
    float r;
    std::memcpy(&r, &u, sizeof r);
    return r;
  }
  // fp16: 11 significant bits down to 2^-14 (the 13 low bits of fp32's 24 rounded off, ties
  // to even; a carry into the exponent is right), then a fixed step of 2^-24 (subnormals:
  // the scalings by powers of two are exact and nearbyint rounds ties to even, the default
  // mode). Past 65504, infinity.
  const float ax = std::fabs(x);
  float r;
  if (ax >= 0x1p-14f) {
    uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    u = (u + 0xfffu + ((u >> 13) & 1u)) & ~0x1fffu;
    std::memcpy(&r, &u, sizeof r);
  } else {
    r = std::ldexp(std::nearbyint(std::ldexp(x, 24)), -24);
  }
  if (std::fabs(r) > 65504.f) return std::copysign(INFINITY, x);
  return r;
}

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
