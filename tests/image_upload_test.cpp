// Issue 9 item 3 through a real hwfarmd: `hwfarmctl flash` uploads the image,
// which is stored by content in the lease's directory and removed with the
// lease; a server-side path is allowed only under agent.image_roots.
// The board is the pty fake board with a command flasher that copies what it
// is given, so the bytes the tool saw can be compared with the upload.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <boost/json.hpp>
#include <filesystem>
#include <regex>
#include <thread>

#include "config/tokens.h"
#include "tests/support/daemon_harness.h"
#include "tests/support/wait.h"

using namespace hwfarm::test;
namespace json = boost::json;
namespace fs = std::filesystem;
using namespace std::chrono_literals;

namespace {

// A fake USB board whose flasher copies the image to <dir>/flashed.bin and
// writes the path it was given to <dir>/flashed.path.
std::string fleet(const TempDir& dir, const std::string& agent_extra = "") {
  return qemuFleet(dir.file("state"), 0, agent_extra + "[leases]\nrecovery_s = 0\n") +
         "  [[worker.board]]\n  name = \"fake-1\"\n  type = \"fake\"\n"
         "  usb = { vendor = \"1209\", product = \"0001\", serial = \"FAKE0001\" }\n"
         "  serial = { port = \"" + dir.file("ttyFAKE0") + "\" }\n"
         "  flash = { driver = \"command\", argv = [\"/bin/sh\", \"-c\", \"cp \\\"$1\\\" " + dir.file("flashed.bin") +
         " && printf %s \\\"$1\\\" > " + dir.file("flashed.path") + "\", \"sh\", \"{image}\"], timeout_s = 5 }\n"
         "  power = { driver = \"none\" }\n";
}

Process plugIn(const TempDir& dir) {
  return Process({FAKE_BOARD_PATH, "serve", "--link", dir.file("ttyFAKE0"), "--control", dir.file("fake.sock")},
                 dir.file("board.out"), dir.file("board.err"));
}

std::string leaseTheBoard(const RunningDaemon& d, const std::string& token = "") {
  for (int i = 0; i < 300; ++i) {
    auto boards = json::parse(d.get("/v1/boards", token).body);
    if (boards.at("boards").at(0).at("state").as_string() == "available") break;
    std::this_thread::sleep_for(10ms);
  }
  auto granted = d.request("POST", "/v1/leases", R"({"selector":{"type":"fake"},"context":"manual"})", token);
  INFO(granted.body);
  REQUIRE(granted.status == 201);
  return std::string(json::parse(granted.body).at("id").as_string());
}

CommandResult ctl(const RunningDaemon& d, std::vector<std::string> args, const std::string& token = "") {
  args.insert(args.begin(), {HWFARMCTL_PATH, "--url", d.url()});
  return runCommand(args, {{"HWFARM_TOKEN", token}}, 60s);
}

hwfarm::cli::HttpResult upload(const RunningDaemon& d, const std::string& target, const std::string& bytes,
                               const std::string& token = "") {
  return hwfarm::cli::HttpClient(d.url()).request("POST", target, bytes, token, "application/octet-stream");
}

// The names in a directory, or none when it does not exist.
std::vector<std::string> entries(const std::string& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec))
    names.push_back(it->path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}


std::string detailOf(const hwfarm::cli::HttpResult& r) { return std::string(json::parse(r.body).at("detail").as_string()); }

} // namespace

TEST_CASE("hwfarmctl flash uploads the image and the flasher gets exactly its bytes") {
  TempDir dir;
  RunningDaemon d(dir, fleet(dir));
  Process board = plugIn(dir);
  std::string id = leaseTheBoard(d);
  // Given an image whose local name is hostile,
  std::string bytes = "\x7f" "ELF firmware\n\0\x01\x02 }[$(id)]" + std::string(100000, 'x');
  std::string local = dir.write("my fw [1] $(id) }.elf", bytes);
  // when hwfarmctl flashes it,
  auto r = ctl(d, {"--json", "flash", id, "fake-1", local});
  INFO(r.err);
  REQUIRE(r.status.code == 0);
  // the flasher read the uploaded bytes from a daemon-made path.
  std::string sha = hwfarm::config::sha256Hex(bytes);
  std::string stored = dir.file("state/consoles/" + id + "/images/" + sha + ".elf");
  REQUIRE(readFile(dir.file("flashed.bin")) == bytes);
  REQUIRE(readFile(dir.file("flashed.path")) == stored);
  auto answer = json::parse(r.out);
  REQUIRE(answer.at("image").at("sha256").as_string() == sha);
  REQUIRE(answer.at("image").at("bytes").as_int64() == static_cast<int64_t>(bytes.size()));
  REQUIRE(answer.at("image").at("name").as_string() == "my_fw__1____id___.elf");

  // The same content uploaded again is stored once, with no spool left.
  REQUIRE(ctl(d, {"flash", id, "fake-1", local}).status.code == 0);
  REQUIRE(entries(dir.file("state/consoles/" + id + "/images")) == std::vector<std::string>{sha + ".elf"});
  // A new build replaces it: the store keeps the board's current image only.
  std::string next = dir.write("next.bin", "build 2");
  REQUIRE(ctl(d, {"flash", id, "fake-1", next}).status.code == 0);
  REQUIRE(readFile(dir.file("flashed.bin")) == "build 2");
  REQUIRE(entries(dir.file("state/consoles/" + id + "/images")) ==
          std::vector<std::string>{hwfarm::config::sha256Hex("build 2") + ".bin"});

  // An image type no flasher knows is refused before its body is sent.
  std::string odd = dir.write("fw.exe", "MZ");
  auto refused = ctl(d, {"flash", id, "fake-1", odd});
  REQUIRE(refused.status.code == 1);
  REQUIRE(refused.err == "hwfarmctl: HTTP 400: invalid_request: unsupported image type \".exe\" (known: .elf, .axf, "
                         ".bin, .hex, .ihex, .srec, .s19, .dfu; none means .bin)\n");
  // A local file that is missing is a command-line error.
  auto missing = ctl(d, {"flash", id, "fake-1", dir.file("nope.elf")});
  REQUIRE(missing.status.code == 2);
  REQUIRE(missing.err == "hwfarmctl flash: cannot read image " + dir.file("nope.elf") + ": No such file or directory\n");

  // When the lease ends, its image store goes and its logs stay.
  REQUIRE(d.request("DELETE", "/v1/leases/" + id, "").status == 200);
  for (int i = 0; i < 500 && fs::exists(dir.file("state/consoles/" + id + "/images")); ++i)
    std::this_thread::sleep_for(10ms);
  REQUIRE_FALSE(fs::exists(dir.file("state/consoles/" + id + "/images")));
  REQUIRE(fs::exists(dir.file("state/consoles/" + id + "/flash__fake-1.txt")));
}

TEST_CASE("an upload over limits.max_image_bytes gets 413 and stores nothing") {
  TempDir dir;
  RunningDaemon d(dir, fleet(dir) + "[limits]\nmax_image_bytes = 4096\n");
  Process board = plugIn(dir);
  std::string id = leaseTheBoard(d);
  std::string target = "/v1/leases/" + id + "/boards/fake-1/flash?name=fw.bin";
  // Announced by its Content-Length: refused before the body is read.
  auto r = upload(d, target, std::string(4097, 'x'));
  REQUIRE(r.status == 413);
  REQUIRE(detailOf(r) == "request body exceeds 4096 bytes (limits.max_image_bytes)");
  auto viaCtl = ctl(d, {"flash", id, "fake-1", dir.write("big.bin", std::string(5000, 'y'))});
  REQUIRE(viaCtl.status.code == 1);
  REQUIRE(viaCtl.err == "hwfarmctl: HTTP 413: payload_too_large: request body exceeds 4096 bytes (limits.max_image_bytes)\n");
  // Sent chunked, with no length up front: cut off at the limit.
  auto chunked = runCommand({"/usr/bin/curl", "-s", "-o", dir.file("chunked.out"), "-w", "%{http_code}", "-X", "POST",
                             "-H", "Content-Type: application/octet-stream", "-H", "Transfer-Encoding: chunked",
                             "--data-binary", "@" + dir.write("big2.bin", std::string(10000, 'z')), d.url() + target});
  REQUIRE(chunked.out == "413");
  REQUIRE(readFile(dir.file("chunked.out")).find("limits.max_image_bytes") != std::string::npos);
  REQUIRE(entries(dir.file("state/consoles/" + id + "/images")).empty());
  REQUIRE_FALSE(fs::exists(dir.file("flashed.bin")));
  // At the limit it is flashed.
  REQUIRE(upload(d, target, std::string(4096, 'x')).status == 200);
  REQUIRE(readFile(dir.file("flashed.bin")) == std::string(4096, 'x'));
}

TEST_CASE("an upload that stalls gets 408 and stores nothing") {
  TempDir dir;
  RunningDaemon d(dir, fleet(dir) + "[limits]\nheader_timeout_s = 0.5\n");
  Process board = plugIn(dir);
  std::string id = leaseTheBoard(d);
  // Given an upload that announces 100000 bytes and sends 10,
  std::string answer = rawExchange(d.url(), "POST /v1/leases/" + id + "/boards/fake-1/flash?name=fw.bin HTTP/1.1\r\n"
                                            "Host: x\r\nContent-Type: application/octet-stream\r\n"
                                            "Content-Length: 100000\r\n\r\n0123456789");
  // the daemon gives up after header_timeout_s without progress, and its spool is gone.
  REQUIRE(answer.rfind("HTTP/1.1 408 Request Timeout\r\n", 0) == 0);
  REQUIRE(answer.find("\"error\":\"request_timeout\"") != std::string::npos);
  REQUIRE(entries(dir.file("state/consoles/" + id + "/images")).empty());
  REQUIRE_FALSE(fs::exists(dir.file("flashed.bin")));
}

TEST_CASE("an upload from a caller who may not flash is refused from its headers") {
  TempDir dir;
  std::string tokens = writeTokens(dir);
  std::string config = fleet(dir, "tokens_file = \"" + tokens + "\"\n");
  config.replace(config.find("anonymous = \"loopback\""), 22, "anonymous = \"off\"");
  RunningDaemon d(dir, config);
  Process board = plugIn(dir);
  std::string id = leaseTheBoard(d, "secret-pipeline");
  std::string target = "/v1/leases/" + id + "/boards/fake-1/flash?name=fw.bin";
  std::string big(1024 * 1024, 'x');
  auto anonymous = upload(d, target, big);
  REQUIRE(anonymous.status == 401);
  REQUIRE(detailOf(anonymous) == "this endpoint needs a bearer token (Authorization: Bearer TOKEN)");
  auto other = upload(d, target, big, "secret-pipeline2");
  REQUIRE(other.status == 403);
  REQUIRE(detailOf(other) == "lease " + id + " belongs to \"pipeline\"");
  auto viewer = upload(d, target, big, "secret-viewer");
  REQUIRE(viewer.status == 403);
  auto no_lease = upload(d, "/v1/leases/nope/boards/fake-1/flash", big, "secret-pipeline");
  REQUIRE(no_lease.status == 404);
  // A client that sends its body without waiting (no Expect) still reads the answer.
  std::string body = dir.write("big.bin", std::string(8 * 1024 * 1024, 'b'));
  for (const char* token : {"", "secret-pipeline2"}) {
    auto eager = runCommand({"/usr/bin/curl", "-s", "-o", dir.file("eager.out"), "-w", "%{http_code}", "-X", "POST",
                             "-H", "Expect:", "-H", "Content-Type: application/octet-stream", "-H",
                             std::string("Authorization: Bearer ") + token, "--data-binary", "@" + body,
                             d.url() + target});
    REQUIRE(eager.out == (*token ? "403" : "401"));
  }
  REQUIRE(entries(dir.file("state/consoles/" + id + "/images")).empty());
  // The holder's upload goes through.
  REQUIRE(upload(d, target, "fw", "secret-pipeline").status == 200);
  REQUIRE(readFile(dir.file("flashed.bin")) == "fw");
}

TEST_CASE("a server-side image path is allowed only under agent.image_roots") {
  TempDir dir;
  std::string root = dir.file("images");
  fs::create_directories(root);
  RunningDaemon d(dir, fleet(dir, "image_roots = [\"" + root + "/\"]\n") + "[limits]\nmax_image_bytes = 4096\n");
  Process board = plugIn(dir);
  std::string id = leaseTheBoard(d);
  std::string base = "/v1/leases/" + id + "/boards/fake-1/flash";
  auto flashPath = [&](const std::string& path) {
    return d.request("POST", base, json::serialize(json::object{{"image", path}}), "");
  };
  auto refused = [&](const hwfarm::cli::HttpResult& r, int status, const std::string& error,
                     const std::string& detail) {
    INFO(r.body);
    REQUIRE(r.status == status);
    REQUIRE(json::parse(r.body).at("error").as_string() == error);
    REQUIRE(detailOf(r) == detail);
  };
  std::string outside = " is not under agent.image_roots (" + root + "): upload it instead";
  // Outside the roots: refused, whether the file exists or not.
  refused(flashPath("/etc/shadow"), 403, "image_path_refused", "image /etc/shadow" + outside);
  refused(flashPath("/nonexistent/fw.elf"), 403, "image_path_refused", "image /nonexistent/fw.elf" + outside);
  refused(flashPath(root + "/../fleet.toml"), 403, "image_path_refused", "image " + root + "/../fleet.toml" + outside);
  // A symlink under the roots that points outside them.
  REQUIRE(::symlink("/etc/passwd", (root + "/evil.bin").c_str()) == 0);
  refused(flashPath(root + "/evil.bin"), 403, "image_path_refused", "image " + root + "/evil.bin" + outside);
  // Not regular files.
  REQUIRE(::mkfifo((root + "/fifo.bin").c_str(), 0600) == 0);
  refused(flashPath(root + "/fifo.bin"), 400, "invalid_image", "image " + root + "/fifo.bin is not a regular file");
  fs::create_directories(root + "/dir.bin");
  refused(flashPath(root + "/dir.bin"), 400, "invalid_image", "image " + root + "/dir.bin is not a regular file");
  refused(flashPath(root + "/missing.bin"), 400, "invalid_image",
          "cannot open image " + root + "/missing.bin: No such file or directory");
  std::string large = dir.write("images/large.bin", std::string(4097, 'L'));
  refused(flashPath(large), 413, "payload_too_large",
          "image " + large + " is 4097 bytes, over 4096 (limits.max_image_bytes)");
  // Nothing was stored or flashed for any of them.
  REQUIRE(entries(dir.file("state/consoles/" + id + "/images")).empty());
  REQUIRE_FALSE(fs::exists(dir.file("flashed.bin")));

  // A file under the roots is copied into the lease's store and flashed from there.
  std::string good = dir.write("images/good.hex", ":00000001FF\n");
  auto r = flashPath(good);
  INFO(r.body);
  REQUIRE(r.status == 200);
  REQUIRE(readFile(dir.file("flashed.bin")) == ":00000001FF\n");
  REQUIRE(readFile(dir.file("flashed.path")) ==
          dir.file("state/consoles/" + id + "/images/" + hwfarm::config::sha256Hex(":00000001FF\n") + ".hex"));
}

TEST_CASE("without agent.image_roots a server-side path is refused") {
  TempDir dir;
  RunningDaemon d(dir, fleet(dir));
  Process board = plugIn(dir);
  std::string id = leaseTheBoard(d);
  std::string image = dir.write("fw.bin", "fw");
  auto r = d.request("POST", "/v1/leases/" + id + "/boards/fake-1/flash", "{\"image\":\"" + image + "\"}", "");
  REQUIRE(r.status == 403);
  REQUIRE(detailOf(r) == "server-side image paths are disabled (agent.image_roots is empty): upload the image "
                         "(hwfarmctl flash uploads it)");
  REQUIRE_FALSE(fs::exists(dir.file("flashed.bin")));
}

TEST_CASE("the image store of a lease that ended while hwfarmd was down goes at start-up") {
  TempDir dir;
  RunningDaemon d(dir, fleet(dir));
  Process board = plugIn(dir);
  for (int i = 0; i < 300 && json::parse(d.get("/v1/boards").body).at("boards").at(0).at("state").as_string() !=
                                 "available";
       ++i)
    std::this_thread::sleep_for(10ms);
  auto granted = d.request("POST", "/v1/leases", R"({"selector":{"type":"fake"},"context":"manual","ttl_s":2})", "");
  REQUIRE(granted.status == 201);
  auto start = std::chrono::steady_clock::now();
  std::string id(json::parse(granted.body).at("id").as_string());
  REQUIRE(upload(d, "/v1/leases/" + id + "/boards/fake-1/flash?name=fw.bin", "fw").status == 200);
  std::string store = dir.file("state/consoles/" + id + "/images");
  REQUIRE(entries(store).size() == 1);
  // Given hwfarmd down while the lease's TTL runs out,
  d.process().signal(SIGKILL);
  d.process().wait(10s);
  std::this_thread::sleep_until(start + 2500ms); // the lease's own TTL, in wall-clock time
  d.killAndRestart();
  // the restarted daemon removes its store and keeps its logs.
  waitWhile([&] { return fs::exists(store); }, 5s);
  REQUIRE_FALSE(fs::exists(store));
  REQUIRE(fs::exists(dir.file("state/consoles/" + id + "/flash__fake-1.txt")));
  REQUIRE(json::parse(d.get("/v1/leases/" + id).body).at("state").as_string() == "expired");
}
