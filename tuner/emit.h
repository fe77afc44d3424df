// The last stage of a tune: the outputs (attntune_config.h, attntune_config.json,
// report.html) rendered from what the database holds.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>

#include "db/database.h"
#include "reports/reports.h"

namespace attntune {

struct OutputPaths {
  std::string header;
  std::string json;
  std::string report;
};

/// The trials a config file and report are rendered from: those whose problem has the
/// given dtype, batch and heads (an unset field takes any value), of the given builds (none
/// given: every build's). A tune selects its own geometry and its own builds (the trials
/// its attntune measured or could reuse: another build's time is another binary's); emit
/// and report take the geometry from --dtype, --batch and --model, and every build.
struct GeometrySelection {
  std::optional<Dtype> dtype;
  std::optional<int64_t> batch, q_heads, kv_heads;
  std::set<int64_t> builds;

  bool Matches(const EntryGeometry& g) const;
};

/// Everything the reporters need, read from the database: the trials of `selection`.
/// `one_geometry`: UserError naming the geometries when the ok trials left are of more
/// than one (a config file answers one lookup per variant, phase, d and L); false (db
/// records): every geometry, each entry with its own.
ReportInput LoadReportInput(const Database& db, const GeometrySelection& selection = {},
                            bool one_geometry = true);

/// The three files EmitOutputs writes into `out_dir`.
OutputPaths EmitPaths(const std::string& out_dir);

/// UserError when one of EmitPaths(out_dir) is the database file `db_path` (a tune checks
/// this before it measures anything).
void RefuseEmitOverDatabase(const std::string& out_dir, const std::string& db_path);

/// Writes attntune_config.h, attntune_config.json and report.html into `out_dir`
/// (created if needed), each atomically, from the trials of `selection` (one geometry);
/// failure, or an output that is the database's file -> UserError.
OutputPaths EmitOutputs(const Database& db, const std::string& out_dir,
                        const GeometrySelection& selection = {});

}  // namespace attntune
