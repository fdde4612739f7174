// The database and its lease tables on a real database file: rows survive
// reopening, a lease written again keeps its row, a schema-1 database is
// migrated, and the writer thread commits queued batches in order.
#include <catch2/catch.hpp>
#include <dlfcn.h>
#include <sqlite3.h>
#include <unistd.h>

#include <climits>
#include <condition_variable>
#include <mutex>
#include <set>
#include <thread>

#include "daemon/store/database.h"
#include "daemon/store/lease_tables.h"
#include "daemon/store/sqlite.h"
#include "tests/support/process.h"

using namespace hwfarm;

namespace {

lease::Lease makeLease(const std::string& id, int64_t granted_ms, const std::string& board) {
  lease::Lease l;
  l.id = id;
  l.holder = {"ci", "job", "7", "stage", "http://jenkins/job/7"};
  l.context = lease::Context::pr;
  l.selector.type = "nucleo";
  l.selector.labels = {"a", "b"};
  l.priority = 3;
  l.idempotency_key = "key-" + id;
  l.ttl_ms = 60000;
  l.granted_ms = granted_ms;
  l.expires_ms = granted_ms + 60000;
  l.boards = {{board, false, 0}};
  return l;
}

// The database with the lease tables, as the lease service holds them.
struct Store {
  store::LeaseTables tables;
  store::Database db;
  Store(const std::string& path, store::DatabaseOptions options) : db(path, options) { db.add(tables); }

  std::vector<store::StoredBoard> loadBoards() { return tables.loadBoards(db); }
  std::vector<lease::Lease> loadLeases(int64_t ended_since_ms) { return tables.loadLeases(db, ended_since_ms); }
  void prune(int64_t cutoff_ms) { tables.prune(db, cutoff_ms); }
  void commitNow(store::Batch batch) { db.commitNow(tables.write(std::move(batch))); }
  void start(store::Database::Post post) { db.start(std::move(post)); }
  void commit(store::Batch batch, store::Database::Done done) {
    std::vector<store::Database::Pending> group;
    group.push_back(tables.pending(std::move(batch), std::move(done)));
    db.commit(std::move(group));
  }
  bool idle() const { return db.idle(); }
  uint64_t syncs() const { return db.syncs(); }
};

store::Batch batchOf(const lease::Lease& l) {
  store::Batch b;
  b.leases.push_back(l);
  b.events.push_back({l.granted_ms, "grant", l.id, "", l.boards[0].name});
  return b;
}

// Runs `sql` on the database at `path` through a connection of its own.
void exec(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  REQUIRE(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr) == SQLITE_OK);
  sqlite3_close(db);
}

int64_t count(const std::string& path, const std::string& sql) {
  sqlite3* db = nullptr;
  REQUIRE(sqlite3_open(path.c_str(), &db) == SQLITE_OK);
  sqlite3_stmt* stmt = nullptr;
  REQUIRE(sqlite3_prepare_v2(db, sql.c_str(), -1, &stmt, nullptr) == SQLITE_OK);
  REQUIRE(sqlite3_step(stmt) == SQLITE_ROW);
  int64_t n = sqlite3_column_int64(stmt, 0);
  sqlite3_finalize(stmt);
  sqlite3_close(db);
  return n;
}

// Holds syncs of one file on command: a forwarding wrapper over libc's
// fdatasync, which the store's sync thread calls for the WAL, and SQLite
// for the database file when it checkpoints. While `closed`, a sync of
// `path` waits at the gate; every other call is the real one.
struct SyncGate {
  std::mutex mutex;
  std::condition_variable changed;
  std::string path;
  bool closed = false;
  int waiting = 0; // syncs of `path` held at the gate now

  void close(const std::string& file) {
    char real[PATH_MAX];
    std::lock_guard lock(mutex);
    path = ::realpath(file.c_str(), real) ? real : file;
    closed = true;
  }
  void open() {
    std::lock_guard lock(mutex);
    closed = false;
    changed.notify_all();
  }
  // True once a sync of `path` waits at the gate (false after 10 s).
  bool awaitHeld() {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, std::chrono::seconds(10), [this] { return waiting > 0; });
  }
  void pass(int fd) {
    char link[PATH_MAX];
    std::string proc = "/proc/self/fd/" + std::to_string(fd);
    ssize_t n = ::readlink(proc.c_str(), link, sizeof link);
    std::unique_lock lock(mutex);
    if (!closed || n <= 0 || std::string(link, static_cast<size_t>(n)) != path) return;
    ++waiting;
    changed.notify_all();
    changed.wait(lock, [this] { return !closed; });
    --waiting;
  }
};

SyncGate sync_gate;

} // namespace

extern "C" int fdatasync(int fd) {
  static auto real = reinterpret_cast<int (*)(int)>(::dlsym(RTLD_NEXT, "fdatasync"));
  sync_gate.pass(fd);
  return real(fd);
}

namespace {

// A stand-in for the event loop: completions the store posts wait here
// until the test runs them, on its own thread; `done` records which ran.
struct Loop {
  std::mutex mutex;
  std::vector<std::function<void()>> posted;
  std::vector<std::string> done;

  store::Database::Post post() {
    return [this](std::function<void()> fn) {
      std::lock_guard lock(mutex);
      posted.push_back(std::move(fn));
    };
  }
  store::Database::Done record(const std::string& name) {
    return [this, name](const Status& status) {
      if (status.ok()) done.push_back(name);
    };
  }
  // Runs what was posted until nothing is in flight (or 10 s pass).
  void runUntilIdle(Store& s) {
    for (int i = 0; i < 2000; ++i) {
      {
        std::lock_guard lock(mutex);
        for (auto& fn : posted) fn();
        posted.clear();
      }
      if (s.idle()) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  }
};

// A group big enough to fill the WAL past its checkpoint size: the writer
// thread checkpoints after it.
store::Batch bigBatch(int64_t granted_ms, const std::string& prefix = "F") {
  store::Batch big;
  for (int i = 0; i < 1500; ++i) {
    lease::Lease l = makeLease(prefix + std::to_string(i), granted_ms, "b1");
    l.holder.url = std::string(3000, 'u');
    big.leases.push_back(l);
  }
  return big;
}

} // namespace

TEST_CASE("store keeps one row per lease across writes and reopening") {
  test::TempDir dir;
  std::string path = dir.file("hwfarm.db");
  {
    Store s(path, {false});
    REQUIRE(s.loadLeases(0).empty());
    s.commitNow(batchOf(makeLease("L1", 1000, "b0")));
    s.commitNow(batchOf(makeLease("L2", 2000, "b1")));
  }
  {
    Store s(path, {false});
    auto leases = s.loadLeases(0);
    REQUIRE(leases.size() == 2);
    CHECK(leases[0].id == "L1"); // grant order
    CHECK(leases[1].id == "L2");
    CHECK(leases[0].holder.url == "http://jenkins/job/7");
    CHECK(leases[0].selector.labels == std::vector<std::string>{"a", "b"});
    CHECK(leases[0].idempotency_key == "key-L1");
    // Renewed after the restart: the same row, not a second one.
    lease::Lease renewed = leases[0];
    renewed.expires_ms = 99000;
    store::Batch b;
    b.leases.push_back(renewed);
    s.commitNow(b);
    // Released: still that row.
    renewed.state = lease::LeaseState::released;
    renewed.ended_ms = 5000;
    renewed.end_reason = "released";
    b.leases = {renewed};
    s.commitNow(b);
  }
  CHECK(count(path, "SELECT count(*) FROM leases") == 2);
  CHECK(count(path, "SELECT count(*) FROM leases WHERE id = 'L1'") == 1);
  CHECK(count(path, "SELECT expires_ms FROM leases WHERE id = 'L1'") == 99000);
  CHECK(count(path, "SELECT count(*) FROM events") == 2);
  Store s(path, {false});
  auto leases = s.loadLeases(0);
  REQUIRE(leases.size() == 2);
  CHECK(leases[0].state == lease::LeaseState::released);
  CHECK(leases[0].ended_ms == 5000);
  // Ended before the cut-off: not loaded; the active one always is.
  CHECK(s.loadLeases(6000).size() == 1);
}

TEST_CASE("store migrates a schema 1 database and keeps its leases") {
  test::TempDir dir;
  std::string path = dir.file("hwfarm.db");
  const char* v1 = R"sql(
    CREATE TABLE meta(key TEXT PRIMARY KEY, value TEXT NOT NULL);
    INSERT INTO meta VALUES('schema_version', '1');
    CREATE TABLE boards(name TEXT PRIMARY KEY, state TEXT NOT NULL, since_ms INTEGER NOT NULL,
                        reason TEXT NOT NULL DEFAULT '');
    INSERT INTO boards VALUES('b9', 'maintenance', 5, 'bad cable');
    CREATE TABLE leases(id TEXT PRIMARY KEY, state TEXT NOT NULL, principal TEXT NOT NULL, job TEXT NOT NULL,
      build TEXT NOT NULL, stage TEXT NOT NULL, url TEXT NOT NULL, context TEXT NOT NULL, sel_type TEXT NOT NULL,
      sel_labels TEXT NOT NULL, sel_worker TEXT NOT NULL, priority INTEGER NOT NULL,
      idempotency_key TEXT NOT NULL, ttl_ms INTEGER NOT NULL, granted_ms INTEGER NOT NULL,
      expires_ms INTEGER NOT NULL, ended_ms INTEGER NOT NULL, end_reason TEXT NOT NULL,
      waited_ms INTEGER NOT NULL, boards TEXT NOT NULL) WITHOUT ROWID;
    INSERT INTO leases VALUES('zz', 'active', 'ci', 'j', '1', 's', 'u', 'pr', 'nucleo', '', '', 0, '', 60000,
                              100, 60100, 0, '', 0, 'b0:0');
    INSERT INTO leases VALUES('aa', 'released', 'ci', 'j', '2', 's', 'u', 'nightly', 'nucleo', 'x,y', 'w0', 0,
                              'k', 60000, 200, 60200, 300, 'released', 4, 'b1:0,b2:250');
    CREATE TABLE events(id INTEGER PRIMARY KEY, at_ms INTEGER NOT NULL, kind TEXT NOT NULL,
                        lease_id TEXT NOT NULL, board TEXT NOT NULL, detail TEXT NOT NULL);
  )sql";
  exec(path, v1);

  {
    Store s(path, {true});
    auto leases = s.loadLeases(0);
    REQUIRE(leases.size() == 2);
    CHECK(leases[0].id == "zz"); // grant order, not id order
    CHECK(leases[1].id == "aa");
    CHECK(leases[1].selector.labels == std::vector<std::string>{"x", "y"});
    REQUIRE(leases[1].boards.size() == 2);
    CHECK(leases[1].boards[1].lost);
    CHECK(leases[1].boards[1].lost_ms == 250);
    auto boards = s.loadBoards();
    REQUIRE(boards.size() == 1);
    CHECK(boards[0].reason == "bad cable");
    // The migrated active lease is written again in place.
    lease::Lease released = leases[0];
    released.state = lease::LeaseState::released;
    released.ended_ms = 400;
    store::Batch b;
    b.leases.push_back(released);
    s.commitNow(b);
    // A new lease gets a row after the migrated ones.
    s.commitNow(batchOf(makeLease("new", 500, "b3")));
  }
  CHECK(count(path, "SELECT value FROM meta WHERE key = 'schema_version'") == 3);
  CHECK(count(path, "SELECT count(*) FROM leases") == 3);
  CHECK(count(path, "SELECT count(*) FROM leases WHERE id = 'zz' AND state = 'released'") == 1);
  CHECK(count(path, "SELECT seq FROM leases WHERE id = 'new'") == 3);
}

TEST_CASE("store refuses a database from a newer schema and says which") {
  test::TempDir dir;
  std::string path = dir.file("hwfarm.db");
  { Store s(path, {false}); }
  exec(path, "UPDATE meta SET value = '7' WHERE key = 'schema_version'");
  try {
    Store s(path, {false});
    FAIL("opened a schema 7 database");
  } catch (const std::runtime_error& e) {
    std::string what = e.what();
    CHECK(what.find(path) != std::string::npos);
    CHECK(what.find("schema version 7") != std::string::npos);
  }
}

TEST_CASE("store writer commits queued batches in order and completes each") {
  test::TempDir dir;
  std::string path = dir.file("hwfarm.db");
  // The test thread is the event loop: it runs what the store posts, and
  // notes which threads posted it.
  std::mutex mutex;
  std::condition_variable posted_cv;
  std::vector<std::function<void()>> posted;
  std::set<std::thread::id> posters;
  std::vector<std::string> completed;
  int failures = 0;
  auto record = [&](const std::string& id) {
    return [&, id](const Status& status) {
      if (!status.ok() || !status.message().empty()) ++failures;
      completed.push_back(id);
    };
  };
  size_t completed_in_place = 0;
  {
    Store s(path, {false});
    s.start([&](std::function<void()> fn) {
      std::lock_guard lock(mutex); // on a store thread: no Catch2 macros here
      posters.insert(std::this_thread::get_id());
      posted.push_back(std::move(fn));
      posted_cv.notify_all();
    });
    // Given a completion that commits 200 batches while its own batch is
    // still in flight (committed in place, they would complete before it:
    // out of order), those 200 are queued for the writer thread,
    s.commit(batchOf(makeLease("L0", 1000, "b0")), [&](const Status& status) {
      record("L0")(status);
      for (int i = 1; i <= 200; ++i) {
        std::string id = "L" + std::to_string(i);
        s.commit(batchOf(makeLease(id, 1000 + i, "b" + std::to_string(i % 4))), record(id));
      }
    });
    completed_in_place = completed.size();
    // and the writer commits them and posts their completions.
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    std::unique_lock lock(mutex);
    while (completed.size() < 201 && std::chrono::steady_clock::now() < deadline) {
      posted_cv.wait_until(lock, deadline, [&] { return !posted.empty(); });
      auto run = std::move(posted);
      posted.clear();
      lock.unlock();
      for (auto& fn : run) fn();
      lock.lock();
    }
  }
  // Only L0 completed before commit() returned: the 200 were not committed in place.
  CHECK(completed_in_place == 1);
  REQUIRE(completed.size() == 201);
  CHECK(failures == 0);
  for (int i = 0; i <= 200; ++i) CHECK(completed[static_cast<size_t>(i)] == "L" + std::to_string(i));
  // Their completions were posted by one thread that is not the loop: the writer.
  REQUIRE(posters.size() == 1);
  CHECK(*posters.begin() != std::this_thread::get_id());
  CHECK(count(path, "SELECT count(*) FROM leases") == 201);
  CHECK(count(path, "SELECT count(DISTINCT seq) FROM leases") == 201);
}

TEST_CASE("without fsync an idle store commits in place and a queued group keeps later ones behind it") {
  test::TempDir dir;
  std::string path = dir.file("hwfarm.db");
  Loop loop;
  auto& done = loop.done;
  int rows = 0;
  {
    Store s(path, {false});
    s.start(loop.post());
    // Idle: committed here, completed before commit() returns.
    s.commit(batchOf(makeLease("A", 1, "b0")), loop.record("A"));
    ++rows;
    REQUIRE(done == std::vector<std::string>{"A"});
    REQUIRE(s.idle());

    // After a group that makes the writer checkpoint (held here at its sync
    // of the database file), the next group goes to the writer,
    sync_gate.close(path);
    s.commit(bigBatch(2), loop.record("big"));
    rows += 1500;
    bool big_in_place = done.back() == "big";
    bool held = sync_gate.awaitHeld();
    s.commit(batchOf(makeLease("B", 3, "b2")), loop.record("B"));
    rows += 1;
    bool b_queued = done.back() == "big";
    sync_gate.open(); // before any REQUIRE: the store's destructor waits for its writer
    REQUIRE(big_in_place);
    REQUIRE(held);
    REQUIRE(b_queued);
    // and once it committed B and posted B's completion, the checkpoint is
    // over, but C, committed while B's completion has not run, queues
    // behind it instead of overtaking it.
    bool posted = false;
    for (int i = 0; i < 2000 && !posted; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
      std::lock_guard lock(loop.mutex);
      posted = !loop.posted.empty();
    }
    REQUIRE(posted);
    s.commit(batchOf(makeLease("C", 4, "b3")), loop.record("C"));
    rows += 1;
    REQUIRE(done.back() == "big");
    REQUIRE_FALSE(s.idle());
    loop.runUntilIdle(s);
    REQUIRE(s.idle());
    REQUIRE(std::vector<std::string>(done.end() - 3, done.end()) == std::vector<std::string>{"big", "B", "C"});
    s.commit(batchOf(makeLease("D", 5, "b0")), loop.record("D"));
    ++rows;
    loop.runUntilIdle(s); // in place, or behind a checkpoint still running
    REQUIRE(done.back() == "D");
  }
  REQUIRE(count(path, "SELECT count(*) FROM leases") == rows);
}

TEST_CASE("with fsync a completion waits for a sync of the WAL and completions keep commit order") {
  test::TempDir dir;
  std::string path = dir.file("hwfarm.db");
  Loop loop;
  auto& done = loop.done;
  {
    Store s(path, {true});
    s.start(loop.post());
    // Committed in place, but answered only once a sync covers it: never
    // before commit() returns, and only from the loop.
    s.commit(batchOf(makeLease("A", 1, "b0")), loop.record("A"));
    REQUIRE(done.empty());
    REQUIRE_FALSE(s.idle());
    // An answer with nothing to write waits for A's sync too.
    s.commit(store::Batch{}, loop.record("empty"));
    s.commit(batchOf(makeLease("B", 2, "b1")), loop.record("B"));
    // After a group that makes the writer checkpoint, the next ones go
    // through the writer thread; completions still come in submission order.
    s.commit(bigBatch(3), loop.record("big"));
    s.commit(batchOf(makeLease("C", 4, "b3")), loop.record("C"));
    s.commit(batchOf(makeLease("D", 5, "b0")), loop.record("D"));
    REQUIRE(done.empty());
    loop.runUntilIdle(s);
    REQUIRE(s.idle());
    REQUIRE(done == std::vector<std::string>{"A", "empty", "B", "big", "C", "D"});
    CHECK(s.syncs() >= 1);
    // Nothing pending: an empty answer still goes through the loop.
    s.commit(store::Batch{}, loop.record("after"));
    REQUIRE(done.back() == "D");
    loop.runUntilIdle(s);
    REQUIRE(done.back() == "after");
  }
  REQUIRE(count(path, "SELECT count(*) FROM leases") == 1504);
  REQUIRE(count(path, "SELECT seq FROM leases WHERE id = 'D'") > count(path, "SELECT seq FROM leases WHERE id = 'C'"));
}

TEST_CASE("with fsync one sync covers every commit made while the one before it ran") {
  test::TempDir dir;
  std::string path = dir.file("hwfarm.db");
  Loop loop;
  auto& done = loop.done;
  {
    Store s(path, {true});
    s.start(loop.post());
    // Given the first commit's sync held at the disk,
    sync_gate.close(path + "-wal");
    s.commit(batchOf(makeLease("A", 1, "b0")), loop.record("A"));
    bool held = sync_gate.awaitHeld();
    // when three more commits are made meanwhile,
    s.commit(batchOf(makeLease("B", 2, "b1")), loop.record("B"));
    s.commit(batchOf(makeLease("C", 3, "b2")), loop.record("C"));
    s.commit(batchOf(makeLease("D", 4, "b3")), loop.record("D"));
    bool waited = done.empty();
    sync_gate.open();
    loop.runUntilIdle(s);
    REQUIRE(held);
    REQUIRE(waited); // nothing was answered before a sync
    REQUIRE(done == std::vector<std::string>{"A", "B", "C", "D"});
    // one more sync answers all three: two syncs for four commits.
    CHECK(s.syncs() == 2);
  }
  REQUIRE(count(path, "SELECT count(*) FROM leases") == 4);
}

// Issue 9, item 14: labels were stored comma-joined, so "rev,b" came back
// as "rev" and "b" after a restart.
TEST_CASE("labels containing commas come back whole after reopening") {
  test::TempDir dir;
  std::string path = dir.file("hwfarm.db");
  lease::Lease l = makeLease("L1", 1000, "b0");
  l.selector.labels = {"rev,b", "", "quote\"d", "[x]", "plain"};
  {
    Store s(path, {false});
    s.commitNow(batchOf(l));
  }
  Store s(path, {false});
  auto leases = s.loadLeases(0);
  REQUIRE(leases.size() == 1);
  CHECK(leases[0].selector.labels == std::vector<std::string>{"rev,b", "", "quote\"d", "[x]", "plain"});
}

TEST_CASE("a schema 2 database with comma-joined labels is migrated and stays readable") {
  test::TempDir dir;
  std::string path = dir.file("hwfarm.db");
  { Store s(path, {false}); }
  // Given rows as schema 2 wrote them,
  const char* v2 = R"sql(
    UPDATE meta SET value = '2' WHERE key = 'schema_version';
    INSERT INTO leases(seq, id, state, principal, job, build, stage, url, context, sel_type, sel_labels, sel_worker,
                       priority, idempotency_key, ttl_ms, granted_ms, expires_ms, ended_ms, end_reason, waited_ms,
                       boards)
      VALUES(1, 'a1', 'active', 'ci', 'j', '1', 's', 'u', 'pr', 'nucleo', 'x,y', '', 0, '', 60000, 100, 60100, 0, '',
             0, 'b0:0'),
            (2, 'a2', 'active', 'ci', 'j', '2', 's', 'u', 'pr', 'nucleo', '', '', 0, '', 60000, 200, 60200, 0, '',
             0, 'b1:0');
  )sql";
  exec(path, v2);
  // when a new hwfarmd opens it, the labels read as before,
  {
    Store s(path, {false});
    auto leases = s.loadLeases(0);
    REQUIRE(leases.size() == 2);
    CHECK(leases[0].selector.labels == std::vector<std::string>{"x", "y"});
    CHECK(leases[1].selector.labels.empty());
  }
  // and the database is at schema 3 with JSON arrays.
  CHECK(count(path, "SELECT value FROM meta WHERE key = 'schema_version'") == 3);
  CHECK(count(path, "SELECT count(*) FROM leases WHERE sel_labels = '[\"x\",\"y\"]'") == 1);
  CHECK(count(path, "SELECT count(*) FROM leases WHERE sel_labels = '[]'") == 1);
}

// Issue 9, item 13: "database or disk is full" named no file.
TEST_CASE("start-up reads and writes that fail name the database") {
  test::TempDir dir;
  std::string path = dir.file("hwfarm.db");
  { Store s(path, {false}); }
  exec(path, "DROP TABLE events; CREATE VIEW events AS SELECT 1 AS at_ms");
  Store s(path, {false});
  try {
    s.prune(0);
    FAIL("pruned a view");
  } catch (const std::runtime_error& e) {
    std::string what = e.what();
    CHECK(what.rfind("database " + path + ": ", 0) == 0);
    CHECK(what.find("cannot modify events because it is a view") != std::string::npos);
  }
  lease::Lease l = makeLease("L1", 1000, "b0");
  try {
    s.commitNow(batchOf(l));
    FAIL("wrote an event into a view");
  } catch (const std::runtime_error& e) {
    CHECK(std::string(e.what()).rfind("database " + path + ": ", 0) == 0);
  }
}

// Issue 9, item 8: strings were read back with sqlite3_column_text and cut at
// the first NUL ("retry\0-7" came back as "retry" and the retry got a second
// lease). Every string field keeps every byte.
TEST_CASE("every string survives reopening with all its bytes") {
  test::TempDir dir;
  std::string path = dir.file("hwfarm.db");
  const std::string nul("\0", 1);
  lease::Lease l = makeLease("L" + nul + "1", 1000, "b0");
  l.idempotency_key = "retry" + nul + "-7 \xc3\xa9\xe2\x9c\x93" + std::string(100, 'k');
  l.holder = {"ci" + nul, "job" + nul + "x", "7" + nul, "st" + nul + "age", "http://j/" + nul + "7"};
  l.selector.type = "nu" + nul + "cleo";
  l.selector.worker = "w" + nul + "0";
  l.end_reason = "why" + nul + "not";
  {
    Store s(path, {false});
    store::Batch b;
    b.leases.push_back(l);
    s.commitNow(b);
  }
  Store s(path, {false});
  auto leases = s.loadLeases(0);
  REQUIRE(leases.size() == 1);
  const lease::Lease& back = leases[0];
  CHECK(back.id == l.id);
  CHECK(back.idempotency_key == l.idempotency_key);
  CHECK(back.holder.principal == l.holder.principal);
  CHECK(back.holder.job == l.holder.job);
  CHECK(back.holder.build == l.holder.build);
  CHECK(back.holder.stage == l.holder.stage);
  CHECK(back.holder.url == l.holder.url);
  CHECK(back.selector.type == l.selector.type);
  CHECK(back.selector.worker == l.selector.worker);
  CHECK(back.end_reason == l.end_reason);
}

// A second set of tables, as runs, events and uploads will be: its own
// table and schema version in the same database, its writes committed in
// the same group as the lease tables' ones.
struct NoteTables final : store::Tables {
  int finished_ok = 0, finished_failed = 0;
  void create(sqlite3* db) override {
    store::exec(db, "CREATE TABLE IF NOT EXISTS notes(text TEXT NOT NULL CHECK (text != 'bad'))");
    if (!store::Database::schemaVersion(db, "notes_schema_version"))
      store::Database::setSchemaVersion(db, "notes_schema_version", 1);
  }
  void finished(bool committed) override { ++(committed ? finished_ok : finished_failed); }
  store::Database::Write note(std::string text) {
    return [text = std::move(text)](sqlite3* db) {
      store::Statement s(db, "INSERT INTO notes(text) VALUES(?1)");
      s.bind(1, text).run();
      return true;
    };
  }
};

TEST_CASE("another set of tables shares the database, its group commits and its rollbacks") {
  test::TempDir dir;
  std::string path = dir.file("hwfarm.db");
  Loop loop;
  std::vector<std::string> errors;
  auto failure = [&](const std::string& name) {
    return [&, name](const Status& status) {
      if (!status.ok()) errors.push_back(name + ": " + status.toString());
    };
  };
  {
    Store s(path, {false});
    NoteTables notes;
    s.db.add(notes);
    s.start(loop.post());
    // One group: a lease and a note commit together,
    std::vector<store::Database::Pending> group;
    group.push_back(s.tables.pending(batchOf(makeLease("A", 1, "b0")), loop.record("A")));
    group.push_back({notes.note("first"), loop.record("first")});
    s.db.commit(std::move(group));
    loop.runUntilIdle(s);
    CHECK(loop.done == std::vector<std::string>{"A", "first"});
    CHECK(notes.finished_ok == 1);
    // and a note that fails its CHECK rolls the lease in its group back:
    // both completions get the error, as an infrastructure failure.
    group.clear();
    group.push_back(s.tables.pending(batchOf(makeLease("B", 2, "b1")), failure("B")));
    group.push_back({notes.note("bad"), failure("bad")});
    s.db.commit(std::move(group));
    loop.runUntilIdle(s);
    REQUIRE(errors.size() == 2);
    CHECK(errors[0].rfind("B: io_error (infrastructure): ", 0) == 0);
    CHECK(errors[0].find("CHECK constraint failed") != std::string::npos);
    CHECK(notes.finished_failed == 1);
    // The lease tables forgot B's row: written again, it is a new lease row.
    s.commit(batchOf(makeLease("B", 3, "b1")), loop.record("B again"));
    loop.runUntilIdle(s);
    CHECK(loop.done.back() == "B again");
  }
  CHECK(count(path, "SELECT count(*) FROM notes") == 1);
  CHECK(count(path, "SELECT count(*) FROM leases") == 2);
  CHECK(count(path, "SELECT granted_ms FROM leases WHERE id = 'B'") == 3);
  CHECK(count(path, "SELECT value FROM meta WHERE key = 'notes_schema_version'") == 1);
  CHECK(count(path, "SELECT value FROM meta WHERE key = 'schema_version'") == store::LeaseTables::kSchemaVersion);
}
