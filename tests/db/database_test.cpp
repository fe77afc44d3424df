#include "db/database.h"

#include <signal.h>
#include <sqlite3.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "core/error.h"
#include "tests/user_error_text.h"

#include <catch2/catch.hpp>

namespace attntune {
namespace {

namespace fs = std::filesystem;

// A fresh directory under /tmp, removed with everything in it.
class TempDir {
 public:
  TempDir() {
    char tmpl[] = "/tmp/attntune_db_test_XXXXXX";
    REQUIRE(mkdtemp(tmpl) != nullptr);
    dir_ = tmpl;
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(dir_, ignored);
  }
  std::string File(const std::string& name) const { return (dir_ / name).string(); }

 private:
  fs::path dir_;
};

// Runs SQL on `path` through a separate raw connection (what another program would do).
void RawExec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* error = nullptr;
  int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  std::string message = error ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  INFO(message);
  REQUIRE(rc == SQLITE_OK);
}

// The first column of the first row of `sql`, as text.
std::string RawQuery(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK);
  std::string value;
  if (sqlite3_step(stmt) == SQLITE_ROW && sqlite3_column_text(stmt, 0))
    value = reinterpret_cast<const char*>(sqlite3_column_text(stmt, 0));
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return value;
}

std::string OpenError(const std::string& path) {
  try {
    Database::Open(path);
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

std::string ReadOnlyOpenError(const std::string& path) {
  try {
    Database::OpenReadOnly(path);
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

// The bytes of a file, to tell that a reader left it as it was.
std::string Bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

struct Ids {
  int64_t device = 0, problem = 0, config = 0, build = 0, run = 0;
};

DeviceRecord Cpu(const std::string& model = "EPYC") {
  return {0, "cpu", model, R"({"model":")" + model + R"(","cores":16})"};
}

ProblemRecord Problem(int64_t L = 1024) {
  ProblemRecord p;
  p.shape.Hq = 16;
  p.shape.Hkv = 8;
  p.shape.Lq = L;
  p.shape.Lk = L;
  p.shape.d = 128;
  return p;
}

ConfigRecord Swa(int w = 256) {
  return {0, "swa", "kokkos_windowed", R"({"sink":4,"w":)" + std::to_string(w) + "}",
          R"({"Bc":64,"Br":32})"};
}

Ids Seed(Database& db) {
  Ids ids;
  ids.device = db.PutDevice(Cpu());
  ids.problem = db.PutProblem(Problem());
  ids.config = db.PutConfig(Swa());
  ids.build = db.PutBuild({0, "0.1.0", "abcdef0123456789"});
  ids.run = db.BeginRun(R"({"cmd":"tune"})", ids.device, "2024-05-01T10:00:00Z");
  return ids;
}

TrialResult Ok(double median = 1.5) {
  TrialResult r;
  r.status = TrialStatus::kOk;
  r.started_at = "2024-05-01T10:00:01Z";
  r.finished_at = "2024-05-01T10:00:02Z";
  r.median_ms = median;
  r.p10_ms = median - 0.25;
  r.p90_ms = median + 0.5;
  r.cv = 0.03;
  r.samples_ms = {median - 0.25, median, median + 0.5, median};
  r.metrics = {{"rel_err", 1e-7}, {"mass_recall", 0.93}, {"gflops", 812.5}};
  return r;
}

TrialResult Failed(TrialStatus status, const std::string& message) {
  TrialResult r;
  r.status = status;
  r.message = message;
  r.started_at = "2024-05-01T10:00:03Z";
  r.finished_at = "2024-05-01T10:00:04Z";
  return r;
}

int64_t Insert(Database& db, const Ids& ids, const TrialResult& result) {
  return db.InsertTrial(ids.run, ids.device, ids.problem, ids.config, ids.build, result);
}

// A file database with `trials` ok trials of 200 samples each, closed.
void MakeFileDb(const std::string& path, int trials) {
  auto db = Database::Open(path);
  Ids ids = Seed(*db);
  TrialResult r = Ok();
  r.samples_ms.assign(200, 1.25);
  for (int i = 0; i < trials; ++i) Insert(*db, ids, r);
}

// Turns a file MakeFileDb made into the schema-3 layout as attntune wrote it before
// calibration sets: no calibration, trial_quality or run_problem table, no calib_id.
void DowngradeToV3(const std::string& path) {
  RawExec(path,
          "DROP TABLE calibration; DROP TABLE trial_quality; DROP TABLE run_problem;"
          "PRAGMA foreign_keys = OFF;"
          "CREATE TABLE problem_v3(id INTEGER PRIMARY KEY, B INTEGER NOT NULL, "
          "Hq INTEGER NOT NULL, Hkv INTEGER NOT NULL, d INTEGER NOT NULL, Lq INTEGER NOT NULL, "
          "Lk INTEGER NOT NULL, causal INTEGER NOT NULL CHECK(causal IN (0, 1)), "
          "dtype TEXT NOT NULL, phase TEXT NOT NULL, "
          "UNIQUE(B, Hq, Hkv, d, Lq, Lk, causal, dtype, phase));"
          "INSERT INTO problem_v3 SELECT id, B, Hq, Hkv, d, Lq, Lk, causal, dtype, phase FROM problem;"
          "DROP TABLE problem; ALTER TABLE problem_v3 RENAME TO problem;"
          "PRAGMA user_version = 3");
}

TEST_CASE("a new database has schema version 3 and no rows", "[db]") {
  auto db = Database::Open(":memory:");
  DbInfo info = db->Info();
  CHECK(info.path == ":memory:");
  CHECK(info.schema_version == kSchemaVersion);
  CHECK(info.schema_version == kSchemaVersion);
  CHECK(info.devices + info.problems + info.configs + info.builds + info.runs + info.trials +
            info.samples + info.metrics ==
        0);
  CHECK(info.trials_by_status.empty());
  CHECK(db->Trials({}).empty());
}

TEST_CASE("a file database has every table, WAL mode and our application id", "[db]") {
  TempDir dir;
  std::string path = dir.File("a.db");
  Database::Open(path);
  CHECK(RawQuery(path,
                 "SELECT group_concat(name, ',') FROM (SELECT name FROM sqlite_master "
                 "WHERE type = 'table' ORDER BY name)") ==
        "build,calibration,claim,config,device,meta,metric,problem,run,run_problem,sample,trial,"
        "trial_quality");
  CHECK(RawQuery(path, "PRAGMA journal_mode") == "wal");
  CHECK(RawQuery(path, "PRAGMA user_version") == "4");
  CHECK(RawQuery(path, "PRAGMA application_id") == std::to_string(0x41544E54));
  CHECK(RawQuery(path, "SELECT value FROM meta WHERE key = 'created_by'").rfind("attntune ", 0) ==
        0);
  CHECK(RawQuery(path, "SELECT count(*) FROM sqlite_master WHERE name = 'trial_reuse'") == "1");
}

TEST_CASE("reopening a database keeps its rows and changes nothing", "[db]") {
  TempDir dir;
  std::string path = dir.File("a.db");
  Ids ids;
  {
    auto db = Database::Open(path);
    ids = Seed(*db);
    Insert(*db, ids, Ok());
  }
  for (int i = 0; i < 2; ++i) {
    auto db = Database::Open(path);
    DbInfo info = db->Info();
    CHECK(info.schema_version == kSchemaVersion);
    CHECK(info.trials == 1);
    CHECK(info.samples == 4);
    CHECK(db->PutDevice(Cpu()) == ids.device);
    CHECK(db->PutConfig(Swa()) == ids.config);
  }
  CHECK(RawQuery(path, "SELECT count(*) FROM meta") == "2");
}

TEST_CASE("upserts return the existing row for an equal key", "[db]") {
  auto db = Database::Open(":memory:");
  int64_t cpu = db->PutDevice(Cpu());
  CHECK(db->PutDevice(Cpu()) == cpu);
  DeviceRecord renamed = Cpu();
  renamed.name = "other name, same fingerprint";
  CHECK(db->PutDevice(renamed) == cpu);
  CHECK(db->PutDevice(Cpu("Xeon")) != cpu);

  int64_t problem = db->PutProblem(Problem());
  CHECK(db->PutProblem(Problem()) == problem);
  ProblemRecord non_causal = Problem();
  non_causal.shape.causal = false;
  ProblemRecord decode = Problem();
  decode.phase = Phase::kDecode;
  ProblemRecord bf16 = Problem();
  bf16.dtype = Dtype::kBf16;
  std::vector<int64_t> ids = {problem, db->PutProblem(Problem(2048)), db->PutProblem(non_causal),
                              db->PutProblem(decode), db->PutProblem(bf16)};
  std::sort(ids.begin(), ids.end());
  CHECK(std::unique(ids.begin(), ids.end()) == ids.end());

  int64_t config = db->PutConfig(Swa());
  CHECK(db->PutConfig(Swa()) == config);
  CHECK(db->PutConfig(Swa(512)) != config);
  ConfigRecord generic = Swa();
  generic.implementation = "kokkos_block_sparse";
  CHECK(db->PutConfig(generic) != config);
  // The same variant parameters with other tunables are another config.
  ConfigRecord tiles = Swa();
  tiles.tunables_json = R"({"Bc":32,"Br":32})";
  const int64_t other_tiles = db->PutConfig(tiles);
  CHECK(other_tiles != config);
  CHECK(db->PutConfig(tiles) == other_tiles);

  int64_t build = db->PutBuild({0, "0.1.0", "aaaa"});
  CHECK(db->PutBuild({0, "0.1.0", "aaaa"}) == build);
  CHECK(db->PutBuild({0, "0.1.0", "bbbb"}) != build);

  DbInfo info = db->Info();
  CHECK(info.devices == 2);
  CHECK(info.problems == 5);
  CHECK(info.configs == 4);
  CHECK(info.builds == 2);
}

TEST_CASE("runs are begun, finished and listed", "[db]") {
  auto db = Database::Open(":memory:");
  Ids ids = Seed(*db);
  int64_t second = db->BeginRun("{}", ids.device, "2024-05-02T00:00:00Z");
  db->FinishRun(ids.run, "2024-05-01T11:00:00Z");
  std::vector<RunRecord> runs = db->Runs();
  REQUIRE(runs.size() == 2);
  CHECK(runs[0].id == ids.run);
  CHECK(runs[0].started_at == "2024-05-01T10:00:00Z");
  CHECK(runs[0].finished_at == "2024-05-01T11:00:00Z");
  CHECK(runs[0].args_json == R"({"cmd":"tune"})");
  CHECK(runs[0].device_id == ids.device);
  CHECK(runs[1].id == second);
  CHECK(runs[1].finished_at.empty());
  std::vector<DeviceRecord> devices = db->Devices();
  REQUIRE(devices.size() == 1);
  CHECK(devices[0].id == ids.device);
  CHECK(devices[0].kind == "cpu");
  CHECK(devices[0].name == "EPYC");
  CHECK(devices[0].fingerprint_json == Cpu().fingerprint_json);
}

TEST_CASE("a trial round-trips through InsertTrial, Trials and Samples", "[db]") {
  auto db = Database::Open(":memory:");
  Ids ids = Seed(*db);
  TrialResult ok = Ok();
  ok.metrics["nan_metric"] = std::numeric_limits<double>::quiet_NaN();
  ok.metrics["inf_metric"] = std::numeric_limits<double>::infinity();
  int64_t ok_id = Insert(*db, ids, ok);
  int64_t bad_id = Insert(*db, ids, Failed(TrialStatus::kWrongResult, "rel_err 0.3 > 1e-4"));

  std::vector<TrialRow> rows = db->Trials({});
  REQUIRE(rows.size() == 2);
  const TrialRow& row = rows[0];
  CHECK(row.id == ok_id);
  CHECK(row.run_id == ids.run);
  CHECK(row.device.id == ids.device);
  CHECK(row.device.name == "EPYC");
  CHECK(row.device.fingerprint_json == Cpu().fingerprint_json);
  CHECK(row.problem.id == ids.problem);
  CHECK(row.problem.shape == Problem().shape);
  CHECK(row.problem.dtype == Dtype::kF32);
  CHECK(row.problem.phase == Phase::kPrefill);
  CHECK(row.config.id == ids.config);
  CHECK(row.config.variant == "swa");
  CHECK(row.config.implementation == "kokkos_windowed");
  CHECK(row.config.params_json == Swa().params_json);
  CHECK(row.config.tunables_json == Swa().tunables_json);
  CHECK(row.build.id == ids.build);
  CHECK(row.build.version == "0.1.0");
  CHECK(row.build.kernel_hash == "abcdef0123456789");
  CHECK(row.result.status == TrialStatus::kOk);
  CHECK(row.result.message.empty());
  CHECK(row.result.started_at == ok.started_at);
  CHECK(row.result.finished_at == ok.finished_at);
  CHECK(row.result.median_ms == ok.median_ms);
  CHECK(row.result.p10_ms == ok.p10_ms);
  CHECK(row.result.p90_ms == ok.p90_ms);
  CHECK(row.result.cv == ok.cv);
  CHECK(row.result.samples_ms.empty());  // Samples() reads them
  CHECK(row.sample_count == 4);
  REQUIRE(row.result.metrics.size() == 5);
  CHECK(row.result.metrics.at("rel_err") == 1e-7);
  CHECK(row.result.metrics.at("mass_recall") == 0.93);
  CHECK(row.result.metrics.at("gflops") == 812.5);
  CHECK(std::isnan(row.result.metrics.at("nan_metric")));
  CHECK(row.result.metrics.at("inf_metric") == std::numeric_limits<double>::infinity());
  CHECK(db->Samples(ok_id) == ok.samples_ms);

  const TrialRow& bad = rows[1];
  CHECK(bad.id == bad_id);
  CHECK(bad.result.status == TrialStatus::kWrongResult);
  CHECK(bad.result.message == "rel_err 0.3 > 1e-4");
  CHECK(bad.result.median_ms == 0);
  CHECK(bad.result.cv == 0);
  CHECK(bad.sample_count == 0);
  CHECK(bad.result.metrics.empty());
  CHECK(db->Samples(bad_id).empty());
}

TEST_CASE("statistics of a failed trial are not stored", "[db]") {
  TempDir dir;
  std::string path = dir.File("a.db");
  {
    auto db = Database::Open(path);
    Ids ids = Seed(*db);
    TrialResult timeout = Failed(TrialStatus::kTimeout, "over 10 s");
    timeout.median_ms = 7;  // ignored: statistics describe ok trials only
    timeout.cv = 0.5;
    Insert(*db, ids, timeout);
  }
  CHECK(RawQuery(path, "SELECT count(*) FROM trial WHERE median_ms IS NULL AND cv IS NULL") == "1");
}

TEST_CASE("Trials filters by device, variant and status", "[db]") {
  auto db = Database::Open(":memory:");
  Ids a = Seed(*db);
  Ids b = a;
  b.device = db->PutDevice(Cpu("Xeon"));
  Ids dense = a;
  dense.config = db->PutConfig({0, "dense", "kokkos_windowed", "{}"});
  int64_t t1 = Insert(*db, a, Ok());
  int64_t t2 = Insert(*db, b, Ok());
  int64_t t3 = Insert(*db, dense, Ok());
  int64_t t4 = Insert(*db, a, Failed(TrialStatus::kLaunchFailed, "out of memory"));

  auto ids_of = [](const std::vector<TrialRow>& rows) {
    std::vector<int64_t> ids;
    for (const TrialRow& r : rows) ids.push_back(r.id);
    return ids;
  };
  CHECK(ids_of(db->Trials({})) == std::vector<int64_t>{t1, t2, t3, t4});
  TrialFilter by_device;
  by_device.device_id = a.device;
  CHECK(ids_of(db->Trials(by_device)) == std::vector<int64_t>{t1, t3, t4});
  TrialFilter by_variant;
  by_variant.variant = "swa";
  CHECK(ids_of(db->Trials(by_variant)) == std::vector<int64_t>{t1, t2, t4});
  TrialFilter ok_only;
  ok_only.ok_only = true;
  CHECK(ids_of(db->Trials(ok_only)) == std::vector<int64_t>{t1, t2, t3});
  TrialFilter all;
  all.device_id = a.device;
  all.variant = "swa";
  all.ok_only = true;
  CHECK(ids_of(db->Trials(all)) == std::vector<int64_t>{t1});
}

TEST_CASE("FindReusable returns the newest deterministic outcome of the same build", "[db]") {
  auto db = Database::Open(":memory:");
  Ids ids = Seed(*db);
  auto find = [&](const Ids& i) {
    return db->FindReusable(i.device, i.problem, i.config, i.build);
  };
  CHECK(!find(ids));

  // Transient failures are retried, never reused.
  Insert(*db, ids, Failed(TrialStatus::kLaunchFailed, "launch failed"));
  Insert(*db, ids, Failed(TrialStatus::kTimeout, "timeout"));
  Insert(*db, ids, Failed(TrialStatus::kCompileFailed, "nvcc failed"));
  CHECK(!find(ids));

  int64_t ok = Insert(*db, ids, Ok(2.0));
  auto found = find(ids);
  REQUIRE(found);
  CHECK(found->id == ok);
  CHECK(found->result.status == TrialStatus::kOk);
  CHECK(found->result.median_ms == 2.0);
  CHECK(found->result.metrics.at("mass_recall") == 0.93);
  CHECK(found->sample_count == 4);

  // A newer transient failure does not hide the reusable ok trial.
  Insert(*db, ids, Failed(TrialStatus::kTimeout, "timeout"));
  CHECK(find(ids)->id == ok);

  int64_t invalid = Insert(*db, ids, Failed(TrialStatus::kInvalid, "w > Lk"));
  CHECK(find(ids)->id == invalid);
  int64_t wrong = Insert(*db, ids, Failed(TrialStatus::kWrongResult, "rel_err 1"));
  CHECK(find(ids)->id == wrong);
  CHECK(find(ids)->result.status == TrialStatus::kWrongResult);

  // Another build, device, problem or config has nothing to reuse.
  Ids other_build = ids;
  other_build.build = db->PutBuild({0, "0.1.0", "changed-kernels"});
  CHECK(!find(other_build));
  Ids other_device = ids;
  other_device.device = db->PutDevice(Cpu("Xeon"));
  CHECK(!find(other_device));
  Ids other_problem = ids;
  other_problem.problem = db->PutProblem(Problem(4096));
  CHECK(!find(other_problem));
  Ids other_config = ids;
  other_config.config = db->PutConfig(Swa(128));
  CHECK(!find(other_config));
}

TEST_CASE("a claim is taken, held against others while live, and taken over when not", "[db]") {
  auto db = Database::Open(":memory:");
  Ids ids = Seed(*db);
  const TrialKey key{ids.device, ids.problem, ids.config, ids.build};
  using Outcome = ClaimResult::Outcome;
  bool live = true;
  std::vector<Claim> asked;
  auto holder_live = [&](const Claim& holder) {
    asked.push_back(holder);
    return live;
  };
  CHECK(db->ClaimOrReuse(key, {100, 1000}, holder_live).outcome == Outcome::kClaimed);
  CHECK(asked.empty());
  // The claimant asking again keeps its claim; another process waits on a live one.
  CHECK(db->ClaimOrReuse(key, {100, 1001}, holder_live).outcome == Outcome::kClaimed);
  const ClaimResult held = db->ClaimOrReuse(key, {200, 1002}, holder_live);
  CHECK(held.outcome == Outcome::kHeld);
  CHECK(held.holder.pid == 100);
  CHECK(held.holder.claimed_at == 1001);
  REQUIRE(asked.size() == 1);
  CHECK(asked[0].pid == 100);
  // Another key is free.
  const TrialKey other{ids.device, db->PutProblem(Problem(2048)), ids.config, ids.build};
  CHECK(db->ClaimOrReuse(other, {200, 1002}, holder_live).outcome == Outcome::kClaimed);
  // A dead holder's claim is taken over.
  live = false;
  CHECK(db->ClaimOrReuse(key, {200, 1003}, holder_live).outcome == Outcome::kClaimed);
  live = true;
  CHECK(db->ClaimOrReuse(key, {100, 1004}, holder_live).holder.pid == 200);
  // The trial's insert drops the claim: from then on the trial answers.
  const int64_t trial = Insert(*db, ids, Ok());
  const ClaimResult reused = db->ClaimOrReuse(key, {300, 1005}, holder_live);
  CHECK(reused.outcome == Outcome::kReusable);
  REQUIRE(reused.trial);
  CHECK(reused.trial->id == trial);
  // A release drops only the releaser's own claim.
  db->ReleaseClaim(other, 100);
  CHECK(db->ClaimOrReuse(other, {300, 1006}, holder_live).outcome == Outcome::kHeld);
  db->ReleaseClaim(other, 200);
  CHECK(db->ClaimOrReuse(other, {300, 1006}, holder_live).outcome == Outcome::kClaimed);
}

TEST_CASE("a schema-2 file gains the claim table and keeps its rows", "[db]") {
  TempDir dir;
  std::string path = dir.File("v2.db");
  MakeFileDb(path, 2);
  DowngradeToV3(path);
  RawExec(path, "DROP TABLE claim; PRAGMA user_version = 2");
  auto db = Database::Open(path);
  CHECK(db->Info().schema_version == kSchemaVersion);
  CHECK(db->Info().trials == 2);
  CHECK(RawQuery(path, "SELECT count(*) FROM sqlite_master WHERE name = 'claim'") == "1");
  Ids ids = Seed(*db);
  CHECK(db->ClaimOrReuse({ids.device, ids.problem, ids.config, ids.build}, {1, 1},
                         [](const Claim&) { return true; })
            .outcome == ClaimResult::Outcome::kReusable);
}

TEST_CASE("Info counts rows per table and trials per status", "[db]") {
  auto db = Database::Open(":memory:");
  Ids ids = Seed(*db);
  Insert(*db, ids, Ok());
  Insert(*db, ids, Ok());
  Insert(*db, ids, Failed(TrialStatus::kTimeout, "t"));
  Insert(*db, ids, Failed(TrialStatus::kInvalid, "i"));
  Insert(*db, ids, Failed(TrialStatus::kTimeout, "t"));
  DbInfo info = db->Info();
  CHECK(info.devices == 1);
  CHECK(info.problems == 1);
  CHECK(info.configs == 1);
  CHECK(info.builds == 1);
  CHECK(info.runs == 1);
  CHECK(info.trials == 5);
  CHECK(info.samples == 8);
  CHECK(info.metrics == 6);
  using Count = std::pair<std::string, int64_t>;
  CHECK(info.trials_by_status == std::vector<Count>{{"ok", 2}, {"invalid", 1}, {"timeout", 2}});
}

TEST_CASE("a failing InsertTrial stores nothing and throws runtime_error", "[db]") {
  TempDir dir;
  std::string path = dir.File("a.db");
  MakeFileDb(path, 1);
  // Stands in for a disk that fills up after the trial row and its samples are written.
  RawExec(path,
          "CREATE TRIGGER full AFTER INSERT ON metric BEGIN "
          "SELECT RAISE(ABORT, 'simulated disk full'); END");
  auto db = Database::Open(path);
  Ids ids = Seed(*db);
  try {
    Insert(*db, ids, Ok());
    FAIL("InsertTrial did not throw");
  } catch (const UserError&) {
    FAIL("an operational error must not be a UserError");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()) == path + ": query failed: simulated disk full");
  }
  DbInfo info = db->Info();
  CHECK(info.trials == 1);
  CHECK(info.samples == 200);
  CHECK(info.metrics == 3);

  // The connection is left usable: no transaction is left open.
  RawExec(path, "DROP TRIGGER full");
  Insert(*db, ids, Ok());
  CHECK(db->Info().trials == 2);
}

TEST_CASE("a trial naming an unknown device is refused", "[db]") {
  auto db = Database::Open(":memory:");
  Ids ids = Seed(*db);
  ids.device = 999;
  CHECK_THROWS_WITH(Insert(*db, ids, Ok()),
                    ":memory:: query failed: FOREIGN KEY constraint failed");
  CHECK(db->Info().trials == 0);
}

TEST_CASE("a file that is not a database is refused by name", "[db]") {
  TempDir dir;
  std::string path = dir.File("x.db");
  std::ofstream(path) << "B=1,Hq=16,Hkv=8,L=4096,d=128\nthis is a text file, not SQLite\n";
  CHECK(OpenError(path) == path + ": not an attntune database (file is not a database)");
  // Refused before anything was written: the file is unchanged and gained no WAL.
  CHECK(fs::file_size(path) == 61);
  CHECK(!fs::exists(path + "-wal"));
}

TEST_CASE("a truncated database is refused by name", "[db]") {
  TempDir dir;
  std::string path = dir.File("t.db");
  MakeFileDb(path, 50);
  auto size = fs::file_size(path);
  REQUIRE(size > 16 * 4096);
  // A copy cut short: SQLite compares the header's page count with the file size.
  fs::resize_file(path, size / 2);
  const std::string malformed = path + ": the database is damaged (database disk image is malformed)";
  CHECK(OpenError(path) == malformed);
  CHECK(ReadOnlyOpenError(path) == malformed);
  // Cut by one page only.
  fs::resize_file(path, size - 4096);
  CHECK(OpenError(path) == malformed);
  CHECK(ReadOnlyOpenError(path) == malformed);

  // Cut inside the first page: SQLite itself finds the schema unreadable.
  fs::resize_file(path, 50);
  CHECK(OpenError(path) == malformed);
  CHECK(ReadOnlyOpenError(path) == malformed);
}

// Zeroes 8 pages in the middle of `path`: the header and schema stay readable, the
// b-tree pages of the samples do not.
void Garble(const std::string& path) {
  std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
  file.seekp(static_cast<std::streamoff>(fs::file_size(path) / 2));
  std::vector<char> zeros(8 * 4096, 0);
  file.write(zeros.data(), static_cast<std::streamsize>(zeros.size()));
}

TEST_CASE("a database garbled in place is refused when it is opened", "[db]") {
  TempDir dir;
  std::string path = dir.File("g.db");
  MakeFileDb(path, 50);
  Garble(path);
  // quick_check reads every page when the file is opened, for writing or for reading.
  const std::string damaged =
      path + ": the database is damaged (Page 44: btreeInitPage() returns error code 11)";
  CHECK(OpenError(path) == damaged);
  CHECK(ReadOnlyOpenError(path) == damaged);
}

TEST_CASE("a header with an unknown schema format number is refused as damaged", "[db]") {
  TempDir dir;
  std::string path = dir.File("f.db");
  MakeFileDb(path, 1);
  {  // offset 44: the schema format number (1 to 4), big-endian; 5 is unknown to SQLite
    std::fstream file(path, std::ios::in | std::ios::out | std::ios::binary);
    file.seekp(47);
    file.put(5);
  }
  const std::string damaged = path + ": the database is damaged (unsupported file format)";
  CHECK(OpenError(path) == damaged);
  CHECK(ReadOnlyOpenError(path) == damaged);
}

// A file of schema 4's tables that claims `version` (PRAGMA user_version): opened as the
// current schema for reading and for writing, refused as "<path>: <reason> (the database
// is damaged)", and left as it was. Returns the file's path (in `dir`).
std::string CheckClaimedVersionRefused(const TempDir& dir, int version, const std::string& reason) {
  std::string path = dir.File("claims.db");
  MakeFileDb(path, 1);
  RawExec(path, "PRAGMA user_version = " + std::to_string(version));
  const std::string damaged = path + ": " + reason + " (the database is damaged)";
  CHECK(UserErrorText([&] { Database::OpenReadOnly(path, /*current=*/true); }) == damaged);
  CHECK(OpenError(path) == damaged);
  CHECK(RawQuery(path, "PRAGMA user_version") == std::to_string(version));  // left as it was
  return path;
}

TEST_CASE("a file whose tables are newer than the version it claims is refused as damaged", "[db]") {
  // The database fuzzer's finding: a migration step met a table it creates (meta, from
  // schema 1 on); here schema 4's calibration table under user_version 3.
  TempDir dir;
  CheckClaimedVersionRefused(
      dir, 3, "schema version 3 does not migrate: table calibration already exists");
}

TEST_CASE("a negative schema version is refused as damaged, before any migration", "[db]") {
  // The database fuzzer's finding (its long run): user_version -248 indexed the migration
  // table below its start (UBSan: index out of bounds), opened for reading or writing.
  TempDir dir;
  const std::string reason = "schema version -248 is none attntune writes";
  const std::string path = CheckClaimedVersionRefused(dir, -248, reason);
  // Refused for a plain read too (a version attntune reads without migrating is not).
  CHECK(ReadOnlyOpenError(path) == path + ": " + reason + " (the database is damaged)");
}

TEST_CASE("a table without the columns attntune wrote is refused as damaged", "[db]") {
  TempDir dir;
  std::string path = dir.File("c.db");
  MakeFileDb(path, 1);
  RawExec(path, "ALTER TABLE metric RENAME COLUMN value TO v");
  auto db = Database::OpenReadOnly(path);
  CHECK(UserErrorText([&] { db->Trials({}); }) ==
        path + ": the database is damaged (no such column: value)");
}

TEST_CASE("a damaged row is a UserError naming the file and the row, never an abort", "[db]") {
  TempDir dir;
  std::string path = dir.File("d.db");
  Ids ids;
  {
    auto db = Database::Open(path);
    ids = Seed(*db);
    Insert(*db, ids, Ok());
  }
  // Both readers of trial rows: Trials (reports) and FindReusable (a re-run), which never
  // selects a trial of an unknown status.
  auto errors = [&](bool reusable = true) {
    std::vector<std::string> texts;
    for (int i = 0; i < (reusable ? 2 : 1); ++i) {
      try {
        auto db = Database::Open(path);
        if (i == 0) db->Trials({});
        else db->FindReusable(ids.device, ids.problem, ids.config, ids.build);
        texts.push_back("(no error)");
      } catch (const UserError& e) {
        texts.push_back(e.what());
      }
    }
    REQUIRE(texts.front() == texts.back());
    return texts.front();
  };
  const std::string damaged = " (the database is damaged)";
  CHECK(errors() == "(no error)");
  // The schema's CHECK keeps attntune from writing it; another program need not.
  RawExec(path, "PRAGMA ignore_check_constraints = ON; UPDATE trial SET status = 'bogus'");
  // quick_check, when the file is opened, checks the schema's CHECK constraints too.
  CHECK(errors(false) == path + ": the database is damaged (CHECK constraint failed in trial)");
  RawExec(path, "PRAGMA ignore_check_constraints = ON; UPDATE trial SET status = 'ok'");
  RawExec(path, "UPDATE problem SET dtype = 'fp8'");
  CHECK(errors() == path + ": problem " + std::to_string(ids.problem) +
                        " has unknown dtype 'fp8'" + damaged);
  RawExec(path, "UPDATE problem SET dtype = 'fp32', phase = 'Prefill'");
  CHECK(errors() == path + ": problem " + std::to_string(ids.problem) +
                        " has unknown phase 'Prefill'" + damaged);
  RawExec(path, "UPDATE problem SET phase = 'prefill'");
  RawExec(path, "UPDATE config SET params_json = '[4,256]'");
  CHECK(errors() == path + ": config " + std::to_string(ids.config) +
                        " has params_json '[4,256]', not a JSON object" + damaged);
  RawExec(path, "UPDATE config SET params_json = '{\"w\":'");
  CHECK(errors() == path + ": config " + std::to_string(ids.config) +
                        " has params_json '{\"w\":', not a JSON object" + damaged);
  RawExec(path, "UPDATE config SET params_json = '{}'");
  CHECK(errors() == "(no error)");
}

// tests/fixtures/db/v1.db: a schema-1 file with 22 trials (README.md there).
std::string CopyOfV1(const TempDir& dir) {
  const std::string path = dir.File("v1.db");
  fs::copy_file(ATTNTUNE_FIXTURES_DIR "/db/v1.db", path);
  return path;
}

TEST_CASE("a schema-1 file is upgraded in place, its configs split by the v1 rule", "[db]") {
  TempDir dir;
  const std::string path = CopyOfV1(dir);
  REQUIRE(RawQuery(path, "PRAGMA user_version") == "1");
  DbInfo first;
  {
    auto db = Database::Open(path);
    first = db->Info();
    CHECK(first.schema_version == kSchemaVersion);
    CHECK(first.trials == 22);
    CHECK(first.samples == 242);
    CHECK(first.metrics == 176);
    CHECK(first.configs == 12);
    std::map<int64_t, ConfigRecord> configs;
    for (const TrialRow& row : db->Trials({})) configs[row.config.id] = row.config;
    REQUIRE(configs.size() == 12);
    CHECK(configs[4].variant == "swa");
    CHECK(configs[4].params_json == R"({"sink":0,"w":512})");
    CHECK(configs[4].tunables_json == R"({"Bc":32,"Br":32})");
    CHECK(configs[1].params_json == "{}");
    CHECK(configs[1].tunables_json == R"({"Bc":128,"Br":16})");
    CHECK(configs[11].params_json == R"({"bias":0,"r":128,"seed":0,"w_kv":1024,"w_q":32})");
    CHECK(configs[11].tunables_json == R"({"Bc":32,"Br":16})");
    // A config written now with the same values is the migrated row.
    CHECK(db->PutConfig(configs[4]) == 4);
  }
  CHECK(RawQuery(path, "PRAGMA foreign_key_check") == "");
  auto again = Database::Open(path);
  const DbInfo second = again->Info();
  CHECK(second.schema_version == kSchemaVersion);
  CHECK(second.configs == first.configs);
  CHECK(second.trials == first.trials);
  CHECK(second.samples == first.samples);
  CHECK(second.metrics == first.metrics);
  CHECK(RawQuery(path, "SELECT count(*) FROM meta") == "2");
}

TEST_CASE("a schema-1 file with a damaged config is refused and left as it was", "[db]") {
  TempDir dir;
  const std::string path = CopyOfV1(dir);
  RawExec(path, "UPDATE config SET params_json = '[32,32]' WHERE id = 7");
  CHECK(OpenError(path) ==
        path + ": config 7 has params_json '[32,32]', not a JSON object (the database is damaged)");
  CHECK(RawQuery(path, "PRAGMA user_version") == "1");
  CHECK(RawQuery(path, "SELECT count(*) FROM sqlite_master WHERE name = 'config_v2'") == "0");
}

TEST_CASE("a database from a newer attntune is refused", "[db]") {
  TempDir dir;
  std::string path = dir.File("n.db");
  MakeFileDb(path, 1);
  RawExec(path, "PRAGMA user_version = 5");
  CHECK(OpenError(path) ==
        path + ": schema version 5 is newer than this attntune (supports 4); upgrade attntune");
  CHECK(ReadOnlyOpenError(path) ==
        path + ": schema version 5 is newer than this attntune (supports 4); upgrade attntune");
  CHECK(RawQuery(path, "PRAGMA user_version") == "5");
}

TEST_CASE("another program's SQLite database is refused", "[db]") {
  TempDir dir;
  std::string path = dir.File("other.db");
  RawExec(path, "CREATE TABLE notes(id INTEGER PRIMARY KEY, body TEXT)");
  CHECK(OpenError(path) == path + ": not an attntune database (no attntune schema)");
  // Even when it sets a user_version of its own.
  RawExec(path, "PRAGMA user_version = 7");
  CHECK(OpenError(path) == path + ": not an attntune database (no attntune schema)");
  CHECK(RawQuery(path, "SELECT count(*) FROM sqlite_master") == "1");
}

TEST_CASE("an empty file becomes a new database", "[db]") {
  TempDir dir;
  std::string path = dir.File("empty.db");
  std::ofstream{path};
  REQUIRE(fs::file_size(path) == 0);
  CHECK(Database::Open(path)->Info().schema_version == kSchemaVersion);
}

TEST_CASE("a reader refuses an empty file and leaves it empty", "[db]") {
  TempDir dir;
  std::string path = dir.File("empty.db");
  std::ofstream{path};
  CHECK(ReadOnlyOpenError(path) == path + ": empty file, not an attntune database");
  CHECK(fs::file_size(path) == 0);
  CHECK(!fs::exists(path + "-wal"));
  // A SQLite file with no schema at all is no attntune database either.
  RawExec(path, "PRAGMA page_size = 4096; VACUUM");
  REQUIRE(fs::file_size(path) > 0);
  CHECK(ReadOnlyOpenError(path) == path + ": not an attntune database (no attntune schema)");
}

TEST_CASE("a reader reads a database without writing to it", "[db]") {
  TempDir dir;
  std::string path = dir.File("a.db");
  MakeFileDb(path, 3);
  const std::string before = Bytes(path);
  {
    auto db = Database::OpenReadOnly(path);
    CHECK(db->Info().schema_version == kSchemaVersion);
    CHECK(db->Info().trials == 3);
    CHECK(db->Trials({}).size() == 3);
    CHECK_THROWS_WITH(db->PutBuild({0, "0.1.0", "x"}),
                      path + ": query failed: attempt to write a readonly database");
  }
  CHECK(Bytes(path) == before);
}

TEST_CASE("a reader reads a schema-1 file as migrated and leaves it at schema 1", "[db]") {
  TempDir dir;
  const std::string path = dir.File("v1.db");
  fs::copy_file(ATTNTUNE_FIXTURES_DIR "/db/v1.db", path);
  const std::string before = Bytes(path);
  {
    auto db = Database::OpenReadOnly(path);
    const DbInfo info = db->Info();
    CHECK(info.schema_version == 1);
    CHECK(info.trials == 22);
    CHECK(info.configs == 12);
    std::map<int64_t, ConfigRecord> configs;
    for (const TrialRow& row : db->Trials({})) configs[row.config.id] = row.config;
    REQUIRE(configs.size() == 12);
    CHECK(configs[4].params_json == R"({"sink":0,"w":512})");
    CHECK(configs[4].tunables_json == R"({"Bc":32,"Br":32})");
  }
  CHECK(Bytes(path) == before);
  CHECK(RawQuery(path, "PRAGMA user_version") == "1");
}

TEST_CASE("a database in a missing directory is refused by name", "[db]") {
  TempDir dir;
  std::string path = dir.File("no/such/dir/a.db");
  CHECK(OpenError(path) == path + ": cannot open database (unable to open database file)");
}

// Writers started together on one new file: one migrates, the others wait (busy timeout,
// BEGIN IMMEDIATE) and see the schema; no trial is lost and no key is duplicated.
TEST_CASE("concurrent writers share one new file", "[db]") {
  TempDir dir;
  std::string path = dir.File("shared.db");
  constexpr int kWriters = 4, kTrialsEach = 25;
  std::vector<pid_t> pids;
  for (int w = 0; w < kWriters; ++w) {
    pid_t pid = fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {  // child: no Catch2 here
      try {
        auto db = Database::Open(path);
        Ids ids = Seed(*db);
        for (int i = 0; i < kTrialsEach; ++i) Insert(*db, ids, Ok());
      } catch (const std::exception& e) {
        fprintf(stderr, "writer: %s\n", e.what());
        _exit(1);
      }
      _exit(0);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    REQUIRE(waitpid(pid, &status, 0) == pid);
    CHECK(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 0);
  }
  DbInfo info = Database::Open(path)->Info();
  CHECK(info.trials == kWriters * kTrialsEach);
  CHECK(info.runs == kWriters);
  CHECK(info.devices == 1);
  CHECK(info.configs == 1);
}

// Fork a writer, let it commit 3 trials and die by SIGKILL inside a 4th transaction whose
// uncommitted pages already spilled into the WAL.
TEST_CASE("a killed writer loses only its uncommitted trial", "[db]") {
  TempDir dir;
  std::string path = dir.File("crash.db");
  pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {  // child: no Catch2 here, only _exit or the kill
    try {
      auto db = Database::Open(path);
      Ids ids = Seed(*db);
      for (int i = 0; i < 3; ++i) Insert(*db, ids, Ok());
      sqlite3* raw = nullptr;
      if (sqlite3_open(path.c_str(), &raw) != SQLITE_OK) _exit(3);
      // A tiny page cache forces the open transaction's pages out to the WAL.
      const char* sql =
          "PRAGMA cache_size = 8;"
          "BEGIN IMMEDIATE;"
          "INSERT INTO trial(run_id, device_id, problem_id, config_id, build_id, status, "
          "  message, started_at, finished_at) VALUES (1, 1, 1, 1, 1, 'timeout', '', '', '');"
          "INSERT INTO sample(trial_id, idx, ms) "
          "  WITH RECURSIVE n(i) AS (SELECT 0 UNION ALL SELECT i + 1 FROM n WHERE i < 99999) "
          "  SELECT (SELECT max(id) FROM trial), i, i * 0.001 FROM n;";
      if (sqlite3_exec(raw, sql, nullptr, nullptr, nullptr) != SQLITE_OK) _exit(4);
    } catch (...) {
      _exit(5);
    }
    raise(SIGKILL);
    _exit(6);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  INFO("child exit status " << (WIFEXITED(status) ? WEXITSTATUS(status) : -1));
  REQUIRE(WIFSIGNALED(status));
  REQUIRE(WTERMSIG(status) == SIGKILL);
  // The uncommitted trial really reached the disk (about 2 MB of sample pages).
  REQUIRE(fs::file_size(path + "-wal") > (1 << 20));

  auto db = Database::Open(path);
  DbInfo info = db->Info();
  CHECK(info.trials == 3);
  CHECK(info.samples == 12);
  CHECK(RawQuery(path, "PRAGMA integrity_check") == "ok");
  Ids ids = Seed(*db);
  Insert(*db, ids, Ok());
  CHECK(db->Info().trials == 4);
}

}  // namespace
}  // namespace attntune

namespace attntune {
namespace {

TEST_CASE("a schema-3 file is upgraded to 4 in place: its problems keep their ids and trials", "[db]") {
  TempDir dir;
  std::string path = dir.File("v3.db");
  MakeFileDb(path, 3);
  DowngradeToV3(path);
  REQUIRE(RawQuery(path, "PRAGMA user_version") == "3");
  const std::string v3 = Bytes(path);
  {  // a reader goes through a migrated copy in memory and leaves the file as it was
    auto reader = Database::OpenReadOnly(path);
    CHECK(reader->Info().schema_version == 3);
    const std::vector<TrialRow> rows = reader->Trials({});
    REQUIRE(rows.size() == 3);
    CHECK(rows[0].problem.calib_id == 0);
    CHECK(reader->Calibrations().empty());
  }
  CHECK(Bytes(path) == v3);
  auto db = Database::Open(path);
  CHECK(db->Info().schema_version == kSchemaVersion);
  CHECK(RawQuery(path, "SELECT group_concat(calib_id) FROM problem") == "0");
  // The Gaussian problem is the one a tune of the same shape finds, and its trials reuse.
  Ids ids = Seed(*db);
  CHECK(ids.problem == 1);
  CHECK(db->FindReusable(ids.device, ids.problem, ids.config, ids.build).has_value());
  CHECK(RawQuery(path, "PRAGMA foreign_key_check") == "");
}

TEST_CASE("a calibration set is part of the problem's key; its trials keep quality cells", "[db]") {
  auto db = Database::Open(":memory:");
  Ids ids = Seed(*db);
  CalibrationRecord calib{0, "ab12", "org/model", "0,1", 512, R"(["a.safetensors"])"};
  const int64_t calib_id = db->PutCalibration(calib);
  CHECK(calib_id > 0);
  calib.files_json = R"(["b.safetensors"])";  // the same content read from another file
  CHECK(db->PutCalibration(calib) == calib_id);
  CHECK(db->PutCalibration({0, "cd34", "org/model", "0", 512, "[]"}) != calib_id);
  ProblemRecord calibrated = Problem();
  calibrated.calib_id = calib_id;
  const int64_t problem = db->PutProblem(calibrated);
  CHECK(problem != ids.problem);
  CHECK(db->PutProblem(calibrated) == problem);
  // Trials of the two problems are kept apart.
  TrialResult r = Ok(2.0);
  r.quality_cells = {{0, 0, 0.97, 0.01}, {0, 1, 0.91, 0.05}, {1, 0, 1.0, 0.0}};
  const int64_t trial = db->InsertTrial(ids.run, ids.device, problem, ids.config, ids.build, r);
  CHECK_FALSE(db->FindReusable(ids.device, ids.problem, ids.config, ids.build).has_value());
  const auto reused = db->FindReusable(ids.device, problem, ids.config, ids.build);
  REQUIRE(reused.has_value());
  CHECK(reused->problem.calib_id == calib_id);
  CHECK(reused->result.quality_cells.empty());  // read on demand only
  const std::vector<QualityCell> cells = db->QualityCells(trial);
  REQUIRE(cells.size() == 3);
  CHECK(cells[1].layer == 0);
  CHECK(cells[1].head == 1);
  CHECK(cells[1].mass_recall == 0.91);
  CHECK(cells[1].rel_err == 0.05);
  CHECK(db->Calibrations().size() == 2);
  CHECK(db->Calibrations()[0].files_json == R"(["a.safetensors"])");
  CHECK(db->Info().calibrations == 2);
  db->PutRunProblem({ids.run, problem, "mass_recall>=0.95"});
  db->PutRunProblem({ids.run, problem, "mass_recall>=0.9"});  // the run's last word
  const std::vector<RunProblemRecord> tuned = db->RunProblems();
  REQUIRE(tuned.size() == 1);
  CHECK(tuned[0].floor == "mass_recall>=0.9");
}

TEST_CASE("quality floors parse, print and judge a trial's worst layer and head", "[db]") {
  const QualityFloor f = ParseQualityFloor("mass_recall>=0.95,rel_err<=0.1", "--min-quality");
  CHECK(f.ToString() == "mass_recall>=0.95,rel_err<=0.1");
  CHECK(ParseQualityFloor(f.ToString(), "x").ToString() == f.ToString());
  // Printed exactly as it judges ("%g" stored 0.9998908 as 0.999891, 0.9999995 as 1).
  const QualityFloor fine = ParseQualityFloor("mass_recall>=0.9998908,rel_err<=1e-07", "x");
  CHECK(fine.ToString() == "mass_recall>=0.9998908,rel_err<=1e-07");
  CHECK(ParseQualityFloor(fine.ToString(), "x").min_mass_recall == fine.min_mass_recall);
  CHECK(ParseQualityFloor("mass_recall>=0.9999995", "x").ToString() == "mass_recall>=0.9999995");
  CHECK(ParseQualityFloor("", "x").Empty());
  CHECK(f.MetBy({{"mass_recall_worst", 0.95}, {"rel_err_worst", 0.1}, {"mass_recall", 0.5}}));
  CHECK_FALSE(f.MetBy({{"mass_recall_worst", 0.9499}, {"rel_err_worst", 0.01}}));
  CHECK_FALSE(f.MetBy({{"mass_recall_worst", 0.99}, {"rel_err_worst", 0.2}}));
  // A trial without worst values is judged by its mean; one without the metric fails.
  CHECK(f.MetBy({{"mass_recall", 0.96}, {"rel_err", 0.05}}));
  CHECK_FALSE(f.MetBy({{"mass_recall", 0.96}}));
  CHECK(QualityFloor{}.MetBy({}));
  auto error = [](const std::string& text) {
    try {
      ParseQualityFloor(text, "--min-quality");
    } catch (const UserError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK(error("mass_recall>0.9") ==
        "--min-quality: 'mass_recall>0.9' is not mass_recall>=X or rel_err<=X");
  CHECK(error("mass_recall>=1.5") ==
        "--min-quality: 'mass_recall>=1.5': X must be a number between 0 and 1");
  CHECK(error("rel_err<=-1") == "--min-quality: 'rel_err<=-1': X must be a non-negative number");
  CHECK(error("rel_err<=nan") == "--min-quality: 'rel_err<=nan': X must be a non-negative number");
  CHECK(error("mass_recall>=0.9,mass_recall>=0.8") == "--min-quality: mass_recall is given twice");
  CHECK(error("mass_recall>=0.9,") == "--min-quality: '' is not mass_recall>=X or rel_err<=X");
}

}  // namespace
}  // namespace attntune
