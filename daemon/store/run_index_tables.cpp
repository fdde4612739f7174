#include "daemon/store/run_index_tables.h"

#include <sqlite3.h>

#include <algorithm>

#include "daemon/store/sqlite.h"

namespace hwfarm::store {
namespace {

const char* kRunIndexVersionKey = "run_index_schema_version";

// Lists (images, board types, boards) are stored "\n"-joined with a "\n" on
// each side, so a filter matches one whole entry: instr(images, "\nX\n").
// Names hold no line end (artifact names, configured board names and types).
const char* kRunIndexSchema = R"sql(
CREATE TABLE IF NOT EXISTS run_index(
  id TEXT PRIMARY KEY,
  lease_id TEXT NOT NULL,
  state TEXT NOT NULL,
  failure_class TEXT NOT NULL,
  suite TEXT NOT NULL,
  commit_id TEXT NOT NULL,
  reason TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  ended_ms INTEGER NOT NULL,
  holder_job TEXT NOT NULL,
  holder_build TEXT NOT NULL,
  holder_stage TEXT NOT NULL,
  holder_url TEXT NOT NULL,
  images TEXT NOT NULL,
  board_types TEXT NOT NULL,
  boards TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS run_index_newest ON run_index(created_ms DESC, id DESC);
CREATE TABLE IF NOT EXISTS run_cases(
  run_id TEXT NOT NULL,
  image TEXT NOT NULL,
  target TEXT NOT NULL,
  name TEXT NOT NULL,
  outcome TEXT NOT NULL,
  message TEXT NOT NULL);
CREATE INDEX IF NOT EXISTS run_cases_run ON run_cases(run_id);
CREATE TABLE IF NOT EXISTS run_outputs(
  run_id TEXT NOT NULL,
  ended_ms INTEGER NOT NULL,
  commit_id TEXT NOT NULL,
  image TEXT NOT NULL,
  output TEXT NOT NULL,
  target TEXT NOT NULL,
  board TEXT NOT NULL,
  board_type TEXT NOT NULL,
  actual_pcc REAL,
  pass INTEGER NOT NULL);
CREATE INDEX IF NOT EXISTS run_outputs_run ON run_outputs(run_id);
CREATE INDEX IF NOT EXISTS run_outputs_series ON run_outputs(image, output, board, ended_ms DESC);
)sql";

std::string joined(const std::vector<std::string>& items) {
  std::string out = "\n";
  for (const auto& i : items) out += i + "\n";
  return out;
}

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  for (size_t start = 1; start < text.size();) {
    size_t nl = text.find('\n', start);
    if (nl == std::string::npos) break;
    out.push_back(text.substr(start, nl - start));
    start = nl + 1;
  }
  return out;
}

// The WHERE clause of `f` (state left out with `without_state`), its
// parameters in `params` from ?1 on.
std::string where(const RunFilter& f, bool without_state, std::vector<std::string>& params) {
  std::string sql = " WHERE 1";
  auto add = [&](const std::string& value, const char* clause) {
    if (value.empty()) return;
    params.push_back(value);
    std::string n = "?" + std::to_string(params.size());
    sql += " AND ";
    for (const char* p = clause; *p; ++p) sql += *p == '?' ? n : std::string(1, *p);
  };
  if (!without_state) add(f.state, "state = ?");
  add(f.failure_class, "failure_class = ?");
  add(f.board_type, "instr(board_types, char(10) || ? || char(10)) > 0");
  add(f.image, "instr(images, char(10) || ? || char(10)) > 0");
  add(f.commit, "substr(commit_id, 1, length(?)) = ?");
  add(f.holder, "instr(holder_job, ?) > 0");
  add(f.lease, "lease_id = ?");
  add(f.prefix, "substr(id, 1, length(?)) = ?");
  return sql;
}

} // namespace

void RunIndexTables::create(sqlite3* db) {
  Database::createTables(db, kRunIndexVersionKey, "run index", kSchemaVersion, kRunIndexSchema);
}

Database::Write RunIndexTables::write(IndexedRun r) {
  return [r = std::move(r)](sqlite3* c) {
    remove({r.id})(c);
    Statement row(c, "INSERT INTO run_index(id, lease_id, state, failure_class, suite, commit_id, reason, created_ms, "
                     "ended_ms, holder_job, holder_build, holder_stage, holder_url, images, board_types, boards) "
                     "VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)");
    std::string images = joined(r.images), types = joined(r.board_types), boards = joined(r.boards);
    row.bind(1, r.id).bind(2, r.lease_id).bind(3, r.state).bind(4, r.failure_class).bind(5, r.suite).bind(6, r.commit);
    row.bind(7, r.reason).bind(8, r.created_ms).bind(9, r.ended_ms).bind(10, r.holder_job).bind(11, r.holder_build);
    row.bind(12, r.holder_stage).bind(13, r.holder_url).bind(14, images).bind(15, types).bind(16, boards);
    row.run();
    Statement kase(c, "INSERT INTO run_cases(run_id, image, target, name, outcome, message) VALUES(?1, ?2, ?3, ?4, ?5, ?6)");
    for (const auto& k : r.cases) {
      std::string outcome(dashboard::caseOutcomeName(k.outcome));
      kase.bind(1, r.id).bind(2, k.image).bind(3, k.target).bind(4, k.name).bind(5, outcome).bind(6, k.message).run();
    }
    Statement out(c, "INSERT INTO run_outputs(run_id, ended_ms, commit_id, image, output, target, board, board_type, "
                     "actual_pcc, pass) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)");
    for (const auto& o : r.outputs) {
      out.bind(1, r.id).bind(2, r.ended_ms).bind(3, r.commit).bind(4, o.image).bind(5, o.key).bind(6, o.target);
      out.bind(7, o.board).bind(8, o.board_type);
      if (o.actual_pcc) out.bind(9, *o.actual_pcc);
      else out.bindNull(9);
      out.bind(10, int64_t{o.pass}).run();
    }
    return true;
  };
}

Database::Write RunIndexTables::remove(std::vector<std::string> ids) {
  return [ids = std::move(ids)](sqlite3* c) {
    for (const char* sql : {"DELETE FROM run_index WHERE id = ?1", "DELETE FROM run_cases WHERE run_id = ?1",
                            "DELETE FROM run_outputs WHERE run_id = ?1"}) {
      Statement s(c, sql);
      for (const auto& id : ids) s.bind(1, id).run();
    }
    return !ids.empty();
  };
}

RunPage RunIndexTables::page(sqlite3* c, const RunFilter& f, const std::string& cursor, size_t limit) {
  limit = std::clamp<size_t>(limit, 1, kMaxPage);
  RunPage out;
  std::vector<std::string> params;
  std::string sql = "SELECT id, lease_id, state, failure_class, suite, commit_id, reason, created_ms, ended_ms, "
                    "holder_job, holder_build, holder_stage, holder_url, images, board_types, boards FROM run_index" +
                    where(f, false, params);
  // The cursor is "<created_ms>.<id>" of the last row shown.
  std::string cursor_ms, cursor_id;
  if (size_t dot = cursor.find('.'); dot != std::string::npos) {
    cursor_ms = cursor.substr(0, dot);
    cursor_id = cursor.substr(dot + 1);
    params.push_back(cursor_ms);
    params.push_back(cursor_id);
    sql += " AND (created_ms, id) < (CAST(?" + std::to_string(params.size() - 1) + " AS INTEGER), ?" +
           std::to_string(params.size()) + ")";
  }
  sql += " ORDER BY created_ms DESC, id DESC LIMIT " + std::to_string(limit + 1);
  Statement s(c, sql.c_str());
  for (size_t i = 0; i < params.size(); ++i) s.bind(static_cast<int>(i + 1), params[i]);
  while (s.step()) {
    if (out.runs.size() == limit) {
      out.next = std::to_string(out.runs.back().created_ms) + "." + out.runs.back().id;
      break;
    }
    IndexedRun r;
    r.id = s.text(0), r.lease_id = s.text(1), r.state = s.text(2), r.failure_class = s.text(3), r.suite = s.text(4);
    r.commit = s.text(5), r.reason = s.text(6), r.created_ms = s.integer(7), r.ended_ms = s.integer(8);
    r.holder_job = s.text(9), r.holder_build = s.text(10), r.holder_stage = s.text(11), r.holder_url = s.text(12);
    r.images = split(s.text(13)), r.board_types = split(s.text(14)), r.boards = split(s.text(15));
    out.runs.push_back(std::move(r));
  }
  s.reset();
  std::vector<std::string> count_params;
  std::string count_sql = "SELECT state, COUNT(*) FROM run_index" + where(f, true, count_params) + " GROUP BY state";
  Statement n(c, count_sql.c_str());
  for (size_t i = 0; i < count_params.size(); ++i) n.bind(static_cast<int>(i + 1), count_params[i]);
  while (n.step()) out.counts[n.text(0)] = n.integer(1);
  n.reset();
  return out;
}

std::vector<dashboard::HistoryRow> RunIndexTables::history(sqlite3* c, const std::string& image, const std::string& key,
                                                           const std::string& board_type, size_t last) {
  Statement s(c, "SELECT run_id, ended_ms, commit_id, board, board_type, actual_pcc, pass FROM ("
                 " SELECT *, ROW_NUMBER() OVER (PARTITION BY board, board_type ORDER BY ended_ms DESC, run_id DESC) AS n"
                 " FROM run_outputs WHERE image = ?1 AND output = ?2 AND (?3 = '' OR board_type = ?3))"
                 " WHERE n <= ?4");
  s.bind(1, image).bind(2, key).bind(3, board_type).bind(4, static_cast<int64_t>(last));
  std::vector<dashboard::HistoryRow> out;
  while (s.step()) {
    dashboard::HistoryRow r;
    r.point.run = s.text(0);
    r.point.ended_ms = s.integer(1);
    r.point.commit = s.text(2);
    r.board = s.text(3);
    r.board_type = s.text(4);
    if (!s.isNull(5)) r.point.value = s.real(5);
    r.point.pass = s.integer(6) != 0;
    out.push_back(std::move(r));
  }
  s.reset();
  return out;
}

std::optional<dashboard::RunDigest> RunIndexTables::digest(sqlite3* c, const std::string& id) {
  Statement known(c, "SELECT 1 FROM run_index WHERE id = ?1");
  known.bind(1, id);
  bool found = known.step();
  known.reset();
  if (!found) return std::nullopt;
  dashboard::RunDigest d;
  d.run = id;
  Statement cases(c, "SELECT image, target, name, outcome, message FROM run_cases WHERE run_id = ?1 ORDER BY rowid");
  cases.bind(1, id);
  while (cases.step())
    d.cases.push_back({cases.text(0), cases.text(1), cases.text(2), dashboard::caseOutcomeFromName(cases.text(3)), cases.text(4)});
  cases.reset();
  Statement outs(c, "SELECT image, target, output, actual_pcc, pass FROM run_outputs WHERE run_id = ?1 ORDER BY rowid");
  outs.bind(1, id);
  while (outs.step()) {
    dashboard::OutputRow o{outs.text(0), outs.text(1), outs.text(2), std::nullopt, outs.integer(4) != 0};
    if (!outs.isNull(3)) o.actual_pcc = outs.real(3);
    d.outputs.push_back(std::move(o));
  }
  outs.reset();
  return d;
}

std::string RunIndexTables::previousRun(sqlite3* c, const std::string& id) {
  Statement s(c, "SELECT p.id FROM run_index p, run_index r WHERE r.id = ?1 AND p.suite = r.suite AND "
                 "p.images = r.images AND p.state != 'running' AND (p.created_ms, p.id) < (r.created_ms, r.id) "
                 "ORDER BY p.created_ms DESC, p.id DESC LIMIT 1");
  s.bind(1, id);
  std::string out = s.step() ? s.text(0) : std::string();
  s.reset();
  return out;
}

std::vector<std::pair<std::string, std::string>> RunIndexTables::outputs(sqlite3* c, const std::string& id) {
  Statement s(c, id.empty() ? "SELECT DISTINCT image, output FROM run_outputs ORDER BY image, output"
                            : "SELECT DISTINCT image, output FROM run_outputs WHERE run_id = ?1 ORDER BY image, output");
  if (!id.empty()) s.bind(1, id);
  std::vector<std::pair<std::string, std::string>> out;
  while (s.step()) out.emplace_back(s.text(0), s.text(1));
  s.reset();
  return out;
}

std::vector<std::string> RunIndexTables::unindexedRecords(sqlite3* c) {
  Statement s(c, "SELECT record FROM runs WHERE NOT EXISTS (SELECT 1 FROM run_index i WHERE i.id = runs.id AND "
                 "i.state = runs.state) ORDER BY created_ms");
  std::vector<std::string> out;
  while (s.step()) out.push_back(s.text(0));
  s.reset();
  return out;
}

} // namespace hwfarm::store
