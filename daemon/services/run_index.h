// The dashboard's index of ended runs (store/run_index_tables.h): the runs
// list paged and filtered in the database, an output's history, two runs
// compared (docs/dashboard.md). No answer holds more than a page of runs
// in memory, whatever the number of runs.
//
// A run is indexed when it starts and again when it ends, from its record;
// at start-up every run of the database whose rows are missing (a database
// an older hwfarmd wrote) or stale (a run interrupted by a restart) is.
// Rows older than runs.history_days go with their runs.
//
// Thread safety: every public call on the event loop thread; answers come
// on it too (after the database's read).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "daemon/core/dashboard/history.h"
#include "daemon/core/lease/types.h"
#include "daemon/core/run/record.h"
#include "daemon/store/run_index_tables.h"

namespace hwfarm {

class RunIndex {
 public:
  // What a record does not say: who held the run's lease (nothing once the
  // lease is forgotten), and a board's type ("" for one no longer configured).
  struct Lookups {
    std::function<std::optional<lease::Holder>(const std::string& lease_id)> holder;
    std::function<std::string(const std::string& board)> board_type;
  };

  // Adds its tables to `db` (REQUIRES: not started).
  RunIndex(store::Database& db, Lookups lookups);

  // Start-up, before the database starts: indexes the runs whose rows are
  // missing or stale, and forgets rows whose run is gone. The runs indexed.
  size_t catchUp();
  // A run started or ended: its record.
  void runChanged(const run::Record& record);
  // Forgets the runs that ended before `cutoff_ms` (runs.history_days).
  void prune(int64_t cutoff_ms);

  // A page of the runs list (newest first; store::RunIndexTables::page).
  void page(store::RunFilter filter, std::string cursor, size_t limit,
            std::function<void(Result<store::RunPage>)> done);
  // GET /v1/history's body: `image`'s output `key` over the newest `last`
  // runs of each board (of `board_type`; "" every type), with its bands.
  void history(std::string image, std::string key, std::string board_type, size_t last,
               std::function<void(Result<std::string>)> done);
  // GET /v1/compare's body: run `head` against run `base`.
  // Code::not_found naming a run without index rows.
  void compare(std::string base, std::string head, std::function<void(Result<std::string>)> done);

  // What the bucket's copy of the dashboard needs of run `id` (docs/
  // dashboard.md): its comparison with the run before it of the same suite
  // and images ("" without one), the history of each output it compared
  // over the newest `last` runs per board, and every history file's name.
  struct Publication {
    std::string compare;
    std::vector<std::pair<std::string, std::string>> histories; // (file name, body)
    std::vector<std::string> history_names;
  };
  void publication(std::string id, size_t last, std::function<void(Result<Publication>)> done);
  // "<image>__<case>.<output>.json", each part normalized as artifact names.
  static std::string historyFileName(const std::string& image, const std::string& key);

  // The index rows of a record (exposed for tests): its counted target
  // attempts' cases and outputs (not the reference's, not a retried one's).
  static store::IndexedRun describe(const run::Record& record, const Lookups& lookups);

 private:
  store::Database& db_;
  Lookups lookups_;
  store::RunIndexTables tables_;
};

} // namespace hwfarm
