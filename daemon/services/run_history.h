// The runs hwfarmd knows (docs/runs.md, "Records"): their order, newest
// last, each with its listing (id, lease, state, times), the last kHistory;
// and the records of a few ended runs, the last kCached that ended or were
// read. Every other ended run's record stays in the database until it is
// asked for (load()): memory does not grow with the records stored.
// At start-up it reads the database's listings, never every record (only
// those it must rewrite, which it keeps among the cached): a run found
// running was cut short by a restart and becomes interrupted (its
// row and summary.json say so); a run directory with a summary.json and no
// row (an older hwfarmd's) joins the table; runs that ended before the
// cutoff go, with their directories.
//
// Thread safety: every call on the event loop thread (restore() at
// start-up, before the loop runs).
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "daemon/core/run/record.h"
#include "daemon/services/run_dir.h"
#include "daemon/store/run_tables.h"

namespace hwfarm {

// What the runs list shows of a run, without its record.
struct RunListing {
  std::string id;
  std::string lease_id;
  run::State state = run::State::running;
  int64_t created_ms = 0;
  int64_t ended_ms = 0; // 0 until it ends
};
RunListing listingOf(const run::Record& record);

class RunHistory {
 public:
  static constexpr size_t kHistory = 1000; // runs listed
  static constexpr size_t kCached = 16;    // ended runs' records kept in memory

  explicit RunHistory(const RunDir& dir) : dir_(dir) {}

  // Start-up (blocking): the runs of `db` and of the runs directory, as
  // above, at wall time `now_ms`; those that ended before `cutoff_ms` are
  // removed.
  void restore(store::RunTables& tables, store::Database& db, int64_t now_ms, int64_t cutoff_ms);

  // A run started: listed from now on.
  void started(const run::Record& record);
  // A run started but was never stored: it is forgotten.
  void dropped(const std::string& id);
  // A run ended: its listing says so and its record is kept (a cached one).
  void ended(run::Record record);
  // The record of an ended run if it is in memory, else nullptr (load()).
  const run::Record* find(const std::string& id) const;
  // The listing of a run (running ones say running), or nullptr.
  const RunListing* listing(const std::string& id) const;
  // The record of ended run `id` to `done`: at once when it is in memory,
  // else once read from `db` (then kept among the cached), listed or not
  // (a run older than the newest kHistory); nullptr when there is no such
  // run or its row is not readable. On the event loop.
  void load(store::Database& db, const std::string& id, std::function<void(const run::Record*)> done);
  // Every run listed, oldest first.
  const std::deque<std::string>& order() const { return order_; }
  // The runs restore() found running and marked interrupted (taken once).
  std::vector<run::Record> takeInterrupted() { return std::exchange(interrupted_, {}); }
  // Stops listing the runs that ended before `cutoff_ms` (their rows are
  // removed next, and each with dropped(): records read of them too).
  void forgetBefore(int64_t cutoff_ms);

 private:
  void cache(run::Record record);

  const RunDir& dir_;
  std::map<std::string, RunListing> listed_;
  std::deque<std::string> order_; // ids, oldest first
  std::map<std::string, run::Record> cached_;
  std::deque<std::string> cache_order_; // ids in cached_, oldest first
  std::vector<run::Record> interrupted_;
};

// A record as the database's row.
store::StoredRun rowOf(const run::Record& record);

} // namespace hwfarm
