// JSON text as attntune writes it: never an exception for a string that is not UTF-8.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

namespace attntune {

/// `j` as text; a string holding bytes that are not UTF-8 (a Linux path may hold any
/// bytes) is written with U+FFFD in their place, where nlohmann's dump() throws.
template <typename Json>
std::string JsonText(const Json& j, int indent = -1) {
  return j.dump(indent, ' ', false, Json::error_handler_t::replace);
}

}  // namespace attntune
