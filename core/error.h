// A user's mistake (STYLE.md, second tier of errors): one line naming the input, what
// is wrong and what would be right. Caught only in cli/, printed as
// "attntune: error: <what()>", exit code 2.
#pragma once

#include <stdexcept>
#include <string>

namespace attntune {

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace attntune
