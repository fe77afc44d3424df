#include "reports/html_page.h"

#include "reports/assets.h"

namespace attntune {

namespace {

bool StartsWithNoCase(const std::string& text, size_t pos, const char* prefix) {
  for (size_t i = 0; prefix[i] != '\0'; ++i, ++pos) {
    if (pos >= text.size()) return false;
    const char c = text[pos];
    const char lower = c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
    if (lower != prefix[i]) return false;
  }
  return true;
}

// JavaScript source for an inline <script>: "</script" and "<!--" would end the element
// or confuse the HTML parser; "<\/script" and "<\!--" mean the same in JS strings,
// regexes and comments, the only places where they can occur.
std::string ScriptSafe(const std::string& js) {
  std::string out;
  out.reserve(js.size());
  for (size_t i = 0; i < js.size(); ++i) {
    out += js[i];
    if (js[i] == '<' &&
        (StartsWithNoCase(js, i + 1, "/script") || StartsWithNoCase(js, i + 1, "!--")))
      out += '\\';
  }
  return out;
}

}  // namespace

std::string HtmlEscape(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  for (const char c : text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string JsonForScript(const std::string& json_text) {
  std::string out;
  out.reserve(json_text.size());
  for (size_t i = 0; i < json_text.size(); ++i) {
    const char c = json_text[i];
    if (c == '<') {
      out += "\\u003c";
    } else if (c == '>') {
      out += "\\u003e";
    } else if (c == '&') {
      out += "\\u0026";
    } else if (c == '\xE2' && i + 2 < json_text.size() && json_text[i + 1] == '\x80' &&
               (json_text[i + 2] == '\xA8' || json_text[i + 2] == '\xA9')) {
      // U+2028 and U+2029 (UTF-8 E2 80 A8/A9) end a line in older JavaScript parsers.
      out += json_text[i + 2] == '\xA8' ? "\\u2028" : "\\u2029";
      i += 2;
    } else {
      out += c;
    }
  }
  return out;
}

std::string RenderHtmlPage(const HtmlPage& page) {
  std::string out =
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>" +
      HtmlEscape(page.title) + "</title>\n<style>" + page.style + "</style>\n";
  if (!page.head_script.empty()) out += "<script>" + ScriptSafe(page.head_script) + "</script>\n";
  if (page.chartjs) {
    const std::string chartjs(reinterpret_cast<const char*>(report_assets::kChartJs),
                              report_assets::kChartJsSize);
    out += "<script>\n" + ScriptSafe(chartjs) + "\n</script>\n";
  }
  return out + "</head>\n<body>\n" + page.body + "</body>\n</html>\n";
}

}  // namespace attntune
