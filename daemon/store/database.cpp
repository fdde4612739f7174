#include "daemon/store/database.h"

#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <stdexcept>

#include "daemon/store/sqlite.h"

namespace hwfarm::store {

Database::Database(const std::string& path, DatabaseOptions options)
    : path_(path), wal_path_(path + "-wal"), fsync_(options.fsync) {
  // No global memory statistics: each of SQLite's allocations would take a
  // global mutex for them, and nothing reads them. Only possible before
  // SQLite initializes, so once, before the first open.
  static const bool configured = [] { return sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0) == SQLITE_OK; }();
  (void)configured;
  if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX,
                      nullptr) != SQLITE_OK) {
    std::string message = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw std::runtime_error("cannot open database " + path + ": " + message);
  }
  try {
    // hwfarmd is the database's only user (the state-dir lock sees to that):
    // take the file lock once instead of per transaction.
    exec(db_, "PRAGMA locking_mode=EXCLUSIVE");
    // Debian builds SQLite to zero every freed cell; nothing here is secret
    // from whoever can read the database file, and rewriting a lease row
    // in place should not pay for it.
    exec(db_, "PRAGMA secure_delete=OFF");
    exec(db_, "PRAGMA journal_mode=WAL");
    // A commit is durable once its WAL frames are in the page cache: it
    // survives the process. With fsync the sync thread makes it survive a
    // power cut too (see syncerLoop); checkpoints sync on their own.
    exec(db_, "PRAGMA synchronous=NORMAL");
    exec(db_, "PRAGMA busy_timeout=5000");
    // After a checkpoint the WAL is rewritten from its start instead of
    // truncated: commits overwrite blocks the file already has, which
    // fdatasync flushes without a metadata update.
    exec(db_, "PRAGMA journal_size_limit=67108864");
    // Checkpoints run on the writer thread, never inside a commit on the
    // event loop (see walHook).
    sqlite3_wal_hook(db_, &Database::walHook, this);
    // Each set of tables records its schema version here.
    exec(db_, "CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)");
  } catch (const std::exception& e) {
    sqlite3_close(db_);
    throw std::runtime_error("database " + path + ": " + e.what());
  }
}

void Database::add(Tables& tables) {
  startup([&](sqlite3* db) {
    try {
      tables.create(db);
    } catch (...) {
      sqlite3_exec(db, "ROLLBACK", nullptr, nullptr, nullptr);
      throw;
    }
  });
  tables_.push_back(&tables);
}

void Database::rethrowNaming(const std::exception& e) const {
  throw std::runtime_error("database " + path_ + ": " + e.what());
}

std::optional<int> Database::schemaVersion(sqlite3* db, const std::string& key) {
  Statement version(db, "SELECT value FROM meta WHERE key = ?1");
  version.bind(1, key);
  if (!version.step()) return std::nullopt;
  int found = std::stoi(version.text(0));
  version.reset();
  return found;
}

void Database::setSchemaVersion(sqlite3* db, const std::string& key, int version) {
  std::string value = std::to_string(version);
  Statement s(db, "INSERT OR REPLACE INTO meta(key, value) VALUES(?1, ?2)");
  s.bind(1, key).bind(2, value).run();
}

void Database::createTables(sqlite3* db, const std::string& key, const std::string& what, int version,
                            const char* schema) {
  std::optional<int> found = schemaVersion(db, key);
  if (found && *found > version)
    throw std::runtime_error("its " + what + " tables are of schema " + std::to_string(*found) +
                             ", newer than this hwfarmd's " + std::to_string(version));
  exec(db, schema);
  if (!found) setSchemaVersion(db, key, version);
}

Database::~Database() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  if (writer_.joinable()) writer_.join();
  // The writer's last commits are synced before the sync thread ends.
  {
    std::lock_guard lock(sync_mutex_);
    sync_stopping_ = true;
  }
  sync_wake_.notify_all();
  if (syncer_.joinable()) syncer_.join();
  if (wal_fd_ >= 0) ::close(wal_fd_);
  statements_.reset();
  // The tables' own statements are finalized by their owners; close_v2
  // closes once they are.
  sqlite3_close_v2(db_);
}

struct Database::Statements {
  explicit Statements(sqlite3* db) : begin(db, "BEGIN IMMEDIATE"), commit(db, "COMMIT") {}
  Statement begin, commit;
};

bool Database::commitGroup(const std::vector<const Write*>& writes) {
  // Answers that only wait for earlier commits come without a write.
  if (std::all_of(writes.begin(), writes.end(), [](const Write* w) { return !*w; })) return false;
  if (!statements_) statements_ = std::make_unique<Statements>(db_);
  bool wrote = false;
  try {
    statements_->begin.run();
    for (const Write* w : writes)
      if (*w && (*w)(db_)) wrote = true;
    statements_->commit.run();
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    for (Tables* t : tables_) t->finished(false);
    throw;
  }
  for (Tables* t : tables_) t->finished(true);
  return wrote;
}

void Database::commitNow(const Write& write) {
  startup([&](sqlite3*) { commitGroup({&write}); });
}

// Runs in the committing thread, inside COMMIT, with the connection held.
// It takes mutex_ with db_mutex_ held, the reverse of commit()'s order;
// that cannot deadlock because commit() only try_locks db_mutex_.
int Database::walHook(void* self, sqlite3*, const char*, int pages) {
  auto* store = static_cast<Database*>(self);
  if (pages >= kCheckpointPages && !store->checkpoint_wanted_.exchange(true)) {
    std::lock_guard lock(store->mutex_);
    if (store->writer_idle_) {
      store->writer_idle_ = false;
      store->wake_.notify_one();
    }
  }
  return SQLITE_OK;
}

void Database::checkpoint() {
  std::lock_guard db(db_mutex_);
  int log = 0, done = 0;
  if (sqlite3_wal_checkpoint_v2(db_, nullptr, SQLITE_CHECKPOINT_PASSIVE, &log, &done) != SQLITE_OK)
    std::fprintf(stderr, "<4>hwfarmd: checkpoint of %s failed: %s\n", path_.c_str(), sqlite3_errmsg(db_));
  checkpoint_wanted_ = false;
  if (wal_fd_ >= 0) checkWal();
}

// SQLite keeps its WAL file while the database is open in exclusive mode,
// so the descriptor the sync thread flushes stays the right one. Should the
// file ever be replaced, syncing the old one would answer for commits it
// does not hold: every later answer fails instead (hwfarmd exits, and
// starts again on the file SQLite uses).
void Database::checkWal() {
  struct stat by_path {}, by_fd {};
  if (::fstat(wal_fd_, &by_fd) == 0 && by_fd.st_nlink > 0 && ::stat(wal_path_.c_str(), &by_path) == 0 &&
      by_path.st_ino == by_fd.st_ino && by_path.st_dev == by_fd.st_dev)
    return;
  std::lock_guard lock(sync_mutex_);
  if (sync_error_.ok())
    sync_error_ = Status::infrastructure(Code::io_error,
                                         wal_path_ + " was replaced under hwfarmd; its syncs no longer cover the commits");
}

// The WAL file the sync thread fdatasyncs. SQLite writes it through its own
// descriptor; fdatasync flushes the file, whichever descriptor wrote it.
// Opened once, before any thread starts; with O_CREAT in case SQLite has
// not made it yet (it then opens this file).
void Database::openWal() {
  wal_fd_ = ::open(wal_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (wal_fd_ < 0) throw std::runtime_error(Status::fromErrno("cannot open " + wal_path_, errno).message());
  // The start-up writes (restore, prune) were made without a sync.
  if (::fdatasync(wal_fd_) != 0)
    throw std::runtime_error(Status::fromErrno("fdatasync " + wal_path_, errno).message());
}

void Database::start(Post post) {
  post_ = std::move(post);
  if (fsync_) openWal();
  // The writer must not take the signals the event loop handles.
  sigset_t all, previous;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &previous);
  writer_ = std::thread([this] { writerLoop(); });
  if (fsync_) syncer_ = std::thread([this] { syncerLoop(); });
  pthread_sigmask(SIG_SETMASK, &previous, nullptr);
}

void Database::commit(std::vector<Pending> group) {
  if (group.empty()) return;
  in_flight_ += group.size();
  bool wake;
  {
    std::unique_lock lock(mutex_);
    // A commit is a few writes into the page cache: done here, it saves two
    // thread hand-offs per group. Only when nothing is queued (order) and
    // the writer is not checkpointing (it holds the connection).
    bool in_order = fsync_ ? queued_ == 0 : in_flight_ == group.size();
    if (in_order && !checkpoint_wanted_) {
      std::unique_lock db(db_mutex_, std::try_to_lock);
      if (db.owns_lock()) {
        lock.unlock();
        Outcome outcome = tryCommit(group);
        if (fsync_) {
          committed(std::move(group), std::move(outcome));
          return;
        }
        db.unlock(); // a completion may commit again
        complete(group, outcome.status);
        return;
      }
    }
    queued_ += group.size();
    for (auto& p : group) queue_.push_back(std::move(p));
    // A busy writer takes the queue when its commit ends: waking it costs a
    // futex call per request and buys nothing.
    wake = writer_idle_;
    writer_idle_ = false;
  }
  if (wake) wake_.notify_one();
}

Database::Outcome Database::tryCommit(const std::vector<Pending>& group) {
  std::vector<const Write*> writes;
  writes.reserve(group.size());
  for (const auto& p : group) writes.push_back(&p.write);
  Outcome outcome;
  try {
    outcome.wrote = commitGroup(writes);
  } catch (const std::exception& e) {
    outcome.status = Status::infrastructure(Code::io_error, e.what());
  }
  return outcome;
}

void Database::complete(std::vector<Pending>& group, const Status& status) {
  for (auto& p : group)
    if (p.done) p.done(status);
  in_flight_ -= group.size();
}

void Database::committed(std::vector<Pending> group, Outcome outcome) {
  if (!fsync_) {
    // Moved into the task, not copied: the completions (which hold HTTP
    // sessions) must be destroyed on the loop, never here as the last
    // reference once the loop has run the task (found by TSan).
    auto completions = std::make_shared<std::vector<Pending>>(std::move(group));
    post_([this, completions = std::move(completions), outcome = std::move(outcome)] {
      complete(*completions, outcome.status);
    });
    return;
  }
  std::lock_guard lock(sync_mutex_);
  if (outcome.wrote) ++commit_seq_;
  // A group that wrote nothing still waits for the commits before it.
  awaiting_.push_back({commit_seq_, std::move(group), std::move(outcome.status)});
  if (commit_seq_ <= synced_) postSynced();
  else if (commit_seq_ > sync_started_) sync_wake_.notify_one();
}

void Database::postSynced() {
  auto ready = std::make_shared<std::vector<Awaiting>>();
  while (!awaiting_.empty() && awaiting_.front().seq <= synced_) {
    ready->push_back(std::move(awaiting_.front()));
    awaiting_.pop_front();
  }
  if (ready->empty()) return;
  // Posted with the lock held: completions reach the loop in commit order.
  // Moved in, so they are destroyed on the loop (see committed()).
  post_([this, ready = std::move(ready), sync_error = sync_error_] {
    for (auto& a : *ready) complete(a.group, a.status.ok() ? sync_error : a.status);
  });
}

// Each sync covers every commit made before it started, so one sync
// answers every request that committed while the previous one ran: group
// commit without holding any commit back. (Holding a sync back until as
// many writes wait as the last one answered, up to the last sync's time,
// was measured: no gain at 16 clients, and a worse grant latency.)
void Database::syncerLoop() {
  std::unique_lock lock(sync_mutex_);
  while (true) {
    sync_wake_.wait(lock, [this] { return commit_seq_ > sync_started_ || sync_stopping_; });
    if (commit_seq_ <= sync_started_) return; // stopping, and every commit is covered
    uint64_t target = sync_started_ = commit_seq_;
    lock.unlock();
    int rc = ::fdatasync(wal_fd_);
    int err = errno;
    ++syncs_;
    lock.lock();
    if (rc != 0 && sync_error_.ok()) sync_error_ = Status::fromErrno("fdatasync " + wal_path_, err);
    synced_ = target;
    postSynced();
  }
}

void Database::writerLoop() {
  while (true) {
    std::vector<Pending> work;
    {
      std::unique_lock lock(mutex_);
      if (queue_.empty() && !stopping_ && !checkpoint_wanted_) {
        writer_idle_ = true;
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty() || checkpoint_wanted_; });
      }
      writer_idle_ = false;
      if (queue_.empty() && stopping_) return;
      work.swap(queue_);
    }
    if (!work.empty()) {
      std::lock_guard db(db_mutex_);
      Outcome outcome = tryCommit(work);
      size_t n = work.size();
      committed(std::move(work), std::move(outcome));
      queued_ -= n;
    }
    if (checkpoint_wanted_) checkpoint();
  }
}

} // namespace hwfarm::store
