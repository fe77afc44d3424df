#include "backends/backend.h"

#include <algorithm>

#include "core/error.h"

namespace attntune {

Dtype ResolveDtype(const Backend& backend, const std::string& text, const std::string& what) {
  const std::vector<Dtype> dtypes = backend.Dtypes();
  if (text.empty()) return dtypes.front();
  std::string list;
  for (Dtype d : dtypes) {
    if (text == ToString(d)) return d;
    list += (list.empty() ? "" : " or ") + std::string(ToString(d));
  }
  throw UserError(what + ": '" + text + "' is not available on " + backend.Id().ToString() +
                  " (it takes " + list + ")");
}

std::vector<const Implementation*> ImplementationsFor(const Backend& backend,
                                                      const Variant& variant,
                                                      const ProblemKind& kind) {
  return variant.ImplementationsFor(backend.Platform(), kind);
}

std::vector<const Implementation*> RequireImplementations(const Backend& backend,
                                                          const Variant& variant,
                                                          const ProblemKind& kind,
                                                          const std::string& what) {
  std::vector<const Implementation*> impls = ImplementationsFor(backend, variant, kind);
  if (!impls.empty()) return impls;
  // An entry that takes the phase and dtype but not the problem says why.
  std::string why;
  for (const Implementation& impl : variant.implementations) {
    const bool takes = impl.platform == backend.Platform() &&
                       std::find(impl.phases.begin(), impl.phases.end(), kind.phase) != impl.phases.end() &&
                       std::find(impl.dtypes.begin(), impl.dtypes.end(), kind.dtype) != impl.dtypes.end();
    if (takes && why.empty()) why = impl.Refuses(kind);
  }
  const std::string platform = backend.Platform();
  throw UserError(what + ": " + variant.id + " has no " + platform + " implementation for the " +
                  ToString(kind.phase) + " phase, " + ToString(kind.dtype) + ", d=" +
                  std::to_string(kind.head_dim) + (why.empty() ? "" : ": " + why) + " (" +
                  platform + " runs: " + SupportedVariantsText(platform, kind) + ")");
}


const Implementation& ImplementationNamed(const Backend& backend, const Variant& variant, Dtype dtype,
                                        int64_t d, const std::string& id, Phase phase) {
  std::vector<const Implementation*> offered;
  for (const Phase phase : {Phase::kPrefill, Phase::kDecode}) {
    for (const Implementation* impl : ImplementationsFor(backend, variant, {phase, dtype, d})) {
      if (std::find(offered.begin(), offered.end(), impl) == offered.end()) offered.push_back(impl);
    }
  }
  if (offered.empty()) {  // throws, naming what the backend runs
    (void)RequireImplementations(backend, variant, {Phase::kPrefill, dtype, d}, "--variant");
  }
  if (id.empty()) {
    const std::vector<const Implementation*> own = ImplementationsFor(backend, variant, {phase, dtype, d});
    return own.empty() ? *offered.front() : *own.front();
  }
  std::string known;
  for (const Implementation* impl : offered) {
    if (impl->id == id) return *impl;
    known += (known.empty() ? "" : ", ") + impl->id;
  }
  // An implementation of this platform that refuses this problem (a library that does not
  // load) or that this build lacks says why, in one line.
  for (const Implementation& impl : variant.implementations) {
    if (impl.id != id || impl.platform != backend.Platform()) continue;
    if (std::find(impl.dtypes.begin(), impl.dtypes.end(), dtype) == impl.dtypes.end()) continue;
    for (const Phase phase : impl.phases) {
      const std::string why = impl.Refuses({phase, dtype, d});
      if (!why.empty()) throw UserError("--impl: " + why);
    }
  }
  for (const AbsentImplementation& absent : AbsentImplementations()) {
    if (absent.id == id && absent.platform == backend.Platform()) {
      throw UserError("--impl: " + id + " is not built in this attntune: " + absent.reason);
    }
  }
  throw UserError("--impl: unknown implementation '" + id + "' of " + variant.id + " (known: " +
                  known + ")");
}

}  // namespace attntune
