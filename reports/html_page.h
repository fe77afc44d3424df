// The one HTML page shell of attntune's pages (report.html, the replay page,
// allocation.html) and the one way text and data are escaped into them. Internal to
// reports/.
#pragma once

#include <string>

namespace attntune {

/// Text as HTML character data or a quoted attribute value: & < > " ' become entities.
std::string HtmlEscape(const std::string& text);

/// JSON text made safe inside a <script> element: every <, > and & (which in JSON occur
/// only inside strings) and U+2028, U+2029 become \u escapes, which mean the same to a
/// JSON or JavaScript parser; the HTML parser then never sees "</script" or "<!--".
std::string JsonForScript(const std::string& json_text);

/// The parts of a page; RenderHtmlPage escapes the title and makes the scripts safe,
/// `style` and `body` are written as given (the caller escapes what it puts in them).
struct HtmlPage {
  std::string title;        // plain text
  std::string style;        // CSS
  std::string head_script;  // JavaScript run first (error handlers); "" for none
  bool chartjs = false;     // inline Chart.js (reports/assets.h) in the head
  std::string body;         // HTML
};

/// "<!DOCTYPE html>" ... "</html>\n": a self-contained page that loads nothing from
/// elsewhere.
std::string RenderHtmlPage(const HtmlPage& page);

}  // namespace attntune
