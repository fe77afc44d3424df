// Parameter values of a configuration: the variant's own (w, sink, ...) and the
// implementation's tunables (Br, Bc, ...), by the names DESIGN.md s1 gives them.
#pragma once

#include <cstdint>
#include <map>
#include <string>

namespace attntune {

/// name -> value text ("1024", "sign"); typed by the variant table's ParamDecl.
using Params = std::map<std::string, std::string>;

/// Parses "w=256,sink=4" (empty text -> no params). Throws UserError naming `what`.
Params ParseParams(const std::string& text, const std::string& what);

/// "sink=4,w=256" (sorted by name).
std::string ParamsToString(const Params& params);

/// The integer value of `name`; CHECKs that it is present and numeric (the variant
/// table has validated and defaulted params before kernels see them).
int64_t ParamInt(const Params& params, const std::string& name);

}  // namespace attntune
