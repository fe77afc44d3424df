#include "tuner/emit.h"

#include <algorithm>
#include <filesystem>
#include <set>

#include "build_info.h"
#include "core/error.h"
#include "core/files.h"
#include "tuner/evaluate.h"

namespace attntune {

bool GeometrySelection::Matches(const EntryGeometry& g) const {
  return (!dtype || *dtype == g.dtype) && (!batch || *batch == g.batch) &&
         (!q_heads || *q_heads == g.q_heads) && (!kv_heads || *kv_heads == g.kv_heads);
}

ReportInput LoadReportInput(const Database& db, const GeometrySelection& selection,
                            bool one_geometry) {
  ReportInput input;
  input.tool_version = ATTNTUNE_VERSION;
  input.generated_at = UtcNow();
  input.db_path = db.Path();
  input.devices = db.Devices();
  input.trials = db.Trials(TrialFilter{});
  std::set<EntryGeometry> held;  // every geometry of the file, for the refusal below
  for (const TrialRow& t : input.trials) held.insert(GeometryOf(t.problem));
  input.trials.erase(std::remove_if(input.trials.begin(), input.trials.end(),
                                    [&](const TrialRow& t) {
                                      return !selection.Matches(GeometryOf(t.problem)) ||
                                             (!selection.builds.empty() &&
                                              selection.builds.count(t.build.id) == 0);
                                    }),
                     input.trials.end());
  // A geometry chosen (--dtype, --batch, --model) that no trial has: one line, where the
  // outputs written over the folder's would have held nothing.
  const bool chosen = selection.dtype || selection.batch || selection.q_heads || selection.kv_heads;
  if (chosen && input.trials.empty() && !held.empty()) {
    std::string names;
    for (const EntryGeometry& g : held) names += (names.empty() ? "" : "; ") + g.ToString();
    throw UserError(db.Path() + ": no trial of the geometry chosen with --dtype, --batch or "
                    "--model (its trials are of " + names + ")");
  }
  if (one_geometry) {
    std::set<EntryGeometry> geometries;
    for (const TrialRow& t : input.trials)
      if (t.result.status == TrialStatus::kOk) geometries.insert(GeometryOf(t.problem));
    if (geometries.size() > 1) {
      std::string names;
      for (const EntryGeometry& g : geometries) names += (names.empty() ? "" : "; ") + g.ToString();
      throw UserError(db.Path() + ": its trials are of " + std::to_string(geometries.size()) +
                      " problem geometries (" + names +
                      "), and a config file holds one: choose it with --dtype, --batch and "
                      "--model");
    }
  }
  input.calibrations = db.Calibrations();
  input.run_problems = db.RunProblems();
  // The heatmaps' cells: the calibrated entries a lookup answers with.
  for (const BestEntry& e : ChosenEntries(BestEntries(input)))
    if (e.calib_id != 0) input.quality_cells[e.trial_id] = db.QualityCells(e.trial_id);
  return input;
}

OutputPaths EmitPaths(const std::string& out_dir) {
  OutputPaths paths;
  paths.header = (std::filesystem::path(out_dir) / "attntune_config.h").string();
  paths.json = (std::filesystem::path(out_dir) / "attntune_config.json").string();
  paths.report = (std::filesystem::path(out_dir) / "report.html").string();
  return paths;
}

void RefuseEmitOverDatabase(const std::string& out_dir, const std::string& db_path) {
  const OutputPaths paths = EmitPaths(out_dir);
  for (const std::string* p : {&paths.header, &paths.json, &paths.report})
    RefuseToReplace(*p, db_path, "the database");
}

OutputPaths EmitOutputs(const Database& db, const std::string& out_dir,
                        const GeometrySelection& selection) {
  RefuseEmitOverDatabase(out_dir, db.Path());
  const ReportInput input = LoadReportInput(db, selection);
  CreateOutputFolder(out_dir);
  const OutputPaths paths = EmitPaths(out_dir);
  WriteFileAtomic(paths.header, RenderConfigHeader(input));
  WriteFileAtomic(paths.json, RenderConfigJson(input));
  WriteFileAtomic(paths.report, RenderHtmlReport(input));
  return paths;
}

}  // namespace attntune
