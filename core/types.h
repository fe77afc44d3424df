// Small value types for what would otherwise travel as strings (STYLE.md "types where
// strings travel"): the element type of a problem's tensors, the phase of a problem, and
// the device a run uses. Each has one spelling on the command line, in the database and
// in the outputs; ToString and the parsers below are the only place it is written.
#pragma once

#include <optional>
#include <string>

namespace attntune {

enum class Dtype { kF32, kF16, kBf16 };

/// "fp32", "fp16", "bf16".
const char* ToString(Dtype dtype);
/// Inverse of ToString; nullopt for any other text.
std::optional<Dtype> DtypeFromString(const std::string& text);
/// Bytes of one element.
double ElementBytes(Dtype dtype);
/// The value of `dtype` nearest `x` (ties to even, as the CUDA conversions round; past
/// the largest finite value, infinity; NaN stays NaN): what a kernel that reads `dtype`
/// sees of `x`. fp32: x.
float RoundToDtype(float x, Dtype dtype);

/// prefill: every query row of an L-token prompt (Lq = Lk = L); decode: one new query row
/// per head against L cached keys (Lq = 1), or every step of a token-by-token variant.
enum class Phase { kPrefill, kDecode };

/// "prefill", "decode".
const char* ToString(Phase phase);
/// Inverse of ToString; nullopt for any other text.
std::optional<Phase> PhaseFromString(const std::string& text);

/// The device of a run: a backend ("cpu", "cuda") and, for backends with several
/// devices, an index ("cuda:1").
struct DeviceId {
  std::string backend = "cpu";
  int index = 0;
  /// "cpu" or "cuda:1" (a backend without devices to choose among prints no index).
  std::string ToString() const;
  bool operator==(const DeviceId& o) const { return backend == o.backend && index == o.index; }
};

/// Parses "cpu", "cuda:N" (or any "<backend>" / "<backend>:<N>" with N a small
/// non-negative integer); nullopt when the text has another form. Whether the backend
/// exists is the caller's question.
std::optional<DeviceId> ParseDeviceId(const std::string& text);

}  // namespace attntune
