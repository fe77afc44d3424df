// The three tiers of errors (STYLE.md): ATTNTUNE_CHECK for broken invariants (here),
// UserError for a user's mistake (error.h), typed statuses for failing candidates
// (db/records.h). The prefix keeps the macro apart from Catch2's CHECK in tests.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "core/error.h"

namespace attntune {

[[noreturn]] inline void CheckFailed(const char* file, int line, const char* expr,
                                     const std::string& detail) {
  std::fprintf(stderr, "attntune: internal error: %s:%d: ATTNTUNE_CHECK(%s) failed%s%s\n", file, line,
               expr, detail.empty() ? "" : ": ", detail.c_str());
  std::abort();
}

}  // namespace attntune

/// Aborts with file and line when an internal invariant is broken.
#define ATTNTUNE_CHECK(cond)                                                \
  do {                                                                      \
    if (!(cond)) ::attntune::CheckFailed(__FILE__, __LINE__, #cond, ""); \
  } while (0)
#define ATTNTUNE_CHECK_MSG(cond, msg)                                        \
  do {                                                                       \
    if (!(cond)) ::attntune::CheckFailed(__FILE__, __LINE__, #cond, (msg)); \
  } while (0)
