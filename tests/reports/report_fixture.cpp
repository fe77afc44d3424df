// report_fixture OUT.html: writes report.html for the fabricated trials (chromium check).
#include <cstdio>
#include <fstream>

#include "reports/reports.h"
#include "tests/reports/fixture_rows.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: report_fixture OUT.html\n");
    return 2;
  }
  std::ofstream out(argv[1], std::ios::binary);
  attntune::ReportInput input = attntune::test::MakeFixtureInputWithDecode();
  attntune::test::AddCounters(&input.trials[1], 2e8, 4e11);  // the roofline's counters points
  out << attntune::RenderHtmlReport(input);
  return out.good() ? 0 : 1;
}
