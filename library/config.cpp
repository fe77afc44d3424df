#include "library/config.h"

#include "build_info.h"
#include "core/error.h"
#include "kernels/variant.h"
#include "profiler/device.h"

namespace attntune {
namespace library {

namespace {

// Every implementation id of `variant` ("tiled, generic, cuda, cuda_decode").
std::string ImplementationIds(const Variant& variant) {
  std::string ids;
  for (const Implementation& impl : variant.implementations) {
    if (ids.find(impl.id) == std::string::npos) ids += (ids.empty() ? "" : ", ") + impl.id;
  }
  return ids;
}

// The names `decls` declares ("w, sink").
std::string Names(const std::vector<ParamDecl>& decls) {
  std::string names;
  for (const ParamDecl& d : decls) names += (names.empty() ? "" : ", ") + d.name;
  return names.empty() ? "none" : names;
}

// UserError unless every name in `given` is declared in `decls`.
void CheckNames(const Params& given, const std::vector<ParamDecl>& decls, const std::string& owner,
                const std::string& what) {
  for (const auto& entry : given) {
    bool known = false;
    for (const ParamDecl& d : decls) known = known || d.name == entry.first;
    if (!known) {
      throw UserError(what + ": unknown parameter '" + entry.first + "' for " + owner +
                      " (known: " + Names(decls) + ")");
    }
  }
}

// The parsed and name-checked configuration (no device or version check).
Config MakeConfig(const std::string& variant_id, const std::string& impl_id,
                  const std::string& params, const std::string& tunables, const std::string& what) {
  const Variant& variant = FindVariant(variant_id, what);
  if (impl_id.empty()) {  // chosen when it runs: the first that runs the problem there
    Config config;
    config.variant = variant.id;
    config.params = ParseParams(params, what + ": params");
    CheckNames(config.params, variant.params, variant.id, what);
    if (!tunables.empty()) {
      throw UserError(what + ": tunables '" + tunables + "' without an implementation (name one: " +
                      ImplementationIds(variant) + ")");
    }
    config.params_text = ParamsToString(config.params);
    config.what = what;
    return config;
  }
  const Implementation* impl = variant.FindImplementation(impl_id, "");
  if (impl == nullptr) {
    throw UserError(what + ": unknown implementation '" + impl_id + "' of " + variant.id +
                    " (known: " + ImplementationIds(variant) + ")");
  }
  Config config;
  config.variant = variant.id;
  config.implementation = impl->id;
  config.params = ParseParams(params, what + ": params");
  config.tunables = ParseParams(tunables, what + ": tunables");
  CheckNames(config.params, variant.params, variant.id, what);
  std::vector<ParamDecl> tunable_decls;
  for (const Implementation& i : variant.implementations) {  // an id may exist per platform
    if (i.id != impl->id) continue;
    tunable_decls.insert(tunable_decls.end(), i.tunables.begin(), i.tunables.end());
  }
  CheckNames(config.tunables, tunable_decls, variant.id + "/" + impl->id, what);
  config.params_text = ParamsToString(config.params);
  config.tunables_text = ParamsToString(config.tunables);
  config.what = what;
  return config;
}

}  // namespace

std::string EntryName(const EntryFields& entry) {
  return entry.variant + " " + entry.phase + " d=" + std::to_string(entry.head_dim) +
         " L=" + std::to_string(entry.seq_len);
}

std::string SchemaRefusal(const std::string& what, int64_t schema) {
  return what + ": schema " + std::to_string(schema) +
         " is not the format this attntune reads (schema " + std::to_string(kConfigSchema) +
         "); emit it again with attntune " + ATTNTUNE_VERSION + " (attntune emit --db FILE)";
}

Config ConfigFromEntry(const EntryFields& entry, const std::string& what,
                       const std::string& device_name, const ConfigChecks& checks) {
  if (entry.schema != kConfigSchema) throw UserError(SchemaRefusal(what, entry.schema));
  std::string warning;
  if (entry.tool_version != ATTNTUNE_VERSION) {
    const std::string why = "written by attntune " + entry.tool_version + ", this is attntune " +
                            ATTNTUNE_VERSION;
    if (!checks.allow_other_version) {
      throw UserError(what + ": " + why +
                      " (emit it again with this version, or allow_other_version to use it "
                      "with a warning)");
    }
    warning = what + ": " + why;
  }
  if (entry.device != device_name) {
    const std::string why = "tuned on '" + entry.device + "', this is '" + device_name + "' (" +
                            checks.device.ToString() + ")";
    if (!checks.allow_other_device) {
      throw UserError(what + ": " + why +
                      " (tune on this device, or allow_other_device to use it with a warning)");
    }
    warning += (warning.empty() ? "" : "; ") + (warning.empty() ? what + ": " : "") + why;
  }
  Config config = MakeConfig(entry.variant, entry.implementation, entry.params, entry.tunables, what);
  config.device = entry.device;
  config.warning = warning;
  return config;
}

Config ConfigByHand(const std::string& variant, const std::string& implementation,
                    const std::string& params, const std::string& tunables) {
  return MakeConfig(variant, implementation, params, tunables, "config");
}

std::string DeviceName(const DeviceId& device) {
  if (device.backend == "cpu") return CpuDevice().name;
  if (device.backend == "cuda") return CudaDevice(device.index).name;
  throw UserError("device: unknown device '" + device.ToString() + "' (known: cpu, cuda:N)");
}

}  // namespace library
}  // namespace attntune
