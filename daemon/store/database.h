// The daemon's one database: SQLite (WAL) under the state directory, with
// group commit, a writer thread, a sync thread and commit pacing. It knows
// no table: each part of the daemon brings its own set (Tables: the lease
// tables today; runs, events and uploads next) and commits writes of its
// own through it.
//
// Writes are committed in groups (one transaction for many) and each
// write's completion runs on the event loop after its commit, in order. The
// daemon answers a request only from that completion, so every
// acknowledged change is committed. A commit only writes into the page
// cache (SQLite's WAL with synchronous=NORMAL): it is done on the calling
// thread when the writer thread is idle, and handed to the writer
// otherwise. Checkpoints always run on the writer thread.
//
// With fsync (leases.fsync, the default) a completion also waits for an
// fdatasync of the WAL that started after its commit. A sync thread runs
// those; each covers every commit made before it started. Commits never
// wait for a sync, and the event loop never waits for the disk.
//
// Errors: start-up (the constructor, add(), startup(), commitNow()) throws
// std::runtime_error naming the file; after start() a failed commit or sync
// reaches the completions as a Status (Code::io_error, infrastructure).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"

struct sqlite3;

namespace hwfarm::store {

struct DatabaseOptions {
  bool fsync = true; // completions wait for an fdatasync (power-loss safe); else only crash safe
};

// A set of tables in the database, owned by one part of the daemon.
class Tables {
 public:
  virtual ~Tables() = default;
  // Creates or migrates the set's tables; runs once, at Database::add(),
  // on the start-up thread. Throws on error.
  virtual void create(sqlite3* db) = 0;
  // A transaction in which this set's writes ran has ended: committed, or
  // rolled back (then forget what those writes assumed was stored). Runs on
  // the thread that committed, with the connection held.
  virtual void finished(bool committed) = 0;
};

class Database {
 public:
  // Opens or creates `path` (WAL, exclusive lock, a `meta` table).
  Database(const std::string& path, DatabaseOptions options);
  ~Database(); // commits what is queued, syncs it, then stops the threads
  Database(const Database&) = delete;
  Database& operator=(const Database&) = delete;

  // Creates `tables` and takes part in every commit (kept by reference:
  // it must outlive the database). REQUIRES: start() not called yet.
  void add(Tables& tables);

  // Runs `fn` on the connection, on the calling thread, and names the
  // database in what it throws. For start-up reads and pruning.
  // REQUIRES: start() not called yet.
  template <typename F>
  auto startup(F&& fn) -> decltype(fn(static_cast<sqlite3*>(nullptr))) {
    try {
      return fn(db_);
    } catch (const std::exception& e) {
      rethrowNaming(e);
    }
  }

  // A write into this database, run inside a group's transaction on the
  // thread that commits (holding the connection): true if it wrote a row.
  // It throws on error; the group is then rolled back and every completion
  // in it gets the error.
  using Write = std::function<bool(sqlite3* db)>;
  using Done = std::function<void(const Status& status)>;
  struct Pending {
    Write write; // empty: nothing to write (an answer that must not overtake earlier commits)
    Done done;
  };

  // Commits `write` in a transaction on the calling thread (start-up).
  // REQUIRES: start() not called yet.
  void commitNow(const Write& write);

  using Post = std::function<void(std::function<void()>)>;
  // Starts the writer (and with fsync the sync) thread. `post` must run a
  // function on the event loop.
  void start(Post post);
  // Commits `group` in one transaction; each `done` runs on the event loop
  // after the commit (or its failure). Without fsync: before commit()
  // returns when the commit happened on the calling thread, else posted by
  // the writer. With fsync: always posted, once a sync covers the commit.
  // Groups are committed and completed in submission order. Called from the
  // event loop only.
  void commit(std::vector<Pending> group);
  // Runs `fn` (a read: it writes nothing) on the connection, after every
  // commit submitted before it, and `done` on the event loop with what it
  // returned, or with the error it threw (Code::io_error). Reads are short
  // (an index lookup, a page of rows): they share the writer's connection,
  // so they never see a half-written group. Called from the event loop only.
  template <typename T>
  void read(std::function<T(sqlite3*)> fn, std::function<void(Result<T>)> done) {
    auto out = std::make_shared<std::optional<T>>();
    commit({{[fn = std::move(fn), out](sqlite3* c) {
               *out = fn(c);
               return false;
             },
             [out, done = std::move(done)](const Status& s) {
               if (!s.ok() || !*out) return done(s.ok() ? Status::error(Code::io_error, "the read returned nothing") : s);
               done(std::move(**out));
             }}});
  }

  // No commit is queued or waiting for its completion to run.
  bool idle() const { return in_flight_ == 0; }
  // fdatasyncs of the WAL so far (with fsync).
  uint64_t syncs() const { return syncs_; }

  const std::string& path() const { return path_; }

  // The schema version a set of tables recorded under `key` in `meta`
  // (nullopt: none yet), and recording one. For Tables::create.
  static std::optional<int> schemaVersion(sqlite3* db, const std::string& key);
  static void setSchemaVersion(sqlite3* db, const std::string& key, int version);
  // For a set of tables with no migration yet: refuses a database whose
  // `key` records a version newer than `version` (naming `what`), runs
  // `schema` (CREATE ... IF NOT EXISTS) and records `version` if none was.
  static void createTables(sqlite3* db, const std::string& key, const std::string& what, int version,
                           const char* schema);

 private:
  static constexpr int kCheckpointPages = 1000; // SQLite's default auto-checkpoint
  [[noreturn]] void rethrowNaming(const std::exception& e) const;
  static int walHook(void* self, sqlite3* db, const char* name, int pages);
  void checkpoint();
  void writerLoop();
  void syncerLoop();
  struct Outcome {
    bool wrote = false; // the group changed the database
    Status status;
  };
  // Commits `group` in one transaction; REQUIRES: db_mutex_ held.
  Outcome tryCommit(const std::vector<Pending>& group);
  // `group` was just committed, or its commit failed: posts its
  // completions, or with fsync queues them for a sync. Runs with db_mutex_
  // held, so groups arrive in commit order.
  void committed(std::vector<Pending> group, Outcome outcome);
  // Runs the completions of `group` (on the event loop) and counts them done.
  void complete(std::vector<Pending>& group, const Status& status);
  // Posts the completions of every group the syncs so far cover; with
  // sync_mutex_ held.
  void postSynced();
  void openWal();
  void checkWal();
  // One transaction for all of `writes`; throws (after rolling back) on
  // error. False if there was nothing to write.
  bool commitGroup(const std::vector<const Write*>& writes);

  struct Statements; // BEGIN and COMMIT, prepared once

  std::string path_;
  std::string wal_path_;
  bool fsync_;
  sqlite3* db_ = nullptr;
  std::vector<Tables*> tables_;
  std::mutex db_mutex_; // the connection: the writer, or the loop committing in place
  std::unique_ptr<Statements> statements_;
  Post post_;
  std::thread writer_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<Pending> queue_;
  bool writer_idle_ = false; // waiting on wake_: commit() must notify
  // Writes submitted whose completions have not run yet.
  std::atomic<size_t> in_flight_{0};
  // Writes handed to the writer and not committed yet. While any are,
  // commit() queues too (never commits in place): commits stay in order.
  // Without fsync, in_flight_ counts instead: completions that run at once
  // must not overtake those the writer posted.
  std::atomic<size_t> queued_{0};

  // With fsync: committed groups waiting for a sync, in commit order.
  struct Awaiting {
    uint64_t seq; // the last commit this group needs synced
    std::vector<Pending> group;
    Status status;
  };
  int wal_fd_ = -1;
  std::thread syncer_;
  std::mutex sync_mutex_;
  std::condition_variable sync_wake_;
  std::deque<Awaiting> awaiting_;
  uint64_t commit_seq_ = 0;   // commits that wrote something, so far
  uint64_t sync_started_ = 0; // the last commit a started sync covers
  uint64_t synced_ = 0;       // the last commit a finished sync covers
  Status sync_error_;         // set once an fdatasync failed: nothing after it is trusted
  bool sync_stopping_ = false;
  std::atomic<uint64_t> syncs_{0};
  std::atomic<bool> checkpoint_wanted_{false};
  bool stopping_ = false;
};

} // namespace hwfarm::store
