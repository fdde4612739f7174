// Durable state: boards, leases and the event log in SQLite (WAL) under the
// state directory.
//
// Writes are committed in groups (one transaction for many batches) and
// each batch's completion runs on the event loop after its commit, in
// order. The daemon answers a request only from that completion, so every
// acknowledged change is committed. With fsync (the default) a writer
// thread commits, so the event loop never waits for the disk. Without
// fsync a commit only writes into the page cache: it is done on the calling
// thread when the writer is idle, and handed to the writer otherwise.
// Checkpoints always run on the writer thread. Reads happen once, at
// start-up, before the writer starts.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "daemon/lease/scheduler.h"

struct sqlite3;

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

struct StoreOptions {
  bool synchronous_full = true; // fsync every commit (power-loss safe); else only crash safe
};

class Store {
 public:
  // Opens or creates `path`. Throws std::runtime_error naming the file and
  // SQLite's message on failure (start-up only).
  Store(const std::string& path, StoreOptions options);
  ~Store(); // commits what is queued, then stops the writer
  Store(const Store&) = delete;
  Store& operator=(const Store&) = delete;

  // Start-up reads; REQUIRES: start() not called yet.
  std::vector<StoredBoard> loadBoards();
  // Active leases and those that ended at or after `ended_since_ms`.
  std::vector<lease::Lease> loadLeases(int64_t ended_since_ms);
  // Deletes ended leases and events older than `cutoff_ms`.
  void prune(int64_t cutoff_ms);
  // Commits on the calling thread; REQUIRES: start() not called yet.
  void commitNow(const Batch& batch);

  using Post = std::function<void(std::function<void()>)>;
  using Done = std::function<void(bool ok, const std::string& error)>;
  // Starts the writer thread. `post` must run a function on the event loop.
  void start(Post post);
  struct Pending {
    Batch batch;
    Done done;
  };
  // Commits `group` in one transaction; each `done` runs on the event loop
  // after the commit (or its failure): before commit() returns when the
  // commit happened on the calling thread, else posted by the writer.
  // Groups are committed and completed in submission order. Called from the
  // event loop only.
  void commit(std::vector<Pending> group);
  void commit(Batch batch, Done done); // a group of one
  // No commit is queued or waiting for its completion to run.
  bool idle() const { return in_flight_ == 0; }

  const std::string& path() const { return path_; }

 private:
  static constexpr int kCheckpointPages = 1000; // SQLite's default auto-checkpoint
  static int walHook(void* self, sqlite3* db, const char* name, int pages);
  void checkpoint();
  void writerLoop();
  // One transaction for all of `batches`; throws (after rolling back) on error.
  void commitGroup(const std::vector<const Batch*>& batches);
  void apply(const Batch& batch, std::vector<std::string>& ended);
  void writeLease(const lease::Lease& l, std::vector<std::string>& ended);
  void writeEvent(const lease::Event& e);
  void exec(const char* sql);

  struct Statements; // prepared once, used by whichever thread writes

  std::string path_;
  bool synchronous_full_;
  sqlite3* db_ = nullptr;
  std::mutex db_mutex_; // the connection: the writer, or the loop committing in place
  std::unique_ptr<Statements> statements_;
  Post post_;
  std::thread writer_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Pending> queue_;
  bool writer_idle_ = false; // waiting on wake_: commit() must notify
  // Batches handed to the writer whose completions have not run yet. While
  // any are, commit() queues too (never commits in place): order.
  std::atomic<size_t> in_flight_{0};
  std::atomic<bool> checkpoint_wanted_{false};
  bool stopping_ = false;
  // The row of each active lease (and of leases in the group being written);
  // touched only with db_mutex_ held (start-up, the writer, or the loop
  // committing in place).
  std::unordered_map<std::string, int64_t> seq_by_id_;
  int64_t last_seq_ = 0;
};

} // namespace hwfarm::store
