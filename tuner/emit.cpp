#include "tuner/emit.h"

#include <filesystem>

#include "build_info.h"
#include "core/files.h"
#include "tuner/evaluate.h"

namespace attntune {

ReportInput LoadReportInput(const Database& db) {
  ReportInput input;
  input.tool_version = ATTNTUNE_VERSION;
  input.generated_at = UtcNow();
  input.db_path = db.Path();
  input.devices = db.Devices();
  input.trials = db.Trials(TrialFilter{});
  input.calibrations = db.Calibrations();
  input.run_problems = db.RunProblems();
  // The heatmaps' cells: the calibrated entries a lookup answers with.
  for (const BestEntry& e : ChosenEntries(BestEntries(input)))
    if (e.calib_id != 0) input.quality_cells[e.trial_id] = db.QualityCells(e.trial_id);
  return input;
}

OutputPaths EmitOutputs(const Database& db, const std::string& out_dir) {
  CreateOutputFolder(out_dir);
  const ReportInput input = LoadReportInput(db);
  OutputPaths paths;
  paths.header = (std::filesystem::path(out_dir) / "attntune_config.h").string();
  paths.json = (std::filesystem::path(out_dir) / "attntune_config.json").string();
  paths.report = (std::filesystem::path(out_dir) / "report.html").string();
  WriteFileAtomic(paths.header, RenderConfigHeader(input));
  WriteFileAtomic(paths.json, RenderConfigJson(input));
  WriteFileAtomic(paths.report, RenderHtmlReport(input));
  return paths;
}

}  // namespace attntune
