// The run index: what the dashboard asks of many runs at once, kept in the
// daemon's database beside the runs' records (run_tables.h) so that no
// answer needs the records in memory or parsed (docs/dashboard.md):
//
//   run_index    one row per run: the runs list's columns and filters
//   run_cases    each target's case outcomes (the comparison of two runs)
//   run_outputs  each compared output's PCC and verdict per target (the
//                comparison, an output's history)
//
// The run index service (services/run_index.h) writes a run's rows when
// the run starts and when it ends, and at start-up those of runs whose rows
// are missing or say another state (a run interrupted by a restart);
// rows go with their run (runs.history_days). Reads run on the database's
// connection (Database::read).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "daemon/core/dashboard/history.h"
#include "daemon/core/dashboard/run_diff.h"
#include "daemon/store/database.h"

namespace hwfarm::store {

struct IndexedRun {
  std::string id, lease_id;
  std::string state;         // running, passed, failed, error, cancelled, interrupted
  std::string failure_class; // "", "test", "infrastructure"
  std::string suite, commit, reason;
  int64_t created_ms = 0, ended_ms = 0;
  std::string holder_job, holder_build, holder_stage, holder_url;
  std::vector<std::string> images, board_types, boards;

  struct Output {
    std::string image, target, board, board_type, key;
    std::optional<double> actual_pcc; // none: undefined (NaN)
    bool pass = false;
  };
  std::vector<dashboard::CaseRow> cases; // targets' cases, not the reference's
  std::vector<Output> outputs;
};

// The runs list's filters; empty: any. `commit` and `prefix` (of the run's
// id) match a prefix, `holder` part of the holder's job, the others exactly.
struct RunFilter {
  std::string state, failure_class, board_type, image, commit, holder, lease, prefix;
};

struct RunPage {
  std::vector<IndexedRun> runs; // without cases and outputs
  std::string next;             // the cursor of the next page; "" at the end
  std::map<std::string, int64_t> counts; // runs by state under the filter less its state
};

class RunIndexTables final : public Tables {
 public:
  static constexpr int kSchemaVersion = 1;
  static constexpr size_t kMaxPage = 200;

  void create(sqlite3* db) override;
  void finished(bool) override {}

  // The write of a run's rows (replacing any it had), for Database::commit.
  static Database::Write write(IndexedRun run);
  // The deletion of these runs' rows.
  static Database::Write remove(std::vector<std::string> ids);

  // Reads (Database::read). Newest first (created_ms, then id), at most
  // `limit` (<= kMaxPage) after `cursor` (a page's `next`; "" the first).
  static RunPage page(sqlite3* db, const RunFilter& filter, const std::string& cursor, size_t limit);
  // Output `key` of `image` per board (of `board_type`, "" any): the newest
  // `last` runs of each board, as history rows.
  static std::vector<dashboard::HistoryRow> history(sqlite3* db, const std::string& image, const std::string& key,
                                                    const std::string& board_type, size_t last);
  // A run's cases and outputs, for a comparison; nothing for a run without rows.
  static std::optional<dashboard::RunDigest> digest(sqlite3* db, const std::string& id);
  // The ended run before `id` of the same suite and images (its base in the
  // bucket's comparisons), or "".
  static std::string previousRun(sqlite3* db, const std::string& id);
  // Every (image, output) any run compared, and those run `id` compared.
  static std::vector<std::pair<std::string, std::string>> outputs(sqlite3* db, const std::string& id = "");
  // Runs of the `runs` table that have no rows here, or rows of another
  // state: their records (JSON), oldest first.
  static std::vector<std::string> unindexedRecords(sqlite3* db);
};

} // namespace hwfarm::store
