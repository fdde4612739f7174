// The runs hwfarmd knows (docs/runs.md, "Records"): their order, newest
// last, and the records of those that ended, the last kHistory in memory.
// At start-up it reads the database's rows: a run found running was cut
// short by a restart and becomes interrupted (its row and summary.json say
// so); a run directory with a summary.json and no row (an older hwfarmd's)
// joins the table; runs that ended before the cutoff go, with their
// directories.
//
// Thread safety: every call on the event loop thread (restore() at
// start-up, before the loop runs).
#pragma once

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "daemon/core/run/record.h"
#include "daemon/services/run_dir.h"
#include "daemon/store/run_tables.h"

namespace hwfarm {

class RunHistory {
 public:
  static constexpr size_t kHistory = 1000; // runs kept in memory and listed

  explicit RunHistory(const RunDir& dir) : dir_(dir) {}

  // Start-up (blocking): the runs of `db` and of the runs directory, as
  // above, at wall time `now_ms`; those that ended before `cutoff_ms` are
  // removed.
  void restore(store::RunTables& tables, store::Database& db, int64_t now_ms, int64_t cutoff_ms);

  // A run started: listed from now on.
  void started(const std::string& id);
  // A run started but was never stored: it is forgotten.
  void dropped(const std::string& id);
  // A run ended: its record is kept (and the oldest beyond kHistory go).
  void ended(run::Record record);
  // The record of an ended run, or nullptr.
  const run::Record* find(const std::string& id) const;
  // Every run known, oldest first.
  const std::deque<std::string>& order() const { return order_; }
  // Forgets the ended runs that ended before `cutoff_ms`; their ids.
  std::vector<std::string> forgetBefore(int64_t cutoff_ms);

 private:
  const RunDir& dir_;
  std::map<std::string, run::Record> finished_;
  std::deque<std::string> order_; // ids, oldest first
};

// A record as the database's row.
store::StoredRun rowOf(const run::Record& record);

} // namespace hwfarm
