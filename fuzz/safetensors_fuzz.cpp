// The safetensors reader, and the design's tensors read from a file.
#include "core/safetensors.h"
#include "fuzz/fuzz_main.h"

void FuzzOne(const std::string& input) {
  attntune::StMetadata metadata;  // the header's __metadata__ (a capture's) is read too
  const attntune::StFile file = attntune::ParseSafetensors(input, "fuzz.safetensors", &metadata);
  for (const auto& [name, t] : file) {
    if (t.dtype == "F32") (void)t.AsF32();
    if (t.dtype == "I32") (void)t.AsI32();
  }
}
