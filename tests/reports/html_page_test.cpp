// The one page shell and escaping routines, and that each of attntune's three pages
// (report.html, the replay page, allocation.html) shows hostile text as text.
#include "reports/html_page.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "reports/allocation.h"
#include "reports/replay_report.h"
#include "reports/reports.h"
#include "tests/reports/fixture_rows.h"

namespace attntune {
namespace {

// Ends a script element, then opens a comment that would swallow what follows.
const std::string kHostile = "</script><!--<b>";

size_t Count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t pos = text.find(needle); pos != std::string::npos; pos = text.find(needle, pos + 1))
    ++n;
  return n;
}

// Every <script> closes where the page means it to, and no comment opens.
void CheckScriptsIntact(const std::string& html, size_t scripts) {
  CHECK(Count(html, "<script") == scripts);
  CHECK(Count(html, "</script") == scripts);
  CHECK(html.find("<!--") == std::string::npos);
}

TEST_CASE("HtmlEscape escapes markup and both quotes") {
  CHECK(HtmlEscape("<a href=\"x\">'&'</a>") ==
        "&lt;a href=&quot;x&quot;&gt;&#39;&amp;&#39;&lt;/a&gt;");
  CHECK(HtmlEscape("plain text, ü") == "plain text, ü");
}

TEST_CASE("JsonForScript escapes <, >, &, U+2028 and U+2029 and keeps the value") {
  const nlohmann::json value = {{"s", "</script><!--a&b\u2028c\u2029"}, {"n", 1}};
  const std::string safe = JsonForScript(value.dump());
  CHECK(safe ==
        R"({"n":1,"s":"\u003c/script\u003e\u003c!--a\u0026b\u2028c\u2029"})");
  CHECK(nlohmann::json::parse(safe) == value);
}

TEST_CASE("RenderHtmlPage: title escaped, scripts made safe, body as given") {
  HtmlPage page;
  page.title = "a </title> & b";
  page.style = "body{margin:0}";
  page.head_script = "var s = '</script><!--';";
  page.body = "<p>hi</p>\n";
  CHECK(RenderHtmlPage(page) ==
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<title>a &lt;/title&gt; &amp; b</title>\n<style>body{margin:0}</style>\n"
        "<script>var s = '<\\/script><\\!--';</script>\n</head>\n<body>\n<p>hi</p>\n"
        "</body>\n</html>\n");
  page.head_script.clear();
  page.chartjs = true;
  const std::string with_chart = RenderHtmlPage(page);
  CHECK(with_chart.find("Chart.js v3.9.1") != std::string::npos);
  CheckScriptsIntact(with_chart, 1);
}

TEST_CASE("report.html shows a hostile title and device name as text") {
  ReportInput in = test::MakeFixtureInput();
  in.generated_at = kHostile;
  for (TrialRow& t : in.trials) t.device.name = kHostile;
  in.devices.clear();
  const std::string html = RenderHtmlReport(in);
  CHECK(html.find("<title>attntune report &lt;/script&gt;&lt;!--&lt;b&gt;</title>") !=
        std::string::npos);
  CHECK(html.find("<h3>Device: &lt;/script&gt;&lt;!--&lt;b&gt; ") != std::string::npos);
  // In the chart data: the scaling series are labelled by device.
  CHECK(html.find(R"("label":"\u003c/script\u003e\u003c!--\u003cb\u003e d=64")") !=
        std::string::npos);
  CheckScriptsIntact(html, 4);
}

TEST_CASE("The replay page shows hostile names as text") {
  ReplayResult r;
  r.file = "/data/cache.json";
  r.device = kHostile;
  r.size = 3;
  r.curve_mean = r.curve_p10 = r.curve_p90 = r.curve_random = {0.5, 1.0};
  const std::string html = RenderReplayReport({kHostile}, {{r}}, 2, 1);
  CHECK(html.find("<title>attntune replay</title>") != std::string::npos);
  CHECK(html.find(R"x("title":"cache.json — \u003c/script\u003e\u003c!--\u003cb\u003e (3 )x"
                  R"x(configurations)")x") != std::string::npos);
  CHECK(html.find(R"({"\u003c/script\u003e\u003c!--\u003cb\u003e":0.0})") != std::string::npos);
  CheckScriptsIntact(html, 2);
}

TEST_CASE("allocation.html shows a hostile model name as text") {
  AllocationRecord r;
  r.model = kHostile;
  r.device = "cpu & more";
  r.layers = 1;
  r.kv_heads = 2;
  r.swa = {{1, 0}};
  r.head_class = {"local", "<global>"};
  r.head_mass_kept = {0.9, 0.5};
  r.head_swa_rel_err = {0.1, 0.4};
  const std::string html = RenderAllocationHtml(r);
  CHECK(html.find("<title>attntune allocation: &lt;/script&gt;&lt;!--&lt;b&gt;</title>") !=
        std::string::npos);
  CHECK(html.find("<h1>FA/SWA allocation: &lt;/script&gt;&lt;!--&lt;b&gt;</h1>") !=
        std::string::npos);
  CHECK(html.find("measured on cpu &amp; more") != std::string::npos);
  CHECK(html.find("title=\"&lt;global&gt;, mass kept") != std::string::npos);
  CHECK(html.rfind("<!DOCTYPE html>", 0) == 0);
  CheckScriptsIntact(html, 0);
}

}  // namespace
}  // namespace attntune
