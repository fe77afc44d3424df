#include "cli/commands.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "cli/allocate_command.h"
#include "cli/backends.h"
#include "cli/replay_command.h"
#include "core/error.h"
#include "core/files.h"
#include "core/shape.h"
#include "core/types.h"
#include "db/database.h"
#include "db/merge.h"
#include "profiler/measure.h"
#include "tuner/emit.h"
#include "tuner/model.h"

namespace attntune {

namespace {

// A CLI11 check: the option's text as a finite double with ok(value).
CLI::Validator FiniteCheck(bool (*ok)(double), const std::string& must) {
  return CLI::Validator(
      [ok, must](std::string& text) -> std::string {
        // A decimal number, the whole text: CLI11's conversion alone took "0x10" as 16.
        const std::string why = "'" + text + "' is not " + must;
        if (text.empty() || std::isspace(static_cast<unsigned char>(text.front())) ||
            text.find_first_of("xX") != std::string::npos)
          return why;
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (end != text.c_str() + text.size() || !std::isfinite(value) || !ok(value)) return why;
        return "";
      },
      must);
}

// A CLI11 check: the option's text as decimal digits (ParseDecimalDigits) from lo to hi.
// CLI11's own conversion took "" as 0, "0x10" as 16 and saturated 99999999999999999999
// to 2^63 - 1.
CLI::Validator DigitsCheck(int64_t lo, int64_t hi, const std::string& must) {
  return CLI::Validator(
      [lo, hi, must](std::string& text) -> std::string {
        const int64_t value = ParseDecimalDigits(text);
        if (value < lo || value > hi) return "'" + text + "' is not " + must;
        return "";
      },
      must);
}

// emit's and report's choice of trials: the geometry of one tune (tuner/emit.h).
struct SelectionArgs {
  std::string dtype, batch, model;
};

void AddSelectionOptions(CLI::App* cmd, SelectionArgs* a) {
  cmd->add_option("--dtype", a->dtype,
                  "The trials of this dtype only (fp32, fp16, bf16), where the database holds several");
  cmd->add_option("--batch", a->batch, "The trials of this batch size only");
  cmd->add_option("--model", a->model,
                  "The trials of this model's heads only (an embedded model name or a Hugging "
                  "Face config.json)");
}

GeometrySelection ParseSelection(const SelectionArgs& a) {
  GeometrySelection s;
  if (!a.dtype.empty()) {
    s.dtype = DtypeFromString(a.dtype);
    if (!s.dtype) throw UserError("--dtype: '" + a.dtype + "' is not fp32, fp16 or bf16");
  }
  if (!a.batch.empty()) s.batch = ParsePositiveInt(a.batch, "--batch");
  if (!a.model.empty()) {
    const ModelGeometry model = LoadModel(a.model, "--model");
    s.q_heads = model.q_heads;
    s.kv_heads = model.kv_heads;
  }
  return s;
}

}  // namespace

const CLI::Validator kPositiveFinite =
    FiniteCheck([](double v) { return v > 0.0; }, "a positive number");
const CLI::Validator kNonNegativeFinite =
    FiniteCheck([](double v) { return v >= 0.0; }, "a non-negative number");
const CLI::Validator kRepetitions =
    DigitsCheck(1, kMaxMinReps, "a count of repetitions from 1 to " + std::to_string(kMaxMinReps));
const CLI::Validator kNonNegativeInteger = DigitsCheck(0, INT64_MAX, "a non-negative integer");
const CLI::Validator kPositiveInteger = DigitsCheck(1, INT64_MAX, "a positive integer");
const CLI::Validator kFraction =
    FiniteCheck([](double v) { return v >= 0.0 && v <= 1.0; }, "a number from 0 to 1");
const CLI::Validator kSeed = CLI::Validator(
    [](std::string& text) -> std::string {
      const std::string why = "'" + text + "' is not a seed (decimal digits, at most " +
                              std::to_string(UINT64_MAX) + ")";
      if (text.empty() || text.size() > 20) return why;
      uint64_t value = 0;
      for (const char c : text) {
        if (c < '0' || c > '9') return why;
        if (__builtin_mul_overflow(value, uint64_t{10}, &value) ||
            __builtin_add_overflow(value, static_cast<uint64_t>(c - '0'), &value))
          return why;
      }
      return "";
    },
    "a seed");

namespace {

// `attntune variants`: the variant table as this build holds it, each row's parameters
// and, per platform, phase and dtype, the implementations that run it.
void RegisterVariants(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("variants", "List the variants and what runs each, from the table");
  cmd->callback([rc] {
    for (const Variant& v : Variants()) {
      std::string params;
      for (const ParamDecl& p : v.params) params += (params.empty() ? "" : ", ") + p.name;
      std::printf("%s: %s\n  params: %s\n", v.id.c_str(), v.summary.c_str(),
                  params.empty() ? "none" : params.c_str());
      // One line per (platform, phase, dtype) that some implementation takes, in table order.
      std::vector<std::string> lines;
      for (const Implementation& impl : v.implementations) {
        for (const Phase phase : impl.phases) {
          for (const Dtype dtype : impl.dtypes) {
            const std::string key = "  " + impl.platform + " " + ToString(phase) + " " +
                                    ToString(dtype) + ":";
            auto it = std::find_if(lines.begin(), lines.end(), [&](const std::string& l) {
              return l.rfind(key, 0) == 0;
            });
            if (it == lines.end()) {
              lines.push_back(key + " " + impl.id);
            } else if (it->find(" " + impl.id) == std::string::npos) {
              *it += ", " + impl.id;
            }
          }
        }
      }
      for (const std::string& line : lines) std::printf("%s\n", line.c_str());
    }
    const std::vector<AbsentImplementation>& absent = AbsentImplementations();
    if (!absent.empty()) std::printf("not built in this attntune:\n");
    for (const AbsentImplementation& a : absent) {
      std::printf("  %s %s: %s\n", a.platform.c_str(), a.id.c_str(), a.reason.c_str());
    }
    *rc = 0;
  });
}

void RegisterDevices(CLI::App& app, int* rc) {
  auto* cmd = app.add_subcommand("devices", "List the devices attntune can tune on");
  cmd->callback([rc] {
    for (const std::string& line : DescribeDevices()) std::printf("%s\n", line.c_str());
    *rc = 0;
  });
}

// The readers' way in: emit, report and db info write nothing into the file (it may sit in
// a read-only folder, or be another tune's database in use).
std::unique_ptr<Database> OpenExisting(const std::string& path) {
  if (FILE* f = std::fopen(path.c_str(), "rb")) {
    std::fclose(f);
  } else {
    throw UserError("--db: '" + path + "' does not exist");
  }
  return Database::OpenReadOnly(path);
}

// `attntune db merge A.db B.db ... --into C.db`: each input's rows that C lacks.
void RegisterMerge(CLI::App* dbcmd, int* rc) {
  auto inputs = std::make_shared<std::vector<std::string>>();
  auto into = std::make_shared<std::string>();
  auto* merge = dbcmd->add_subcommand(
      "merge", "Add the trials of databases (separate jobs, clusters) to one, each once");
  merge->add_option("databases", *inputs, "Databases to merge")->required();
  merge->add_option("--into", *into, "The database they go into (created if absent)")->required();
  merge->callback([inputs, into, rc] {
    for (const auto& [path, counts] : MergeFiles(*inputs, *into)) {
      std::string added, present;
      for (const auto& [table, n] : counts.added)
        added += (added.empty() ? "" : ", ") + table + " " + std::to_string(n);
      for (const auto& [table, n] : counts.present)
        present += (present.empty() ? "" : ", ") + table + " " + std::to_string(n);
      std::printf("%s: added %s\n  already in %s: %s\n", path.c_str(), added.c_str(),
                  into->c_str(), present.c_str());
    }
    *rc = 0;
  });
}

void RegisterEmitReportDb(CLI::App& app, int* rc) {
  auto emit_db = std::make_shared<std::string>();
  auto emit_out = std::make_shared<std::string>("attntune_out");
  auto* emit = app.add_subcommand("emit", "Write attntune_config.h, .json and report.html from a database");
  emit->add_option("--db", *emit_db, "SQLite database")->required();
  emit->add_option("--out", *emit_out, "Output folder")->capture_default_str();
  auto emit_selection = std::make_shared<SelectionArgs>();
  AddSelectionOptions(emit, emit_selection.get());
  emit->callback([emit_db, emit_out, emit_selection, rc] {
    const GeometrySelection selection = ParseSelection(*emit_selection);
    auto db = OpenExisting(*emit_db);
    const OutputPaths p = EmitOutputs(*db, *emit_out, selection);
    std::printf("  header: %s\n  json:   %s\n  report: %s\n", p.header.c_str(), p.json.c_str(),
                p.report.c_str());
    *rc = 0;
  });

  auto report_db = std::make_shared<std::string>();
  auto report_out = std::make_shared<std::string>("report.html");
  auto* report = app.add_subcommand("report", "Write the HTML report of a database");
  report->add_option("--db", *report_db, "SQLite database")->required();
  report->add_option("--out", *report_out, "HTML file")->capture_default_str();
  auto report_selection = std::make_shared<SelectionArgs>();
  AddSelectionOptions(report, report_selection.get());
  report->callback([report_db, report_out, report_selection, rc] {
    const GeometrySelection selection = ParseSelection(*report_selection);
    auto db = OpenExisting(*report_db);
    RefuseToReplace(*report_out, *report_db, "the database");
    WriteFileAtomic(*report_out, RenderHtmlReport(LoadReportInput(*db, selection)));
    std::printf("  report: %s\n", report_out->c_str());
    *rc = 0;
  });

  auto* dbcmd = app.add_subcommand("db", "Inspect or merge databases");
  dbcmd->require_subcommand(1);
  auto info_db = std::make_shared<std::string>();
  auto* info = dbcmd->add_subcommand("info", "Counts of what a database holds");
  info->add_option("--db", *info_db, "SQLite database")->required();
  info->callback([info_db, rc] {
    auto db = OpenExisting(*info_db);
    const DbInfo i = db->Info();
    std::printf("database: %s\nschema version: %d\n", i.path.c_str(), i.schema_version);
    std::printf("devices %lld, problems %lld, configs %lld, builds %lld, runs %lld\n",
                static_cast<long long>(i.devices), static_cast<long long>(i.problems),
                static_cast<long long>(i.configs), static_cast<long long>(i.builds),
                static_cast<long long>(i.runs));
    std::printf("trials %lld (samples %lld, metrics %lld)\n", static_cast<long long>(i.trials),
                static_cast<long long>(i.samples), static_cast<long long>(i.metrics));
    for (const auto& [status, n] : i.trials_by_status)
      std::printf("  %-15s %lld\n", status.c_str(), static_cast<long long>(n));
    std::printf("calibration sets %lld\n", static_cast<long long>(i.calibrations));
    *rc = 0;
  });
  RegisterMerge(dbcmd, rc);
  auto records_db = std::make_shared<std::string>();
  auto* records = dbcmd->add_subcommand(
      "records", "Per tuned entry, each implementation's best trial as bench --json's record, "
                 "one per line (the entry's own with \"tuned\": true)");
  records->add_option("--db", *records_db, "SQLite database")->required();
  records->callback([records_db, rc] {
    auto db = OpenExisting(*records_db);
    std::fputs(RenderEntryRecords(LoadReportInput(*db, {}, /*one_geometry=*/false)).c_str(),
               stdout);
    *rc = 0;
  });
}

}  // namespace

void RegisterCommands(CLI::App& app, int* rc) {
  RegisterDevices(app, rc);
  RegisterVariants(app, rc);
  RegisterTune(app, rc);
  RegisterBench(app, rc);
  RegisterRun(app, rc);
  RegisterEmitReportDb(app, rc);
  RegisterReplay(app, rc);
  RegisterAllocate(app, rc);
}

}  // namespace attntune
