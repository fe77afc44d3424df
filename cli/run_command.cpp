// attntune run: one variant on the tensors of a safetensors file, O written to another.
#include <cstdint>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "cli/backends.h"
#include "cli/commands.h"
#include "core/error.h"
#include "core/files.h"
#include "core/safetensors.h"
#include "core/tensor_file.h"
#include "kernels/selection/selection.h"

namespace attntune {
namespace {

struct RunArgs {
  std::string variant;
  std::string impl;
  std::string params;
  std::string in;
  std::string out;
  bool non_causal = false;
  int64_t layer = -1;
};

}  // namespace

void RegisterRun(CLI::App& app, int* rc) {
  auto args = std::make_shared<RunArgs>();
  auto* cmd = app.add_subcommand("run", "Run one variant on the tensors of a safetensors file");
  cmd->add_option("--variant", args->variant, "Variant id")->required();
  cmd->add_option("--impl", args->impl, "Implementation (default: the variant's first)");
  cmd->add_option("--params", args->params, "key=value,... (e.g. w=256,sink=4)");
  cmd->add_option("--in", args->in, "safetensors file with q [B,Hq,Lq,d], k, v [B,Hkv,Lk,d]")->required();
  cmd->add_option("--out", args->out, "safetensors file to write o [B,Hq,Lq,d] to")->required();
  cmd->add_flag("--non-causal", args->non_causal, "Every query sees every key");
  cmd->add_option("--layer", args->layer,
                  "Read q.<layer>, k.<layer>, v.<layer> of a captured file "
                  "(scripts/capture_qkv.py) instead of q, k, v")
      ->check(kNonNegativeInteger);
  cmd->callback([args, rc] {
    const Variant& variant = FindVariant(args->variant, "--variant");
    // o written over q, k, v would leave the caller without its inputs.
    RefuseToReplace(args->out, args->in, "the --in file");
    // run computes on the CPU backend (fp32 host buffers in and out).
    std::unique_ptr<Backend> cpu = OpenBackend("cpu", "--device");
    const Implementation* impl = &ImplementationNamed(*cpu, variant, Dtype::kF32, 0, args->impl);
    const Params given = ParseParams(args->params, "--params");
    ProblemFile problem = ReadProblemFile(args->in, !args->non_causal, args->layer);
    const Tensors& t = problem.tensors;
    std::set<std::string> names;  // a tensor may supply a parameter (hybrid's windows)
    for (const auto& [name, tensor] : problem.file) names.insert(name);
    const Params params = ResolveParams(variant, impl, t.shape, given, "--params", &names);
    ReadOptionalTensors(params, &problem);
    CheckDmaBias(t, params, args->in);
    std::vector<float> o(static_cast<size_t>(t.shape.QElems()));
    impl->run(t, params, o.data());
    WriteSafetensors(args->out, {{"o", MakeF32({t.shape.B, t.shape.Hq, t.shape.Lq, t.shape.d}, o)}});
    *rc = 0;
  });
}

}  // namespace attntune
