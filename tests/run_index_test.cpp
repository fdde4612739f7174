// The dashboard's run index on a real database file (daemon/store/
// run_index_tables.h, daemon/services/run_index.h): pages and filters,
// counts by state, an output's history per board, two runs' digests, and
// the runs start-up finds unindexed or stale.
#include <catch2/catch.hpp>
#include <sqlite3.h>

#include <boost/json.hpp>

#include "daemon/services/run_index.h"
#include "daemon/store/database.h"
#include "daemon/store/run_index_tables.h"
#include "daemon/store/run_tables.h"
#include "daemon/store/sqlite.h"
#include "tests/support/process.h"

using namespace hwfarm;

namespace {

struct Index {
  store::RunTables runs;
  store::RunIndexTables index;
  store::Database db;
  explicit Index(const std::string& path) : db(path, {false}) {
    db.add(runs);
    db.add(index);
  }
  template <typename F>
  auto read(F fn) {
    return db.startup(fn);
  }
};

store::IndexedRun indexed(const std::string& id, int64_t created, const std::string& state, const std::string& failure,
                          const std::string& image, const std::string& type, const std::string& commit,
                          const std::string& job) {
  store::IndexedRun r;
  r.id = id;
  r.lease_id = "lease-" + job;
  r.state = state;
  r.failure_class = failure;
  r.created_ms = created;
  r.ended_ms = created + 100;
  r.commit = commit;
  r.holder_job = job;
  r.images = {image};
  r.board_types = {type};
  r.boards = {type + "-0"};
  r.cases = {{image, "t", "square", state == "failed" ? dashboard::CaseOutcome::fail : dashboard::CaseOutcome::pass, ""}};
  r.outputs = {{image, "t", type + "-0", type, "square.y", state == "failed" ? 0.5 : 0.999, state != "failed"}};
  return r;
}

std::vector<std::string> ids(const store::RunPage& p) {
  std::vector<std::string> out;
  for (const auto& r : p.runs) out.push_back(r.id);
  return out;
}

} // namespace

TEST_CASE("the runs list pages newest first with a cursor, whatever the number of runs") {
  // Given 250 indexed runs
  test::TempDir dir;
  Index x(dir.file("hwfarm.db"));
  x.db.commitNow([](sqlite3* c) {
    for (int i = 0; i < 250; ++i)
      store::RunIndexTables::write(indexed("run-" + std::to_string(1000 + i), 1000 * i, "passed", "", "model", "m3", "c", "j"))(c);
    return true;
  });
  // When the first page of 100 is read, then the next ones
  auto first = x.read([](sqlite3* c) { return store::RunIndexTables::page(c, {}, "", 100); });
  // Then it holds the newest 100 and a cursor
  REQUIRE(first.runs.size() == 100);
  CHECK(first.runs.front().id == "run-1249");
  CHECK(first.runs.back().id == "run-1150");
  REQUIRE_FALSE(first.next.empty());
  auto second = x.read([&](sqlite3* c) { return store::RunIndexTables::page(c, {}, first.next, 100); });
  CHECK(second.runs.front().id == "run-1149");
  auto third = x.read([&](sqlite3* c) { return store::RunIndexTables::page(c, {}, second.next, 100); });
  CHECK(third.runs.size() == 50);
  CHECK(third.next.empty());
  // and a page never exceeds kMaxPage
  auto big = x.read([](sqlite3* c) { return store::RunIndexTables::page(c, {}, "", 100000); });
  CHECK(big.runs.size() == store::RunIndexTables::kMaxPage);
  CHECK(first.counts.at("passed") == 250);
}

TEST_CASE("filters match whole list entries, commit and id prefixes, part of the holder's job") {
  test::TempDir dir;
  Index x(dir.file("hwfarm.db"));
  x.db.commitNow([](sqlite3* c) {
    store::RunIndexTables::write(indexed("run-a", 1, "passed", "", "model", "mps2_an385", "4f3b0c4", "tvm/nightly"))(c);
    store::RunIndexTables::write(indexed("run-b", 2, "failed", "test", "model", "mps2_an385", "77aa", "tvm/PR-12"))(c);
    store::RunIndexTables::write(indexed("run-c", 3, "error", "infrastructure", "model2", "nucleo", "4f3b999", "zephyr/main"))(c);
    return true;
  });
  auto q = [&](store::RunFilter f) {
    return x.read([&](sqlite3* c) { return store::RunIndexTables::page(c, f, "", 50); });
  };
  CHECK(ids(q({.state = "error"})) == std::vector<std::string>{"run-c"});
  CHECK(ids(q({.failure_class = "test"})) == std::vector<std::string>{"run-b"});
  CHECK(ids(q({.board_type = "nucleo"})) == std::vector<std::string>{"run-c"});
  CHECK(ids(q({.board_type = "mps2"})).empty()); // a whole entry, not a part
  CHECK(ids(q({.image = "model"})) == std::vector<std::string>{"run-b", "run-a"});
  CHECK(ids(q({.commit = "4f3b"})) == std::vector<std::string>{"run-c", "run-a"});
  CHECK(ids(q({.holder = "tvm/"})) == std::vector<std::string>{"run-b", "run-a"});
  CHECK(ids(q({.lease = "lease-zephyr/main"})) == std::vector<std::string>{"run-c"});
  CHECK(ids(q({.prefix = "run-b"})) == std::vector<std::string>{"run-b"});
  // The counts leave the state filter out (so each state's count shows), and keep the others.
  auto counted = q({.state = "passed", .image = "model"});
  CHECK(counted.counts == std::map<std::string, int64_t>{{"failed", 1}, {"passed", 1}});
  // A run indexed again replaces its rows.
  x.db.commitNow(store::RunIndexTables::write(indexed("run-a", 1, "failed", "test", "model", "mps2_an385", "4f3b0c4", "tvm/nightly")));
  CHECK(ids(q({.state = "passed"})).empty());
  auto d = x.read([](sqlite3* c) { return store::RunIndexTables::digest(c, "run-a"); });
  REQUIRE(d);
  CHECK(d->cases.size() == 1);
  CHECK(d->outputs.size() == 1);
}

TEST_CASE("an output's history keeps the newest N runs of each board") {
  test::TempDir dir;
  Index x(dir.file("hwfarm.db"));
  x.db.commitNow([](sqlite3* c) {
    for (int i = 0; i < 10; ++i) {
      store::RunIndexTables::write(indexed("run-m" + std::to_string(i), i, "passed", "", "model", "m3", "c" + std::to_string(i), "j"))(c);
      store::RunIndexTables::write(indexed("run-n" + std::to_string(i), i, "passed", "", "model", "m4", "c" + std::to_string(i), "j"))(c);
    }
    return true;
  });
  auto rows = x.read([](sqlite3* c) { return store::RunIndexTables::history(c, "model", "square.y", "", 4); });
  CHECK(rows.size() == 8);
  auto m3 = x.read([](sqlite3* c) { return store::RunIndexTables::history(c, "model", "square.y", "m3", 4); });
  REQUIRE(m3.size() == 4);
  auto series = dashboard::buildHistory(m3, 4, {});
  REQUIRE(series.size() == 1);
  CHECK(series[0].points.front().run == "run-m6");
  CHECK(series[0].points.back().run == "run-m9");
  CHECK(*series[0].points.back().value == Approx(0.999));
  CHECK(x.read([](sqlite3* c) { return store::RunIndexTables::history(c, "model", "other.y", "", 4); }).empty());
  CHECK_FALSE(x.read([](sqlite3* c) { return store::RunIndexTables::digest(c, "run-none"); }));
}

TEST_CASE("a record's index rows: its targets' cases and outputs, the holder and board types looked up") {
  // Given a record with a reference attempt, a retried attempt and its retry
  std::string record = R"({"id": "run-1", "lease_id": "L", "state": "failed", "created_ms": 5, "ended_ms": 9,
    "suite": "nightly", "commit": "abc", "failure_class": "test", "reason": "square: ...",
    "images": [{"name": "model", "file": "model.elf"}],
    "targets": [{"board": "sim-0", "name": "mps2_an385"}, {"board": "sim-1", "name": "mps2_an385", "replaces": "sim-0"}],
    "attempts": [
      {"image": "model", "target": "qemu_ref", "board": "qemu", "reference": true, "cases": [{"name": "square", "outcome": "pass"}]},
      {"image": "model", "target": "mps2_an385", "board": "sim-0", "retried": true, "outcome": "error", "cases": []},
      {"image": "model", "target": "mps2_an385", "board": "sim-1", "retry_of_board": "sim-0", "outcome": "fail",
       "cases": [{"name": "square", "outcome": "fail", "message": "low",
                  "outputs": [{"key": "square.y", "verdict": "fail", "actual_pcc": 0.5}, {"key": "e.y", "verdict": "fail", "actual_pcc": null}]}]}]})";
  RunIndex::Lookups lookups{[](const std::string&) { return std::optional<lease::Holder>({"p", "tvm/nightly", "7", "hil", "https://ci"}); },
                            [](const std::string& board) { return board == "sim-1" ? "mps2-an385" : "mps2-an385"; }};
  // When it is read as a record and described
  Result<run::Record> read = run::Record::fromJson(record);
  REQUIRE(read);
  const store::IndexedRun rows = RunIndex::describe(*read, lookups);
  const store::IndexedRun* r = &rows;
  // Then only the retry's case and outputs count, with the board's type
  CHECK(r->holder_job == "tvm/nightly");
  CHECK(r->images == std::vector<std::string>{"model"});
  CHECK(r->boards == std::vector<std::string>{"sim-0", "sim-1"});
  CHECK(r->board_types == std::vector<std::string>{"mps2-an385"});
  REQUIRE(r->cases.size() == 1);
  CHECK(r->cases[0].outcome == dashboard::CaseOutcome::fail);
  REQUIRE(r->outputs.size() == 2);
  CHECK(r->outputs[0].board == "sim-1");
  CHECK(r->outputs[0].board_type == "mps2-an385");
  CHECK(*r->outputs[0].actual_pcc == 0.5);
  CHECK_FALSE(r->outputs[1].actual_pcc);
  // and text that is no record is never indexed
  CHECK_FALSE(run::Record::fromJson("{\"not\": \"a record\"}"));
  CHECK_FALSE(run::Record::fromJson("not json"));
}

TEST_CASE("start-up finds the runs without index rows and those whose state changed") {
  test::TempDir dir;
  Index x(dir.file("hwfarm.db"));
  auto stored = [](const std::string& id, const std::string& state) {
    return store::StoredRun{id, "L", state, 1, 2, R"({"id": ")" + id + R"(", "state": ")" + state + R"("})"};
  };
  x.runs.storeNow(x.db, {stored("run-new", "passed"), stored("run-same", "passed"), stored("run-stale", "interrupted")});
  x.db.commitNow(store::RunIndexTables::write(indexed("run-same", 1, "passed", "", "m", "t", "c", "j")));
  x.db.commitNow(store::RunIndexTables::write(indexed("run-stale", 1, "running", "", "m", "t", "c", "j")));
  auto records = x.read([](sqlite3* c) { return store::RunIndexTables::unindexedRecords(c); });
  REQUIRE(records.size() == 2);
  CHECK(records[0].find("run-new") != std::string::npos);
  CHECK(records[1].find("run-stale") != std::string::npos);
}
