#include "library/config_file.h"

#include <cmath>
#include <cstdint>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "core/error.h"

namespace attntune {
namespace library {

namespace {

using Json = nlohmann::json;

// The bounds of an entry's integers: far above any tuned shape, far below overflow.
constexpr int64_t kMaxHeadDim = 1 << 20;
constexpr int64_t kMaxSeqLen = int64_t{1} << 40;

// An integer member of `object` in [lo, hi], or UserError "<where>: "<key>" ...".
int64_t IntMember(const Json& object, const char* key, int64_t lo, int64_t hi,
                  const std::string& where) {
  const auto it = object.find(key);
  const bool integer = it != object.end() && it->is_number_integer();
  const std::string wrong = where + ": \"" + key + "\" is " +
                            (it == object.end() ? "missing"
                             : !integer         ? "not an integer"
                                                : it->dump() + ", out of range") +
                            " (an integer from " + std::to_string(lo) + " to " +
                            std::to_string(hi) + " is expected)";
  if (!integer) throw UserError(wrong);
  if (it->is_number_unsigned()) {  // nlohmann reads every non-negative integer as unsigned
    const uint64_t v = it->get<uint64_t>();
    if (v > static_cast<uint64_t>(hi) || (lo > 0 && v < static_cast<uint64_t>(lo)))
      throw UserError(wrong);
    return static_cast<int64_t>(v);
  }
  const int64_t v = it->get<int64_t>();
  if (v < lo || v > hi) throw UserError(wrong);
  return v;
}

// A string member without control characters (it may appear in a one-line error).
std::string StringMember(const Json& object, const char* key, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_string()) {
    throw UserError(where + ": \"" + key + "\" is " + (it == object.end() ? "missing" : "not a string"));
  }
  std::string value = it->get<std::string>();
  for (const char c : value) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      throw UserError(where + ": \"" + key + "\" holds a control character");
    }
  }
  return value;
}

double NumberMember(const Json& object, const char* key, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_number() || !std::isfinite(it->get<double>())) {
    throw UserError(where + ": \"" + key + "\" is " + (it == object.end() ? "missing" : "not a finite number"));
  }
  return it->get<double>();
}

// A parameter name or value as the text "k=v,k=v" carries it: no separators.
bool PlainText(const std::string& s) {
  if (s.empty()) return false;
  for (const char c : s) {
    if (c == ',' || c == '=' || static_cast<unsigned char>(c) < 0x20) return false;
  }
  return true;
}

// A params or tunables object as "k=v,k=v" (keys in the object's order; integers and
// strings only).
std::string ParamsMember(const Json& object, const char* key, const std::string& where) {
  const auto it = object.find(key);
  if (it == object.end() || !it->is_object()) {
    throw UserError(where + ": \"" + key + "\" is " + (it == object.end() ? "missing" : "not an object"));
  }
  std::string text;
  for (const auto& item : it->items()) {
    std::string value;
    if (item.value().is_number_integer()) {
      value = item.value().dump();
    } else if (item.value().is_string()) {
      value = item.value().get<std::string>();
    }
    if (!PlainText(item.key()) || !PlainText(value)) {
      throw UserError(where + ": \"" + key + "\" holds a value that is not a name with an "
                      "integer or a word (e.g. {\"w\": 256, \"rule\": \"sign\"})");
    }
    text += (text.empty() ? "" : ",") + item.key() + "=" + value;
  }
  return text;
}

EntryFields ParseEntry(const Json& e, const std::string& where) {
  if (!e.is_object()) throw UserError(where + ": not an object");
  EntryFields entry;
  entry.device = StringMember(e, "device", where);
  entry.variant = StringMember(e, "variant", where);
  entry.phase = StringMember(e, "phase", where);
  if (!PhaseFromString(entry.phase)) {
    throw UserError(where + ": \"phase\" is '" + entry.phase + "' (prefill or decode is expected)");
  }
  entry.implementation = StringMember(e, "implementation", where);
  entry.params = ParamsMember(e, "params", where);
  entry.tunables = ParamsMember(e, "tunables", where);
  entry.head_dim = IntMember(e, "head_dim", 1, kMaxHeadDim, where);
  entry.seq_len = IntMember(e, "seq_len", 1, kMaxSeqLen, where);
  entry.median_ms = NumberMember(e, "median_ms", where);
  entry.rel_err = NumberMember(e, "rel_err", where);
  entry.mass_recall = NumberMember(e, "mass_recall", where);
  // "calibration": null or {"id", "model"}; "mass_recall_worst": a number, or null where
  // no calibration set measured the entry. A file without them has no calibrated entry.
  const auto calibration = e.find("calibration");
  if (calibration != e.end() && !calibration->is_null()) {
    if (!calibration->is_object())
      throw UserError(where + ": \"calibration\" is not null or an object");
    entry.calibrated = true;
    const auto worst = e.find("mass_recall_worst");
    if (worst != e.end() && !worst->is_null())  // null: not measured, meets no floor
      entry.mass_recall_worst = NumberMember(e, "mass_recall_worst", where);
  }
  return entry;
}

// Whether `e` takes part in a lookup (attntune_config::detail::Eligible): a floor is
// answered from calibrated entries only, by their worst layer and head.
bool Eligible(const EntryFields& e, const std::string& phase, const std::string& device,
              const std::string& variant, int64_t head_dim, double min_mass_recall) {
  const bool quality =
      min_mass_recall <= 0.0 || (e.calibrated && e.mass_recall_worst >= min_mass_recall);
  return e.phase == phase && (device.empty() || e.device == device) && e.variant == variant &&
         e.head_dim == head_dim && quality;
}

// attntune_config::detail::Find over the file's entries; nullptr when none takes part.
const EntryFields* Find(const std::vector<EntryFields>& entries, const std::string& phase,
                        const std::string& device, const std::string& variant, int64_t head_dim,
                        int64_t seq_len, double min_mass_recall) {
  bool any = false, have_above = false;
  int64_t above = 0, largest = 0;
  for (const EntryFields& e : entries) {
    if (!Eligible(e, phase, device, variant, head_dim, min_mass_recall)) continue;
    if (!any || e.seq_len > largest) largest = e.seq_len;
    any = true;
    if (e.seq_len >= seq_len && (!have_above || e.seq_len < above)) {
      above = e.seq_len;
      have_above = true;
    }
  }
  if (!any) return nullptr;
  const int64_t bucket = have_above ? above : largest;
  const EntryFields* best = nullptr;
  for (const EntryFields& e : entries) {
    if (!Eligible(e, phase, device, variant, head_dim, min_mass_recall)) continue;
    if (e.seq_len == bucket && (best == nullptr || e.median_ms < best->median_ms)) best = &e;
  }
  return best;
}

// "dense prefill d=64, swa prefill d=64": what a file holds, for a lookup that found none.
std::string Holdings(const std::vector<EntryFields>& entries) {
  std::set<std::string> kinds;
  for (const EntryFields& e : entries) {
    kinds.insert(e.variant + " " + e.phase + " d=" + std::to_string(e.head_dim));
  }
  std::string text;
  int shown = 0;
  for (const std::string& k : kinds) {
    if (shown++ == 12) {
      text += ", ...";
      break;
    }
    text += (text.empty() ? "" : ", ") + k;
  }
  return text.empty() ? "no entries" : text;
}

}  // namespace

ConfigFile ParseConfigFile(const std::string& text, const std::string& path,
                           const std::string& device_name, const ConfigChecks& checks) {
  Json doc;
  try {
    doc = Json::parse(text);
  } catch (const Json::parse_error& e) {
    throw UserError(path + ": not valid JSON (at byte " + std::to_string(e.byte) + ")");
  } catch (const Json::exception&) {  // a number beyond double's range
    throw UserError(path + ": not valid JSON (a number out of range)");
  }
  if (!doc.is_object() || !doc.contains("schema")) {
    throw UserError(path + ": not an attntune_config.json (a JSON object with \"schema\", "
                    "\"tool_version\" and \"entries\" is expected)");
  }
  // A float, a string or a huge number is no schema (named -1 in the refusal).
  const auto schema = doc.find("schema");
  int64_t n = -1;
  if (schema->is_number_unsigned()) {
    n = schema->get<uint64_t>() <= INT64_MAX ? static_cast<int64_t>(schema->get<uint64_t>()) : -1;
  } else if (schema->is_number_integer()) {
    n = schema->get<int64_t>();
  }
  if (n != kConfigSchema) throw UserError(SchemaRefusal(path, n));
  ConfigFile file;
  file.path = path;
  file.device_name = device_name;
  file.checks = checks;
  const std::string tool_version = StringMember(doc, "tool_version", path);
  const auto entries = doc.find("entries");
  if (entries == doc.end() || !entries->is_array()) {
    throw UserError(path + ": \"entries\" is " + (entries == doc.end() ? "missing" : "not an array"));
  }
  for (size_t n = 0; n < entries->size(); ++n) {
    EntryFields entry = ParseEntry((*entries)[n], path + ": entries[" + std::to_string(n) + "]");
    entry.schema = kConfigSchema;
    entry.tool_version = tool_version;
    file.entries.push_back(std::move(entry));
  }
  return file;
}

ConfigFile LoadConfigFile(const std::string& path, const ConfigChecks& checks) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(path + ": cannot open (an attntune_config.json written by attntune tune is expected)");
  std::string text;
  char buffer[1 << 16];
  while (in.read(buffer, sizeof buffer) || in.gcount() > 0) {
    text.append(buffer, static_cast<size_t>(in.gcount()));
    if (text.size() > kMaxConfigFileBytes) {
      throw UserError(path + ": larger than 64 MiB, which no attntune_config.json is");
    }
  }
  if (in.bad()) throw UserError(path + ": cannot read");
  return ParseConfigFile(text, path, DeviceName(checks.device), checks);
}

Config LookupConfig(const ConfigFile& file, const std::string& variant, const std::string& phase,
                    int64_t head_dim, int64_t seq_len, double min_mass_recall) {
  const EntryFields* entry = Find(file.entries, phase, file.device_name, variant, head_dim,
                                  seq_len, min_mass_recall);
  if (entry == nullptr) {  // another device's entry: ConfigFromEntry refuses it or warns
    entry = Find(file.entries, phase, "", variant, head_dim, seq_len, min_mass_recall);
  }
  if (entry == nullptr) {
    std::ostringstream floor;
    if (min_mass_recall > 0)
      floor << " measured on a calibration set with mass_recall >= " << min_mass_recall
            << " on its worst layer and head";
    throw UserError(file.path + ": no entry for " + variant + " " + phase + " d=" +
                    std::to_string(head_dim) + floor.str() + " (it holds: " +
                    Holdings(file.entries) + ")");
  }
  return ConfigFromEntry(*entry, file.path + ": entry " + EntryName(*entry), file.device_name,
                         file.checks);
}

}  // namespace library
}  // namespace attntune
