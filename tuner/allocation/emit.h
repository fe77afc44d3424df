// The outputs of `attntune allocate`, written like tune's (tuner/emit.h): every file
// atomically, attntune_config.json in tune's schema with the allocation next to the
// database's entries.
#pragma once

#include <string>

#include "db/database.h"
#include "reports/allocation.h"
#include "tuner/allocation/allocate.h"

namespace attntune {

struct AllocationOutputs {
  std::string json;    // attntune_config.json
  std::string header;  // attntune_allocation.h
  std::string tsv;     // full_attention_heads.tsv
  std::string mask;    // allocation_mask.json
  std::string report;  // allocation.html
};

/// What the allocation reporters render of a result (`device`: where it was measured).
AllocationRecord MakeAllocationRecord(const AllocateResult& r, const AllocateOptions& o,
                                      const std::string& device);

/// Writes the five outputs into `out_dir` (created if needed), each atomically;
/// attntune_config.json holds `db`'s entries and `record` in "allocations". Failure ->
/// UserError.
/// The five files EmitAllocation writes into `out_dir`.
AllocationOutputs AllocationPaths(const std::string& out_dir);

/// UserError when one of AllocationPaths(out_dir) is the database file `db_path` (allocate
/// checks this before it measures anything).
void RefuseAllocationOverDatabase(const std::string& out_dir, const std::string& db_path);

AllocationOutputs EmitAllocation(const Database& db, const AllocationRecord& record,
                                 const Allocation& chosen, const std::string& out_dir);

}  // namespace attntune
