#include "tuner/allocation/emit.h"

#include <filesystem>

#include "build_info.h"
#include "core/files.h"
#include "reports/reports.h"
#include "tuner/allocation/io.h"
#include "tuner/emit.h"
#include "tuner/evaluate.h"

namespace attntune {

AllocationRecord MakeAllocationRecord(const AllocateResult& r, const AllocateOptions& o,
                                      const std::string& device) {
  AllocationRecord rec;
  rec.tool_version = ATTNTUNE_VERSION;
  rec.generated_at = UtcNow();
  rec.device = device;
  rec.model = r.model.name;
  rec.model_type = r.model.model_type;
  rec.layers = r.model.layers;
  rec.q_heads = r.model.q_heads;
  rec.kv_heads = r.model.kv_heads;
  rec.head_dim = r.model.head_dim;
  rec.granularity = GranularityName(o.granularity);
  rec.strategy = o.strategy;
  rec.budget = r.budget;
  rec.rho_target = r.rho_target;
  rec.rho = r.chosen.SwaFraction();
  rec.window = r.window;
  rec.sink = o.sink;
  rec.context = o.context;
  rec.br = o.cost.br;
  rec.bc = o.cost.bc;
  rec.calib_source = r.stats.source;
  rec.calib_length = r.stats.length;
  rec.calib_window = r.calib_window;
  rec.cost_method = r.cost_method;
  for (int64_t l = 0; l < r.chosen.layers; ++l) {
    rec.swa.emplace_back();
    for (int64_t h = 0; h < r.chosen.kv_heads; ++h)
      rec.swa.back().push_back(r.chosen.Swa(l, h) ? 1 : 0);
  }
  for (const HeadStats& h : r.stats.heads) {
    rec.head_class.push_back(RangeClassName(h.range_class));
    rec.head_mass_kept.push_back(h.mass_kept);
    rec.head_swa_rel_err.push_back(h.swa_rel_err);
  }
  rec.quality_loss = r.quality_loss;
  rec.prefill_ms = r.cost.prefill_ms;
  rec.decode_ms = r.cost.decode_ms;
  rec.kv_bytes = r.cost.kv_bytes;
  rec.prefill_pairs = r.cost.prefill_pairs;
  rec.decode_pairs = r.cost.decode_pairs;
  rec.tuned.tuned = r.tuned.tuned;
  rec.tuned.br = r.tuned.br;
  rec.tuned.bc = r.tuned.bc;
  rec.tuned.window = r.tuned.window;
  rec.tuned.layer_swa_heads = r.tuned.layer_swa_heads;
  rec.tuned.evaluations = r.tuned.evaluations;
  rec.tuned.budget = o.tune_budget;
  rec.tuned.prefill_ms = r.tuned.prefill_ms;
  rec.tuned.default_prefill_ms = r.tuned.default_prefill_ms;
  rec.tuned.quality_loss = r.quality_loss;  // w is not searched: the chosen one's loss
  for (const SweepPoint& p : r.sweep)
    rec.sweep.push_back({p.rho, p.quality_loss, p.cost.prefill_ms, p.cost.decode_ms,
                         p.cost.kv_bytes, p.cost.prefill_pairs, p.on_front});
  return rec;
}

AllocationOutputs AllocationPaths(const std::string& out_dir) {
  auto path = [&](const char* name) { return (std::filesystem::path(out_dir) / name).string(); };
  AllocationOutputs paths;
  paths.json = path("attntune_config.json");
  paths.header = path("attntune_allocation.h");
  paths.tsv = path("full_attention_heads.tsv");
  paths.mask = path("allocation_mask.json");
  paths.report = path("allocation.html");
  return paths;
}

void RefuseAllocationOverDatabase(const std::string& out_dir, const std::string& db_path) {
  const AllocationOutputs paths = AllocationPaths(out_dir);
  for (const std::string* p : {&paths.json, &paths.header, &paths.tsv, &paths.mask, &paths.report})
    RefuseToReplace(*p, db_path, "the database");
}

AllocationOutputs EmitAllocation(const Database& db, const AllocationRecord& record,
                                 const Allocation& chosen, const std::string& out_dir) {
  RefuseAllocationOverDatabase(out_dir, db.Path());
  CreateOutputFolder(out_dir);
  const AllocationOutputs paths = AllocationPaths(out_dir);
  GeometrySelection selection;  // the model's heads (a tune of another in the database stays out)
  selection.q_heads = record.q_heads;
  selection.kv_heads = record.kv_heads;
  ReportInput input = LoadReportInput(db, selection);
  input.allocations = {record};
  WriteFileAtomic(paths.json, RenderConfigJson(input));
  WriteFileAtomic(paths.header, RenderAllocationHeader(record));
  WriteFileAtomic(paths.tsv, FormatDuoAttentionTsv(chosen));
  WriteFileAtomic(paths.mask, FormatConsaMask(chosen));
  WriteFileAtomic(paths.report, RenderAllocationHtml(record));
  return paths;
}

}  // namespace attntune
