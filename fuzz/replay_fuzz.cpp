// The Kernel Tuner cache (JSON) and T4 readers of `attntune replay`.
#include "fuzz/fuzz_main.h"
#include "search/replay.h"

void FuzzOne(const std::string& input) {
  const attntune::ReplayCache cache = attntune::ParseReplayCache(input, "cache.json");
  if (!cache.entries.empty()) (void)attntune::Statistics(cache);
}
