#include "db/records.h"

#include "core/check.h"

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
