// Tests assert the exact one-line text of a user's mistake.
#pragma once

#include <string>

#include "core/error.h"

namespace attntune {

/// The message of the UserError that `f` throws ("<no UserError>" if none).
template <typename F>
std::string UserErrorText(F&& f) {
  try {
    f();
  } catch (const UserError& e) {
    return e.what();
  }
  return "<no UserError>";
}

}  // namespace attntune
