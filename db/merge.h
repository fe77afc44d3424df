// attntune db merge: the rows of one database added to another, each once. The tables,
// their columns, what identifies a row and what refers to what are read from the schema
// (PRAGMA table_info, index_list, foreign_key_list), so that a column or table a later
// schema adds is merged without a change here; a reference the schema cannot declare
// (problem.calib_id, whose 0 names no calibration set) is listed in merge.cpp.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "db/database.h"

namespace attntune {

/// Rows added to the destination, and rows found there already, per table.
struct MergeCounts {
  std::map<std::string, int64_t> added;
  std::map<std::string, int64_t> present;
};

/// Adds every row of `from` that `into` lacks, in one transaction: a row of a table with a
/// UNIQUE constraint (device, problem, config, build) is the same as the row with equal
/// values there; one of a table without (run, trial) the same as the row with equal
/// NOT NULL columns, whose NULL columns it fills (a run finished since); a row keyed by
/// its primary key (sample, metric, trial_quality, run_problem) the same as the row of
/// that key. References (problem.calib_id's included) are mapped to the destination's
/// rows. The file's own bookkeeping (meta) and tunes' claims are not merged. `from` must
/// have this build's schema (OpenReadOnly with `current`). `from` is read in one read
/// transaction: a tune writing to it meanwhile adds nothing half (its samples without
/// their trial). `after_table` (tests) is called with each table's name once it is merged.
MergeCounts MergeDatabase(Database& into, const Database& from,
                          const std::function<void(const std::string&)>& after_table);
inline MergeCounts MergeDatabase(Database& into, const Database& from) {
  return MergeDatabase(into, from, {});
}

/// Merges each of `inputs` (read with OpenReadOnly: a file of a newer schema or a damaged
/// one is refused in one line, an older one read as migrated) into the database at
/// `into`, created if absent; one transaction per input. UserError when an input is
/// missing or is `into` itself. Returns each input's counts, in order.
std::vector<std::pair<std::string, MergeCounts>> MergeFiles(const std::vector<std::string>& inputs,
                                                            const std::string& into);

}  // namespace attntune
