// The command-line parsers: shapes, params, durations, sequence lengths, device ids.
// The first byte chooses the parser, the rest is its text.
#include "core/params.h"
#include "core/shape.h"
#include "core/types.h"
#include "fuzz/fuzz_main.h"

void FuzzOne(const std::string& input) {
  if (input.empty()) return;
  const std::string text = input.substr(1);
  switch (static_cast<unsigned char>(input[0]) % 6) {
    case 0: (void)attntune::ParseShape(text, "--shape"); break;
    case 1: (void)attntune::ParseParams(text, "--params"); break;
    case 2: (void)attntune::ParseDuration(text, "--time-budget"); break;
    case 3: (void)attntune::ParseSeqLens(text, "--seq-lens"); break;
    case 4: (void)attntune::ParseDeviceId(text); break;
    default: (void)attntune::ParsePositiveInt(text, "--batch"); break;
  }
}
