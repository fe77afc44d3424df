#include "db/records.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "core/check.h"
#include "core/error.h"

namespace attntune {

namespace {
struct StatusName {
  TrialStatus status;
  const char* name;
};
constexpr StatusName kStatusNames[] = {
    {TrialStatus::kOk, "ok"},
    {TrialStatus::kInvalid, "invalid"},
    {TrialStatus::kCompileFailed, "compile_failed"},
    {TrialStatus::kLaunchFailed, "launch_failed"},
    {TrialStatus::kWrongResult, "wrong_result"},
    {TrialStatus::kTimeout, "timeout"},
};
}  // namespace

const char* ToString(TrialStatus status) {
  for (const auto& s : kStatusNames)
    if (s.status == status) return s.name;
  ATTNTUNE_CHECK_MSG(false, "unknown TrialStatus");
}

std::optional<TrialStatus> TrialStatusFromString(const std::string& text) {
  for (const auto& s : kStatusNames)
    if (text == s.name) return s.status;
  return std::nullopt;
}

}  // namespace attntune

namespace attntune {

namespace {

// The shortest text that reads back as `x` exactly: a floor stored rounded ("%g" made
// 0.9998908 into 0.999891) was not the floor the search kept.
std::string Number(double x) {
  char text[64];
  const std::to_chars_result r = std::to_chars(text, text + sizeof text, x);
  return std::string(text, r.ptr);
}

// The metric `name` of a trial at its worst (layer, head), or its mean when it stored none.
std::optional<double> Worst(const std::map<std::string, double>& metrics, const std::string& name) {
  for (const std::string& key : {name + "_worst", name}) {
    auto it = metrics.find(key);
    if (it != metrics.end()) return it->second;
  }
  return std::nullopt;
}

}  // namespace

std::string QualityFloor::ToString() const {
  std::string text;
  if (min_mass_recall) text += "mass_recall>=" + Number(*min_mass_recall);
  if (max_rel_err) text += std::string(text.empty() ? "" : ",") + "rel_err<=" + Number(*max_rel_err);
  return text;
}

bool QualityFloor::MetBy(const std::map<std::string, double>& metrics) const {
  if (min_mass_recall) {
    const std::optional<double> x = Worst(metrics, "mass_recall");
    if (!x || !(*x >= *min_mass_recall)) return false;
  }
  if (max_rel_err) {
    const std::optional<double> x = Worst(metrics, "rel_err");
    if (!x || !(*x <= *max_rel_err)) return false;
  }
  return true;
}

QualityFloor ParseQualityFloor(const std::string& text, const std::string& what) {
  QualityFloor floor;
  if (text.empty()) return floor;
  std::vector<std::string> parts(1);
  for (const char c : text) {
    if (c == ',')
      parts.emplace_back();
    else
      parts.back() += c;
  }
  for (const std::string& part : parts) {
    const bool recall = part.rfind("mass_recall>=", 0) == 0;
    const bool err = part.rfind("rel_err<=", 0) == 0;
    if (!recall && !err)
      throw UserError(what + ": '" + part + "' is not mass_recall>=X or rel_err<=X");
    const std::string value = part.substr(recall ? 13 : 9);
    char* rest = nullptr;
    const double x = value.empty() ? std::nan("") : std::strtod(value.c_str(), &rest);
    const bool number = !value.empty() && rest != nullptr && *rest == '\0' && std::isfinite(x);
    if (recall) {
      if (!number || x < 0 || x > 1)
        throw UserError(what + ": '" + part + "': X must be a number between 0 and 1");
      if (floor.min_mass_recall) throw UserError(what + ": mass_recall is given twice");
      floor.min_mass_recall = x;
    } else {
      if (!number || x < 0)
        throw UserError(what + ": '" + part + "': X must be a non-negative number");
      if (floor.max_rel_err) throw UserError(what + ": rel_err is given twice");
      floor.max_rel_err = x;
    }
  }
  return floor;
}

}  // namespace attntune
