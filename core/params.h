// Parameter values of a configuration: the variant's own (w, sink, ...) and the
// implementation's tunables (Br, Bc, ...), by the names DESIGN.md s1 gives them.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace attntune {

/// name -> value text ("1024", "sign"); typed by the variant table's ParamDecl.
using Params = std::map<std::string, std::string>;

/// UserError "<what>: '<item>' holds a character that is not printable ASCII (...)" for
/// a space, a control character or a byte past ASCII in a NAME=VALUE item (it would be
/// stored in JSON, where a byte that is not UTF-8 is an error).
void CheckParamItem(const std::string& item, const std::string& what);

/// Parses "w=256,sink=4" (empty text -> no params). Throws UserError naming `what`.
Params ParseParams(const std::string& text, const std::string& what);

/// The comma-separated items of `text` ("a,b" -> {"a", "b"}; "" -> {}).
std::vector<std::string> SplitList(const std::string& text);

/// The longest duration ParseDuration takes: 1e7 s, about 116 days (anything longer is a
/// typo, and 1e308h would overflow to infinity).
constexpr double kMaxDurationSeconds = 1e7;

/// A positive duration in seconds: a number of seconds, or of minutes or hours with the
/// suffix s, m or h ("90", "90s", "1.5m", "2h"). UserError "<what>: '<text>' is not a
/// duration (e.g. 90s, 10m, 1.5h)", "... is not a positive duration" or "... is longer
/// than the limit of 1e7 s (116 days)".
double ParseDuration(const std::string& text, const std::string& what);

/// "sink=4,w=256" (sorted by name).
std::string ParamsToString(const Params& params);

/// The integer value of `name`; CHECKs that it is present and numeric (the variant
/// table has validated and defaulted params before kernels see them).
int64_t ParamInt(const Params& params, const std::string& name);

}  // namespace attntune
