// The board route handlers called directly (no socket) over a real
// LeaseService and BoardService on a temp state dir: the board list,
// maintenance and resume, and the checks in front of a lease's flash, power
// and console. board_api_test drives leased boards end to end (QEMU, the
// console stream over a socket, hwfarmctl).
#include <catch2/catch.hpp>

#include <boost/json.hpp>
#include <filesystem>

#include "config/tokens.h"
#include "tests/support/daemon_harness.h"
#include "tests/support/in_process.h"

using namespace hwfarm;
using namespace hwfarm::test;
namespace json = boost::json;
using api::Handlers;

namespace {

std::string boardState(const InProcess& d, const std::string& name) {
  return lease::toString(d.leases->scheduler().board(name)->state);
}

std::shared_ptr<Recorded> boardAction(InProcess& d, const std::string& board, const std::string& action,
                                      const std::string& body = "") {
  return d.call(&Handlers::boardAction, httpRequest("POST", "/v1/boards/" + board + "/" + action, body),
                callers::operator_, board, action);
}

// A lease of `count` boards for `who`: its id and the first board's name.
std::pair<std::string, std::string> leaseOf(InProcess& d, const Principal& who, int count = 1) {
  auto r = d.call(&Handlers::acquire,
                  httpRequest("POST", "/v1/leases",
                              R"({"selector":{"type":"mps2-an385"},"context":"manual","count":)" +
                                  std::to_string(count) + "}"),
                  who);
  if (r->status() != 201) throw std::runtime_error("no lease: " + r->body());
  auto body = r->json();
  return {std::string(body.at("id").as_string()), std::string(body.at("boards").at(0).at("name").as_string())};
}

// POST /v1/leases/{id}/boards/{board}/{what} (flash or power) by `who`.
std::shared_ptr<Recorded> operate(InProcess& d, const std::string& id, const std::string& board,
                                  const std::string& what, const std::string& body,
                                  const Principal& who = callers::pipeline) {
  return d.call(&Handlers::boardOperation,
                httpRequest("POST", "/v1/leases/" + id + "/boards/" + board + "/" + what, body), who, id, board,
                what);
}

// The sending end of a streamed answer, recording what it is sent; its
// client never falls behind.
struct RecordedStream : api::StreamSink {
  std::string text;
  bool ended = false;
  bool write(std::string data) override {
    text += data;
    return true;
  }
  void end() override { ended = true; }
  void onGone(std::function<void()>) override {}
  size_t queued() const override { return 0; }
  void onDrained(std::function<void()> on_drained) override { on_drained(); }
};

} // namespace

TEST_CASE("the board list shows every configured board with its state, and all=1 the unclaimed devices") {
  TempDir dir;
  InProcess d(simulatedFleet(dir, 2));
  auto [id, leased] = leaseOf(d, callers::pipeline);
  d.state.usb_discovery = true;
  d.state.unclaimed.push_back({"1209", "0001", "SN-9", "1-2", "/dev/ttyACM0", "[[worker.board]] ..."});
  auto r = d.call(&Handlers::boards, httpRequest("GET", "/v1/boards"), callers::viewer);
  REQUIRE(r->status() == 200);
  auto body = r->json().as_object();
  REQUIRE(body.size() == 1); // no unclaimed devices without all=1
  const auto& boards = body.at("boards").as_array();
  REQUIRE(boards.size() == 2);
  for (const auto& b : boards) {
    INFO(json::serialize(b));
    REQUIRE(b.at("worker").as_string() == "w0");
    REQUIRE(b.at("type").as_string() == "mps2-an385");
    REQUIRE(b.at("driver").as_string() == "qemu");
    bool mine = b.at("name").as_string() == leased;
    REQUIRE(b.at("state").as_string() == (mine ? "leased" : "available"));
    REQUIRE(b.at("lease") == (mine ? json::value(id) : json::value(nullptr)));
  }
  auto all = d.call(&Handlers::boards, httpRequest("GET", "/v1/boards?all=1"), callers::viewer)->json();
  REQUIRE(all.at("boards") == json::value(boards));
  REQUIRE(all.at("usb_discovery").as_bool());
  REQUIRE(all.at("unclaimed") == json::parse(R"([{"vendor":"1209","product":"0001","serial":"SN-9","port":"1-2",)"
                                             R"("tty":"/dev/ttyACM0","snippet":"[[worker.board]] ..."}])"));
}

TEST_CASE("operators put unleased boards into maintenance and resume them") {
  TempDir dir;
  InProcess d(simulatedFleet(dir, 2));
  auto r = boardAction(d, "sim-1", "maintenance", R"({"reason":"probe swap"})");
  REQUIRE(r->status() == 200);
  REQUIRE(r->json() == json::parse(R"x({"name":"sim-1","state":"maintenance","reason":"probe swap (operator)"})x"));
  REQUIRE(boardState(d, "sim-1") == "maintenance");
  // A board in maintenance is not granted: two boards are not to be had.
  auto two =
      d.call(&Handlers::acquire,
             httpRequest("POST", "/v1/leases", R"({"selector":{"type":"mps2-an385"},"count":2,"context":"manual"})"),
             callers::pipeline);
  REQUIRE(two->status() == 408);
  // A leased board cannot go into maintenance; an unknown one is 404.
  auto [id, leased] = leaseOf(d, callers::pipeline);
  REQUIRE(leased == "sim-0");
  auto busy = boardAction(d, "sim-0", "maintenance");
  REQUIRE(busy->status() == 409);
  REQUIRE(busy->json().at("error").as_string() == "conflict");
  REQUIRE_THAT(std::string(busy->json().at("detail").as_string()), Catch::StartsWith("board sim-0 is leased"));
  REQUIRE(boardState(d, "sim-0") == "leased");
  auto unknown = boardAction(d, "sim-9", "maintenance");
  REQUIRE(unknown->status() == 404);
  REQUIRE(unknown->json() == json::parse(R"({"error":"not_found","detail":"no board sim-9"})"));
  // Resumed, it is available again (recovery_s = 0).
  REQUIRE(boardAction(d, "sim-1", "resume")->status() == 200);
  REQUIRE(boardState(d, "sim-1") == "available");
  // Without a reason the operator is named; the maintenance is durable.
  auto plain = boardAction(d, "sim-1", "maintenance");
  REQUIRE(plain->json().at("reason").as_string() == "maintenance by operator");
  d.restart();
  REQUIRE(boardState(d, "sim-1") == "maintenance");
  REQUIRE(d.leases->scheduler().board("sim-1")->reason == "maintenance by operator");
}

TEST_CASE("a bad maintenance body is 400 naming the field and changes nothing") {
  TempDir dir;
  InProcess d(simulatedFleet(dir, 1));
  struct Case {
    std::string body, detail;
  };
  std::vector<Case> cases{
      // Issue 9, item 8: control characters in identifiers and reasons.
      {R"({"reason":"a\nb"})", "reason: contains the control character U+000A"},
      {"{", "malformed JSON: "},
      {R"({"reason":5})", "reason: expected a string"},
      {R"({"why":"x"})", "why: unknown field"},
  };
  for (const auto& c : cases) {
    INFO(c.body);
    auto r = boardAction(d, "sim-0", "maintenance", c.body);
    REQUIRE(r->status() == 400);
    REQUIRE(r->json().at("error").as_string() == "invalid_request");
    REQUIRE_THAT(std::string(r->json().at("detail").as_string()), Catch::StartsWith(c.detail));
  }
  REQUIRE(boardState(d, "sim-0") == "available");
}

TEST_CASE("board operations check the lease and report driver failures as infrastructure") {
  TempDir dir;
  InProcess d(simulatedFleet(dir, 2));
  auto [id, mine] = leaseOf(d, callers::pipeline);
  std::string other = mine == "sim-0" ? "sim-1" : "sim-0";
  // A server-side path is refused (issue 9 item 3: no agent.image_roots here).
  auto refused = operate(d, id, mine, "flash", R"({"image":"/nonexistent/fw.elf"})");
  REQUIRE(refused->status() == 403);
  REQUIRE(refused->json().at("error").as_string() == "image_path_refused");
  // Powering on a board never flashed is the driver's failure: 502.
  auto off = operate(d, id, mine, "power", R"({"action":"on"})");
  REQUIRE(off->status() == 502);
  REQUIRE(off->json().at("error").as_string() == "infrastructure_failure");
  REQUIRE(off->json().at("board").as_string() == mine);
  REQUIRE(off->json().at("detail").as_string() == "board " + mine + " has no image: flash it first");
  REQUIRE(off->json().at("failure_class").as_string() == "infrastructure");
  REQUIRE_FALSE(off->json().as_object().contains("evidence")); // no tool ran, no console printed
  // A board outside the lease, a bad action or image, an unknown lease.
  auto outside = operate(d, id, other, "power", R"({"action":"on"})");
  REQUIRE(outside->status() == 404);
  REQUIRE(outside->json().at("detail").as_string() == "board " + other + " is not in lease " + id);
  auto toggle = operate(d, id, mine, "power", R"({"action":"toggle"})");
  REQUIRE(toggle->status() == 400);
  REQUIRE(toggle->json().at("detail").as_string() == "expected {\"action\": \"on\" | \"off\" | \"cycle\"}");
  REQUIRE(operate(d, id, mine, "flash", R"({"image":"relative.elf"})")->status() == 400);
  REQUIRE(operate(d, id, mine, "power", "{")->status() == 400);
  auto nope = operate(d, "nope", mine, "flash", R"({"image":"/x"})");
  REQUIRE(nope->status() == 404);
  REQUIRE(nope->json().at("detail").as_string() == "no lease nope");
  // Another pipeline may not operate the lease's boards; an operator may.
  auto foreign = operate(d, id, mine, "power", R"({"action":"on"})", callers::pipeline2);
  REQUIRE(foreign->status() == 403);
  REQUIRE(foreign->json().at("detail").as_string() == "lease " + id + " belongs to \"pipeline\"");
  REQUIRE(operate(d, id, mine, "power", R"({"action":"on"})", callers::operator_)->status() == 502);
  // The console of a board that is off says so in the stream, and ends it.
  auto console =
      d.call(&Handlers::boardOperation, httpRequest("GET", "/v1/leases/" + id + "/boards/" + mine + "/console"),
             callers::pipeline, id, mine, std::string("console"));
  REQUIRE(console->status() == 200);
  REQUIRE(console->response->content_type == "text/plain; charset=utf-8");
  REQUIRE(console->response->stream);
  auto stream = std::make_shared<RecordedStream>();
  console->response->stream(stream);
  REQUIRE(stream->text == "-- hwfarmd: the simulated board is off: power it on first --\n");
  REQUIRE(stream->ended);
  // Once the lease ended its boards are not its to operate.
  auto released = d.call(&Handlers::release, httpRequest("DELETE", "/v1/leases/" + id), callers::pipeline, id);
  REQUIRE(released->status() == 200);
  auto ended = operate(d, id, mine, "power", R"({"action":"on"})");
  REQUIRE(ended->status() == 409);
  REQUIRE(ended->json() == json::parse(R"({"error":"not_active","detail":"lease )" + id + R"( is released"})"));
}

TEST_CASE("an upload to the flash route is planned into the lease's image store only for who may flash it") {
  TempDir dir;
  InProcess d(simulatedFleet(dir, 1, "[limits]\nmax_image_bytes = 1048576\n"));
  auto [id, board] = leaseOf(d, callers::pipeline);
  std::string target = "/v1/leases/" + id + "/boards/" + board + "/flash?name=fw.elf";
  auto plan = [&](const std::string& t, const Principal& who, const std::string& lease_id) {
    api::HttpRequest head = httpRequest("POST", t);
    head.content_type = "application/octet-stream";
    Pending p = d.prepare(head, who);
    auto result = d.handlers->planUpload(p.call, lease_id, board);
    return std::make_pair(result, p.answer);
  };
  // Another pipeline is refused from the head, and no store is made.
  auto [foreign, foreign_answer] = plan(target, callers::pipeline2, id);
  REQUIRE_FALSE(foreign);
  REQUIRE(foreign_answer->status() == 403);
  REQUIRE_FALSE(std::filesystem::exists(d.boards->imageDir(id)));
  // So is a file name of a kind no flasher takes.
  auto [exe, exe_answer] = plan("/v1/leases/" + id + "/boards/" + board + "/flash?name=fw.exe", callers::pipeline, id);
  REQUIRE_FALSE(exe);
  REQUIRE(exe_answer->status() == 400);
  REQUIRE(exe_answer->json().at("error").as_string() == "invalid_request");
  REQUIRE_FALSE(std::filesystem::exists(d.boards->imageDir(id)));
  // The holder's upload goes to the lease's store, up to limits.max_image_bytes.
  auto [ok, ok_answer] = plan(target, callers::pipeline, id);
  REQUIRE(ok);
  REQUIRE(ok_answer->status() == 0);
  REQUIRE(ok->kind == api::BodyPlan::Kind::file);
  REQUIRE(ok->dir == d.boards->imageDir(id));
  REQUIRE(std::filesystem::is_directory(ok->dir));
  REQUIRE(ok->limit == 1048576);
  REQUIRE(ok->limit_name == "limits.max_image_bytes");
}

TEST_CASE("a flashed image is stored in the lease's image store by its SHA-256, uploaded or from an image root") {
  TempDir dir;
  std::string roots = "image_roots = [\"" + dir.file("images") + "\"]\n";
  InProcess d(simulatedFleet(dir, 1, roots));
  auto [id, board] = leaseOf(d, callers::pipeline);
  std::string target = "/v1/leases/" + id + "/boards/" + board + "/flash";
  // Given an upload the server spooled into the lease's store,
  api::HttpRequest head = httpRequest("POST", target + "?name=build%2Ffw.elf");
  head.content_type = "application/octet-stream";
  Pending p = d.prepare(head, callers::pipeline);
  auto plan = d.handlers->planUpload(p.call, id, board);
  REQUIRE(plan);
  const std::string bytes = "not really an ELF";
  std::string sha = config::sha256Hex(bytes);
  std::string spool = dir.write("spooled", bytes);
  std::filesystem::rename(spool, plan->dir + "/spool");
  api::HttpRequest upload = head;
  upload.upload = api::HttpRequest::Upload{plan->dir + "/spool", sha, bytes.size()};
  // the flash answers with the image it stored (named by content) and flashed.
  auto r = d.call(&Handlers::boardOperation, upload, callers::pipeline, id, board, std::string("flash"));
  REQUIRE(r->status() == 200);
  auto body = r->json();
  REQUIRE(body.at("board").as_string() == board);
  REQUIRE(body.at("ok").as_bool());
  std::string stored = d.boards->imageDir(id) + "/" + sha + ".elf";
  REQUIRE(body.at("image") == json::value{{"sha256", sha}, {"bytes", bytes.size()}, {"name", "fw.elf"},
                                          {"stored", stored}});
  REQUIRE(readFile(stored) == bytes);
  // A server-side path under agent.image_roots is copied into the store.
  std::filesystem::create_directories(dir.file("images"));
  dir.write("images/fw.bin", "raw image");
  auto copied = operate(d, id, board, "flash", R"({"image":")" + dir.file("images/fw.bin") + "\"}");
  REQUIRE(copied->status() == 200);
  REQUIRE(copied->json().at("image") == json::value{{"path", dir.file("images/fw.bin")}, {"bytes", 9}});
  REQUIRE(readFile(d.boards->imageDir(id) + "/" + config::sha256Hex("raw image") + ".bin") == "raw image");
  // An image of a kind no flasher takes is refused, and nothing is stored.
  dir.write("images/fw.exe", "x");
  auto exe = operate(d, id, board, "flash", R"({"image":")" + dir.file("images/fw.exe") + "\"}");
  REQUIRE(exe->status() == 400);
  REQUIRE(exe->json().at("error").as_string() == "invalid_image");
  REQUIRE_FALSE(std::filesystem::exists(d.boards->imageDir(id) + "/" + config::sha256Hex("x") + ".exe"));
}
