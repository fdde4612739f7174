// Durable state: boards, leases and the event log in SQLite (WAL) under the
// state directory.
//
// Writes are committed in groups (one transaction for many batches) and
// each batch's completion runs on the event loop after its commit, in
// order. The daemon answers a request only from that completion, so every
// acknowledged change is committed. A commit only writes into the page
// cache (SQLite's WAL with synchronous=NORMAL): it is done on the calling
// thread when the writer thread is idle, and handed to the writer
// otherwise. Checkpoints always run on the writer thread.
//
// With fsync (an option) a completion also waits for an fdatasync of the
// WAL that started after its commit. A sync thread runs those back to back;
// each covers every commit made before it started. Commits never wait for
// a sync, and the event loop never waits for the disk.
// Reads happen once, at start-up, before the writer starts.
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

#include "daemon/core/lease/scheduler.h"

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
  bool fsync = false; // completions wait for an fdatasync (power-loss safe); else only crash safe
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
  // after the commit (or its failure). Without fsync: before commit()
  // returns when the commit happened on the calling thread, else posted by
  // the writer. With fsync: always posted, once a sync covers the commit.
  // Groups are committed and completed in submission order. Called from the
  // event loop only.
  void commit(std::vector<Pending> group);
  void commit(Batch batch, Done done); // a group of one
  // No commit is queued or waiting for its completion to run.
  bool idle() const { return in_flight_ == 0; }
  // fdatasyncs of the WAL so far (with fsync).
  uint64_t syncs() const { return syncs_; }

  const std::string& path() const { return path_; }

 private:
  static constexpr int kCheckpointPages = 1000; // SQLite's default auto-checkpoint
  static int walHook(void* self, sqlite3* db, const char* name, int pages);
  void checkpoint();
  void writerLoop();
  void syncerLoop();
  struct Outcome {
    bool ok = true;
    bool wrote = false; // the group changed the database
    std::string error;
  };
  // Commits `group` in one transaction; REQUIRES: db_mutex_ held.
  Outcome tryCommit(const std::vector<Pending>& group);
  // `group` was just committed, or its commit failed: posts its
  // completions, or with fsync queues them for a sync. Runs with db_mutex_
  // held, so groups arrive in commit order.
  void committed(std::vector<Pending> group, Outcome outcome);
  // Runs the completions of `group` (on the event loop) and counts them done.
  void complete(std::vector<Pending>& group, bool ok, const std::string& error);
  // Posts the completions of every group the syncs so far cover; with
  // sync_mutex_ held.
  void postSynced();
  void openWal();
  void checkWal();
  // One transaction for all of `batches`; throws (after rolling back) on
  // error. False if there was nothing to write.
  bool commitGroup(const std::vector<const Batch*>& batches);
  void apply(const Batch& batch, std::vector<std::string>& ended);
  void writeLease(const lease::Lease& l, std::vector<std::string>& ended);
  void writeEvent(const lease::Event& e);
  void exec(const char* sql);
  void migrateLabelsFrom2();
  template <typename F>
  auto naming(F&& f) -> decltype(f());
  std::vector<StoredBoard> readBoards();
  std::vector<lease::Lease> readLeases(int64_t ended_since_ms);
  void deleteBefore(int64_t cutoff_ms);

  struct Statements; // prepared once, used by whichever thread writes

  std::string path_;
  std::string wal_path_;
  bool fsync_;
  sqlite3* db_ = nullptr;
  std::mutex db_mutex_; // the connection: the writer, or the loop committing in place
  std::unique_ptr<Statements> statements_;
  Post post_;
  std::thread writer_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Pending> queue_;
  bool writer_idle_ = false; // waiting on wake_: commit() must notify
  // Batches submitted whose completions have not run yet.
  std::atomic<size_t> in_flight_{0};
  // Batches handed to the writer and not committed yet. While any are,
  // commit() queues too (never commits in place): commits stay in order.
  // Without fsync, in_flight_ counts instead: completions that run at once
  // must not overtake those the writer posted.
  std::atomic<size_t> queued_{0};

  // With fsync: committed groups waiting for a sync, in commit order.
  struct Awaiting {
    uint64_t seq; // the last commit this group needs synced
    std::vector<Pending> group;
    bool ok;
    std::string error;
  };
  int wal_fd_ = -1;
  std::thread syncer_;
  std::mutex sync_mutex_;
  std::condition_variable sync_wake_;
  std::deque<Awaiting> awaiting_;
  uint64_t commit_seq_ = 0;   // commits that wrote something, so far
  uint64_t sync_started_ = 0; // the last commit a started sync covers
  uint64_t synced_ = 0;       // the last commit a finished sync covers
  std::string sync_error_;    // set once an fdatasync failed: nothing after it is trusted
  bool sync_stopping_ = false;
  std::atomic<uint64_t> syncs_{0};
  std::atomic<bool> checkpoint_wanted_{false};
  bool stopping_ = false;
  // The row of each active lease (and of leases in the group being written);
  // touched only with db_mutex_ held (start-up, the writer, or the loop
  // committing in place).
  std::unordered_map<std::string, int64_t> seq_by_id_;
  int64_t last_seq_ = 0;
};

} // namespace hwfarm::store
