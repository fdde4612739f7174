// The lease tables: boards in a stored state, leases and the event log, in
// the daemon's database (database.h). Schema and migrations, the start-up
// reads, and the writes of one scheduler operation (a Batch).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "daemon/core/lease/scheduler.h"
#include "daemon/store/database.h"

namespace hwfarm::store {

// A board in a stored state (lease::storedState).
struct StoredBoard {
  std::string name;
  lease::BoardState state = lease::BoardState::offline;
  int64_t since_ms = 0;
  std::string reason;
};

// Everything one scheduler operation made durable.
struct Batch {
  // One scheduler operation's changes, read in place (not copied): its
  // granted, updated and ended leases in that order, then its events.
  std::shared_ptr<const lease::Changes> changes;
  std::vector<lease::Lease> leases; // more leases, written after those
  std::vector<lease::Board> boards; // stored if in a stored state, else deleted
  std::vector<lease::Event> events;
  bool empty() const {
    return leases.empty() && boards.empty() && events.empty() &&
           (!changes || (changes->granted.empty() && changes->updated.empty() && changes->ended.empty() &&
                         changes->events.empty()));
  }
};

class LeaseTables final : public Tables {
 public:
  static constexpr int kSchemaVersion = 3;
  LeaseTables();
  ~LeaseTables() override;

  void create(sqlite3* db) override;
  void finished(bool committed) override;

  // Start-up reads and pruning, through Database::startup.
  std::vector<StoredBoard> loadBoards(Database& db);
  // Active leases and those that ended at or after `ended_since_ms`.
  std::vector<lease::Lease> loadLeases(Database& db, int64_t ended_since_ms);
  // Deletes ended leases and events older than `cutoff_ms`.
  void prune(Database& db, int64_t cutoff_ms);

  // The write of `batch`, for Database::commit; an empty batch gives an
  // empty write (its completion only waits for earlier commits).
  Database::Write write(Batch batch);
  // A pending commit of `batch`.
  Database::Pending pending(Batch batch, Database::Done done) { return {write(std::move(batch)), std::move(done)}; }

 private:
  bool apply(sqlite3* db, const Batch& batch);
  void writeLease(const lease::Lease& l);
  void writeEvent(const lease::Event& e);
  void migrateLabelsFrom2(sqlite3* db);

  struct Statements; // prepared at the first write, used by whichever thread commits
  std::unique_ptr<Statements> statements_;
  // The row of each active lease (and of leases in the transaction being
  // written); touched only with the connection held (start-up, the writer,
  // or the loop committing in place).
  std::unordered_map<std::string, int64_t> seq_by_id_;
  int64_t last_seq_ = 0;
  // The transaction being written: its first lease row, and the leases it ended.
  bool in_transaction_ = false;
  int64_t transaction_seq_ = 0;
  std::vector<std::string> ended_;
};

} // namespace hwfarm::store
