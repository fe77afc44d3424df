#include "core/params.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>

#include "core/check.h"

namespace attntune {

Params ParseParams(const std::string& text, const std::string& what) {
  Params params;
  if (text.empty()) return params;
  std::istringstream in(text);
  std::string item;
  // getline drops a trailing empty item ("w=1,"); catch it explicitly.
  if (text.back() == ',') throw UserError(what + ": '' is not key=value");
  while (std::getline(in, item, ',')) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size()) {
      throw UserError(what + ": '" + item + "' is not key=value");
    }
    const std::string key = item.substr(0, eq);
    if (!params.emplace(key, item.substr(eq + 1)).second) {
      throw UserError(what + ": parameter '" + key + "' given twice");
    }
  }
  return params;
}

std::string ParamsToString(const Params& params) {
  std::string out;
  for (const auto& [name, value] : params) {
    if (!out.empty()) out += ',';
    out += name + "=" + value;
  }
  return out;
}

int64_t ParamInt(const Params& params, const std::string& name) {
  const auto it = params.find(name);
  ATTNTUNE_CHECK_MSG(it != params.end(), "missing parameter " + name);
  const char* begin = it->second.c_str();
  char* end = nullptr;
  errno = 0;
  const long long value = std::strtoll(begin, &end, 10);
  ATTNTUNE_CHECK_MSG(!it->second.empty() && *end == '\0' && errno == 0,
            "parameter " + name + "='" + it->second + "' is not an integer");
  return value;
}

}  // namespace attntune
