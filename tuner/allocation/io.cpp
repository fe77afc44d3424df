#include "tuner/allocation/io.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "core/error.h"
#include "core/files.h"

namespace attntune {

namespace {

constexpr char kMaskFormat[] = "attntune-consa-mask";

std::string FormatRows(const Allocation& a, const char* sep, const char* open, const char* close,
                       const char* row_sep) {
  std::string out;
  for (int64_t l = 0; l < a.layers; ++l) {
    out += open;
    for (int64_t h = 0; h < a.kv_heads; ++h) {
      if (h > 0) out += sep;
      out += a.Swa(l, h) ? "0" : "1";
    }
    out += close;
    if (l + 1 < a.layers) out += row_sep;
  }
  return out;
}

HeadScores FromRows(const std::vector<std::vector<double>>& rows, const std::string& source) {
  HeadScores s;
  s.layers = static_cast<int64_t>(rows.size());
  if (s.layers == 0) throw UserError(source + ": no layers (expected one row per layer)");
  s.kv_heads = static_cast<int64_t>(rows[0].size());
  for (size_t l = 0; l < rows.size(); ++l) {
    if (static_cast<int64_t>(rows[l].size()) != s.kv_heads || s.kv_heads == 0)
      throw UserError(source + ": layer " + std::to_string(l) + " has " +
                      std::to_string(rows[l].size()) + " heads, expected " +
                      std::to_string(s.kv_heads) + " (same count on every row)");
    for (double x : rows[l]) s.keep.push_back(x);
  }
  return s;
}

}  // namespace

HeadScores ParseDuoAttentionTsv(const std::string& text, const std::string& source) {
  std::vector<std::vector<double>> rows;
  std::istringstream in(text);
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    std::vector<double> row;
    std::istringstream cells(line);
    std::string cell;
    while (std::getline(cells, cell, '\t')) {
      char* end = nullptr;
      const double x = std::strtod(cell.c_str(), &end);
      if (cell.empty() || end == cell.c_str() || *end != '\0' || !std::isfinite(x))
        throw UserError(source + ":" + std::to_string(line_no) + ": '" + cell +
                        "' is not a number (expected tab-separated gate values)");
      row.push_back(std::min(1.0, std::max(0.0, x)));
    }
    rows.push_back(row);
  }
  return FromRows(rows, source);
}

std::string FormatDuoAttentionTsv(const Allocation& a) {
  return FormatRows(a, "\t", "", "", "\n") + "\n";
}

HeadScores ParseConsaMask(const std::string& text, const std::string& source) {
  nlohmann::json j;
  try {
    j = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw UserError(source + ": not valid JSON (byte " + std::to_string(e.byte) + ")");
  }
  const auto format = j.is_object() ? j.find("format") : j.end();
  if (!j.is_object() || format == j.end() || !format->is_string() ||
      format->get<std::string>() != kMaskFormat)
    throw UserError(source + ": not a mask file (expected \"format\": \"" + kMaskFormat + "\")");
  // Version 1 is the one layout there is; a later one may mean its numbers otherwise.
  const auto version = j.find("version");
  if (version != j.end() && !(version->is_number_integer() && version->get<int64_t>() == 1))
    throw UserError(source + ": mask file version " + version->dump() +
                    " is not one this attntune reads (1)");
  const bool logits = j.contains("log_alpha");
  const char* key = logits ? "log_alpha" : "mask";
  if (!j.contains(key) || !j[key].is_array())
    throw UserError(source + ": missing 'mask' (per layer, per KV head: P(keep full))");
  std::vector<std::vector<double>> rows;
  for (const auto& r : j[key]) {
    if (!r.is_array()) throw UserError(source + ": '" + key + "' must be a list of lists");
    rows.emplace_back();
    for (const auto& x : r) {
      if (!x.is_number())
        throw UserError(source + ": '" + key + "' entry " + x.dump() + " is not a number");
      const double v = x.get<double>();
      if (!logits && (v < 0 || v > 1))
        throw UserError(source + ": 'mask' entry " + x.dump() + " is not in [0, 1]");
      rows.back().push_back(logits ? 1.0 / (1.0 + std::exp(-v)) : v);
    }
  }
  return FromRows(rows, source);
}

std::string FormatConsaMask(const Allocation& a) {
  return std::string("{\"format\": \"") + kMaskFormat + "\", \"version\": 1, \"mask\": [" +
         FormatRows(a, ", ", "[", "]", ", ") + "]}\n";
}

HeadScores ReadHeadScores(const std::string& path, const std::string& what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw UserError(what + ": cannot read '" + path + "'");
  in.close();
  const std::string text = ReadInputFile(path, kMaxImportBytes, "an import file");
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '{') return ParseConsaMask(text, path);
  return ParseDuoAttentionTsv(text, path);
}

Allocation AllocationFromScores(const HeadScores& s, Granularity g, double rho) {
  if (rho < 0) {
    Allocation a(s.layers, s.kv_heads);
    for (size_t i = 0; i < s.keep.size(); ++i) a.swa[i] = s.keep[i] < 0.5 ? 1 : 0;
    return a;
  }
  return AllocateGreedy(g, s.layers, s.kv_heads, rho, s.keep);
}

}  // namespace attntune
