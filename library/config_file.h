// attntune_config.json read back at run time (DESIGN.md s5, s8): the file's entries,
// checked for form on load (a malformed or hostile file is refused in one line, never a
// crash), and looked up by the generated header's rule.
#pragma once

#include <string>
#include <vector>

#include "library/config.h"

namespace attntune {
namespace library {

struct ConfigFile {
  std::string path;
  std::vector<EntryFields> entries;
  std::string device_name;  // the device lookups are for (ConfigChecks::device's name)
  ConfigChecks checks;
};

/// The largest attntune_config.json read: far above any tune's (about 300 bytes an entry).
constexpr size_t kMaxConfigFileBytes = size_t{64} << 20;

/// Parses the text of an attntune_config.json named `path` in errors. UserError "<path>: ..."
/// for anything but a JSON object of schema kConfigSchema with well-formed entries.
ConfigFile ParseConfigFile(const std::string& text, const std::string& path,
                           const std::string& device_name, const ConfigChecks& checks);

/// Reads and parses `path`; the entries are for the device of `checks` (its name read once).
ConfigFile LoadConfigFile(const std::string& path, const ConfigChecks& checks);

/// The entry for (variant, phase, head_dim, seq_len) by attntune_config::LookupOnDevice's
/// rule on the file's device (another device's entries when no entry of this one takes
/// part; ConfigFromEntry then refuses or warns), as a checked Config. UserError naming
/// what the file holds when no entry takes part.
Config LookupConfig(const ConfigFile& file, const std::string& variant, const std::string& phase,
                    int64_t head_dim, int64_t seq_len, double min_mass_recall);

}  // namespace library
}  // namespace attntune
