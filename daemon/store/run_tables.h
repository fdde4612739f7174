// The run tables: one row per run (its id, lease, state, times and its
// record, the JSON GET /v1/runs/{id} serves), in the daemon's database
// (database.h). The run service writes a run's row when it starts (before
// the run is acknowledged) and when it ends (after its artifacts are
// written), reads them at start-up and deletes those past
// runs.history_days. The artifacts stay files under <state_dir>/runs/.
#pragma once

#include <cstdint>
#include <set>
#include <string>
#include <vector>

#include "daemon/store/database.h"

namespace hwfarm::store {

struct StoredRun {
  std::string id;
  std::string lease_id;
  std::string state; // running, passed, failed, error, cancelled, interrupted
  int64_t created_ms = 0;
  int64_t ended_ms = 0; // 0 while running
  std::string record;   // the run's record (JSON)
};

class RunTables final : public Tables {
 public:
  static constexpr int kSchemaVersion = 1;

  void create(sqlite3* db) override;
  void finished(bool) override {}

  // Start-up: the newest `limit` runs and every run still running (however
  // old), oldest first, each without its record but for a run still
  // running (the run history marks it interrupted).
  std::vector<StoredRun> load(Database& db, size_t limit);
  // Start-up: the id of every run stored.
  std::set<std::string> ids(Database& db);
  // The read of run `id`'s record, "" when it has no row (Database::read).
  static std::string record(sqlite3* db, const std::string& id);
  // The read of the ids of the runs that ended before `cutoff_ms`.
  static std::vector<std::string> endedBefore(sqlite3* db, int64_t cutoff_ms);
  // Start-up: writes `runs` in one transaction.
  void storeNow(Database& db, const std::vector<StoredRun>& runs);
  // Start-up: deletes the runs that ended before `cutoff_ms`; their ids.
  std::vector<std::string> prune(Database& db, int64_t cutoff_ms);

  // The write of a run's row (inserted or replaced), for Database::commit.
  static Database::Write write(StoredRun run);
  // The deletion of these runs' rows.
  static Database::Write remove(std::vector<std::string> ids);
};

} // namespace hwfarm::store
