#include "db/database.h"

#include <sqlite3.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <map>
#include <stdexcept>
#include <utility>

#include "build_info.h"
#include "core/check.h"

namespace attntune {

namespace {

// Written into the header's application_id so that another program's SQLite file is
// told apart from ours: "ATNT" in ASCII.
constexpr int32_t kApplicationId = 0x41544E54;

// A writer waits this long for another attntune process's transaction (one trial is
// short) before giving up with SQLITE_BUSY.
constexpr int kBusyTimeoutMs = 10000;

// A row that breaks the rules this code writes by comes from a damaged file (or another
// program's writes): one line naming the file and the row, never an abort.
[[noreturn]] void Damaged(const std::string& path, const std::string& what) {
  throw UserError(path + ": " + what + " (the database is damaged)");
}

void SplitV1Params(sqlite3* db, const std::string& path);

// Migration i brings schema version i to i + 1: its SQL, then its C++ step (if any), in
// one transaction with foreign keys off (so that a table can be rebuilt under the rows
// that reference it). Append only: a step, once released, is never edited, since files
// in the wild already carry its result.
struct Migration {
  const char* sql;
  void (*step)(sqlite3* db, const std::string& path);
};
const Migration kMigrations[] = {
    // 0 -> 1: the data model of DESIGN.md s4. Pareto membership is derived, never stored.
    {R"sql(
CREATE TABLE meta(
  key TEXT PRIMARY KEY,
  value TEXT NOT NULL);
CREATE TABLE device(
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL,
  name TEXT NOT NULL,
  fingerprint_json TEXT NOT NULL UNIQUE);
CREATE TABLE problem(
  id INTEGER PRIMARY KEY,
  B INTEGER NOT NULL, Hq INTEGER NOT NULL, Hkv INTEGER NOT NULL, d INTEGER NOT NULL,
  Lq INTEGER NOT NULL, Lk INTEGER NOT NULL,
  causal INTEGER NOT NULL CHECK(causal IN (0, 1)),
  dtype TEXT NOT NULL,
  phase TEXT NOT NULL,
  UNIQUE(B, Hq, Hkv, d, Lq, Lk, causal, dtype, phase));
CREATE TABLE config(
  id INTEGER PRIMARY KEY,
  variant TEXT NOT NULL,
  implementation TEXT NOT NULL,
  params_json TEXT NOT NULL,
  UNIQUE(variant, implementation, params_json));
CREATE TABLE build(
  id INTEGER PRIMARY KEY,
  version TEXT NOT NULL,
  kernel_hash TEXT NOT NULL,
  UNIQUE(version, kernel_hash));
CREATE TABLE run(
  id INTEGER PRIMARY KEY,
  started_at TEXT NOT NULL,
  finished_at TEXT,
  args_json TEXT NOT NULL,
  device_id INTEGER NOT NULL REFERENCES device(id));
CREATE TABLE trial(
  id INTEGER PRIMARY KEY,
  run_id INTEGER NOT NULL REFERENCES run(id),
  device_id INTEGER NOT NULL REFERENCES device(id),
  problem_id INTEGER NOT NULL REFERENCES problem(id),
  config_id INTEGER NOT NULL REFERENCES config(id),
  build_id INTEGER NOT NULL REFERENCES build(id),
  status TEXT NOT NULL CHECK(status IN
    ('ok', 'invalid', 'compile_failed', 'launch_failed', 'wrong_result', 'timeout')),
  message TEXT NOT NULL,
  started_at TEXT NOT NULL,
  finished_at TEXT NOT NULL,
  median_ms REAL, p10_ms REAL, p90_ms REAL, cv REAL,
  CHECK(status = 'ok' OR
        (median_ms IS NULL AND p10_ms IS NULL AND p90_ms IS NULL AND cv IS NULL)));
CREATE INDEX trial_reuse ON trial(device_id, problem_id, config_id, build_id, status);
CREATE INDEX trial_run ON trial(run_id);
CREATE TABLE sample(
  trial_id INTEGER NOT NULL REFERENCES trial(id),
  idx INTEGER NOT NULL,
  ms REAL,
  PRIMARY KEY(trial_id, idx)) WITHOUT ROWID;
CREATE TABLE metric(
  trial_id INTEGER NOT NULL REFERENCES trial(id),
  name TEXT NOT NULL,
  value REAL,
  PRIMARY KEY(trial_id, name)) WITHOUT ROWID;
)sql",
     nullptr},
    // 1 -> 2: a config's variant parameters and its implementation's tunables as two JSON
    // objects, both in the unique key; SplitV1Params fills the new table and replaces the
    // old one (ids kept, so trials keep their configs).
    {R"sql(
CREATE TABLE config_v2(
  id INTEGER PRIMARY KEY,
  variant TEXT NOT NULL,
  implementation TEXT NOT NULL,
  params_json TEXT NOT NULL,
  tunables_json TEXT NOT NULL,
  UNIQUE(variant, implementation, params_json, tunables_json));
)sql",
     SplitV1Params},
    // 2 -> 3: a tune's claim on the candidate it is measuring, so that another tune of the
    // same candidate waits for its trial instead of measuring it twice. A claim is dropped
    // with the trial's insert; one of a dead process is taken over (tuner/store.cpp).
    {R"sql(
CREATE TABLE claim(
  device_id INTEGER NOT NULL REFERENCES device(id),
  problem_id INTEGER NOT NULL REFERENCES problem(id),
  config_id INTEGER NOT NULL REFERENCES config(id),
  build_id INTEGER NOT NULL REFERENCES build(id),
  pid INTEGER NOT NULL,
  claimed_at INTEGER NOT NULL,
  PRIMARY KEY(device_id, problem_id, config_id, build_id)) WITHOUT ROWID;
)sql",
     nullptr},
    // 3 -> 4: calibration sets (captured Q/K/V, tuner/calibration_set.h) as part of the
    // problem's key, so that trials measured on them never mix with trials on the seeded
    // Gaussian inputs (calib_id 0); each calibrated trial's quality per (layer, head); and
    // the floor each run searched each problem under. The problem table is rebuilt with
    // calib_id in its unique key (ids kept, so trials and claims keep their problems).
    {R"sql(
CREATE TABLE calibration(
  id INTEGER PRIMARY KEY,
  content_hash TEXT NOT NULL UNIQUE,
  model TEXT NOT NULL,
  layers TEXT NOT NULL,
  tokens INTEGER NOT NULL,
  files_json TEXT NOT NULL);
CREATE TABLE problem_v4(
  id INTEGER PRIMARY KEY,
  B INTEGER NOT NULL, Hq INTEGER NOT NULL, Hkv INTEGER NOT NULL, d INTEGER NOT NULL,
  Lq INTEGER NOT NULL, Lk INTEGER NOT NULL,
  causal INTEGER NOT NULL CHECK(causal IN (0, 1)),
  dtype TEXT NOT NULL,
  phase TEXT NOT NULL,
  calib_id INTEGER NOT NULL DEFAULT 0,
  UNIQUE(B, Hq, Hkv, d, Lq, Lk, causal, dtype, phase, calib_id));
INSERT INTO problem_v4(id, B, Hq, Hkv, d, Lq, Lk, causal, dtype, phase, calib_id)
  SELECT id, B, Hq, Hkv, d, Lq, Lk, causal, dtype, phase, 0 FROM problem;
DROP TABLE problem;
ALTER TABLE problem_v4 RENAME TO problem;
CREATE TABLE trial_quality(
  trial_id INTEGER NOT NULL REFERENCES trial(id),
  layer INTEGER NOT NULL,
  head INTEGER NOT NULL,
  mass_recall REAL,
  rel_err REAL,
  PRIMARY KEY(trial_id, layer, head)) WITHOUT ROWID;
CREATE TABLE run_problem(
  run_id INTEGER NOT NULL REFERENCES run(id),
  problem_id INTEGER NOT NULL REFERENCES problem(id),
  floor TEXT NOT NULL,
  PRIMARY KEY(run_id, problem_id)) WITHOUT ROWID;
)sql",
     nullptr},
};
static_assert(sizeof(kMigrations) / sizeof(kMigrations[0]) == kSchemaVersion,
              "one migration step per schema version");

// A damaged or foreign file is the user's input, so UserError; anything else SQLite
// reports during operation (disk full, I/O error) is a runtime_error.
[[noreturn]] void Fail(sqlite3* db, const std::string& path, int rc, const std::string& what) {
  std::string reason = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
  if ((rc & 0xff) == SQLITE_NOTADB)
    throw UserError(path + ": not an attntune database (" + reason + ")");
  if ((rc & 0xff) == SQLITE_CORRUPT)
    throw UserError(path + ": the database is damaged (" + reason + ")");
  throw std::runtime_error(path + ": " + what + ": " + reason);
}

// A prepared statement with bound parameters; finalised on scope exit.
class Stmt {
 public:
  Stmt(sqlite3* db, const std::string& path, const char* sql) : db_(db), path_(path) {
    int rc = sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr);
    // Every statement is this file's own SQL, run by the tests: one SQLite cannot prepare
    // meets a schema that is not the one attntune wrote (a header with an unknown schema
    // format number, a table without its columns): a damaged file, found by the fuzzer.
    if ((rc & 0xff) == SQLITE_ERROR)
      throw UserError(path_ + ": the database is damaged (" + sqlite3_errmsg(db_) + ")");
    if (rc != SQLITE_OK) Fail(db_, path_, rc, "preparing a query");
  }
  ~Stmt() { sqlite3_finalize(stmt_); }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;

  Stmt& Bind(int i, int64_t v) { return Check(sqlite3_bind_int64(stmt_, i, v)); }
  Stmt& Bind(int i, const std::string& v) {
    return Check(
        sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
  }
  // NaN is stored as NULL (SQLite has no NaN); +-inf are ordinary REALs.
  Stmt& Bind(int i, double v) {
    return Check(std::isnan(v) ? sqlite3_bind_null(stmt_, i) : sqlite3_bind_double(stmt_, i, v));
  }
  Stmt& BindNull(int i) { return Check(sqlite3_bind_null(stmt_, i)); }
  template <typename T>
  Stmt& Bind(int i, const std::optional<T>& v) {
    return v ? Bind(i, *v) : BindNull(i);
  }

  /// True when a row is ready, false when done; throws on error.
  bool Step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    Fail(db_, path_, rc, "query failed");
  }
  /// Runs a statement that returns no rows.
  void Run() {
    Step();
    Reset();
  }
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }

  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }
  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  double Real(int col) const {
    return IsNull(col) ? std::numeric_limits<double>::quiet_NaN()
                       : sqlite3_column_double(stmt_, col);
  }
  std::string Text(int col) const {
    const unsigned char* text = sqlite3_column_text(stmt_, col);
    return text ? std::string(reinterpret_cast<const char*>(text),
                              static_cast<size_t>(sqlite3_column_bytes(stmt_, col)))
                : std::string();
  }

 private:
  Stmt& Check(int rc) {
    if (rc != SQLITE_OK) Fail(db_, path_, rc, "binding a parameter");
    return *this;
  }
  sqlite3* db_;
  const std::string& path_;
  sqlite3_stmt* stmt_ = nullptr;
};

void Exec(sqlite3* db, const std::string& path, const char* sql) {
  int rc = sqlite3_exec(db, sql, nullptr, nullptr, nullptr);
  if (rc != SQLITE_OK) Fail(db, path, rc, "executing SQL");
}

int64_t QueryInt(sqlite3* db, const std::string& path, const char* sql) {
  Stmt stmt(db, path, sql);
  ATTNTUNE_CHECK_MSG(stmt.Step(), sql);
  return stmt.Int(0);
}

// A write transaction, rolled back unless committed. BEGIN IMMEDIATE takes the write
// lock up front, so that two attntune processes on one file queue (busy timeout) rather
// than fail on lock upgrade halfway through.
class Transaction {
 public:
  Transaction(sqlite3* db, const std::string& path) : db_(db), path_(path) {
    Exec(db_, path_, "BEGIN IMMEDIATE");
  }
  ~Transaction() {
    if (!done_) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
  }
  Transaction(const Transaction&) = delete;
  Transaction& operator=(const Transaction&) = delete;
  void Commit() {
    Exec(db_, path_, "COMMIT");
    done_ = true;
  }

 private:
  sqlite3* db_;
  const std::string& path_;
  bool done_ = false;
};

// Refuses a file that is not ours or is damaged, before anything is written to it, and
// returns its schema version. `allow_fresh`: a file with no schema at all is accepted (a
// writer creates the schema in it). The header is read before quick_check so that a file
// of another program is named as such, not as damaged.
int64_t CheckFile(sqlite3* db, const std::string& path, bool allow_fresh) {
  // The first reads of the header and schema fail on a text file, a garbled header or a
  // truncated copy (SQLite checks the header's page count against the file size). A page
  // garbled in place is found when it is read, and Fail makes that a UserError too;
  // PRAGMA quick_check would find it now, but reads the whole file (about 0.5 s per 60 MB)
  // on every open. One statement, so one snapshot: another process may be creating the
  // schema right now.
  Stmt header(db, path,
              "SELECT (SELECT user_version FROM pragma_user_version), "
              "(SELECT application_id FROM pragma_application_id), "
              "(SELECT count(*) FROM sqlite_master)");
  ATTNTUNE_CHECK(header.Step());
  int64_t version = header.Int(0), app_id = header.Int(1), tables = header.Int(2);
  bool fresh = version == 0 && app_id == 0 && tables == 0;
  if ((!fresh || !allow_fresh) && app_id != kApplicationId)
    throw UserError(path + ": not an attntune database (no attntune schema)");
  // user_version is any 32-bit integer in a file; attntune writes 0 to kSchemaVersion.
  if (version < 0)
    Damaged(path, "schema version " + std::to_string(version) + " is none attntune writes");
  if (version > kSchemaVersion)
    throw UserError(path + ": schema version " + std::to_string(version) +
                    " is newer than this attntune (supports " + std::to_string(kSchemaVersion) +
                    "); upgrade attntune");
  return version;
}

// Every page of a file, read once (PRAGMA quick_check: b-tree structure, no index
// contents; about 0.5 s per 60 MB): a page garbled in place would otherwise surface only
// if a query touched it, or not at all when a garbled interior page reads as an empty
// table, and a report would show fewer trials than the file holds.
void QuickCheck(sqlite3* db, const std::string& path) {
  // 1: the first problem is enough to name the damage.
  Stmt check(db, path, "PRAGMA quick_check(1)");
  const std::string result = check.Step() ? check.Text(0) : std::string("no result");
  if (result == "ok") return;
  // The report is "*** in database main ***\nPage 42: ..."; the error is one line.
  std::string line;
  size_t start = 0;
  while (start <= result.size()) {
    size_t end = result.find('\n', start);
    if (end == std::string::npos) end = result.size();
    const std::string part = result.substr(start, end - start);
    if (!part.empty() && part.rfind("*** in database", 0) != 0)
      line += (line.empty() ? "" : "; ") + part;
    start = end + 1;
  }
  throw UserError(path + ": the database is damaged (" + line + ")");
}

// The URI a reader opens `path` by. A WAL file is read through its -shm index, which
// SQLite creates beside the file; in a folder the reader cannot write, with no -wal file
// (so no writer: a writer would have had to create one there), the file cannot change
// while it is read, and SQLite is told so (immutable) instead of needing the index.
std::string ReadOnlyUri(const std::string& path) {
  // An absolute path after an empty authority: "file:" + "//x" would name a host x.
  std::string uri = !path.empty() && path[0] == '/' ? "file://" : "file:";
  for (const char c : path) {
    // '?', '#' and '%' would end or escape the path in a URI.
    if (c == '?' || c == '#' || c == '%') {
      char escaped[4];
      std::snprintf(escaped, sizeof escaped, "%%%02X", static_cast<unsigned char>(c));
      uri += escaped;
    } else {
      uri += c;
    }
  }
  const std::filesystem::path folder = std::filesystem::absolute(path).parent_path();
  std::error_code ec;
  if (!std::filesystem::exists(path + "-wal", ec) && access(folder.c_str(), W_OK) != 0)
    uri += "?immutable=1";
  return uri;
}

// Switching a file to WAL needs an exclusive lock, and SQLite does not wait for it (the
// connection already holds a shared lock, so its busy handler could deadlock): while
// other processes open the same new file, retry here.
void EnableWal(sqlite3* db, const std::string& path) {
  constexpr int kRetryMs = 5;
  for (int waited_ms = 0;; waited_ms += kRetryMs) {
    int rc = sqlite3_exec(db, "PRAGMA journal_mode = WAL", nullptr, nullptr, nullptr);
    if (rc == SQLITE_OK) return;
    if ((rc & 0xff) != SQLITE_BUSY || waited_ms >= kBusyTimeoutMs)
      Fail(db, path, rc, "switching to WAL");
    sqlite3_sleep(kRetryMs);
  }
}

// The v1 convention: a schema-1 file's params_json holds the variant's parameters and the
// implementation's tunables in one object, and every tunable the releases that wrote v1
// files declared (Br, Bc, Tile, Split, Chunk) begins with an upper-case letter while no
// variant parameter does. Only the migration of v1 files relies on it; schema 2 stores
// the two apart.
bool IsV1TunableName(const std::string& name) {
  return !name.empty() && name[0] >= 'A' && name[0] <= 'Z';
}

// 1 -> 2: copies every config into config_v2 with its params_json split by the v1
// convention, then puts config_v2 in the place of config.
void SplitV1Params(sqlite3* db, const std::string& path) {
  {  // the statements end before the table they read is dropped
    Stmt select(db, path, "SELECT id, variant, implementation, params_json FROM config");
    Stmt insert(db, path,
                "INSERT INTO config_v2(id, variant, implementation, params_json, tunables_json) "
                "VALUES (?1, ?2, ?3, ?4, ?5)");
    while (select.Step()) {
      const int64_t id = select.Int(0);
      const std::string text = select.Text(3);
      const nlohmann::json merged = nlohmann::json::parse(text, nullptr, false);
      if (!merged.is_object())
        Damaged(path, "config " + std::to_string(id) + " has params_json '" + text +
                          "', not a JSON object");
      nlohmann::json params = nlohmann::json::object(), tunables = nlohmann::json::object();
      for (const auto& [key, value] : merged.items())
        (IsV1TunableName(key) ? tunables : params)[key] = value;
      // dump() writes the canonical form that kernels' Canonical*Json functions write.
      insert.Bind(1, id).Bind(2, select.Text(1)).Bind(3, select.Text(2));
      insert.Bind(4, params.dump()).Bind(5, tunables.dump()).Run();
    }
  }
  Exec(db, path, "DROP TABLE config; ALTER TABLE config_v2 RENAME TO config;");
}

// The reason SQLite gave in one of Fail's messages ("<path>: <what>: <reason>").
std::string SqliteReason(const std::string& path, const std::string& message) {
  if (message.rfind(path + ": ", 0) != 0) return message;
  const size_t colon = message.find(": ", path.size() + 2);
  return colon == std::string::npos ? message : message.substr(colon + 2);
}

void Migrate(sqlite3* db, const std::string& path) {
  // An up-to-date file takes no write lock, so that opening never waits for a writer.
  if (QueryInt(db, path, "PRAGMA user_version") >= kSchemaVersion) return;
  // Outside any transaction (inside one SQLite ignores it); back on below.
  Exec(db, path, "PRAGMA foreign_keys = OFF");
  while (QueryInt(db, path, "PRAGMA user_version") < kSchemaVersion) {
    Transaction txn(db, path);
    // Read again under the write lock: another process may have migrated the file.
    int64_t version = QueryInt(db, path, "PRAGMA user_version");
    if (version >= kSchemaVersion) break;
    const Migration& step = kMigrations[static_cast<size_t>(version)];
    // A step whose SQL fails on a file (a table it creates exists already, one it changes
    // is missing, rows it copies break a constraint of the new table) meets tables or rows
    // that are not those of the version the file claims: the file is damaged (found by the
    // database fuzzer), and the transaction leaves it as it was.
    try {
      Exec(db, path, step.sql);
      if (step.step) step.step(db, path);
    } catch (const UserError&) {
      throw;
    } catch (const std::runtime_error& e) {
      Damaged(path, "schema version " + std::to_string(version) + " does not migrate: " +
                        SqliteReason(path, e.what()));
    }
    {  // a rebuilt table must leave every reference intact
      Stmt fk_check(db, path, "PRAGMA foreign_key_check");
      if (fk_check.Step())
        Damaged(path, "table " + fk_check.Text(0) + " row " + std::to_string(fk_check.Int(1)) +
                          " refers to a missing " + fk_check.Text(2) + " row");
    }
    if (version == 0) {
      Stmt meta(db, path,
                "INSERT INTO meta(key, value) VALUES ('created_by', ?1), "
                "('created_at', strftime('%Y-%m-%dT%H:%M:%SZ', 'now'))");
      meta.Bind(1, std::string("attntune " ATTNTUNE_VERSION)).Run();
      Exec(db, path, ("PRAGMA application_id = " + std::to_string(kApplicationId)).c_str());
    }
    // PRAGMA takes no bound parameters; the value is our own integer.
    Exec(db, path, ("PRAGMA user_version = " + std::to_string(version + 1)).c_str());
    txn.Commit();
  }
  Exec(db, path, "PRAGMA foreign_keys = ON");
}

// Columns of a trial joined with its device, problem, config and build; ReadTrialRow
// reads them in this order.
constexpr const char* kTrialSelect = R"sql(
SELECT t.id, t.run_id, t.status, t.message, t.started_at, t.finished_at,
       t.median_ms, t.p10_ms, t.p90_ms, t.cv,
       (SELECT count(*) FROM sample s WHERE s.trial_id = t.id),
       d.id, d.kind, d.name, d.fingerprint_json,
       p.id, p.B, p.Hq, p.Hkv, p.d, p.Lq, p.Lk, p.causal, p.dtype, p.phase,
       c.id, c.variant, c.implementation, c.params_json, c.tunables_json,
       b.id, b.version, b.kernel_hash, p.calib_id
FROM trial t
JOIN device d ON d.id = t.device_id
JOIN problem p ON p.id = t.problem_id
JOIN config c ON c.id = t.config_id
JOIN build b ON b.id = t.build_id
)sql";

// The value of a config column that must hold a JSON object.
void CheckJsonObject(const std::string& path, int64_t config_id, const char* column,
                     const std::string& text) {
  if (!nlohmann::json::parse(text, nullptr, false).is_object())
    Damaged(path, "config " + std::to_string(config_id) + " has " + column + " '" + text +
                      "', not a JSON object");
}

TrialRow ReadTrialRow(const Stmt& s, const std::string& path) {
  TrialRow row;
  row.id = s.Int(0);
  row.run_id = s.Int(1);
  TrialResult& r = row.result;
  const std::string status = s.Text(2);
  const std::optional<TrialStatus> parsed_status = TrialStatusFromString(status);
  if (!parsed_status)
    Damaged(path, "trial " + std::to_string(row.id) + " has unknown status '" + status + "'");
  r.status = *parsed_status;
  r.message = s.Text(3);
  r.started_at = s.Text(4);
  r.finished_at = s.Text(5);
  if (r.status == TrialStatus::kOk) {  // NULL here was a NaN statistic
    r.median_ms = s.Real(6);
    r.p10_ms = s.Real(7);
    r.p90_ms = s.Real(8);
    r.cv = s.Real(9);
  }
  row.sample_count = s.Int(10);
  row.device = {s.Int(11), s.Text(12), s.Text(13), s.Text(14)};
  ProblemRecord& p = row.problem;
  p.id = s.Int(15);
  p.shape.B = s.Int(16);
  p.shape.Hq = s.Int(17);
  p.shape.Hkv = s.Int(18);
  p.shape.d = s.Int(19);
  p.shape.Lq = s.Int(20);
  p.shape.Lk = s.Int(21);
  p.shape.causal = s.Int(22) != 0;
  const std::string dtype = s.Text(23), phase = s.Text(24);
  const std::optional<Dtype> parsed_dtype = DtypeFromString(dtype);
  if (!parsed_dtype)
    Damaged(path, "problem " + std::to_string(p.id) + " has unknown dtype '" + dtype + "'");
  const std::optional<Phase> parsed_phase = PhaseFromString(phase);
  if (!parsed_phase)
    Damaged(path, "problem " + std::to_string(p.id) + " has unknown phase '" + phase + "'");
  p.dtype = *parsed_dtype;
  p.phase = *parsed_phase;
  row.config = {s.Int(25), s.Text(26), s.Text(27), s.Text(28), s.Text(29)};
  CheckJsonObject(path, row.config.id, "params_json", row.config.params_json);
  CheckJsonObject(path, row.config.id, "tunables_json", row.config.tunables_json);
  row.build = {s.Int(30), s.Text(31), s.Text(32)};
  p.calib_id = s.Int(33);
  return row;
}

void LoadMetrics(sqlite3* db, const std::string& path, std::vector<TrialRow>& rows) {
  Stmt stmt(db, path, "SELECT name, value FROM metric WHERE trial_id = ?1");
  for (TrialRow& row : rows) {
    stmt.Bind(1, row.id);
    while (stmt.Step()) row.result.metrics[stmt.Text(0)] = stmt.Real(1);
    stmt.Reset();
  }
}

}  // namespace

std::unique_ptr<Database> Database::Open(const std::string& path) {
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(path.c_str(), &raw, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE, nullptr);
  if (rc != SQLITE_OK) {
    std::string reason = raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    sqlite3_close_v2(raw);
    throw UserError(path + ": cannot open database (" + reason + ")");
  }
  // Owned from here, so that a throw below closes the connection.
  std::unique_ptr<Database> db(new Database(path, raw));
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, kBusyTimeoutMs);
  CheckFile(raw, path, /*allow_fresh=*/true);
  QuickCheck(raw, path);
  Exec(raw, path, "PRAGMA foreign_keys = ON");
  if (path != ":memory:" && !path.empty()) {
    // WAL: a killed process loses at most its uncommitted transaction, and readers (a
    // report) never block the tuner. synchronous=NORMAL keeps every committed trial
    // across a crash or kill of the process; only a power loss or OS crash may roll back
    // the last commits, which is out of scope.
    EnableWal(raw, path);
    Exec(raw, path, "PRAGMA synchronous = NORMAL");
  }
  Migrate(raw, path);
  db->file_schema_version_ = static_cast<int>(QueryInt(raw, path, "PRAGMA user_version"));
  return db;
}

std::unique_ptr<Database> Database::OpenReadOnly(const std::string& path, bool current) {
  // SQLite takes a zero-byte file for an empty database; a reader never has a use for one.
  std::error_code ec;
  if (std::filesystem::is_regular_file(path, ec) && std::filesystem::file_size(path, ec) == 0)
    throw UserError(path + ": empty file, not an attntune database");
  sqlite3* raw = nullptr;
  int rc = sqlite3_open_v2(ReadOnlyUri(path).c_str(), &raw,
                           SQLITE_OPEN_READONLY | SQLITE_OPEN_URI, nullptr);
  if (rc != SQLITE_OK) {
    std::string reason = raw ? sqlite3_errmsg(raw) : sqlite3_errstr(rc);
    sqlite3_close_v2(raw);
    throw UserError(path + ": cannot open database (" + reason + ")");
  }
  std::unique_ptr<Database> db(new Database(path, raw));
  sqlite3_extended_result_codes(raw, 1);
  sqlite3_busy_timeout(raw, kBusyTimeoutMs);
  const int64_t version = CheckFile(raw, path, /*allow_fresh=*/false);
  QuickCheck(raw, path);
  db->file_schema_version_ = static_cast<int>(version);
  if (version >= (current ? kSchemaVersion : kReadableSchemaVersion)) return db;

  // An older file: copied into memory and migrated there by the same steps that upgrade
  // it in place, so that it reads as a migrated file would while the file stays as it is.
  sqlite3* memory = nullptr;
  rc = sqlite3_open_v2(":memory:", &memory, SQLITE_OPEN_READWRITE, nullptr);
  if (rc != SQLITE_OK) {
    sqlite3_close_v2(memory);
    Fail(nullptr, path, rc, "opening an in-memory copy");
  }
  db->db_ = memory;  // owned from here; `raw` is closed below
  sqlite3_backup* backup = sqlite3_backup_init(memory, "main", raw, "main");
  rc = backup ? sqlite3_backup_step(backup, -1) : sqlite3_errcode(memory);
  if (backup) sqlite3_backup_finish(backup);
  sqlite3_close_v2(raw);
  if (rc != SQLITE_DONE) Fail(nullptr, path, rc, "copying into memory");
  sqlite3_extended_result_codes(memory, 1);
  Exec(memory, path, "PRAGMA foreign_keys = ON");
  Migrate(memory, path);
  return db;
}

Database::Database(std::string path, sqlite3* db) : path_(std::move(path)), db_(db) {}

Database::~Database() { sqlite3_close_v2(db_); }

int64_t Database::PutDevice(const DeviceRecord& device) {
  Stmt insert(db_, path_,
              "INSERT INTO device(kind, name, fingerprint_json) VALUES (?1, ?2, ?3) "
              "ON CONFLICT DO NOTHING");
  insert.Bind(1, device.kind).Bind(2, device.name).Bind(3, device.fingerprint_json).Run();
  Stmt select(db_, path_, "SELECT id FROM device WHERE fingerprint_json = ?1");
  select.Bind(1, device.fingerprint_json);
  ATTNTUNE_CHECK(select.Step());
  return select.Int(0);
}

int64_t Database::PutProblem(const ProblemRecord& problem) {
  const char* const kInsert =
      "INSERT INTO problem(B, Hq, Hkv, d, Lq, Lk, causal, dtype, phase, calib_id) "
      "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) ON CONFLICT DO NOTHING";
  const char* const kSelect =
      "SELECT id FROM problem WHERE B = ?1 AND Hq = ?2 AND Hkv = ?3 AND d = ?4 AND Lq = ?5 "
      "AND Lk = ?6 AND causal = ?7 AND dtype = ?8 AND phase = ?9 AND calib_id = ?10";
  Stmt insert(db_, path_, kInsert);
  Stmt select(db_, path_, kSelect);
  for (Stmt* s : {&insert, &select}) {
    const Shape& sh = problem.shape;
    s->Bind(1, sh.B).Bind(2, sh.Hq).Bind(3, sh.Hkv).Bind(4, sh.d).Bind(5, sh.Lq).Bind(6, sh.Lk);
    s->Bind(7, int64_t{sh.causal ? 1 : 0});
    s->Bind(8, std::string(ToString(problem.dtype)));
    s->Bind(9, std::string(ToString(problem.phase)));
    s->Bind(10, problem.calib_id);
  }
  insert.Run();
  ATTNTUNE_CHECK(select.Step());
  return select.Int(0);
}

int64_t Database::PutConfig(const ConfigRecord& config) {
  Stmt insert(db_, path_,
              "INSERT INTO config(variant, implementation, params_json, tunables_json) "
              "VALUES (?1, ?2, ?3, ?4) ON CONFLICT DO NOTHING");
  Stmt select(db_, path_,
              "SELECT id FROM config WHERE variant = ?1 AND implementation = ?2 AND "
              "params_json = ?3 AND tunables_json = ?4");
  for (Stmt* s : {&insert, &select}) {
    s->Bind(1, config.variant).Bind(2, config.implementation);
    s->Bind(3, config.params_json).Bind(4, config.tunables_json);
  }
  insert.Run();
  ATTNTUNE_CHECK(select.Step());
  return select.Int(0);
}

int64_t Database::PutBuild(const BuildRecord& build) {
  Stmt insert(db_, path_,
              "INSERT INTO build(version, kernel_hash) VALUES (?1, ?2) ON CONFLICT DO NOTHING");
  insert.Bind(1, build.version).Bind(2, build.kernel_hash).Run();
  Stmt select(db_, path_, "SELECT id FROM build WHERE version = ?1 AND kernel_hash = ?2");
  select.Bind(1, build.version).Bind(2, build.kernel_hash);
  ATTNTUNE_CHECK(select.Step());
  return select.Int(0);
}

int64_t Database::PutCalibration(const CalibrationRecord& calibration) {
  Stmt insert(db_, path_,
              "INSERT INTO calibration(content_hash, model, layers, tokens, files_json) "
              "VALUES (?1, ?2, ?3, ?4, ?5) ON CONFLICT DO NOTHING");
  insert.Bind(1, calibration.content_hash).Bind(2, calibration.model);
  insert.Bind(3, calibration.layers).Bind(4, calibration.tokens);
  insert.Bind(5, calibration.files_json).Run();
  Stmt select(db_, path_, "SELECT id FROM calibration WHERE content_hash = ?1");
  select.Bind(1, calibration.content_hash);
  ATTNTUNE_CHECK(select.Step());
  return select.Int(0);
}

std::vector<CalibrationRecord> Database::Calibrations() const {
  Stmt stmt(db_, path_,
            "SELECT id, content_hash, model, layers, tokens, files_json FROM calibration "
            "ORDER BY id");
  std::vector<CalibrationRecord> rows;
  while (stmt.Step())
    rows.push_back({stmt.Int(0), stmt.Text(1), stmt.Text(2), stmt.Text(3), stmt.Int(4),
                    stmt.Text(5)});
  return rows;
}

void Database::PutRunProblem(const RunProblemRecord& record) {
  Stmt insert(db_, path_,
              "INSERT OR REPLACE INTO run_problem(run_id, problem_id, floor) VALUES (?1, ?2, ?3)");
  insert.Bind(1, record.run_id).Bind(2, record.problem_id).Bind(3, record.floor).Run();
}

std::vector<RunProblemRecord> Database::RunProblems() const {
  Stmt stmt(db_, path_, "SELECT run_id, problem_id, floor FROM run_problem ORDER BY run_id, problem_id");
  std::vector<RunProblemRecord> rows;
  while (stmt.Step()) rows.push_back({stmt.Int(0), stmt.Int(1), stmt.Text(2)});
  return rows;
}

std::vector<QualityCell> Database::QualityCells(int64_t trial_id) const {
  Stmt stmt(db_, path_,
            "SELECT layer, head, mass_recall, rel_err FROM trial_quality WHERE trial_id = ?1 "
            "ORDER BY layer, head");
  stmt.Bind(1, trial_id);
  std::vector<QualityCell> cells;
  while (stmt.Step()) cells.push_back({stmt.Int(0), stmt.Int(1), stmt.Real(2), stmt.Real(3)});
  return cells;
}

int64_t Database::BeginRun(const std::string& args_json, int64_t device_id,
                           const std::string& now) {
  Stmt insert(db_, path_, "INSERT INTO run(started_at, args_json, device_id) VALUES (?1, ?2, ?3)");
  insert.Bind(1, now).Bind(2, args_json).Bind(3, device_id).Run();
  return sqlite3_last_insert_rowid(db_);
}

void Database::FinishRun(int64_t run_id, const std::string& now) {
  Stmt update(db_, path_, "UPDATE run SET finished_at = ?1 WHERE id = ?2");
  update.Bind(1, now).Bind(2, run_id).Run();
  ATTNTUNE_CHECK_MSG(sqlite3_changes(db_) == 1, "FinishRun: no run " + std::to_string(run_id));
}

std::optional<TrialRow> Database::FindReusable(int64_t device_id, int64_t problem_id,
                                               int64_t config_id, int64_t build_id) {
  // ok, invalid and wrong_result are deterministic for a given build; a launch failure
  // or timeout may be transient, so it is retried.
  std::string sql = std::string(kTrialSelect) +
                    "WHERE t.device_id = ?1 AND t.problem_id = ?2 AND t.config_id = ?3 AND "
                    "t.build_id = ?4 AND t.status IN ('ok', 'invalid', 'wrong_result') "
                    "ORDER BY t.id DESC LIMIT 1";
  Stmt stmt(db_, path_, sql.c_str());
  stmt.Bind(1, device_id).Bind(2, problem_id).Bind(3, config_id).Bind(4, build_id);
  if (!stmt.Step()) return std::nullopt;
  std::vector<TrialRow> rows{ReadTrialRow(stmt, path_)};
  LoadMetrics(db_, path_, rows);
  return std::move(rows.front());
}

ClaimResult Database::ClaimOrReuse(const TrialKey& key, const Claim& claimant,
                                   const std::function<bool(const Claim&)>& holder_live,
                                   const std::vector<int64_t>& peers,
                                   const std::function<bool(const TrialRow&)>& reusable) {
  Transaction txn(db_, path_);
  ClaimResult result;
  result.trial = FindReusable(key.device_id, key.problem_id, key.config_id, key.build_id);
  for (const int64_t peer : peers) {
    if (peer == key.device_id) continue;
    std::optional<TrialRow> found = FindReusable(peer, key.problem_id, key.config_id, key.build_id);
    if (found && (!result.trial || found->id > result.trial->id)) result.trial = std::move(found);
  }
  if (result.trial && reusable && !reusable(*result.trial)) result.trial.reset();
  if (result.trial) {
    result.outcome = ClaimResult::Outcome::kReusable;
    txn.Commit();
    return result;
  }
  {
    Stmt held(db_, path_,
              "SELECT pid, claimed_at FROM claim WHERE device_id = ?1 AND problem_id = ?2 AND "
              "config_id = ?3 AND build_id = ?4");
    held.Bind(1, key.device_id).Bind(2, key.problem_id).Bind(3, key.config_id);
    held.Bind(4, key.build_id);
    if (held.Step()) {
      const Claim holder{held.Int(0), held.Int(1)};
      if (holder.pid != claimant.pid && holder_live(holder)) {
        result.outcome = ClaimResult::Outcome::kHeld;
        result.holder = holder;
        txn.Commit();
        return result;
      }
    }
  }
  Stmt claim(db_, path_,
             "INSERT OR REPLACE INTO claim(device_id, problem_id, config_id, build_id, pid, "
             "claimed_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6)");
  claim.Bind(1, key.device_id).Bind(2, key.problem_id).Bind(3, key.config_id);
  claim.Bind(4, key.build_id).Bind(5, claimant.pid).Bind(6, claimant.claimed_at).Run();
  txn.Commit();
  result.outcome = ClaimResult::Outcome::kClaimed;
  return result;
}

void Database::ReleaseClaim(const TrialKey& key, int64_t pid) {
  Stmt drop(db_, path_,
            "DELETE FROM claim WHERE device_id = ?1 AND problem_id = ?2 AND config_id = ?3 AND "
            "build_id = ?4 AND pid = ?5");
  drop.Bind(1, key.device_id).Bind(2, key.problem_id).Bind(3, key.config_id);
  drop.Bind(4, key.build_id).Bind(5, pid).Run();
}

int64_t Database::InsertTrial(int64_t run_id, int64_t device_id, int64_t problem_id,
                              int64_t config_id, int64_t build_id, const TrialResult& result,
                              const TrialKey* claim) {
  Transaction txn(db_, path_);
  Stmt trial(db_, path_,
             "INSERT INTO trial(run_id, device_id, problem_id, config_id, build_id, status, "
             "message, started_at, finished_at, median_ms, p10_ms, p90_ms, cv) "
             "VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)");
  trial.Bind(1, run_id).Bind(2, device_id).Bind(3, problem_id).Bind(4, config_id);
  trial.Bind(5, build_id).Bind(6, std::string(ToString(result.status))).Bind(7, result.message);
  trial.Bind(8, result.started_at).Bind(9, result.finished_at);
  if (result.status == TrialStatus::kOk) {  // statistics describe successful timings only
    trial.Bind(10, result.median_ms).Bind(11, result.p10_ms).Bind(12, result.p90_ms);
    trial.Bind(13, result.cv);
  }
  trial.Run();
  int64_t trial_id = sqlite3_last_insert_rowid(db_);

  Stmt sample(db_, path_, "INSERT INTO sample(trial_id, idx, ms) VALUES (?1, ?2, ?3)");
  for (size_t i = 0; i < result.samples_ms.size(); ++i)
    sample.Bind(1, trial_id).Bind(2, static_cast<int64_t>(i)).Bind(3, result.samples_ms[i]).Run();
  Stmt metric(db_, path_, "INSERT INTO metric(trial_id, name, value) VALUES (?1, ?2, ?3)");
  for (const auto& [name, value] : result.metrics)
    metric.Bind(1, trial_id).Bind(2, name).Bind(3, value).Run();
  Stmt cell(db_, path_,
            "INSERT INTO trial_quality(trial_id, layer, head, mass_recall, rel_err) "
            "VALUES (?1, ?2, ?3, ?4, ?5)");
  for (const QualityCell& c : result.quality_cells)
    cell.Bind(1, trial_id).Bind(2, c.layer).Bind(3, c.head).Bind(4, c.mass_recall).Bind(5, c.rel_err).Run();
  // The trial answers whoever waits on the claim from now on.
  Stmt drop(db_, path_,
            "DELETE FROM claim WHERE device_id = ?1 AND problem_id = ?2 AND config_id = ?3 AND "
            "build_id = ?4");
  drop.Bind(1, device_id).Bind(2, problem_id).Bind(3, config_id).Bind(4, build_id).Run();
  if (claim) {
    drop.Bind(1, claim->device_id).Bind(2, claim->problem_id).Bind(3, claim->config_id);
    drop.Bind(4, claim->build_id).Run();
  }
  txn.Commit();
  return trial_id;
}

void Database::AddMetrics(int64_t trial_id, const std::map<std::string, double>& metrics) {
  Transaction txn(db_, path_);
  Stmt metric(db_, path_,
              "INSERT OR REPLACE INTO metric(trial_id, name, value) VALUES (?1, ?2, ?3)");
  for (const auto& [name, value] : metrics)
    metric.Bind(1, trial_id).Bind(2, name).Bind(3, value).Run();
  txn.Commit();
}

std::vector<TrialRow> Database::Trials(const TrialFilter& filter) const {
  std::string sql = std::string(kTrialSelect) +
                    "WHERE (?1 IS NULL OR t.device_id = ?1) AND (?2 IS NULL OR c.variant = ?2) "
                    "AND (?3 = 0 OR t.status = 'ok') ORDER BY t.id";
  Stmt stmt(db_, path_, sql.c_str());
  stmt.Bind(1, filter.device_id).Bind(2, filter.variant);
  stmt.Bind(3, int64_t{filter.ok_only ? 1 : 0});
  std::vector<TrialRow> rows;
  while (stmt.Step()) rows.push_back(ReadTrialRow(stmt, path_));
  LoadMetrics(db_, path_, rows);
  return rows;
}

std::vector<double> Database::Samples(int64_t trial_id) const {
  Stmt stmt(db_, path_, "SELECT ms FROM sample WHERE trial_id = ?1 ORDER BY idx");
  stmt.Bind(1, trial_id);
  std::vector<double> samples;
  while (stmt.Step()) samples.push_back(stmt.Real(0));
  return samples;
}

std::vector<DeviceRecord> Database::Devices() const {
  Stmt stmt(db_, path_, "SELECT id, kind, name, fingerprint_json FROM device ORDER BY id");
  std::vector<DeviceRecord> devices;
  while (stmt.Step()) devices.push_back({stmt.Int(0), stmt.Text(1), stmt.Text(2), stmt.Text(3)});
  return devices;
}

std::vector<RunRecord> Database::Runs() const {
  Stmt stmt(db_, path_,
            "SELECT id, started_at, finished_at, args_json, device_id FROM run ORDER BY id");
  std::vector<RunRecord> runs;
  while (stmt.Step())
    runs.push_back({stmt.Int(0), stmt.Text(1), stmt.Text(2), stmt.Text(3), stmt.Int(4)});
  return runs;
}

DbInfo Database::Info() const {
  DbInfo info;
  info.path = path_;
  info.schema_version = file_schema_version_;
  const std::pair<const char*, int64_t*> kCounts[] = {
      {"SELECT count(*) FROM device", &info.devices},
      {"SELECT count(*) FROM problem", &info.problems},
      {"SELECT count(*) FROM config", &info.configs},
      {"SELECT count(*) FROM build", &info.builds},
      {"SELECT count(*) FROM run", &info.runs},
      {"SELECT count(*) FROM trial", &info.trials},
      {"SELECT count(*) FROM sample", &info.samples},
      {"SELECT count(*) FROM metric", &info.metrics},
      {"SELECT count(*) FROM calibration", &info.calibrations},
  };
  for (const auto& [sql, count] : kCounts) *count = QueryInt(db_, path_, sql);

  // In TrialStatus order, statuses with no trial left out.
  std::map<std::string, int64_t> by_status;
  Stmt stmt(db_, path_, "SELECT status, count(*) FROM trial GROUP BY status");
  while (stmt.Step()) by_status[stmt.Text(0)] = stmt.Int(1);
  for (int s = static_cast<int>(TrialStatus::kOk); s <= static_cast<int>(TrialStatus::kTimeout);
       ++s) {
    const char* name = ToString(static_cast<TrialStatus>(s));
    if (auto it = by_status.find(name); it != by_status.end()) info.trials_by_status.push_back(*it);
  }
  return info;
}

}  // namespace attntune
