// The three tiers of errors (STYLE.md): CHECK for broken invariants, UserError for
// a user's mistake (caught only in cli/), typed statuses for failing candidates.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>

namespace attntune {

/// A user's mistake: one line naming the input, what is wrong and what would be right.
/// cli/ prints it as "attntune: error: <what()>" and exits with code 2.
class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message) : std::runtime_error(message) {}
};

[[noreturn]] inline void CheckFailed(const char* file, int line, const char* expr,
                                     const std::string& detail) {
  std::fprintf(stderr, "attntune: internal error: %s:%d: CHECK(%s) failed%s%s\n", file, line,
               expr, detail.empty() ? "" : ": ", detail.c_str());
  std::abort();
}

}  // namespace attntune

/// Aborts with file and line when an internal invariant is broken.
#define CHECK(cond)                                                         \
  do {                                                                      \
    if (!(cond)) ::attntune::CheckFailed(__FILE__, __LINE__, #cond, ""); \
  } while (0)
#define CHECK_MSG(cond, msg)                                                 \
  do {                                                                       \
    if (!(cond)) ::attntune::CheckFailed(__FILE__, __LINE__, #cond, (msg)); \
  } while (0)
