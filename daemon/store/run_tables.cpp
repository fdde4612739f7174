#include "daemon/store/run_tables.h"

#include <sqlite3.h>

#include <optional>
#include <set>
#include <stdexcept>

#include "daemon/store/sqlite.h"

namespace hwfarm::store {
namespace {

const char* kRunVersionKey = "runs_schema_version";

// Rows are written twice per run (start, end); at start-up their listings
// are read, and an ended run's record when it is asked for.
const char* kRunSchema = R"sql(
CREATE TABLE IF NOT EXISTS runs(
  id TEXT PRIMARY KEY,
  lease_id TEXT NOT NULL,
  state TEXT NOT NULL,
  created_ms INTEGER NOT NULL,
  ended_ms INTEGER NOT NULL,
  record TEXT NOT NULL);
)sql";

bool writeRow(sqlite3* c, const StoredRun& r) {
  Statement s(c, "INSERT OR REPLACE INTO runs(id, lease_id, state, created_ms, ended_ms, record) "
                 "VALUES(?1, ?2, ?3, ?4, ?5, ?6)");
  s.bind(1, r.id).bind(2, r.lease_id).bind(3, r.state).bind(4, r.created_ms).bind(5, r.ended_ms).bind(6, r.record);
  s.run();
  return true;
}

} // namespace

void RunTables::create(sqlite3* db) { Database::createTables(db, kRunVersionKey, "runs", kSchemaVersion, kRunSchema); }

std::vector<StoredRun> RunTables::load(Database& db, size_t limit) {
  return db.startup([limit](sqlite3* c) {
    std::vector<StoredRun> out;
    Statement s(c, "SELECT id, lease_id, state, created_ms, ended_ms, "
                   "CASE WHEN state = 'running' THEN record ELSE '' END FROM "
                   "(SELECT id, lease_id, state, created_ms, ended_ms, record FROM "
                   "(SELECT * FROM runs ORDER BY created_ms DESC, id DESC LIMIT ?1) "
                   "UNION ALL SELECT id, lease_id, state, created_ms, ended_ms, record FROM runs "
                   "WHERE state = 'running' AND id NOT IN "
                   "(SELECT id FROM runs ORDER BY created_ms DESC, id DESC LIMIT ?1)) ORDER BY created_ms, id");
    s.bind(1, static_cast<int64_t>(limit));
    while (s.step())
      out.push_back({s.text(0), s.text(1), s.text(2), s.integer(3), s.integer(4), s.text(5)});
    return out;
  });
}

std::set<std::string> RunTables::ids(Database& db) {
  return db.startup([](sqlite3* c) {
    std::set<std::string> out;
    Statement s(c, "SELECT id FROM runs");
    while (s.step()) out.insert(s.text(0));
    return out;
  });
}

std::string RunTables::record(sqlite3* c, const std::string& id) {
  Statement s(c, "SELECT record FROM runs WHERE id = ?1");
  s.bind(1, id);
  std::string out = s.step() ? s.text(0) : "";
  s.reset();
  return out;
}

void RunTables::storeNow(Database& db, const std::vector<StoredRun>& runs) {
  if (runs.empty()) return;
  db.commitNow([&runs](sqlite3* c) {
    for (const auto& r : runs) writeRow(c, r);
    return true;
  });
}

std::vector<std::string> RunTables::prune(Database& db, int64_t cutoff_ms) {
  std::vector<std::string> ids = db.startup([cutoff_ms](sqlite3* c) { return endedBefore(c, cutoff_ms); });
  if (!ids.empty()) db.commitNow(remove(ids));
  return ids;
}

std::vector<std::string> RunTables::endedBefore(sqlite3* c, int64_t cutoff_ms) {
  std::vector<std::string> out;
  Statement s(c, "SELECT id FROM runs WHERE state != 'running' AND ended_ms > 0 AND ended_ms < ?1");
  s.bind(1, cutoff_ms);
  while (s.step()) out.push_back(s.text(0));
  return out;
}

Database::Write RunTables::write(StoredRun run) {
  return [run = std::move(run)](sqlite3* c) { return writeRow(c, run); };
}

Database::Write RunTables::remove(std::vector<std::string> ids) {
  return [ids = std::move(ids)](sqlite3* c) {
    Statement s(c, "DELETE FROM runs WHERE id = ?1");
    for (const auto& id : ids) s.bind(1, id).run();
    return !ids.empty();
  };
}

} // namespace hwfarm::store
