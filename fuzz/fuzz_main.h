// The contract every fuzz target checks (issue 24): an input attntune refuses throws
// UserError (one line for the user); anything else escaping, a crash, a leak or undefined
// behaviour is a finding. libFuzzer calls FuzzOne with each input.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "core/error.h"

/// The target's body: parse `input`; UserError is the accepted refusal.
void FuzzOne(const std::string& input);

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    FuzzOne(std::string(reinterpret_cast<const char*>(data), size));
  } catch (const attntune::UserError&) {
  }
  return 0;
}
