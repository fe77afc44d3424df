// The last stage of a tune: the outputs (attntune_config.h, attntune_config.json,
// report.html) rendered from what the database holds.
#pragma once

#include <string>

#include "db/database.h"
#include "reports/reports.h"

namespace attntune {

struct OutputPaths {
  std::string header;
  std::string json;
  std::string report;
};

/// Everything the reporters need, read from the database.
ReportInput LoadReportInput(const Database& db);

/// Writes attntune_config.h, attntune_config.json and report.html into `out_dir`
/// (created if needed), each atomically; failure -> UserError.
OutputPaths EmitOutputs(const Database& db, const std::string& out_dir);

}  // namespace attntune
