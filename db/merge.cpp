#include "db/merge.h"

#include <sqlite3.h>

#include <algorithm>
#include <filesystem>
#include <memory>
#include <set>
#include <stdexcept>
#include <utility>
#include <vector>

#include "core/check.h"
#include "core/error.h"
#include "db/records.h"

namespace attntune {
namespace {

// Tables that describe one file or one moment, not results: never merged.
const std::set<std::string> kNotMerged = {"meta", "claim"};

// References the schema does not declare, as (table, column) -> referenced table: their
// value 0 names no row. problem.calib_id is the problem's calibration set, 0 for the
// seeded Gaussian inputs (schema 4; a REFERENCES clause would forbid the 0).
const std::map<std::pair<std::string, std::string>, std::string> kUndeclaredReferences = {
    {{"problem", "calib_id"}, "calibration"}};

// A row that breaks a constraint of the destination's schema (a NOT NULL, CHECK or
// UNIQUE one): it comes from a damaged or foreign source.
struct ConstraintBroken : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A prepared statement on one connection; values bound and read as sqlite3_value copies.
class Query {
 public:
  Query(sqlite3* db, const std::string& path, const std::string& sql) : db_(db), path_(path) {
    if (sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt_, nullptr) != SQLITE_OK)
      Fail("preparing " + sql);
  }
  ~Query() { sqlite3_finalize(stmt_); }
  Query(const Query&) = delete;
  Query& operator=(const Query&) = delete;

  bool Step() {
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if ((rc & 0xff) == SQLITE_CONSTRAINT) throw ConstraintBroken(sqlite3_errmsg(db_));
    if (rc != SQLITE_DONE) Fail("a query");
    return false;
  }
  void Reset() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  void Bind(int i, sqlite3_value* v) { Check(sqlite3_bind_value(stmt_, i, v)); }
  void Bind(int i, int64_t v) { Check(sqlite3_bind_int64(stmt_, i, v)); }
  void Bind(int i, const std::string& v) {
    Check(sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_TRANSIENT));
  }
  int Columns() const { return sqlite3_column_count(stmt_); }
  sqlite3_value* Value(int col) const { return sqlite3_column_value(stmt_, col); }
  int64_t Int(int col) const { return sqlite3_column_int64(stmt_, col); }
  std::string Text(int col) const {
    const unsigned char* t = sqlite3_column_text(stmt_, col);
    return t ? reinterpret_cast<const char*>(t) : "";
  }
  bool IsNull(int col) const { return sqlite3_column_type(stmt_, col) == SQLITE_NULL; }

 private:
  void Check(int rc) {
    if (rc != SQLITE_OK) Fail("binding a value");
  }
  [[noreturn]] void Fail(const std::string& what) {
    const int rc = sqlite3_extended_errcode(db_);
    const std::string reason = sqlite3_errmsg(db_);
    if ((rc & 0xff) == SQLITE_CORRUPT) throw UserError(path_ + ": the database is damaged (" + reason + ")");
    throw std::runtime_error(path_ + ": merging: " + what + ": " + reason);
  }
  sqlite3* db_;
  const std::string& path_;
  sqlite3_stmt* stmt_ = nullptr;
};

std::string Quote(const std::string& name) {
  std::string q = "\"";
  for (const char c : name) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

// What the schema says of one table.
struct Table {
  std::string name;
  std::vector<std::string> columns;
  std::set<std::string> not_null;
  std::vector<std::string> primary;  // primary key columns, in key order
  std::string rowid;                 // an INTEGER PRIMARY KEY column, if the key is one
  std::vector<std::string> unique;   // the first UNIQUE constraint's columns, if any
  std::map<std::string, std::string> references;  // column -> referenced table
  std::set<std::string> zero_is_none;  // referring columns whose 0 names no row
};

Table ReadTable(sqlite3* db, const std::string& path, const std::string& name) {
  Table t;
  t.name = name;
  std::vector<std::pair<int64_t, std::string>> pk;
  Query info(db, path, "SELECT name, upper(type), \"notnull\", pk FROM pragma_table_info(?1)");
  info.Bind(1, name);
  while (info.Step()) {
    const std::string column = info.Text(0);
    t.columns.push_back(column);
    if (info.Int(2) != 0) t.not_null.insert(column);
    if (info.Int(3) > 0) pk.emplace_back(info.Int(3), column);
    // An INTEGER PRIMARY KEY is the rowid: its values are the file's own numbering.
    if (info.Int(3) > 0 && info.Text(1) == "INTEGER") t.rowid = column;
  }
  std::sort(pk.begin(), pk.end());
  for (const auto& [order, column] : pk) t.primary.push_back(column);
  if (t.primary.size() != 1) t.rowid.clear();
  Query indexes(db, path, "SELECT name FROM pragma_index_list(?1) WHERE \"unique\" = 1 AND "
                          "origin != 'pk' ORDER BY seq DESC");
  indexes.Bind(1, name);
  if (indexes.Step()) {
    Query cols(db, path, "SELECT name FROM pragma_index_info(?1) ORDER BY seqno");
    cols.Bind(1, indexes.Text(0));
    while (cols.Step()) t.unique.push_back(cols.Text(0));
  }
  Query fks(db, path, "SELECT \"from\", \"table\" FROM pragma_foreign_key_list(?1)");
  fks.Bind(1, name);
  while (fks.Step()) t.references[fks.Text(0)] = fks.Text(1);
  for (const auto& [where, table] : kUndeclaredReferences) {
    if (where.first != name ||
        std::find(t.columns.begin(), t.columns.end(), where.second) == t.columns.end())
      continue;
    t.references[where.second] = table;
    t.zero_is_none.insert(where.second);
  }
  return t;
}

// The destination's tables that hold results, each after the tables it refers to.
std::vector<Table> MergedTables(sqlite3* db, const std::string& path) {
  std::vector<Table> pending;
  Query names(db, path,
              "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' "
              "ORDER BY name");
  while (names.Step()) {
    if (!kNotMerged.count(names.Text(0))) pending.push_back(ReadTable(db, path, names.Text(0)));
  }
  std::vector<Table> ordered;
  std::set<std::string> placed;
  while (!pending.empty()) {
    const auto ready = std::find_if(pending.begin(), pending.end(), [&](const Table& t) {
      return std::all_of(t.references.begin(), t.references.end(), [&](const auto& ref) {
        return ref.second == t.name || placed.count(ref.second) || kNotMerged.count(ref.second);
      });
    });
    ATTNTUNE_CHECK_MSG(ready != pending.end(), "the schema's references form a cycle");
    placed.insert(ready->name);
    ordered.push_back(std::move(*ready));
    pending.erase(ready);
  }
  return ordered;
}

}  // namespace

namespace {

// Source row ids of each rowid table -> the destination's.
using Ids = std::map<std::string, std::map<int64_t, int64_t>>;

[[noreturn]] void Damaged(const std::string& path, const std::string& what) {
  throw UserError(path + ": " + what + " (the database is damaged)");
}

// `text` with every run of white space (a CHECK constraint's SQL spans lines) one space.
std::string OneLine(const std::string& text) {
  std::string out;
  for (const char c : text) {
    const bool space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : c;
  }
  return out;
}

std::string Join(const std::vector<std::string>& items, const std::string& each,
                 const std::string& sep) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    std::string item = each;
    for (size_t at; (at = item.find('@')) != std::string::npos;) item.replace(at, 1, Quote(items[i]));
    for (size_t at; (at = item.find('#')) != std::string::npos;)
      item.replace(at, 1, "?" + std::to_string(i + 1));
    out += (i ? sep : "") + item;
  }
  return out;
}

// What identifies a row of `t` apart from its own number: its UNIQUE constraint's
// columns; else, for a numbered row, its NOT NULL columns; else its primary key.
std::vector<std::string> KeyColumns(const Table& t) {
  if (!t.unique.empty()) return t.unique;
  if (t.rowid.empty()) return t.primary;
  std::vector<std::string> key;
  for (const std::string& c : t.columns) {
    if (c != t.rowid && t.not_null.count(c)) key.push_back(c);
  }
  return key;
}

// Merges table `t` of `from` into `to`. The source's values are bound as they are,
// references mapped through `ids`; a rowid table's new numbers are recorded there.
void MergeTable(sqlite3* to, const std::string& to_path, sqlite3* from,
                const std::string& from_path, const Table& t, Ids& ids, MergeCounts& counts) {
  std::vector<std::string> columns;  // the copied ones: all but the row's own number
  for (const std::string& c : t.columns) {
    if (c != t.rowid) columns.push_back(c);
  }
  const std::vector<std::string> key = KeyColumns(t);
  const std::string rowid = t.rowid.empty() ? "" : Quote(t.rowid);
  Query select(from, from_path, "SELECT " + (rowid.empty() ? "" : rowid + ", ") +
                                    Join(columns, "@", ", ") + " FROM " + Quote(t.name));
  Query insert(to, to_path, std::string(rowid.empty() ? "INSERT OR IGNORE" : "INSERT") +
                                " INTO " + Quote(t.name) + "(" + Join(columns, "@", ", ") +
                                ") VALUES (" + Join(columns, "#", ", ") + ")");
  std::unique_ptr<Query> find, fill;
  if (!rowid.empty()) {
    find = std::make_unique<Query>(to, to_path, "SELECT " + rowid + " FROM " + Quote(t.name) +
                                                    " WHERE " + Join(key, "@ IS #", " AND "));
    // NULL columns of a row found are filled from the source (a run finished since).
    fill = std::make_unique<Query>(
        to, to_path, "UPDATE " + Quote(t.name) + " SET " + Join(columns, "@ = coalesce(@, #)", ", ") +
                         " WHERE " + rowid + " = ?" + std::to_string(columns.size() + 1));
  }
  const int offset = rowid.empty() ? 0 : 1;
  while (select.Step()) try {
    // Each column's value: a reference mapped to the destination's row, else as read.
    std::map<std::string, int64_t> mapped;
    for (size_t i = 0; i < columns.size(); ++i) {
      const auto ref = t.references.find(columns[i]);
      const int col = static_cast<int>(i) + offset;
      if (ref == t.references.end() || select.IsNull(col) || kNotMerged.count(ref->second)) continue;
      if (t.zero_is_none.count(columns[i]) && select.Int(col) == 0) continue;
      const std::map<int64_t, int64_t>& table_ids = ids[ref->second];
      const auto it = table_ids.find(select.Int(col));
      if (it == table_ids.end())
        Damaged(from_path, "table " + t.name + " refers to a missing " + ref->second + " row " +
                               std::to_string(select.Int(col)));
      mapped[columns[i]] = it->second;
    }
    // A metric whose value is a trial's number (the re-timing's default,
    // kMetricConfirmDefaultTrial) refers to a trial as a column would.
    if (t.name == "metric") {
      const auto name_at = std::find(columns.begin(), columns.end(), "name") - columns.begin();
      const auto value_at = std::find(columns.begin(), columns.end(), "value") - columns.begin();
      const int name_col = static_cast<int>(name_at) + offset;
      const int value_col = static_cast<int>(value_at) + offset;
      const auto n = static_cast<std::ptrdiff_t>(columns.size());
      if (name_at < n && value_at < n && !select.IsNull(name_col) &&
          select.Text(name_col) == kMetricConfirmDefaultTrial && !select.IsNull(value_col)) {
        const auto it = ids["trial"].find(select.Int(value_col));
        if (it == ids["trial"].end())
          Damaged(from_path, "metric " + std::string(kMetricConfirmDefaultTrial) +
                                 " refers to a missing trial row " +
                                 std::to_string(select.Int(value_col)));
        mapped["value"] = it->second;
      }
    }
    auto bind = [&](Query& q, const std::vector<std::string>& names) {
      for (size_t i = 0; i < names.size(); ++i) {
        const int at = static_cast<int>(i) + 1;
        const auto m = mapped.find(names[i]);
        const auto pos = std::find(columns.begin(), columns.end(), names[i]) - columns.begin();
        if (m != mapped.end()) {
          q.Bind(at, m->second);
        } else {
          q.Bind(at, select.Value(static_cast<int>(pos) + offset));
        }
      }
    };
    if (find) {
      bind(*find, key);
      if (find->Step()) {
        const int64_t existing = find->Int(0);
        find->Reset();
        bind(*fill, columns);
        fill->Bind(static_cast<int>(columns.size()) + 1, existing);
        fill->Step();
        fill->Reset();
        ids[t.name][select.Int(0)] = existing;
        ++counts.present[t.name];
        continue;
      }
      find->Reset();
    }
    bind(insert, columns);
    insert.Step();
    insert.Reset();
    const bool added = sqlite3_changes(to) > 0;
    ++(added ? counts.added : counts.present)[t.name];
    if (!rowid.empty()) ids[t.name][select.Int(0)] = sqlite3_last_insert_rowid(to);
  } catch (const ConstraintBroken& e) {
    Damaged(from_path, "a row of table " + t.name + " breaks this schema (" + OneLine(e.what()) + ")");
  }
}

// Refuses a source whose table differs from the destination's: not this build's schema.
void SameColumns(const Table& to, const Table& from, const std::string& from_path) {
  if (to.columns != from.columns)
    throw UserError(from_path + ": table " + to.name + " has other columns than this attntune's "
                    "schema (" + Join(from.columns, "@", ", ") + ")");
}

void Exec(sqlite3* db, const std::string& path, const char* sql) {
  Query q(db, path, sql);
  q.Step();
}

}  // namespace

MergeCounts MergeDatabase(Database& into, const Database& from,
                          const std::function<void(const std::string&)>& after_table) {
  sqlite3* to = into.db_;
  const std::string& to_path = into.Path();
  const std::string& from_path = from.Path();
  MergeCounts counts;
  Ids ids;
  // One snapshot of the source for every table (each SELECT alone would be its own): a
  // trial committed between the reads of `trial` and `sample` made the merge refuse a
  // healthy file as damaged (its samples' trial missing).
  Exec(from.db_, from_path, "BEGIN");
  Exec(to, to_path, "BEGIN IMMEDIATE");
  try {
    for (const Table& t : MergedTables(to, to_path)) {
      Query exists(from.db_, from_path, "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = ?1");
      exists.Bind(1, t.name);
      if (!exists.Step() || exists.Int(0) == 0)
        throw UserError(from_path + ": no table " + t.name + " (not this attntune's schema)");
      SameColumns(t, ReadTable(from.db_, from_path, t.name), from_path);
      counts.added[t.name] += 0;
      counts.present[t.name] += 0;
      MergeTable(to, to_path, from.db_, from_path, t, ids, counts);
      if (after_table) after_table(t.name);
    }
    Exec(to, to_path, "COMMIT");
  } catch (...) {
    sqlite3_exec(to, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_exec(from.db_, "COMMIT", nullptr, nullptr, nullptr);
    throw;
  }
  sqlite3_exec(from.db_, "COMMIT", nullptr, nullptr, nullptr);  // ends the read
  return counts;
}

std::vector<std::pair<std::string, MergeCounts>> MergeFiles(const std::vector<std::string>& inputs,
                                                            const std::string& into) {
  if (inputs.empty()) throw UserError("db merge: no database to merge (give one or more files)");
  // SQLite takes "" for a temporary database: the merge would say it added everything and
  // keep nothing.
  if (into.empty()) throw UserError("--into: '' is not a file name (name the database)");
  std::error_code ec;
  for (const std::string& path : inputs) {
    if (!std::filesystem::exists(path, ec))
      throw UserError("db merge: '" + path + "' does not exist");
    if (std::filesystem::exists(into, ec) && std::filesystem::equivalent(path, into, ec))
      throw UserError("--into: '" + into + "' is also a database to merge (name another file)");
  }
  // Every input is checked before the destination is created or written.
  std::vector<std::unique_ptr<Database>> sources;
  for (const std::string& path : inputs) sources.push_back(Database::OpenReadOnly(path, true));
  std::unique_ptr<Database> destination = Database::Open(into);
  std::vector<std::pair<std::string, MergeCounts>> out;
  for (size_t i = 0; i < inputs.size(); ++i)
    out.emplace_back(inputs[i], MergeDatabase(*destination, *sources[i]));
  return out;
}

}  // namespace attntune
