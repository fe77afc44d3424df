// Captures attntune's NVTX ranges (profiler/nvtx.h) through the nvtx_capture injection
// library. ctest runs this with NVTX_INJECTION64_PATH and ATTNTUNE_NVTX_LOG set.
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include "profiler/nvtx.h"

int main() {
  const char* injection = std::getenv("NVTX_INJECTION64_PATH");
  const char* log = std::getenv("ATTNTUNE_NVTX_LOG");
  if (injection == nullptr || log == nullptr) {
    std::cerr << "nvtx_capture_test: set NVTX_INJECTION64_PATH and ATTNTUNE_NVTX_LOG\n";
    return 1;
  }
  if (!attntune::NvtxCompiledIn()) {
    std::cerr << "nvtx_capture_test: this build has no NVTX ranges\n";
    return 1;
  }
  std::remove(log);
  {
    attntune::NvtxRange tune("tune");
    for (int c = 1; c <= 2; ++c) {
      attntune::NvtxRange candidate("candidate " + std::to_string(c));
    }
  }
  const std::vector<std::string> expected = {
      "injection initialised", "push attntune:tune",        "push attntune:candidate 1",
      "pop attntune",          "push attntune:candidate 2", "pop attntune",
      "pop attntune"};
  std::vector<std::string> got;
  std::ifstream in(log);
  for (std::string line; std::getline(in, line);) got.push_back(line);
  if (got != expected) {
    std::cerr << "nvtx_capture_test: captured " << got.size() << " lines:\n";
    for (const std::string& line : got) std::cerr << "  " << line << "\n";
    std::cerr << "expected " << expected.size() << " lines:\n";
    for (const std::string& line : expected) std::cerr << "  " << line << "\n";
    return 1;
  }
  std::cout << "nvtx_capture_test: captured " << got.size() - 1 << " NVTX events\n";
  return 0;
}
