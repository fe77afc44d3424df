// The three tiers of errors (STYLE.md): CHECK for broken invariants (here), UserError
// for a user's mistake (error.h), typed statuses for failing candidates (db/records.h).
// Tests include error.h only: Catch2 has a CHECK macro of its own.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

#include "kernels/spec/error.h"

namespace attntune {

[[noreturn]] inline void CheckFailed(const char* file, int line, const char* expr,
                                     const std::string& detail) {
  std::fprintf(stderr, "attntune: internal error: %s:%d: CHECK(%s) failed%s%s\n", file, line,
               expr, detail.empty() ? "" : ": ", detail.c_str());
  std::abort();
}

}  // namespace attntune

/// Aborts with file and line when an internal invariant is broken.
#define ATTNTUNE_CHECK(cond)                                                \
  do {                                                                      \
    if (!(cond)) ::attntune::CheckFailed(__FILE__, __LINE__, #cond, ""); \
  } while (0)
#define CHECK_MSG(cond, msg)                                                 \
  do {                                                                       \
    if (!(cond)) ::attntune::CheckFailed(__FILE__, __LINE__, #cond, (msg)); \
  } while (0)
// Catch2 also defines CHECK: a test that includes catch.hpp before this header keeps
// Catch's CHECK (headers therefore use ATTNTUNE_CHECK, never CHECK, in inline code).
#ifndef CHECK
#define CHECK(cond) ATTNTUNE_CHECK(cond)
#endif
