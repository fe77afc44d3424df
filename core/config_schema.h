// The format version of the tuned outputs that programs read back: attntune_config.h
// (Entry::kSchema) and attntune_config.json ("schema"). reports/ writes it; the library
// (library/) reads only this version. Bumped whenever a field changes meaning or goes away.
#pragma once

namespace attntune {

constexpr int kConfigSchema = 1;

}  // namespace attntune
