// The library's configurations (DESIGN.md s8): what runs (variant, implementation,
// parameters, tunables) and where it was tuned. A tuned entry, from a generated
// attntune_config.h or from attntune_config.json, becomes a Config in one place,
// ConfigFromEntry, which checks the format's schema, the attntune version and the device.
#pragma once

#include <limits>
#include <string>

#include "core/config_schema.h"
#include "core/params.h"
#include "core/types.h"

namespace attntune {
namespace library {

struct Config {
  std::string variant;
  std::string implementation;
  Params params;    // the variant's own parameters
  Params tunables;  // the implementation's
  std::string params_text;    // "sink=0,w=256"
  std::string tunables_text;  // "Bc=64,Br=32"
  std::string device;         // the device it was tuned on ("" by hand)
  std::string warning;        // "" or the mismatch the options allowed
  std::string what;           // how errors name it ("config", "attntune_config.h entry ...")
};

/// One tuned entry as the outputs carry it (attntune_config::Entry, a JSON entry), with
/// the schema and attntune version of the file it came from.
struct EntryFields {
  int schema = 0;
  std::string tool_version;
  std::string device;
  std::string variant;
  std::string phase;
  std::string params;    // "sink=0,w=256"
  std::string implementation;
  std::string tunables;  // "Bc=64,Br=32"
  int64_t head_dim = 0;
  int64_t seq_len = 0;
  double median_ms = 0;
  double rel_err = 0;
  double mass_recall = 1;
  /// Measured on a calibration set (the JSON's "calibration" not null), and the worst
  /// (layer, head) mass_recall there (NaN when not calibrated): a lookup with a quality
  /// floor takes these entries only, by their worst (the generated header's rule).
  bool calibrated = false;
  double mass_recall_worst = std::numeric_limits<double>::quiet_NaN();
};

/// Where a configuration will run and which mismatches the caller accepts.
struct ConfigChecks {
  DeviceId device;
  bool allow_other_device = false;
  bool allow_other_version = false;
};

/// "<variant> <phase> d=<head_dim> L=<seq_len>": how an entry is named in errors.
std::string EntryName(const EntryFields& entry);

/// The refusal of a file or header in another format than kConfigSchema.
std::string SchemaRefusal(const std::string& what, int64_t schema);

/// The configuration of a tuned entry. UserError "<what>: ..." for another schema (always),
/// another attntune version or another device than `checks` (unless allowed: then
/// `warning` says which), an unknown variant or implementation, or unparseable params.
Config ConfigFromEntry(const EntryFields& entry, const std::string& what,
                       const std::string& device_name, const ConfigChecks& checks);

/// A configuration by hand (no provenance, no device check). UserError naming "config".
Config ConfigByHand(const std::string& variant, const std::string& implementation,
                    const std::string& params, const std::string& tunables);

/// The name of `device` as tuned entries record it: the CPU model, the GPU's name.
/// UserError when the device is unusable (the CUDA probe's reason).
std::string DeviceName(const DeviceId& device);

}  // namespace library
}  // namespace attntune
