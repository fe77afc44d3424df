// RenderConfigHeader: attntune_config.h, the tuned tiles as a self-contained C++17 header.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "core/config_schema.h"
#include "reports/report_util.h"
#include "reports/reports.h"

namespace attntune {

namespace {

// A C++ string literal. Octal escapes (always three digits, so a following digit cannot
// extend them) for every byte outside printable ASCII; '?' escaped against trigraphs.
std::string CppString(const std::string& text) {
  std::string out = "\"";
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    if (c == '"' || c == '\\' || c == '?') {
      out += '\\';
      out += ch;
    } else if (c < 0x20 || c >= 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\%03o", c);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// A value inside a // comment: JSON-quoted and ASCII-only, so it cannot hold a newline
// or end in a backslash (which would continue the comment onto the next line).
std::string CommentValue(const std::string& text) {
  return nlohmann::json(text).dump(-1, ' ', /*ensure_ascii=*/true,
                                   nlohmann::json::error_handler_t::replace);
}

std::string CppDouble(double v) {
  if (std::isnan(v)) return "std::numeric_limits<double>::quiet_NaN()";
  if (std::isinf(v))
    return v > 0 ? "std::numeric_limits<double>::infinity()"
                 : "-std::numeric_limits<double>::infinity()";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, v);  // shortest round-trip form
  std::string s(buf, res.ptr);
  if (s.find_first_of(".eE") == std::string::npos) s += ".0";
  return s;
}

// The EntryQuality fields of an Entry initializer, in the struct's order.
std::string EntryQualityCpp(const EntryQuality& q) {
  return CppString(q.calibration) + ", " + CppDouble(q.mass_recall_worst) + ", " +
         CppDouble(q.rel_err_worst) + ", " + CppString(q.floor) + ", " +
         (q.meets_floor ? "true" : "false");
}

int TunableInt(const nlohmann::json& tunables, const char* name) {
  const auto it = tunables.find(name);
  return it != tunables.end() && it->is_number_integer() ? it->get<int>() : 0;
}

// The lookup, written once into every header; the rule is in its comment.
constexpr const char kLookupCode[] = R"code(
namespace detail {
constexpr bool Eligible(const Entry& e, std::string_view phase, std::string_view device,
                        std::string_view variant, int head_dim, double min_mass_recall) {
  // A floor is answered from calibrated entries only, by their worst layer and head.
  const bool quality = min_mass_recall <= 0.0 ||
                       (e.calibration[0] != '\0' && e.mass_recall_worst >= min_mass_recall);
  return std::string_view(e.phase) == phase &&
         (device.empty() || std::string_view(e.device) == device) &&
         std::string_view(e.variant) == variant && e.head_dim == head_dim && quality;
}

constexpr const Entry* Find(std::string_view phase, std::string_view device,
                            std::string_view variant, int head_dim, int seq_len,
                            double min_mass_recall) {
  bool any = false, have_above = false;
  int above = 0, largest = 0;
  for (const Entry& e : kEntries) {
    if (!Eligible(e, phase, device, variant, head_dim, min_mass_recall)) continue;
    if (!any || e.seq_len > largest) largest = e.seq_len;
    any = true;
    if (e.seq_len >= seq_len && (!have_above || e.seq_len < above)) {
      above = e.seq_len;
      have_above = true;
    }
  }
  if (!any) return nullptr;
  const int bucket = have_above ? above : largest;
  const Entry* best = nullptr;
  for (const Entry& e : kEntries) {
    if (!Eligible(e, phase, device, variant, head_dim, min_mass_recall)) continue;
    if (e.seq_len == bucket && (best == nullptr || e.median_ms < best->median_ms)) best = &e;
  }
  return best;
}
}  // namespace detail

/// The tuned prefill config for a shape, on `device` (empty: any device in the table).
/// Fallback rule:
///  - only entries of the lookup's phase take part: LookupOnDevice and Lookup answer
///    prefill (every query row of a seq_len-token sequence), LookupDecodeOnDevice and
///    LookupDecode answer decode (one new token per head against seq_len cached keys);
///    a decode entry is never returned for a prefill lookup, nor the reverse;
///  - head_dim must match exactly (tiles do not transfer between head dims);
///  - only entries of `variant` take part; with min_mass_recall > 0, only those measured
///    on a calibration set (the model's captured attention: calibration is not "") whose
///    worst layer and head keeps mass_recall_worst >= min_mass_recall (Gaussian inputs say
///    nothing about a model's attention);
///  - bucket: the smallest tuned seq_len >= seq_len (the tiles tuned for the next
///    longer length), else, beyond every tuned length, the largest tuned seq_len;
///  - within that bucket the fastest entry (smallest median_ms);
///  - nullptr when no entry takes part.
constexpr const Entry* LookupOnDevice(std::string_view device, std::string_view variant,
                                      int head_dim, int seq_len,
                                      double min_mass_recall = 0.0) {
  return detail::Find("prefill", device, variant, head_dim, seq_len, min_mass_recall);
}

/// LookupOnDevice over every device in the table (a header is usually made for one).
constexpr const Entry* Lookup(std::string_view variant, int head_dim, int seq_len,
                              double min_mass_recall = 0.0) {
  return LookupOnDevice(std::string_view(), variant, head_dim, seq_len, min_mass_recall);
}

/// The tuned decode config (one step against `seq_len` cached keys; dma_decode, which
/// runs token by token, is tuned over all seq_len steps) on `device`; the same rule.
constexpr const Entry* LookupDecodeOnDevice(std::string_view device, std::string_view variant,
                                            int head_dim, int seq_len,
                                            double min_mass_recall = 0.0) {
  return detail::Find("decode", device, variant, head_dim, seq_len, min_mass_recall);
}

/// LookupDecodeOnDevice over every device in the table.
constexpr const Entry* LookupDecode(std::string_view variant, int head_dim, int seq_len,
                                    double min_mass_recall = 0.0) {
  return LookupDecodeOnDevice(std::string_view(), variant, head_dim, seq_len, min_mass_recall);
}
)code";

}  // namespace

std::string RenderConfigHeader(const ReportInput& input) {
  const std::vector<BestEntry> entries = BestEntries(input);
  const std::vector<DeviceRecord> devices = report_util::ReportDevices(input);
  int64_t ok_trials = 0;
  for (const TrialRow& t : input.trials) ok_trials += t.result.status == TrialStatus::kOk;

  std::ostringstream out;
  out << "// attntune_config.h: tuned attention configs. Generated by attntune; do not edit.\n"
      << "//\n"
      << "// tool version: " << CommentValue(input.tool_version) << "\n"
      << "// generated at: " << CommentValue(input.generated_at) << "\n"
      << "// database:     " << CommentValue(input.db_path) << "\n"
      << "// trials:       " << input.trials.size() << " (" << ok_trials << " ok)\n";
  for (const DeviceRecord& d : devices) {
    out << "// device:       " << CommentValue(d.name) << "\n"
        << "//   fingerprint: "
        << report_util::FingerprintValue(d.fingerprint_json)
               .dump(-1, ' ', true, nlohmann::json::error_handler_t::replace)
        << "\n";
  }
  for (const CalibrationRecord& c : input.calibrations) {
    out << "// calibration:  " << CommentValue(c.content_hash.substr(0, 12)) << " model "
        << CommentValue(c.model) << ", layers " << CommentValue(c.layers) << ", " << c.tokens
        << " tokens\n";
  }
  out << "//\n"
      << "// One entry per (device, variant, phase, variant params, head_dim, seq_len,\n"
      << "// calibration set): the\n"
      << "// fastest config that passed the reference check. median_ms holds only for that\n"
      << "// device. Prefill and decode entries are looked up apart: Lookup for prefill,\n"
      << "// LookupDecode for decode (see the fallback rule at LookupOnDevice).\n"
      << "#ifndef ATTNTUNE_CONFIG_H_\n#define ATTNTUNE_CONFIG_H_\n\n"
      << "#include <array>\n#include <cstddef>\n#include <limits>\n#include <string_view>\n\n"
      << "namespace attntune_config {\n\n"
      << "inline constexpr const char kToolVersion[] = " << CppString(input.tool_version) << ";\n"
      << "inline constexpr const char kGeneratedAt[] = " << CppString(input.generated_at) << ";\n"
      << "// The format of this header; attntune::FromEntry (attntune/attntune.h) checks it.\n"
      << "inline constexpr int kSchema = " << kConfigSchema << ";\n\n"
      << "struct Entry {\n"
      << "  static constexpr int kSchema = attntune_config::kSchema;\n"
      << "  static constexpr const char* kToolVersion = attntune_config::kToolVersion;\n"
      << "  const char* device;\n"
      << "  const char* variant;\n"
      << "  const char* phase;     // \"prefill\", or \"decode\": one step against seq_len keys\n"
      << "  const char* params;    // the variant's own parameters, \"sink=0,w=256\"\n"
      << "  const char* impl;      // implementation\n"
      << "  int Br;                // query tile rows (0: not a tunable of impl)\n"
      << "  int Bc;                // key tile columns (0: not a tunable of impl)\n"
      << "  const char* tunables;  // every tunable, \"Bc=64,Br=32\"\n"
      << "  int head_dim;\n"
      << "  int seq_len;           // Lk\n"
      << "  double median_ms;\n"
      << "  double rel_err;        // against dense attention\n"
      << "  double mass_recall;    // share of dense attention probability kept (mean)\n"
      << "  const char* calibration;  // calibration set (hash prefix) quality was measured on; \"\": Gaussian\n"
      << "  double mass_recall_worst;  // at the worst layer and head (NaN: not measured)\n"
      << "  double rel_err_worst;      // at the worst layer and head (NaN: not measured)\n"
      << "  const char* floor;         // the floor it was tuned under, \"mass_recall>=0.95\"; \"\": none\n"
      << "  bool meets_floor;          // it keeps that floor\n"
      << "};\n\n"
      << "inline constexpr std::array<Entry, " << entries.size() << "> kEntries{{\n";
  for (const BestEntry& e : entries) {
    const report_util::SplitParams split = report_util::ParseConfigParams(e.params_json, e.tunables_json);
    out << "    {" << CppString(e.device_name) << ", " << CppString(e.variant) << ", "
        << CppString(ToString(e.phase)) << ", "
        << CppString(report_util::ParamsText(split.variant)) << ", " << CppString(e.implementation)
        << ", " << TunableInt(split.tunables, "Br") << ", " << TunableInt(split.tunables, "Bc")
        << ", " << CppString(report_util::ParamsText(split.tunables)) << ", " << e.head_dim << ", "
        << e.seq_len << ", " << CppDouble(e.median_ms) << ", " << CppDouble(e.rel_err) << ", "
        << CppDouble(e.mass_recall) << ", " << EntryQualityCpp(e.quality) << "},  // "
        << CommentValue(report_util::EntryComparisonText(e)) << "\n";
  }
  out << "}};\n"
      << kLookupCode << "\n}  // namespace attntune_config\n\n"
      << "#endif  // ATTNTUNE_CONFIG_H_\n";
  return out.str();
}

}  // namespace attntune
