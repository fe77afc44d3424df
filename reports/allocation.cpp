// AllocationJson (an entry of attntune_config.json), RenderAllocationHtml and
// RenderAllocationHeader: the outputs of `attntune allocate`.
#include "reports/allocation.h"

#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "reports/html_page.h"
#include "reports/report_util.h"

namespace attntune {

namespace {

bool MixedLayers(const AllocationRecord& r) {
  for (const auto& layer : r.swa)
    for (int v : layer)
      if (v != layer[0]) return true;
  return false;
}

std::string CommentValue(const std::string& text) {  // JSON-quoted, ASCII, one line
  return nlohmann::json(text).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
}

}  // namespace

nlohmann::ordered_json report_util::AllocationJson(const AllocationRecord& r) {
  using J = nlohmann::ordered_json;
  J layer_types = J::array(), windows = J::array(), share = J::array();
  for (const auto& layer : r.swa) {
    int n = 0;
    J row = J::array();
    for (int v : layer) n += v, row.push_back(v ? r.window : 0);
    layer_types.push_back(n == static_cast<int>(layer.size()) ? "sliding_attention"
                                                              : "full_attention");
    windows.push_back(row);
    share.push_back(layer.empty() ? 0.0
                                  : static_cast<double>(n) / static_cast<double>(layer.size()));
  }
  J a;
  a["model"] = {{"name", r.model},      {"model_type", r.model_type}, {"layers", r.layers},
                {"q_heads", r.q_heads}, {"kv_heads", r.kv_heads},     {"head_dim", r.head_dim}};
  a["granularity"] = r.granularity;
  a["strategy"] = r.strategy;
  a["budget"] = r.budget;
  a["rho_target"] = r.rho_target;
  a["rho"] = r.rho;
  a["sliding_window"] = r.window;
  a["sink"] = r.sink;
  a["transformers"] = {{"sliding_window", r.window}, {"layer_types", layer_types}};
  if (MixedLayers(r)) a["kv_head_windows"] = windows;
  a["swa_share_per_layer"] = share;
  a["tiles"] = {{"Br", r.br}, {"Bc", r.bc}};
  a["calibration"] = {
      {"source", r.calib_source}, {"length", r.calib_length}, {"window", r.calib_window}};
  J heads = J::array();
  for (size_t i = 0; i < r.head_class.size(); ++i)
    heads.push_back({{"layer", static_cast<int64_t>(i) / r.kv_heads},
                     {"kv_head", static_cast<int64_t>(i) % r.kv_heads},
                     {"range_class", r.head_class[i]},
                     {"mass_kept", r.head_mass_kept[i]},
                     {"swa_rel_err", r.head_swa_rel_err[i]}});
  a["heads"] = heads;
  a["cost"] = {{"device", r.device},
               {"method", r.cost_method},
               {"context", r.context},
               {"quality_loss", r.quality_loss},
               {"prefill_ms", r.prefill_ms},
               {"decode_ms_per_token", r.decode_ms},
               {"kv_bytes", r.kv_bytes},
               {"prefill_pairs", r.prefill_pairs},
               {"decode_pairs", r.decode_pairs}};
  J sweep = J::array();
  for (const auto& p : r.sweep)
    sweep.push_back({{"rho", p.rho},
                     {"quality_loss", p.quality_loss},
                     {"prefill_ms", p.prefill_ms},
                     {"decode_ms_per_token", p.decode_ms},
                     {"kv_bytes", p.kv_bytes},
                     {"prefill_pairs", p.prefill_pairs},
                     {"on_front", p.on_front}});
  a["sweep"] = sweep;
  if (r.tuned.tuned)
    a["tuned"] = {{"Br", r.tuned.br},
                  {"Bc", r.tuned.bc},
                  {"w", r.tuned.window},
                  {"prefill_ms", r.tuned.prefill_ms},
                  {"quality_loss", r.tuned.quality_loss},
                  {"default_prefill_ms", r.tuned.default_prefill_ms},
                  {"default_tiles", {{"Br", r.br}, {"Bc", r.bc}}},
                  {"layer_swa_heads", r.tuned.layer_swa_heads},
                  {"evaluations", r.tuned.evaluations},
                  {"budget", r.tuned.budget},
                  {"search", "random"},
                  {"timed", "prefill of one layer"}};
  else
    a["tuned"] = nullptr;
  return a;
}

std::string RenderAllocationHtml(const AllocationRecord& r) {
  char buf[256];
  std::string h = "<h1>FA/SWA allocation: " + HtmlEscape(r.model) + "</h1>\n<p>" +
                  HtmlEscape(r.granularity) + ", " + HtmlEscape(r.strategy) + ", " +
                  HtmlEscape(r.budget) + "; window " + std::to_string(r.window) + ", context " +
                  std::to_string(r.context) + "; measured on " + HtmlEscape(r.device) + " (" +
                  HtmlEscape(r.cost_method) + ")</p>\n";
  if (r.tuned.tuned) {
    std::snprintf(buf, sizeof buf,
                  "<p>tuned tiles: Br %lld, Bc %lld at w %lld: %.3f ms per layer with %lld SWA "
                  "KV heads (defaults Br %lld, Bc %lld: %.3f ms; %lld points searched)</p>\n",
                  static_cast<long long>(r.tuned.br), static_cast<long long>(r.tuned.bc),
                  static_cast<long long>(r.tuned.window), r.tuned.prefill_ms,
                  static_cast<long long>(r.tuned.layer_swa_heads), static_cast<long long>(r.br),
                  static_cast<long long>(r.bc), r.tuned.default_prefill_ms,
                  static_cast<long long>(r.tuned.evaluations));
    h += buf;
  }
  h +=
      "<h2>Layers x KV heads</h2><p>blue: full attention; orange: sliding window, darker = "
      "larger output error if SWA (hover for the head's statistics)</p>\n<table><tr><th>layer</th>";
  for (int64_t k = 0; k < r.kv_heads; ++k) h += "<th>" + std::to_string(k) + "</th>";
  h += "<th>SWA share</th></tr>\n";
  double max_err = 1e-12;
  for (double e : r.head_swa_rel_err) max_err = std::max(max_err, e);
  for (size_t l = 0; l < r.swa.size(); ++l) {
    h += "<tr><th>" + std::to_string(l) + "</th>";
    int n = 0;
    for (size_t k = 0; k < r.swa[l].size(); ++k) {
      const size_t i = l * r.swa[l].size() + k;
      const double e = i < r.head_swa_rel_err.size() ? r.head_swa_rel_err[i] / max_err : 0.0;
      const int shade = static_cast<int>(230 - 150 * e);
      if (r.swa[l][k]) {
        ++n;
        std::snprintf(buf, sizeof buf, "rgb(255,%d,%d)", std::max(60, shade - 40), 60);
      } else {
        std::snprintf(buf, sizeof buf, "rgb(70,120,200)");
      }
      std::string title = i < r.head_class.size()
                              ? r.head_class[i] + ", mass kept " +
                                    std::to_string(r.head_mass_kept[i]) + ", swa_rel_err " +
                                    std::to_string(r.head_swa_rel_err[i])
                              : "";
      h += "<td class=\"c\" style=\"background:" + std::string(buf) + "\" title=\"" +
           HtmlEscape(title) + "\"></td>";
    }
    std::snprintf(buf, sizeof buf, "%.2f",
                  r.swa[l].empty() ? 0.0 : static_cast<double>(n) / r.swa[l].size());
    h += "<td>" + std::string(buf) + "</td></tr>\n";
  }
  h += "</table>\n<h2>Sweep (* = Pareto front of quality loss, prefill time, KV bytes)</h2>\n"
       "<table><tr><th>rho</th><th>quality loss</th><th>prefill ms</th><th>decode ms/token</th>"
       "<th>KV bytes</th><th>front</th></tr>\n";
  for (const auto& p : r.sweep) {
    std::snprintf(
        buf, sizeof buf,
        "<tr><td>%.4f</td><td>%.5g</td><td>%.3f</td><td>%.4f</td><td>%lld</td><td>%s</td></tr>\n",
        p.rho, p.quality_loss, p.prefill_ms, p.decode_ms, static_cast<long long>(p.kv_bytes),
        p.on_front ? "*" : "");
    h += buf;
  }
  HtmlPage page;
  page.title = "attntune allocation: " + r.model;
  page.style =
      "body{font-family:sans-serif;margin:2em}table{border-collapse:collapse}"
      "td,th{border:1px solid #ccc;padding:2px 6px;font-size:12px;text-align:right}"
      "td.c{width:18px;height:14px;padding:0}";
  page.body = h + "</table>\n";
  return RenderHtmlPage(page);
}

std::string RenderAllocationHeader(const AllocationRecord& r) {
  std::string h;
  h +=
      "// attntune_allocation.h: FA/SWA allocation generated by attntune " + r.tool_version + ".\n";
  h += "// generated_at " + CommentValue(r.generated_at) + ", model " + CommentValue(r.model) +
       ", granularity " + CommentValue(r.granularity) + ", strategy " + CommentValue(r.strategy) +
       ", budget " + CommentValue(r.budget) + ".\n";
  h += "#pragma once\n\n#include <cstdint>\n\nnamespace attntune_allocation {\n\n";
  h += "constexpr int kLayers = " + std::to_string(r.layers) + ";\n";
  h += "constexpr int kKvHeads = " + std::to_string(r.kv_heads) + ";\n";
  h += "constexpr int kSlidingWindow = " + std::to_string(r.window) + ";\n";
  h += "constexpr int kSink = " + std::to_string(r.sink) + ";\n";
  char buf[256];
  std::snprintf(buf, sizeof buf, "%.17g", r.rho);
  h += std::string("constexpr double kSwaShare = ") + buf + ";  // SWA share of all KV heads\n\n";
  h += "/// kWindows[layer][kv_head]: 0 = full attention, else the sliding window.\n";
  h += "constexpr int32_t kWindows[kLayers][kKvHeads] = {\n";
  for (const auto& layer : r.swa) {
    h += "    {";
    for (size_t i = 0; i < layer.size(); ++i)
      h += (i ? ", " : "") + std::to_string(layer[i] ? r.window : 0);
    h += "},\n";
  }
  h += "};\n\n";
  if (r.tuned.tuned) {
    std::snprintf(buf, sizeof buf,
                  "/// Tiles of the hybrid kernel tuned for this allocation (%lld points): %.3f "
                  "ms\n/// per layer at w %lld (defaults Br %lld, Bc %lld: %.3f ms).\n",
                  static_cast<long long>(r.tuned.evaluations), r.tuned.prefill_ms,
                  static_cast<long long>(r.tuned.window), static_cast<long long>(r.br),
                  static_cast<long long>(r.bc), r.tuned.default_prefill_ms);
    h += buf;
  } else {
    h += "/// Tiles of the hybrid kernel: not tuned (the defaults).\n";
  }
  h += "constexpr int kTileBr = " + std::to_string(r.tuned.tuned ? r.tuned.br : r.br) + ";\n";
  h += "constexpr int kTileBc = " + std::to_string(r.tuned.tuned ? r.tuned.bc : r.bc) + ";\n\n";
  h += "/// The window of a KV head (0 = full attention); outside the table: 0, full\n"
       "/// attention, which is always correct.\n"
       "constexpr int32_t Window(int layer, int kv_head) {\n"
       "  return layer >= 0 && layer < kLayers && kv_head >= 0 && kv_head < kKvHeads\n"
       "             ? kWindows[layer][kv_head]\n"
       "             : 0;\n"
       "}\n\n}  // namespace attntune_allocation\n";
  return h;
}

}  // namespace attntune
