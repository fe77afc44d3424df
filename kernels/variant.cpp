#include "kernels/variant.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "core/check.h"

namespace attntune {

const Implementation* Variant::FindImplementation(const std::string& impl_id,
                                                  const std::string& platform) const {
  for (const Implementation& impl : implementations) {
    if (impl.id == impl_id && (platform.empty() || impl.platform == platform)) return &impl;
  }
  return nullptr;
}

std::vector<std::string> DeclaredValues(const ParamDecl& decl) {
  return decl.grid.empty() ? std::vector<std::string>{decl.default_value} : decl.grid;
}

std::string Implementation::Refuses(const ProblemKind& kind) const {
  if (std::find(phases.begin(), phases.end(), kind.phase) == phases.end())
    return id + " is not offered for the " + ToString(kind.phase) + " phase";
  if (std::find(dtypes.begin(), dtypes.end(), kind.dtype) == dtypes.end())
    return id + " does not take " + ToString(kind.dtype) + " inputs";
  return supports ? supports(kind) : "";
}

std::vector<ParamDecl> Implementation::TunablesFor(const ProblemKind& kind) const {
  return tunables_for ? tunables_for(kind) : tunables;
}

std::vector<const Implementation*> Variant::ImplementationsFor(const std::string& platform,
                                                               const ProblemKind& kind) const {
  std::vector<const Implementation*> out;
  for (const Implementation& impl : implementations) {
    if (impl.platform == platform && impl.Refuses(kind).empty()) out.push_back(&impl);
  }
  return out;
}

std::string SupportedVariantsText(const std::string& platform, const ProblemKind& kind) {
  std::string text;
  for (const Variant& v : Variants()) {
    if (!v.ImplementationsFor(platform, kind).empty()) text += (text.empty() ? "" : ", ") + v.id;
  }
  return text.empty() ? "none" : text;
}

const Variant& FindVariant(const std::string& id, const std::string& what) {
  std::string known;
  for (const Variant& v : Variants()) {
    if (v.id == id) return v;
    known += (known.empty() ? "" : ", ") + v.id;
  }
  throw UserError(what + ": unknown variant '" + id + "' (known: " + known + ")");
}

namespace {

bool ParseInt(const std::string& text, int64_t* value) {
  if (text.empty()) return false;
  char* end = nullptr;
  errno = 0;
  const long long v = std::strtoll(text.c_str(), &end, 10);
  // strtoll skips leading blanks and accepts '+'; a parameter value must not.
  if (*end != '\0' || errno != 0 || !(text[0] == '-' || (text[0] >= '0' && text[0] <= '9'))) {
    return false;
  }
  *value = v;
  return true;
}

std::string RangeText(const ParamDecl& p) {
  const std::string lo = std::to_string(p.min) + " <= ";
  if (p.max == INT64_MAX) return p.name + " >= " + std::to_string(p.min);
  return lo + p.name + " <= " + std::to_string(p.max);
}

}  // namespace

std::string CheckParamValue(const ParamDecl& p, const std::string& value, std::string* canonical) {
  if (p.kind == ParamKind::kInt) {
    int64_t v = 0;
    if (!ParseInt(value, &v)) {
      // Digits past int64 are an integer out of range, not "not an integer".
      const size_t first = !value.empty() && value[0] == '-' ? 1 : 0;
      const bool digits = value.size() > first &&
                          value.find_first_not_of("0123456789", first) == std::string::npos;
      if (digits) return p.name + "=" + value + " is out of range (" + RangeText(p) + ")";
      return p.name + "='" + value + "' is not an integer";
    }
    if (v < p.min || v > p.max) {
      return p.name + "=" + value + " is out of range (" + RangeText(p) + ")";
    }
    *canonical = std::to_string(v);
    return "";
  }
  std::string choices;
  for (const std::string& c : p.choices) {
    if (c == value) {
      *canonical = value;
      return "";
    }
    choices += (choices.empty() ? "" : ", ") + c;
  }
  return p.name + "='" + value + "' is not one of " + choices;
}

namespace {

// The shared body of ResolveParams and CheckParams: "" and `*out` complete, or the reason.
std::string Resolve(const Variant& variant, const Implementation* impl, const Shape& shape,
                    const Params& given, Params* out,
                    const std::set<std::string>* tensors = nullptr) {
  std::vector<const ParamDecl*> decls;
  for (const ParamDecl& p : variant.params) decls.push_back(&p);
  // An implementation whose tunables depend on the problem's kind (a CUDA tile compiled
  // for one head dim) takes those of this shape's kind, so that its defaults fit it.
  std::vector<ParamDecl> of_kind;
  if (impl != nullptr && impl->tunables_for) {
    ProblemKind kind;
    kind.head_dim = shape.d;
    if (!impl->phases.empty()) kind.phase = impl->phases.front();
    if (!impl->dtypes.empty()) kind.dtype = impl->dtypes.front();
    of_kind = impl->tunables_for(kind);
  }
  if (impl != nullptr) {
    for (const ParamDecl& p : impl->tunables_for ? of_kind : impl->tunables) decls.push_back(&p);
  }
  const std::string owner = variant.id + (impl != nullptr ? "/" + impl->id : "");
  for (const auto& [name, value] : given) {
    bool known = false;
    for (const ParamDecl* p : decls) known = known || p->name == name;
    if (!known) {
      std::string names;
      for (const ParamDecl* p : decls) names += (names.empty() ? "" : ", ") + p->name;
      return "unknown parameter '" + name + "' for " + owner +
             (names.empty() ? " (it takes none)" : " (known: " + names + ")");
    }
  }
  out->clear();
  for (const ParamDecl* p : decls) {
    const auto it = given.find(p->name);
    std::string value;
    const bool from_tensor = !p->tensor.empty() && tensors != nullptr && tensors->count(p->tensor);
    if (it != given.end()) {
      value = it->second;
    } else if (from_tensor) {
      continue;  // the input file's tensor supplies it
    } else if (!p->default_value.empty()) {
      value = p->default_value;
    } else {
      return owner + " requires parameter " + p->name +
             (p->grid.empty() ? "" : " (e.g. " + p->name + "=" + p->grid.front() + ")") +
             (p->tensor.empty() || tensors == nullptr
                  ? ""
                  : " or a '" + p->tensor + "' tensor in the input file");
    }
    std::string canonical;
    const std::string reason = CheckParamValue(*p, value, &canonical);
    if (!reason.empty()) return reason;
    (*out)[p->name] = canonical;
  }
  if (variant.check) {
    const std::string reason = variant.check(shape, *out);
    if (!reason.empty()) return reason;
  }
  if (impl != nullptr && impl->check) {
    const std::string reason = impl->check(shape, *out);
    if (!reason.empty()) return reason;
  }
  return "";
}

}  // namespace

Params ResolveParams(const Variant& variant, const Implementation* impl, const Shape& shape,
                     const Params& given, const std::string& what,
                     const std::set<std::string>* tensors) {
  Params out;
  const std::string reason = Resolve(variant, impl, shape, given, &out, tensors);
  if (!reason.empty()) throw UserError(what + ": " + reason);
  return out;
}

std::string CheckParams(const Variant& variant, const Implementation& impl, const Shape& shape,
                        const Params& params) {
  Params out;
  return Resolve(variant, &impl, shape, params, &out);
}

namespace {
// The declared parameters present in `params` as one JSON object.
std::string CanonicalJson(const std::vector<ParamDecl>& decls, const Params& params) {
  nlohmann::json j = nlohmann::json::object();
  for (const ParamDecl& p : decls) {
    const auto it = params.find(p.name);
    if (it == params.end()) continue;
    if (p.kind == ParamKind::kInt) {
      int64_t v = 0;
      ATTNTUNE_CHECK_MSG(ParseInt(it->second, &v), p.name + "='" + it->second + "'");
      j[p.name] = v;
    } else {
      j[p.name] = it->second;
    }
  }
  return j.dump();  // nlohmann::json objects keep their keys sorted
}
}  // namespace

std::string CanonicalVariantParamsJson(const Variant& variant, const Params& params) {
  return CanonicalJson(variant.params, params);
}

std::string CanonicalTunablesJson(const Implementation& impl, const Params& params) {
  return CanonicalJson(impl.tunables, params);
}

int64_t AttendedPairs(const Variant& variant, const Tensors& tensors, const Params& params) {
  const Shape& s = tensors.shape;
  if (variant.pairs) return variant.pairs(s, params);
  if (variant.count_pairs) return variant.count_pairs(tensors, params);
  const std::unique_ptr<KeySets> sets = variant.key_sets(tensors, params);
  std::vector<int64_t> keys;
  int64_t pairs = 0;
  for (int64_t b = 0; b < s.B; ++b) {
    for (int64_t h = 0; h < s.Hq; ++h) {
      for (int64_t i = 0; i < s.Lq; ++i) {
        sets->Row(b, h, i, &keys);
        pairs += static_cast<int64_t>(keys.size());
      }
    }
  }
  return pairs;
}

}  // namespace attntune
