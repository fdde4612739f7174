#include "daemon/store/store.h"

#include <fcntl.h>
#include <signal.h>
#include <sqlite3.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <stdexcept>

#include <boost/json.hpp>

namespace hwfarm::store {
namespace {

constexpr int kSchemaVersion = 3;

// Each commit touches as few pages as possible: leases are keyed by a
// sequence number in grant order, so new rows land on the last page of the
// table and a release updates a row on a page the cache still holds. There
// are no secondary indexes: the tables are read and pruned only at start-up,
// by full scans, and lease ids are looked up in memory.
const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
-- Only some board states are stored (maintenance, quarantined, recovering);
-- the rest is re-derived at start-up from presence and the active leases.
CREATE TABLE IF NOT EXISTS boards(
  name TEXT PRIMARY KEY,
  state TEXT NOT NULL,
  since_ms INTEGER NOT NULL,
  reason TEXT NOT NULL DEFAULT '');
CREATE TABLE IF NOT EXISTS leases(
  seq INTEGER PRIMARY KEY, -- grant order (storage only)
  id TEXT NOT NULL,
  state TEXT NOT NULL,
  principal TEXT NOT NULL,
  job TEXT NOT NULL, build TEXT NOT NULL, stage TEXT NOT NULL, url TEXT NOT NULL,
  context TEXT NOT NULL,
  sel_type TEXT NOT NULL,
  sel_labels TEXT NOT NULL, -- a JSON array of strings (schema 3; before: comma-joined)
  sel_worker TEXT NOT NULL,
  priority INTEGER NOT NULL,
  idempotency_key TEXT NOT NULL,
  ttl_ms INTEGER NOT NULL,
  granted_ms INTEGER NOT NULL,
  expires_ms INTEGER NOT NULL,
  ended_ms INTEGER NOT NULL,
  end_reason TEXT NOT NULL,
  waited_ms INTEGER NOT NULL,
  boards TEXT NOT NULL -- "name:lost_ms,..." in grant order; lost_ms 0 = present
);
CREATE TABLE IF NOT EXISTS events(
  id INTEGER PRIMARY KEY,
  at_ms INTEGER NOT NULL,
  kind TEXT NOT NULL,
  lease_id TEXT NOT NULL,
  board TEXT NOT NULL,
  detail TEXT NOT NULL);
)sql";

// Schema 1 (hwfarm 0.1 development builds) keyed leases by their random id.
// Migration: rename that table, create schema 2 (kSchema), copy the rows
// over in grant order.
const char* kCopyLeasesFrom1 = R"sql(
INSERT INTO leases(id, state, principal, job, build, stage, url, context, sel_type, sel_labels, sel_worker,
                   priority, idempotency_key, ttl_ms, granted_ms, expires_ms, ended_ms, end_reason, waited_ms, boards)
  SELECT id, state, principal, job, build, stage, url, context, sel_type, sel_labels, sel_worker, priority,
         idempotency_key, ttl_ms, granted_ms, expires_ms, ended_ms, end_reason, waited_ms, boards
  FROM leases_v1 ORDER BY granted_ms, id;
DROP TABLE leases_v1;
UPDATE meta SET value = '2' WHERE key = 'schema_version';
)sql";

// Schema 2 stored a selector's labels comma-joined, so a label containing
// "," came back as two. Schema 3 stores a JSON array; the migration
// rewrites every row (see migrateLabelsFrom2).

// A prepared statement, reset after each use.
class Statement {
 public:
  Statement(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &stmt_, nullptr) != SQLITE_OK)
      throw std::runtime_error(std::string("sqlite prepare: ") + sqlite3_errmsg(db));
  }
  ~Statement() { sqlite3_finalize(stmt_); }
  // Binds text without copying it: `v` must outlive the next run()/step().
  Statement& bind(int i, const std::string& v) {
    return bound(i, sqlite3_bind_text(stmt_, i, v.data(), static_cast<int>(v.size()), SQLITE_STATIC));
  }
  Statement& bind(int i, const char* v) { return bound(i, sqlite3_bind_text(stmt_, i, v, -1, SQLITE_STATIC)); }
  Statement& bind(int i, int64_t v) { return bound(i, sqlite3_bind_int64(stmt_, i, v)); }
  // A bind that failed (a value too big, a wrong index) throws: a row must
  // not be written with a parameter silently left NULL or stale.
  Statement& bound(int i, int rc) {
    if (rc != SQLITE_OK)
      throw std::runtime_error("sqlite bind of parameter " + std::to_string(i) + " of \"" + sqlite3_sql(stmt_) +
                               "\": " + sqlite3_errstr(rc));
    return *this;
  }
  bool step() {
    int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc != SQLITE_DONE) {
      std::string message = sqlite3_errmsg(db_);
      sqlite3_reset(stmt_);
      sqlite3_clear_bindings(stmt_);
      throw std::runtime_error("sqlite step: " + message);
    }
    return false;
  }
  sqlite3_stmt* handle() const { return stmt_; }
  // Every use binds every parameter again, so the old bindings need no
  // clearing (text is bound without copying: it must not be read later).
  void run() {
    step();
    sqlite3_reset(stmt_);
  }
  // Every byte of the column, NULs included (its length is
  // sqlite3_column_bytes, read after sqlite3_column_text as SQLite requires).
  std::string text(int col) const {
    const unsigned char* t = sqlite3_column_text(stmt_, col);
    if (!t) return std::string();
    return std::string(reinterpret_cast<const char*>(t), static_cast<size_t>(sqlite3_column_bytes(stmt_, col)));
  }
  int64_t integer(int col) const { return sqlite3_column_int64(stmt_, col); }

 private:
  sqlite3* db_;
  sqlite3_stmt* stmt_ = nullptr;
};

// A selector's labels as a JSON array of strings: any text survives.
std::string encodeLabels(const std::vector<std::string>& labels) {
  if (labels.empty()) return "[]"; // most requests name a type only
  boost::json::array a;
  for (const auto& l : labels) a.emplace_back(l);
  return boost::json::serialize(a);
}

std::vector<std::string> decodeLabels(const std::string& text) {
  std::vector<std::string> out;
  if (text == "[]") return out;
  boost::system::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec || !v.is_array()) throw std::runtime_error("sel_labels is not a JSON array: " + text.substr(0, 80));
  for (const auto& item : v.as_array()) {
    if (!item.is_string()) throw std::runtime_error("sel_labels holds a non-string: " + text.substr(0, 80));
    out.emplace_back(item.as_string());
  }
  return out;
}

std::string encodeBoards(const std::vector<lease::LeasedBoard>& boards) {
  std::string out;
  for (const auto& b : boards)
    out += (out.empty() ? "" : ",") + b.name + ":" + std::to_string(b.lost ? std::max<int64_t>(1, b.lost_ms) : 0);
  return out;
}

std::vector<std::string> splitCommas(const std::string& text);

std::vector<lease::LeasedBoard> decodeBoards(const std::string& text) {
  std::vector<lease::LeasedBoard> out;
  for (const auto& item : splitCommas(text)) {
    size_t colon = item.rfind(':');
    int64_t lost_ms = std::stoll(item.substr(colon + 1));
    out.push_back({item.substr(0, colon), lost_ms != 0, lost_ms});
  }
  return out;
}

// Board lists ("name:lost_ms,..."; board names cannot hold ",") and
// schema 2's labels.
std::vector<std::string> splitCommas(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start < text.size()) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    out.push_back(text.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

} // namespace

Store::Store(const std::string& path, StoreOptions options)
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
    exec("PRAGMA locking_mode=EXCLUSIVE");
    // Debian builds SQLite to zero every freed cell; nothing here is secret
    // from whoever can read the database file, and rewriting a lease row
    // in place should not pay for it.
    exec("PRAGMA secure_delete=OFF");
    exec("PRAGMA journal_mode=WAL");
    // A commit is durable once its WAL frames are in the page cache: it
    // survives the process. With fsync the sync thread makes it survive a
    // power cut too (see syncerLoop); checkpoints sync on their own.
    exec("PRAGMA synchronous=NORMAL");
    exec("PRAGMA busy_timeout=5000");
    // After a checkpoint the WAL is rewritten from its start instead of
    // truncated: commits overwrite blocks the file already has, which
    // fdatasync flushes without a metadata update.
    exec("PRAGMA journal_size_limit=67108864");
    // Checkpoints run on the writer thread, never inside a commit on the
    // event loop (see walHook).
    sqlite3_wal_hook(db_, &Store::walHook, this);
    exec(kSchema);
    Statement version(db_, "SELECT value FROM meta WHERE key='schema_version'");
    if (version.step()) {
      int found = std::stoi(version.text(0));
      sqlite3_reset(version.handle());
      if (found == 1 || found == 2) {
        exec("BEGIN IMMEDIATE");
        if (found == 1) {
          exec("ALTER TABLE leases RENAME TO leases_v1");
          exec(kSchema);
          exec(kCopyLeasesFrom1);
        }
        migrateLabelsFrom2();
        exec("COMMIT");
      } else if (found != kSchemaVersion) {
        throw std::runtime_error("schema version " + std::to_string(found) + " is not " +
                                 std::to_string(kSchemaVersion) + " (written by a newer hwfarmd?)");
      }
    } else {
      exec(("INSERT INTO meta(key, value) VALUES('schema_version', '" + std::to_string(kSchemaVersion) + "')").c_str());
    }
    Statement last(db_, "SELECT coalesce(max(seq), 0) FROM leases");
    last.step();
    last_seq_ = last.integer(0);
  } catch (const std::exception& e) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    sqlite3_close(db_);
    throw std::runtime_error("database " + path + ": " + e.what());
  }
}

// Schema 2 -> 3: comma-joined labels become JSON arrays. REQUIRES: inside
// a transaction.
void Store::migrateLabelsFrom2() {
  std::vector<std::pair<int64_t, std::string>> rows;
  {
    Statement read(db_, "SELECT seq, sel_labels FROM leases");
    while (read.step()) rows.emplace_back(read.integer(0), encodeLabels(splitCommas(read.text(1))));
  }
  Statement write(db_, "UPDATE leases SET sel_labels = ?2 WHERE seq = ?1");
  for (const auto& [seq, labels] : rows) write.bind(1, seq).bind(2, labels).run();
  exec(("UPDATE meta SET value = '" + std::to_string(kSchemaVersion) + "' WHERE key = 'schema_version'").c_str());
}

Store::~Store() {
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
  sqlite3_close(db_);
}

void Store::exec(const char* sql) {
  char* error = nullptr;
  if (sqlite3_exec(db_, sql, nullptr, nullptr, &error) != SQLITE_OK) {
    std::string message = error ? error : "unknown error";
    sqlite3_free(error);
    throw std::runtime_error(message);
  }
}

// Errors of the start-up calls name the database: "database PATH: ...".
template <typename F>
auto Store::naming(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const std::exception& e) {
    throw std::runtime_error("database " + path_ + ": " + e.what());
  }
}

std::vector<StoredBoard> Store::loadBoards() {
  return naming([this] { return readBoards(); });
}

std::vector<lease::Lease> Store::loadLeases(int64_t ended_since_ms) {
  return naming([this, ended_since_ms] { return readLeases(ended_since_ms); });
}

void Store::prune(int64_t cutoff_ms) {
  naming([this, cutoff_ms] { deleteBefore(cutoff_ms); });
}

std::vector<StoredBoard> Store::readBoards() {
  std::vector<StoredBoard> out;
  Statement s(db_, "SELECT name, state, since_ms, reason FROM boards");
  while (s.step()) {
    StoredBoard b;
    b.name = s.text(0);
    b.state = lease::boardStateFromString(s.text(1)).value_or(lease::BoardState::offline);
    b.since_ms = s.integer(2);
    b.reason = s.text(3);
    out.push_back(std::move(b));
  }
  return out;
}

std::vector<lease::Lease> Store::readLeases(int64_t ended_since_ms) {
  std::vector<lease::Lease> out;
  Statement s(db_,
              "SELECT id, state, principal, job, build, stage, url, context, sel_type, sel_labels, sel_worker, "
              "priority, idempotency_key, ttl_ms, granted_ms, expires_ms, ended_ms, end_reason, waited_ms, boards, "
              "seq FROM leases WHERE state = 'active' OR ended_ms >= ?1 ORDER BY seq");
  s.bind(1, ended_since_ms);
  while (s.step()) {
    lease::Lease l;
    l.id = s.text(0);
    l.state = lease::leaseStateFromString(s.text(1)).value_or(lease::LeaseState::revoked);
    l.holder = {s.text(2), s.text(3), s.text(4), s.text(5), s.text(6)};
    l.context = lease::contextFromString(s.text(7)).value_or(lease::Context::manual);
    l.selector.type = s.text(8);
    l.selector.labels = decodeLabels(s.text(9));
    l.selector.worker = s.text(10);
    l.priority = static_cast<int>(s.integer(11));
    l.idempotency_key = s.text(12);
    l.ttl_ms = s.integer(13);
    l.granted_ms = s.integer(14);
    l.expires_ms = s.integer(15);
    l.ended_ms = s.integer(16);
    l.end_reason = s.text(17);
    l.waited_ms = s.integer(18);
    l.boards = decodeBoards(s.text(19));
    // Active leases are written again (renewed, released): keep their rows.
    if (l.state == lease::LeaseState::active) seq_by_id_[l.id] = s.integer(20);
    out.push_back(std::move(l));
  }
  return out;
}

void Store::deleteBefore(int64_t cutoff_ms) {
  exec("BEGIN IMMEDIATE");
  try {
    Statement leases(db_, "DELETE FROM leases WHERE state != 'active' AND ended_ms < ?1");
    leases.bind(1, cutoff_ms).run();
    Statement events(db_, "DELETE FROM events WHERE at_ms < ?1");
    events.bind(1, cutoff_ms).run();
    exec("COMMIT");
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    throw;
  }
}

struct Store::Statements {
  explicit Statements(sqlite3* db)
      : begin(db, "BEGIN IMMEDIATE"),
        commit(db, "COMMIT"),
        lease(db,
              "INSERT OR REPLACE INTO leases(seq, id, state, principal, job, build, stage, url, context, sel_type, "
              "sel_labels, sel_worker, priority, idempotency_key, ttl_ms, granted_ms, expires_ms, ended_ms, "
              "end_reason, waited_ms, boards) VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, "
              "?15, ?16, ?17, ?18, ?19, ?20, ?21)"),
        update(db,
               "UPDATE leases SET state = ?2, ttl_ms = ?3, expires_ms = ?4, ended_ms = ?5, end_reason = ?6, "
               "boards = ?7 WHERE seq = ?1"),
        board(db, "INSERT OR REPLACE INTO boards(name, state, since_ms, reason) VALUES(?1, ?2, ?3, ?4)"),
        unboard(db, "DELETE FROM boards WHERE name = ?1"),
        event(db, "INSERT INTO events(at_ms, kind, lease_id, board, detail) VALUES(?1, ?2, ?3, ?4, ?5)") {}
  Statement begin, commit, lease, update, board, unboard, event;
};

void Store::writeLease(const lease::Lease& l, std::vector<std::string>& ended) {
  auto [it, inserted] = seq_by_id_.try_emplace(l.id, 0);
  if (l.state != lease::LeaseState::active) ended.push_back(l.id);
  std::string boards = encodeBoards(l.boards);
  if (!inserted) {
    // Renewed, ended or a board lost: only these columns ever change.
    statements_->update.bind(1, it->second).bind(2, lease::toString(l.state)).bind(3, l.ttl_ms);
    statements_->update.bind(4, l.expires_ms).bind(5, l.ended_ms).bind(6, l.end_reason).bind(7, boards).run();
    return;
  }
  it->second = ++last_seq_;
  std::string labels = encodeLabels(l.selector.labels);
  Statement& lease = statements_->lease;
  lease.bind(1, it->second).bind(2, l.id).bind(3, lease::toString(l.state)).bind(4, l.holder.principal);
  lease.bind(5, l.holder.job).bind(6, l.holder.build).bind(7, l.holder.stage).bind(8, l.holder.url);
  lease.bind(9, lease::toString(l.context)).bind(10, l.selector.type);
  lease.bind(11, labels).bind(12, l.selector.worker);
  lease.bind(13, static_cast<int64_t>(l.priority)).bind(14, l.idempotency_key).bind(15, l.ttl_ms);
  lease.bind(16, l.granted_ms).bind(17, l.expires_ms).bind(18, l.ended_ms).bind(19, l.end_reason);
  lease.bind(20, l.waited_ms).bind(21, boards).run();
}

void Store::writeEvent(const lease::Event& e) {
  statements_->event.bind(1, e.at_ms).bind(2, e.kind).bind(3, e.lease_id).bind(4, e.board).bind(5, e.detail).run();
}

void Store::apply(const Batch& batch, std::vector<std::string>& ended) {
  if (const lease::Changes* c = batch.changes.get()) {
    for (const auto* group : {&c->granted, &c->updated, &c->ended})
      for (const auto& l : *group) writeLease(l, ended);
  }
  for (const auto& l : batch.leases) writeLease(l, ended);
  for (const auto& b : batch.boards) {
    if (lease::storedState(b.state))
      statements_->board.bind(1, b.spec.name).bind(2, lease::toString(b.state)).bind(3, b.since_ms)
          .bind(4, b.reason).run();
    else
      statements_->unboard.bind(1, b.spec.name).run();
  }
  if (batch.changes)
    for (const auto& e : batch.changes->events) writeEvent(e);
  for (const auto& e : batch.events) writeEvent(e);
}

bool Store::commitGroup(const std::vector<const Batch*>& batches) {
  // Answers that only wait for earlier commits come as empty batches.
  if (std::all_of(batches.begin(), batches.end(), [](const Batch* b) { return b->empty(); })) return false;
  if (!statements_) statements_ = std::make_unique<Statements>(db_);
  std::vector<std::string> ended;
  int64_t last_seq = last_seq_;
  try {
    statements_->begin.run();
    for (const Batch* b : batches) apply(*b, ended);
    statements_->commit.run();
  } catch (...) {
    sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
    // Rows of leases first seen in this group were not written.
    for (auto it = seq_by_id_.begin(); it != seq_by_id_.end();)
      it = it->second > last_seq ? seq_by_id_.erase(it) : std::next(it);
    last_seq_ = last_seq;
    throw;
  }
  // An ended lease is never written again.
  for (const auto& id : ended) seq_by_id_.erase(id);
  return true;
}

void Store::commitNow(const Batch& batch) {
  naming([this, &batch] { commitGroup({&batch}); });
}

// Runs in the committing thread, inside COMMIT, with the connection held.
// It takes mutex_ with db_mutex_ held, the reverse of commit()'s order;
// that cannot deadlock because commit() only try_locks db_mutex_.
int Store::walHook(void* self, sqlite3*, const char*, int pages) {
  auto* store = static_cast<Store*>(self);
  if (pages >= kCheckpointPages && !store->checkpoint_wanted_.exchange(true)) {
    std::lock_guard lock(store->mutex_);
    if (store->writer_idle_) {
      store->writer_idle_ = false;
      store->wake_.notify_one();
    }
  }
  return SQLITE_OK;
}

void Store::checkpoint() {
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
void Store::checkWal() {
  struct stat by_path {}, by_fd {};
  if (::fstat(wal_fd_, &by_fd) == 0 && by_fd.st_nlink > 0 && ::stat(wal_path_.c_str(), &by_path) == 0 &&
      by_path.st_ino == by_fd.st_ino && by_path.st_dev == by_fd.st_dev)
    return;
  std::lock_guard lock(sync_mutex_);
  if (sync_error_.empty()) sync_error_ = wal_path_ + " was replaced under hwfarmd; its syncs no longer cover the commits";
}

// The WAL file the sync thread fdatasyncs. SQLite writes it through its own
// descriptor; fdatasync flushes the file, whichever descriptor wrote it.
// Opened once, before any thread starts; with O_CREAT in case SQLite has
// not made it yet (it then opens this file).
void Store::openWal() {
  wal_fd_ = ::open(wal_path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (wal_fd_ < 0) throw std::runtime_error("cannot open " + wal_path_ + ": " + std::strerror(errno));
  // The start-up writes (restore, prune) were made without a sync.
  if (::fdatasync(wal_fd_) != 0) throw std::runtime_error("fdatasync " + wal_path_ + ": " + std::strerror(errno));
}

void Store::start(Post post) {
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

void Store::commit(Batch batch, Done done) {
  std::vector<Pending> group;
  group.push_back({std::move(batch), std::move(done)});
  commit(std::move(group));
}

void Store::commit(std::vector<Pending> group) {
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
        complete(group, outcome.ok, outcome.error);
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

Store::Outcome Store::tryCommit(const std::vector<Pending>& group) {
  std::vector<const Batch*> batches;
  batches.reserve(group.size());
  for (const auto& p : group) batches.push_back(&p.batch);
  Outcome outcome;
  try {
    outcome.wrote = commitGroup(batches);
  } catch (const std::exception& e) {
    outcome.ok = false;
    outcome.error = e.what();
  }
  return outcome;
}

void Store::complete(std::vector<Pending>& group, bool ok, const std::string& error) {
  for (auto& p : group)
    if (p.done) p.done(ok, error);
  in_flight_ -= group.size();
}

void Store::committed(std::vector<Pending> group, Outcome outcome) {
  if (!fsync_) {
    // Moved into the task, not copied: the completions (which hold HTTP
    // sessions) must be destroyed on the loop, never here as the last
    // reference once the loop has run the task (found by TSan).
    auto completions = std::make_shared<std::vector<Pending>>(std::move(group));
    post_([this, completions = std::move(completions), outcome = std::move(outcome)] {
      complete(*completions, outcome.ok, outcome.error);
    });
    return;
  }
  std::lock_guard lock(sync_mutex_);
  if (outcome.wrote) ++commit_seq_;
  // A group that wrote nothing still waits for the commits before it.
  awaiting_.push_back({commit_seq_, std::move(group), outcome.ok, std::move(outcome.error)});
  if (commit_seq_ <= synced_) postSynced();
  else if (commit_seq_ > sync_started_) sync_wake_.notify_one();
}

void Store::postSynced() {
  auto ready = std::make_shared<std::vector<Awaiting>>();
  while (!awaiting_.empty() && awaiting_.front().seq <= synced_) {
    ready->push_back(std::move(awaiting_.front()));
    awaiting_.pop_front();
  }
  if (ready->empty()) return;
  // Posted with the lock held: completions reach the loop in commit order.
  // Moved in, so they are destroyed on the loop (see committed()).
  post_([this, ready = std::move(ready), sync_error = sync_error_] {
    for (auto& a : *ready) complete(a.group, a.ok && sync_error.empty(), a.ok ? sync_error : a.error);
  });
}

// Each sync covers every commit made before it started, so one sync
// answers every request that committed while the previous one ran: group
// commit without holding any commit back.
void Store::syncerLoop() {
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
    if (rc != 0 && sync_error_.empty())
      sync_error_ = "fdatasync " + wal_path_ + ": " + std::strerror(err);
    synced_ = target;
    postSynced();
  }
}

void Store::writerLoop() {
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
