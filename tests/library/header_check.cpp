// attntune/attntune.h (and attntune_cuda.h) compiled alone, every template instantiated
// as a program would: tests/library/CMakeLists.txt runs this with -Werror in C++17 and 20.
#include <attntune/attntune.h>
#ifdef ATTNTUNE_CHECK_CUDA_HEADER
#include <attntune/attntune_cuda.h>
#endif

// A generated header's namespace lives beside the API's names.
namespace attntune_config {
inline constexpr int kSchema = 1;
}  // namespace attntune_config

namespace {
// The shape of a generated attntune_config::Entry.
struct Entry {
  static constexpr int kSchema = 1;
  static constexpr const char* kToolVersion = "0.1.0";
  const char* device;
  const char* variant;
  const char* phase;
  const char* params;
  const char* impl;
  int Br;
  int Bc;
  const char* tunables;
  int head_dim;
  int seq_len;
  double median_ms;
  double rel_err;
  double mass_recall;
};
}  // namespace

int main() {
  constexpr Entry entry{"cpu", "swa", "prefill", "w=64", "tiled", 32, 64, "Br=32,Bc=64", 64, 128, 1.0, 0.0, 1.0};
  attntune::Config config;
  attntune::ConfigOptions options;
  options.quiet = true;
  if (!attntune::TryFromEntry(entry, &config, options).ok()) config = attntune::MakeConfig("swa", "tiled", "w=64");
  const Entry* none = nullptr;
  (void)attntune::TryFromEntry(none, &config);
  attntune::Problem problem;
  attntune::Tensors tensors;
  const attntune::Status status = attntune::TryRun(config, problem, tensors);
#ifdef ATTNTUNE_CHECK_CUDA_HEADER
  (void)attntune::TryRun(config, problem, tensors, cudaStream_t{});
#endif
  attntune::ConfigFile file;
  (void)attntune::ConfigFile::TryLoad("attntune_config.json", &file, options);
  return status.ok() ? 0 : 1;
}
