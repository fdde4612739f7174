// The run routes that stream, called in process over real services (a
// RunService on the in-process BoardService and its QEMU boards): GET
// /v1/runs/{id}/events (its lines, a reader that falls behind, one that
// leaves, the stream limit) and GET /v1/runs/{id}/artifacts.tar (what goes
// in, read back by GNU tar, with a bounded queue). run_events_test drives
// them over a socket with hwfarmd and hwfarmctl.
#include <catch2/catch.hpp>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <boost/json.hpp>

#include "config/tokens.h"
#include "tests/support/in_process.h"

using namespace hwfarm;
using namespace hwfarm::test;
using namespace std::chrono_literals;
namespace json = boost::json;
namespace fs = std::filesystem;

namespace {

// The sending end of a streamed answer, recording what it is sent. While
// `behind` is set its client takes nothing: queued() says so, as the
// server counts bytes not yet sent.
struct HeldStream : api::StreamSink {
  std::string text;
  bool ended = false;
  size_t behind = 0;
  size_t most_behind = 0; // the largest queue seen
  bool counts_writes = false; // what is written waits until catchUp()
  std::function<void()> drained, gone;

  bool write(std::string data) override {
    if (ended) return false;
    text += data;
    if (counts_writes) behind += data.size();
    most_behind = std::max(most_behind, behind);
    return true;
  }
  // As the server does, the drained hook goes with the end (it may hold the
  // writer, which holds this sink).
  void end() override {
    ended = true;
    drained = nullptr;
  }
  void onGone(std::function<void()> hook) override { gone = std::move(hook); }
  size_t queued() const override { return behind; }
  void onDrained(std::function<void()> hook) override { drained = std::move(hook); }
  // The client took everything.
  void catchUp() {
    behind = 0;
    if (drained) {
      auto hook = drained;
      hook();
    }
  }
  std::vector<json::object> lines() const {
    std::vector<json::object> out;
    for (size_t start = 0, nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
      out.push_back(json::parse(text.substr(start, nl - start)).as_object());
    return out;
  }
};

// The services of InProcess plus a RunService, and handlers that serve runs.
struct WithRuns {
  explicit WithRuns(const config::FleetConfig& config)
      : d(config), runs(*d.runs), handlers(*d.handlers) {}

  // A call of `handler` by a viewer; the answer as it stands.
  std::shared_ptr<Recorded> get(void (api::Handlers::*handler)(api::Call&, const std::string&), const std::string& id,
                                const std::string& what) {
    Pending p = d.prepare(httpRequest("GET", "/v1/runs/" + id + "/" + what), callers::viewer);
    (handlers.*handler)(p.call, id);
    return p.answer;
  }
  // GET /v1/runs/{id}/events: the stream started on `sink`.
  void follow(const std::string& id, const std::shared_ptr<HeldStream>& sink) {
    auto answer = get(&api::Handlers::runEvents, id, "events");
    REQUIRE(answer->status() == 200);
    REQUIRE(answer->response->content_type == "application/x-ndjson");
    answer->response->stream(sink);
  }

  // Runs the pass image on the lease's one board and the reference.
  std::string startPassRun() {
    Pending p = d.prepare(httpRequest("POST", "/v1/leases",
                                      R"({"selector":{"type":"mps2-an385"},"context":"manual","count":1})"),
                          callers::pipeline);
    handlers.acquire(p.call);
    d.runUntil(p.answer);
    REQUIRE(p.answer->status() == 201);
    std::string lease_id(p.answer->json().at("id").as_string());
    // The image as POST /v1/leases/{id}/images stores it: by its SHA-256.
    REQUIRE(d.boards->makeImageDir(lease_id).ok());
    std::string bytes = readFile(std::string(HWFARM_FIRMWARE_DIR) + "/hwfarm-pass.elf");
    std::string stored = config::sha256Hex(bytes) + ".elf";
    std::ofstream(d.boards->imageDir(lease_id) + "/" + stored, std::ios::binary) << bytes;
    Pending start = d.prepare(httpRequest("POST", "/v1/leases/" + lease_id + "/runs",
                                          R"({"images":[{"image":")" + stored + R"(","name":"pass.elf"}]})"),
                              callers::pipeline);
    handlers.startRun(start.call, lease_id);
    d.runUntil(start.answer);
    INFO(start.answer->body());
    REQUIRE(start.answer->status() == 201);
    return std::string(start.answer->json().at("id").as_string());
  }
  // Runs the loop until `done` (30 s at most).
  void runUntil(const std::function<bool()>& done) {
    auto until = std::chrono::steady_clock::now() + 30s;
    while (!done() && std::chrono::steady_clock::now() < until) d.io.run_for(5ms);
  }

  InProcess d;
  RunService& runs;
  api::Handlers& handlers;
};

// An ended run's record as hwfarmd left it on disk, with its artifacts.
const char* kRunId = "run-00112233aabbccdd";

std::string writeEndedRun(const TempDir& dir) {
  std::string run = dir.file("state/runs/") + kRunId;
  fs::create_directories(run + "/traces");
  fs::create_directories(run + "/outputs/pass__qemu_ref");
  int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  json::object record{{"id", kRunId}, {"lease_id", "l1"}, {"state", "failed"}, {"created_ms", now - 1000},
                      {"ended_ms", now}, {"failure_class", "test"}, {"reason", "ramp: FAIL"},
                      {"attempts", json::array{}},
                      {"artifacts", json::array{"junit.xml", "traces/pass__sim.txt", "outputs/pass__qemu_ref/ramp.y.npy",
                                                "../escape.txt", "link.txt", "gone.txt", "summary.json"}}};
  std::string text = json::serialize(record);
  std::ofstream(run + "/summary.json") << text;
  std::ofstream(run + "/junit.xml") << "<testsuites/>\n";
  std::string trace;
  for (size_t i = 0; trace.size() < (3u << 20) + 123; ++i) trace += "line " + std::to_string(i) + "\n";
  std::ofstream(run + "/traces/pass__sim.txt") << trace;
  std::ofstream(run + "/outputs/pass__qemu_ref/ramp.y.npy", std::ios::binary) << std::string("\x93NUMPY\x01\0", 8);
  std::ofstream(dir.file("state/runs/escape.txt")) << "not the run's\n";
  std::ofstream(run + "/unlisted.txt") << "not listed\n";
  fs::create_symlink(run + "/junit.xml", run + "/link.txt");
  return text;
}

} // namespace

TEST_CASE("events and artifacts.tar of an unknown run are 404") {
  TempDir dir;
  WithRuns w(simulatedFleet(dir, 1));
  for (auto handler : {&api::Handlers::runEvents, &api::Handlers::runArtifactsTar}) {
    auto answer = w.get(handler, "run-nope", "events");
    w.d.runUntil(answer); // (its row is looked for first)
    CHECK(answer->status() == 404);
    CHECK(answer->json().at("error").as_string() == "not_found");
  }
}

TEST_CASE("the events of an ended run are its record and the end line, and the stream ends") {
  TempDir dir;
  writeEndedRun(dir);
  WithRuns w(simulatedFleet(dir, 1));
  auto sink = std::make_shared<HeldStream>();
  w.follow(kRunId, sink);
  CHECK(sink->ended);
  // The record as GET /v1/runs/{id} serves it (read from its summary.json).
  auto shown = w.get(&api::Handlers::showRun, kRunId, "");
  REQUIRE(shown->status() == 200);
  CHECK(shown->json().at("reason") == "ramp: FAIL");
  CHECK(sink->text == "{\"event\":\"run\",\"run\":" + shown->body() + "}\n" +
                          R"({"event":"end","state":"failed","failure_class":"test","reason":"ramp: FAIL"})" + "\n");
}

TEST_CASE("after a restart an ended run is listed, and its record is read from the database when it is asked for") {
  TempDir dir;
  std::string id;
  {
    WithRuns w(simulatedFleet(dir, 1));
    id = w.startPassRun();
    w.runUntil([&] { const run::Record* r = w.runs.find(id); return r && r->state != run::State::running; });
    REQUIRE(w.runs.find(id));
  }
  // Given hwfarmd started again: the run is listed, its record not read,
  WithRuns w(simulatedFleet(dir, 1));
  CHECK(w.runs.known(id));
  CHECK(w.runs.find(id) == nullptr);
  REQUIRE(w.runs.list().size() == 1);
  CHECK(w.runs.list()[0].state == run::State::passed);
  // when a client asks for it, it is read from the database,
  auto shown = w.get(&api::Handlers::showRun, id, "");
  w.d.runUntil(shown);
  REQUIRE(shown->status() == 200);
  CHECK(shown->json().at("state") == "passed");
  CHECK(shown->json().at("attempts").as_array().size() == 2);
  // and kept in memory for the next one.
  REQUIRE(w.runs.find(id));
  CHECK(w.runs.find(id)->toJson() == shown->body());
}

TEST_CASE("a run older than the newest 1,000 listed is served from its row until runs.history_days, then removed") {
  TempDir dir;
  // Given 1,006 ended runs (as an older hwfarmd left them: their
  // summary.json), the oldest 3 ended two days ago, the others an hour ago,
  int64_t now = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto idOf = [](int i) {
    char id[32];
    std::snprintf(id, sizeof id, "run-%016x", i);
    return std::string(id);
  };
  for (int i = 0; i < 1006; ++i) {
    int64_t created = (i < 3 ? now - 2 * 86400000LL : now - 3600000) + i;
    std::string run = dir.file("state/runs/") + idOf(i);
    fs::create_directories(run);
    json::object record{{"id", idOf(i)},           {"lease_id", "l1"}, {"state", "failed"},
                        {"created_ms", created},   {"ended_ms", created + 500},
                        {"reason", "case " + std::to_string(i) + ": FAIL"},
                        {"artifacts", json::array{"junit.xml", "summary.json"}}};
    std::ofstream(run + "/summary.json") << json::serialize(record);
    std::ofstream(run + "/junit.xml") << "<testsuites name=\"" << i << "\"/>\n";
  }
  std::string oldest = idOf(0);
  {
    WithRuns w(simulatedFleet(dir, 1));
    // the newest 1,000 are listed,
    REQUIRE(w.runs.list().size() == 1000);
    CHECK(w.runs.list().back().id == idOf(6));
    CHECK_FALSE(w.runs.known(oldest));
    // and the oldest is still served: its record,
    auto shown = w.get(&api::Handlers::showRun, oldest, "");
    w.d.runUntil(shown);
    REQUIRE(shown->status() == 200);
    CHECK(shown->json().at("reason") == "case 0: FAIL");
    // an artifact,
    auto file = w.d.start(&api::Handlers::runArtifact, httpRequest("GET", "/v1/runs/" + oldest + "/artifacts/junit.xml"),
                          callers::viewer, oldest, std::string("junit.xml"));
    w.d.runUntil(file);
    REQUIRE(file->status() == 200);
    auto file_sink = std::make_shared<HeldStream>();
    file->response->stream(file_sink);
    CHECK(file_sink->ended);
    CHECK(file_sink->text == "<testsuites name=\"0\"/>\n");
    // its events (the record, then the end),
    auto events = w.get(&api::Handlers::runEvents, idOf(1), "events");
    w.d.runUntil(events);
    REQUIRE(events->status() == 200);
    auto sink = std::make_shared<HeldStream>();
    events->response->stream(sink);
    w.runUntil([&] { return sink->ended; });
    REQUIRE(sink->lines().size() == 2);
    CHECK(sink->lines()[0].at("run").at("reason") == "case 1: FAIL");
    CHECK(sink->lines()[1].at("event") == "end");
    // its archive;
    auto tar = w.get(&api::Handlers::runArtifactsTar, idOf(2), "artifacts.tar");
    w.d.runUntil(tar);
    CHECK(tar->status() == 200);
    // a cancel is refused as for any ended run, and an unknown run is 404 everywhere.
    auto cancel = w.d.call(&api::Handlers::cancelRun, httpRequest("DELETE", "/v1/runs/" + oldest), callers::operator_,
                           oldest);
    CHECK(cancel->status() == 409);
    CHECK(cancel->json().at("detail").as_string() == "run " + oldest + " has already ended (failed)");
    std::string nope = "run-ffffffffffffffff";
    for (auto handler : {&api::Handlers::showRun, &api::Handlers::runEvents, &api::Handlers::runArtifactsTar,
                         &api::Handlers::cancelRun}) {
      auto answer = w.get(handler, nope, "x");
      w.d.runUntil(answer);
      CHECK(answer->status() == 404);
      CHECK(answer->json().at("detail").as_string() == "no run " + nope);
    }
    auto no_file = w.d.start(&api::Handlers::runArtifact, httpRequest("GET", "/v1/runs/" + nope + "/artifacts/junit.xml"),
                             callers::viewer, nope, std::string("junit.xml"));
    w.d.runUntil(no_file);
    CHECK(no_file->status() == 404);

    // When runs.history_days becomes 1 and the hourly pruning comes, the
    // three that ended two days ago go, listed or not, with their files.
    w.d.reload(simulatedFleet(dir, 1, "\n[runs]\nhistory_days = 1\n"));
    w.runs.pruneOld();
    // (the folders go one by one off the event loop, in the rows' order)
    auto removed = [&] {
      for (int i = 0; i < 3; ++i)
        if (fs::exists(dir.file("state/runs/") + idOf(i))) return false;
      return true;
    };
    w.runUntil(removed);
    CHECK_FALSE(fs::exists(dir.file("state/runs/") + oldest));
    CHECK_FALSE(fs::exists(dir.file("state/runs/") + idOf(2)));
    CHECK(fs::exists(dir.file("state/runs/") + idOf(3)));
    auto gone = w.get(&api::Handlers::showRun, oldest, "");
    w.d.runUntil(gone);
    CHECK(gone->status() == 404);
    auto kept = w.get(&api::Handlers::showRun, idOf(3), "");
    w.d.runUntil(kept);
    CHECK(kept->status() == 200);
  }
  // A row still running (hwfarmd killed mid-run), older than the newest
  // 1,000 (1,003 are left): the restart finds it too and marks it interrupted.
  std::string running = idOf(3);
  CommandResult set = runCommand(
      {"/usr/bin/python3", "-c",
       "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); "
       "c.execute(\"UPDATE runs SET state='running', ended_ms=0, record=json_set(record,'$.state','running') "
       "WHERE id=?\", (sys.argv[2],)); c.commit()",
       dir.file("state/hwfarm.db"), running});
  REQUIRE(set.status.code == 0);
  WithRuns w(simulatedFleet(dir, 1));
  CHECK(w.runs.list().size() == 1000);
  CHECK_FALSE(w.runs.known(running));
  auto shown = w.get(&api::Handlers::showRun, running, "");
  w.d.runUntil(shown);
  REQUIRE(shown->status() == 200);
  CHECK(shown->json().at("state") == "interrupted");
}

TEST_CASE("artifacts.tar holds the listed plain files of the run under its id, read a piece at a time") {
  TempDir dir;
  writeEndedRun(dir);
  WithRuns w(simulatedFleet(dir, 1));
  auto answer = w.get(&api::Handlers::runArtifactsTar, kRunId, "artifacts.tar");
  REQUIRE(answer->status() == 200);
  CHECK(answer->response->content_type == "application/x-tar");
  auto sink = std::make_shared<HeldStream>();
  sink->counts_writes = true;
  answer->response->stream(sink);
  // The client takes what was queued, each time it has all been sent.
  for (int i = 0; i < 100 && !sink->ended; ++i) sink->catchUp();
  REQUIRE(sink->ended);
  // 1 MiB queued at most, plus the piece that crossed it.
  CHECK(sink->most_behind <= (1u << 20) + (256u << 10) + 512);
  CHECK(sink->most_behind >= (1u << 20)); // the 3 MiB trace did not go in one piece
  std::ofstream(dir.file("a.tar"), std::ios::binary) << sink->text;
  CommandResult listed = runCommand({"/bin/tar", "-tf", dir.file("a.tar")});
  REQUIRE(listed.status.code == 0);
  std::string id = kRunId;
  // Not the symlink, not a path out of the run, not what is gone or unlisted.
  CHECK(listed.out == id + "/junit.xml\n" + id + "/traces/pass__sim.txt\n" + id +
                          "/outputs/pass__qemu_ref/ramp.y.npy\n" + id + "/summary.json\n");
  fs::create_directories(dir.file("x"));
  REQUIRE(runCommand({"/bin/tar", "-xf", dir.file("a.tar"), "-C", dir.file("x")}).status.code == 0);
  for (const char* f : {"junit.xml", "traces/pass__sim.txt", "outputs/pass__qemu_ref/ramp.y.npy", "summary.json"})
    CHECK(readFile(dir.file("x/") + id + "/" + f) == readFile(dir.file("state/runs/") + id + "/" + f));
}

TEST_CASE("a run's events: the record, a line per change, the end, and a reader that falls behind gets the record again") {
  TempDir dir;
  WithRuns w(simulatedFleet(dir, 1));
  std::string id = w.startPassRun();
  auto keeps_up = std::make_shared<HeldStream>();
  auto falls_behind = std::make_shared<HeldStream>();
  auto leaves = std::make_shared<HeldStream>();
  w.follow(id, keeps_up);
  w.follow(id, falls_behind);
  w.follow(id, leaves);
  CHECK(w.runs.watcherCount(id) == 3);
  // Running: its artifacts are not there yet.
  auto early = w.get(&api::Handlers::runArtifactsTar, id, "artifacts.tar");
  CHECK(early->status() == 409);
  CHECK(early->json().at("error").as_string() == "run_running");
  // Given a reader whose client stopped taking bytes, and one that left,
  falls_behind->behind = 1u << 20;
  REQUIRE(leaves->gone);
  leaves->gone();
  CHECK(w.runs.watcherCount(id) == 2);
  w.runUntil([&] { return keeps_up->ended && falls_behind->ended; });
  REQUIRE(keeps_up->ended);
  REQUIRE(falls_behind->ended);
  const run::Record* run = w.runs.find(id);
  REQUIRE(run->state == run::State::passed);
  CHECK(w.runs.watcherCount(id) == 0);

  // The reader that kept up: the record, the changes in order, the end.
  auto lines = keeps_up->lines();
  INFO(keeps_up->text);
  REQUIRE(lines.size() > 4);
  CHECK(lines.front().at("event") == "run");
  CHECK(lines.front().at("run").at("state") == "running");
  CHECK(lines.back() == json::parse(R"({"event":"end","state":"passed"})"));
  // Applied to the first record, the attempt lines give the final attempts.
  json::array attempts = lines.front().at("run").at("attempts").as_array();
  std::map<std::string, std::vector<std::string>> phases; // by target, from the first record on
  for (const auto& a : attempts)
    phases[std::string(a.at("target").as_string())].emplace_back(a.at("phase").as_string());
  for (const auto& l : lines) {
    if (l.at("event") != "attempt") continue;
    size_t index = static_cast<size_t>(l.at("index").as_int64());
    if (index >= attempts.size()) attempts.resize(index + 1);
    attempts[index] = l.at("attempt");
    phases[std::string(l.at("attempt").at("target").as_string())].emplace_back(l.at("attempt").at("phase").as_string());
  }
  json::array final_attempts = json::parse(run->toJson()).at("attempts").as_array();
  REQUIRE(attempts.size() == final_attempts.size());
  for (size_t i = 0; i < attempts.size(); ++i)
    for (const char* key : {"image", "target", "board", "phase", "outcome"})
      CHECK(attempts[i].at(key) == final_attempts[i].at(key));
  // The board's attempt was seen running (in the first record or a change), then done.
  auto& board = phases["mps2_an385"];
  CHECK(std::find(board.begin(), board.end(), "running") < std::find(board.begin(), board.end(), "done"));
  CHECK(board.back() == "done");
  json::object progress;
  for (const auto& l : lines)
    if (l.at("event") == "progress") progress = l;
  CHECK(progress == json::parse(R"({"event":"progress","done":2,"total":2})"));

  // The one that fell behind: no changes, the record as it stood at the end, the end.
  auto behind = falls_behind->lines();
  REQUIRE(behind.size() == 3);
  CHECK(behind[0] == lines[0]);
  CHECK(behind[1].at("event") == "run");
  CHECK(json::serialize(behind[1].at("run")) == run->toJson());
  CHECK(behind[2] == lines.back());
}

TEST_CASE("a reader that catches up gets the record, then the changes, and a run has at most 16 event streams") {
  TempDir dir;
  WithRuns w(simulatedFleet(dir, 1));
  std::string id = w.startPassRun();
  std::vector<std::shared_ptr<HeldStream>> streams;
  for (int i = 0; i < 16; ++i) {
    streams.push_back(std::make_shared<HeldStream>());
    w.follow(id, streams.back());
  }
  auto refused = w.get(&api::Handlers::runEvents, id, "events");
  CHECK(refused->status() == 429);
  CHECK(refused->json().at("error").as_string() == "too_many_streams");
  // One client leaves: another may follow.
  streams.back()->gone();
  streams.pop_back();
  auto late = std::make_shared<HeldStream>();
  w.follow(id, late);
  // A client behind while the run changes, then it catches up.
  auto& slow = streams.front();
  slow->behind = 1u << 20;
  // Until the others saw a change (the slow one skipped it), one handler at
  // a time: the run's end must not come in the same pass.
  auto changed = [&] {
    for (const auto& l : streams[1]->lines())
      if (l.at("event") == "attempt") return true;
    return false;
  };
  for (auto until = std::chrono::steady_clock::now() + 30s; !changed() && std::chrono::steady_clock::now() < until;) {
    if (w.d.io.stopped()) w.d.io.restart();
    w.d.io.run_one_for(5ms);
  }
  REQUIRE(changed());
  REQUIRE_FALSE(slow->ended);
  slow->catchUp();
  w.runUntil([&] { return slow->ended; });
  REQUIRE(slow->ended);
  auto lines = slow->lines();
  INFO(slow->text);
  REQUIRE(lines.size() >= 4);
  CHECK(lines[0].at("event") == "run");
  CHECK(lines[1].at("event") == "run"); // as it stood when the client caught up
  CHECK(lines[1].at("run").at("state") == "running");
  CHECK(lines[2].at("event") == "attempt");
  CHECK(lines.back().at("event") == "end");
  CHECK(late->ended);
}
