#include "core/params.h"

#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/check.h"

namespace attntune {

void CheckParamItem(const std::string& item, const std::string& what) {
  for (const char c : item) {
    if (c <= ' ' || c > '~')
      throw UserError(what + ": '" + item + "' holds a character that is not printable ASCII "
                      "(a parameter's name and value are integers or words)");
  }
}

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
    CheckParamItem(item, what);
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

std::vector<std::string> SplitList(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) items.push_back(item);
  return items;
}

double ParseDuration(const std::string& text, const std::string& what) {
  const std::string bad = what + ": '" + text + "' is not a duration (e.g. 90s, 10m, 1.5h)";
  if (text.empty()) throw UserError(bad);
  double unit = 1;
  std::string number = text;
  const char last = text.back();
  if (last == 's' || last == 'm' || last == 'h') {
    unit = last == 'h' ? 3600 : last == 'm' ? 60 : 1;
    number.pop_back();
  }
  if (number.empty() || number.find_first_not_of("0123456789.eE+-") != std::string::npos) {
    throw UserError(bad);  // also "nan", "inf" and hexadecimal, which strtod would take
  }
  char* end = nullptr;
  const double value = std::strtod(number.c_str(), &end);
  if (end != number.c_str() + number.size() || !std::isfinite(value)) throw UserError(bad);
  if (!(value > 0)) throw UserError(what + ": '" + text + "' is not a positive duration");
  if (value * unit > kMaxDurationSeconds) {
    throw UserError(what + ": '" + text + "' is longer than the limit of 1e7 s (116 days)");
  }
  return value * unit;
}

}  // namespace attntune
