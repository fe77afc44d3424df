// attntune db merge (db/merge.h): every trial once with its samples and metrics, the
// rows they hang off deduplicated, bad inputs refused in one line, and the tables,
// columns and keys read from the schema.
#include "db/merge.h"

#include <sqlite3.h>

#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "tests/temp_dir.h"

#include <catch2/catch.hpp>

namespace attntune {
namespace {

void Raw(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  char* error = nullptr;
  const int rc = sqlite3_exec(db, sql.c_str(), nullptr, nullptr, &error);
  const std::string message = error ? error : "";
  sqlite3_free(error);
  sqlite3_close(db);
  INFO(message);
  REQUIRE(rc == SQLITE_OK);
}

std::string RawValue(const std::string& path, const std::string& sql) {
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

ProblemRecord Problem(int64_t L) {
  ProblemRecord p;
  p.shape.B = 1;
  p.shape.Hq = 4;
  p.shape.Hkv = 2;
  p.shape.d = 64;
  p.shape.Lq = p.shape.Lk = L;
  return p;
}

// A database of one device: two problems, three configs, a trial of each pair (one of
// them failed), each ok one with samples and metrics that depend on `seed`.
void Fill(const std::string& path, const std::string& device, int seed, bool finish = true) {
  auto db = Database::Open(path);
  const int64_t dev = db->PutDevice({0, "cpu", device, R"({"model":")" + device + "\"}"});
  const int64_t build = db->PutBuild({0, "0.1.0", "k1"});
  const int64_t run = db->BeginRun(R"({"cmd":"tune"})", dev, "2026-11-25T10:00:0" + std::to_string(seed) + "Z");
  int n = 0;
  for (const int64_t L : {64, 128}) {
    const int64_t problem = db->PutProblem(Problem(L));
    for (const char* w : {"16", "32", "64"}) {
      const int64_t config = db->PutConfig({0, "swa", "tiled", std::string(R"({"w":)") + w + "}",
                                            R"({"Br":32})"});
      TrialResult r;
      r.started_at = r.finished_at = "2026-11-25T10:00:0" + std::to_string(n % 10) + "Z";
      if (++n == 4) {
        r.status = TrialStatus::kWrongResult;
        r.message = "max rel err 0.5";
      } else {
        r.median_ms = r.p10_ms = r.p90_ms = seed + n * 0.25;
        r.cv = 0.01;
        r.samples_ms = {seed + n * 0.25, seed + n * 0.5, seed + 1.0};
        r.metrics = {{"rel_err", 1e-7 * n}, {"gflops", 10.0 * seed + n}};
      }
      db->InsertTrial(run, dev, problem, config, build, r);
    }
  }
  if (finish) db->FinishRun(run, "2026-11-25T11:00:00Z");
}

using StoredTrial = std::tuple<std::string, int64_t, std::string, std::string, double,
                            std::vector<double>, std::map<std::string, double>>;

// Every trial of `path` with what it hangs off, its samples and metrics.
std::multiset<StoredTrial> AllTrials(const std::string& path) {
  auto db = Database::OpenReadOnly(path);
  std::multiset<StoredTrial> out;
  for (const TrialRow& t : db->Trials(TrialFilter{})) {
    out.insert({t.device.name, t.problem.shape.Lk, t.config.params_json,
                ToString(t.result.status), t.result.median_ms, db->Samples(t.id), t.result.metrics});
  }
  return out;
}

std::string MergeError(const std::vector<std::string>& inputs, const std::string& into) {
  try {
    MergeFiles(inputs, into);
  } catch (const UserError& e) {
    return e.what();
  }
  return "(no error)";
}

}  // namespace

TEST_CASE("db merge: two devices' databases in one, every trial once with its samples and metrics", "[db][merge]") {
  TempDir dir("attntune_merge");
  const std::string a = dir.File("a.db"), b = dir.File("b.db"), c = dir.File("c.db");
  Fill(a, "cpu x", 1);
  Fill(b, "cpu y", 2);
  const auto counts = MergeFiles({a, b}, c);
  REQUIRE(counts.size() == 2);
  CHECK(counts[0].second.added.at("trial") == 6);
  CHECK(counts[1].second.added.at("trial") == 6);
  // b's problems, configs and build are a's: found, not added.
  CHECK(counts[1].second.added.at("problem") == 0);
  CHECK(counts[1].second.present.at("problem") == 2);
  CHECK(counts[1].second.added.at("config") == 0);
  CHECK(counts[1].second.added.at("build") == 0);
  CHECK(counts[1].second.added.at("device") == 1);
  std::multiset<StoredTrial> expected = AllTrials(a);
  for (const StoredTrial& t : AllTrials(b)) expected.insert(t);
  CHECK(AllTrials(c) == expected);
  auto merged = Database::OpenReadOnly(c);
  const DbInfo info = merged->Info();
  CHECK(info.devices == 2);
  CHECK(info.problems == 2);
  CHECK(info.configs == 3);
  CHECK(info.builds == 1);
  CHECK(info.runs == 2);
  CHECK(info.trials == 12);
  CHECK(info.samples == 2 * 5 * 3);
  CHECK(info.metrics == 2 * 5 * 2);
  merged.reset();

  SECTION("merging the same files again adds nothing") {
    for (const auto& [path, again] : MergeFiles({a, b, a}, c)) {
      INFO(path);
      for (const auto& [table, n] : again.added) CHECK(n == 0);
      CHECK(again.present.at("trial") == 6);
    }
    CHECK(AllTrials(c) == expected);
    CHECK(Database::OpenReadOnly(c)->Info().samples == 30);
  }
}

TEST_CASE("db merge reads its source in one snapshot while a tune writes to it", "[db][merge]") {
  // A trial with its samples committed to the source after its trial table was merged and
  // before its sample table is: without one read transaction the samples were read and
  // their trial was not, and the healthy file was refused as damaged.
  TempDir dir("attntune_merge");
  const std::string a = dir.File("a.db"), c = dir.File("c.db");
  Fill(a, "cpu x", 1);
  auto from = Database::OpenReadOnly(a, true);
  auto into = Database::Open(c);
  int written = 0;
  const MergeCounts counts = MergeDatabase(*into, *from, [&](const std::string& table) {
    if (table != "trial") return;
    auto writer = Database::Open(a);  // the tune
    const TrialRow row = writer->Trials(TrialFilter{}).front();
    TrialResult r;
    r.median_ms = r.p10_ms = r.p90_ms = 9.0;
    r.samples_ms = {9.0, 9.5};
    writer->InsertTrial(row.run_id, row.device.id, row.problem.id, row.config.id, row.build.id, r);
    ++written;
  });
  REQUIRE(written == 1);
  CHECK(counts.added.at("trial") == 6);  // the snapshot's, not the one written since
  CHECK(counts.added.at("sample") == 5 * 3);
  into.reset();
  from.reset();
  CHECK(RawValue(c, "SELECT count(*) FROM trial") == "6");
  CHECK(RawValue(a, "SELECT count(*) FROM trial") == "7");
}

TEST_CASE("db merge: a run finished since, and counters read since, join what is merged", "[db][merge]") {
  TempDir dir("attntune_merge");
  const std::string a = dir.File("a.db"), c = dir.File("c.db");
  Fill(a, "cpu x", 1, /*finish=*/false);
  MergeFiles({a}, c);
  CHECK(RawValue(c, "SELECT finished_at IS NULL FROM run") == "1");
  {
    auto db = Database::Open(a);
    db->FinishRun(db->Runs().front().id, "2026-11-25T12:00:00Z");
    db->AddMetrics(db->Trials(TrialFilter{}).front().id, {{"hw_passes", 3}});
  }
  const auto again = MergeFiles({a}, c);
  CHECK(again[0].second.added.at("trial") == 0);
  CHECK(again[0].second.added.at("run") == 0);
  CHECK(again[0].second.added.at("metric") == 1);
  CHECK(RawValue(c, "SELECT finished_at FROM run") == "2026-11-25T12:00:00Z");
  CHECK(RawValue(c, "SELECT count(*) FROM metric WHERE name = 'hw_passes'") == "1");
  CHECK(AllTrials(c) == AllTrials(a));
}

TEST_CASE("db merge: an older file merges as migrated; newer, damaged, missing or the destination itself are refused in one line", "[db][merge]") {
  TempDir dir("attntune_merge");
  const std::string v1 = dir.File("v1.db"), c = dir.File("c.db");
  std::filesystem::copy_file(std::string(ATTNTUNE_FIXTURES_DIR) + "/db/v1.db", v1);
  const auto counts = MergeFiles({v1}, c);
  CHECK(counts[0].second.added.at("trial") > 0);
  CHECK(AllTrials(c) == AllTrials(v1));
  CHECK(RawValue(v1, "PRAGMA user_version") == "1");  // read, not upgraded

  const std::string newer = dir.File("newer.db");
  Fill(newer, "cpu x", 1);
  Raw(newer, "PRAGMA user_version = 99");
  CHECK(MergeError({newer}, dir.File("d.db")) ==
        newer + ": schema version 99 is newer than this attntune (supports " +
            std::to_string(kSchemaVersion) + "); upgrade attntune");
  CHECK_FALSE(std::filesystem::exists(dir.File("d.db")));  // nothing written

  const std::string damaged = dir.File("damaged.db");
  Fill(damaged, "cpu x", 1);
  Raw(damaged, "PRAGMA wal_checkpoint(TRUNCATE); PRAGMA journal_mode = DELETE");
  {
    // The device table's page (the fourth: after meta and its index) garbled in place.
    REQUIRE(RawValue(damaged, "SELECT rootpage FROM sqlite_master WHERE name = 'device'") == "4");
    std::FILE* f = std::fopen(damaged.c_str(), "r+b");
    REQUIRE(f != nullptr);
    std::fseek(f, 4096 * 3, SEEK_SET);
    const std::string junk(4096, '\x5a');
    std::fwrite(junk.data(), 1, junk.size(), f);
    std::fclose(f);
  }
  const std::string error = MergeError({damaged}, dir.File("d.db"));
  INFO(error);
  CHECK(error.rfind(damaged + ": the database is damaged (", 0) == 0);
  CHECK(error.find('\n') == std::string::npos);

  // A row its own schema forbids (written with the checks off): damaged, in one line.
  const std::string forged = dir.File("forged.db");
  Fill(forged, "cpu x", 1);
  Raw(forged, "PRAGMA ignore_check_constraints = 1; UPDATE trial SET status = 'bogus' WHERE id = 2");
  CHECK(MergeError({forged}, dir.File("e.db")) ==
        forged + ": a row of table trial breaks this schema (CHECK constraint failed: status IN "
                 "('ok', 'invalid', 'compile_failed', 'launch_failed', 'wrong_result', "
                 "'timeout')) (the database is damaged)");

  CHECK(MergeError({dir.File("none.db")}, c) == "db merge: '" + dir.File("none.db") + "' does not exist");
  CHECK(MergeError({v1, c}, c) == "--into: '" + c + "' is also a database to merge (name another file)");
}

TEST_CASE("db merge reads tables, columns, keys and references from the schema (a column and a table added)", "[db][merge]") {
  TempDir dir("attntune_merge");
  const std::string a = dir.File("a.db"), c = dir.File("c.db");
  // The same later schema in both files: a corpus table, and the problem's key with its
  // corpus (as a schema that makes another table part of the problem would).
  const std::string later = R"sql(
PRAGMA foreign_keys = OFF;
CREATE TABLE corpus(id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE);
CREATE TABLE problem_next(
  id INTEGER PRIMARY KEY,
  B INTEGER NOT NULL, Hq INTEGER NOT NULL, Hkv INTEGER NOT NULL, d INTEGER NOT NULL,
  Lq INTEGER NOT NULL, Lk INTEGER NOT NULL,
  causal INTEGER NOT NULL CHECK(causal IN (0, 1)),
  dtype TEXT NOT NULL,
  phase TEXT NOT NULL,
  calib_id INTEGER NOT NULL DEFAULT 0,
  corpus_id INTEGER REFERENCES corpus(id),
  UNIQUE(B, Hq, Hkv, d, Lq, Lk, causal, dtype, phase, calib_id, corpus_id));
INSERT INTO problem_next SELECT *, NULL FROM problem;
DROP TABLE problem;
ALTER TABLE problem_next RENAME TO problem;
)sql";
  Fill(a, "cpu x", 1);
  Raw(a, later);
  Raw(a, "INSERT INTO corpus(id, name) VALUES (1, 'wiki'), (2, 'code');"
         "INSERT INTO problem(B, Hq, Hkv, d, Lq, Lk, causal, dtype, phase, calib_id, corpus_id) "
         "VALUES (1, 4, 2, 64, 64, 64, 0, 'fp32', 'prefill', 0, 1), "
         "(1, 4, 2, 64, 64, 64, 0, 'fp32', 'prefill', 0, 2)");
  {
    auto create = Database::Open(c);
  }
  Raw(c, later);
  // The destination numbers its corpora otherwise: references must be mapped.
  Raw(c, "INSERT INTO corpus(id, name) VALUES (1, 'code')");
  auto into = Database::Open(c);
  auto from = Database::OpenReadOnly(a, true);
  const MergeCounts counts = MergeDatabase(*into, *from);
  CHECK(counts.added.at("corpus") == 1);
  CHECK(counts.present.at("corpus") == 1);
  CHECK(counts.added.at("problem") == 4);  // two without a corpus, two with
  CHECK(counts.added.at("trial") == 6);
  into.reset();
  CHECK(RawValue(c, "SELECT group_concat(cal.name, ',') FROM (SELECT c.name FROM problem p "
                    "JOIN corpus c ON c.id = p.corpus_id ORDER BY c.name) cal") ==
        "code,wiki");
  CHECK(RawValue(c, "SELECT count(*) FROM problem WHERE corpus_id IS NULL") == "2");
  // Merged twice: nothing more (the NULL corpora are found, not added again).
  auto again_into = Database::Open(c);
  const MergeCounts again = MergeDatabase(*again_into, *from);
  for (const auto& [table, n] : again.added) CHECK(n == 0);
}

}  // namespace attntune
