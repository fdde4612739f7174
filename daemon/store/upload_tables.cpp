#include "daemon/store/upload_tables.h"

#include <sqlite3.h>

#include <map>
#include <optional>
#include <stdexcept>

#include "daemon/store/sqlite.h"

namespace hwfarm::store {
namespace {

const char* kUploadVersionKey = "uploads_schema_version";

const char* kUploadSchema = R"sql(
CREATE TABLE IF NOT EXISTS uploads(
  run_id TEXT PRIMARY KEY,
  lease_id TEXT NOT NULL,
  day TEXT NOT NULL,
  key TEXT NOT NULL,
  run_commit TEXT NOT NULL,
  verdict TEXT NOT NULL,
  ended_ms INTEGER NOT NULL,
  state TEXT NOT NULL,
  failures INTEGER NOT NULL,
  next_ms INTEGER NOT NULL,
  error TEXT NOT NULL,
  updated_ms INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS upload_objects(
  run_id TEXT NOT NULL,
  path TEXT NOT NULL,
  PRIMARY KEY(run_id, path));
)sql";

} // namespace

void UploadTables::create(sqlite3* db) {
  Database::createTables(db, kUploadVersionKey, "upload", kSchemaVersion, kUploadSchema);
}

std::vector<StoredUpload> UploadTables::load(Database& db) {
  return db.startup([](sqlite3* c) {
    std::vector<StoredUpload> out;
    std::map<std::string, size_t> at;
    Statement s(c, "SELECT run_id, lease_id, day, key, run_commit, verdict, ended_ms, state, failures, next_ms, "
                   "error, updated_ms FROM uploads ORDER BY ended_ms, run_id");
    while (s.step()) {
      StoredUpload u;
      u.run_id = s.text(0);
      u.lease_id = s.text(1);
      u.day = s.text(2);
      u.key = s.text(3);
      u.commit = s.text(4);
      u.verdict = s.text(5);
      u.ended_ms = s.integer(6);
      u.state = s.text(7);
      u.failures = s.integer(8);
      u.next_ms = s.integer(9);
      u.error = s.text(10);
      u.updated_ms = s.integer(11);
      at[u.run_id] = out.size();
      out.push_back(std::move(u));
    }
    Statement objects(c, "SELECT run_id, path FROM upload_objects");
    while (objects.step())
      if (auto it = at.find(objects.text(0)); it != at.end()) out[it->second].uploaded.insert(objects.text(1));
    return out;
  });
}

size_t UploadTables::prune(Database& db, int64_t cutoff_ms) {
  size_t removed = 0;
  db.commitNow([cutoff_ms, &removed](sqlite3* c) {
    Statement objects(c, "DELETE FROM upload_objects WHERE run_id IN (SELECT run_id FROM uploads WHERE "
                         "state = 'done' AND ended_ms < ?1)");
    objects.bind(1, cutoff_ms).run();
    Statement s(c, "DELETE FROM uploads WHERE state = 'done' AND ended_ms < ?1");
    s.bind(1, cutoff_ms);
    s.run();
    removed = static_cast<size_t>(sqlite3_changes(c));
    return removed > 0;
  });
  return removed;
}

Database::Write UploadTables::write(StoredUpload u, bool clear_objects) {
  return [u = std::move(u), clear_objects](sqlite3* c) {
    Statement s(c, "INSERT OR REPLACE INTO uploads(run_id, lease_id, day, key, run_commit, verdict, ended_ms, state, "
                   "failures, next_ms, error, updated_ms) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12)");
    s.bind(1, u.run_id).bind(2, u.lease_id).bind(3, u.day).bind(4, u.key).bind(5, u.commit).bind(6, u.verdict);
    s.bind(7, u.ended_ms).bind(8, u.state).bind(9, u.failures).bind(10, u.next_ms).bind(11, u.error);
    s.bind(12, u.updated_ms);
    s.run();
    if (clear_objects) {
      Statement d(c, "DELETE FROM upload_objects WHERE run_id = ?1");
      d.bind(1, u.run_id).run();
    }
    return true;
  };
}

Database::Write UploadTables::objectUploaded(std::string run_id, std::string path) {
  return [run_id = std::move(run_id), path = std::move(path)](sqlite3* c) {
    Statement s(c, "INSERT OR IGNORE INTO upload_objects(run_id, path) VALUES(?1, ?2)");
    s.bind(1, run_id).bind(2, path).run();
    return true;
  };
}

} // namespace hwfarm::store
