// hwfarmd on an https:// address and hwfarmctl against it, with
// certificates the test makes (tests/support/test_certs.h): leases and runs
// over TLS, the client's refusals (expired, another name, no trusted CA),
// the key file's rules, plain HTTP on the TLS port, and a SIGHUP with a new
// certificate that drops no connection.
#include <catch2/catch.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <boost/json.hpp>
#include <filesystem>
#include <regex>
#include <signal.h>

#include "tests/support/daemon_harness.h"
#include "tests/support/test_certs.h"

using namespace hwfarm::test;
namespace json = boost::json;
namespace asio = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using namespace std::chrono_literals;

namespace {

const std::string kPipeline = "secret-pipeline";
const std::string kOperator = "secret-operator";

std::string firmware(const std::string& variant) {
  return std::string(HWFARM_FIRMWARE_DIR) + "/hwfarm-" + variant + ".elf";
}

// Writes a certificate and its key (mode 0600) into `dir` as NAME.crt and
// NAME.key; returns the config lines that name them.
std::string writeIdentity(const TempDir& dir, const CertAndKey& id, const std::string& name = "server") {
  dir.write(name + ".crt", id.cert_pem);
  std::string key = dir.write(name + ".key", id.key_pem);
  REQUIRE(::chmod(key.c_str(), 0600) == 0);
  return "tls_cert = \"" + dir.file(name + ".crt") + "\"\ntls_key = \"" + dir.file(name + ".key") + "\"\n";
}

// A fleet with one QEMU board, tokens, a unix socket (where the test looks
// at the state behind TLS's back) and an https:// address.
std::string httpsFleet(const TempDir& dir, const std::string& tls_lines) {
  std::string text = tokenFleet(dir, 1, tls_lines);
  return std::regex_replace(text, std::regex("listen = \"127.0.0.1:0\""),
                            "listen = [\"unix:" + dir.file("hwfarmd.sock") + "\", \"https://127.0.0.1:0\"]");
}

std::string httpsUrl(const RunningDaemon& d) {
  std::smatch m;
  std::string log = d.log();
  REQUIRE(std::regex_search(log, m, std::regex("listening on (https://[^\\s]+)")));
  return m[1];
}

std::string portOf(const std::string& url) { return url.substr(url.rfind(':') + 1); }

CommandResult hwfarmctl(std::vector<std::string> args, const std::map<std::string, std::string>& env = {}) {
  args.insert(args.begin(), HWFARMCTL_PATH);
  return runCommand(args, env, 120s);
}

size_t activeLeases(const RunningDaemon& d) {
  return json::parse(d.get("/v1/leases", kOperator).body).at("leases").as_array().size();
}

// One TLS connection that stays open: requests on it show whether the
// daemon keeps a connection across a certificate reload.
class KeptConnection {
 public:
  KeptConnection(const std::string& port, const std::string& ca_pem)
      : ctx_(asio::ssl::context::tls_client), stream_(io_, ctx_) {
    ctx_.add_certificate_authority(asio::buffer(ca_pem));
    ctx_.set_verify_mode(asio::ssl::verify_peer);
    asio::ip::tcp::resolver resolver(io_);
    beast::get_lowest_layer(stream_).connect(resolver.resolve("127.0.0.1", port));
    stream_.handshake(asio::ssl::stream_base::client);
  }
  int get(const std::string& target) {
    http::request<http::empty_body> request{http::verb::get, target, 11};
    request.set(http::field::host, "127.0.0.1");
    request.set(http::field::authorization, "Bearer " + kOperator);
    http::write(stream_, request);
    http::response<http::string_body> response;
    http::read(stream_, buffer_, response);
    return static_cast<int>(response.result_int());
  }

 private:
  asio::io_context io_;
  asio::ssl::context ctx_;
  beast::ssl_stream<beast::tcp_stream> stream_;
  beast::flat_buffer buffer_;
};

} // namespace

TEST_CASE("leases and runs over https with a certificate the CA vouches for") {
  // Given hwfarmd on https:// with a certificate for 127.0.0.1 from the test's CA,
  TempDir dir;
  TestCa ca;
  std::string ca_file = dir.write("ca.crt", ca.certPem());
  RunningDaemon d(dir, httpsFleet(dir, writeIdentity(dir, ca.issue({"127.0.0.1", "localhost"}))));
  std::string url = httpsUrl(d);
  REQUIRE(url.rfind("https://127.0.0.1:", 0) == 0);
  REQUIRE(d.log().find("TLS certificate CN=127.0.0.1 from " + dir.file("server.crt") + ", valid until") !=
          std::string::npos);

  // when a pipeline leases the board with --cacert,
  CommandResult lease = hwfarmctl({"--url", url, "--cacert", ca_file, "--token", kPipeline, "-q", "lease", "acquire",
                                   "--type", "mps2-an385", "--context", "manual"});
  INFO(lease.out << lease.err);
  REQUIRE(lease.status.code == 0);
  std::string id = lease.out.substr(0, lease.out.find('\n'));
  REQUIRE(activeLeases(d) == 1);

  // and runs the test firmware on it (the CA from $HWFARM_CACERT, the name
  // "localhost" this time), the run passes with its verdict streamed over TLS;
  CommandResult run = hwfarmctl({"--url", "https://localhost:" + portOf(url), "--token", kPipeline, "run", "--lease",
                                 id, "--reference", "none", "--out", dir.file("out"), firmware("pass")},
                                {{"HWFARM_CACERT", ca_file}});
  INFO(run.out << run.err);
  CHECK(run.status.code == 0);
  CHECK(run.out.find(": passed\n") != std::string::npos);
  CHECK(std::filesystem::exists(dir.file("out/junit.xml")));

  // then the lease is released over TLS too.
  CommandResult release = hwfarmctl({"--url", url, "--cacert", ca_file, "--token", kPipeline, "lease", "release", id});
  CHECK(release.status.code == 0);
  CHECK(activeLeases(d) == 0);
}

TEST_CASE("hwfarmctl refuses an expired certificate, one for another name and one no trusted CA issued, sending nothing") {
  TempDir dir;
  TestCa ca, other_ca("another CA");
  std::string ca_file = dir.write("ca.crt", ca.certPem());
  auto acquire = [&](const std::string& url, std::vector<std::string> extra = {}) {
    std::vector<std::string> args{"--url", url, "--token", kPipeline};
    args.insert(args.end(), extra.begin(), extra.end());
    for (std::string a : {"lease", "acquire", "--type", "mps2-an385", "--context", "manual", "--wait", "0"})
      args.push_back(a);
    return hwfarmctl(args);
  };

  SECTION("an expired certificate") {
    // Given a certificate that expired an hour ago (hwfarmd still serves it, and says so),
    RunningDaemon d(dir, httpsFleet(dir, writeIdentity(dir, ca.issue({"127.0.0.1"}, -7200, -3600))));
    CHECK(d.log().find("the TLS certificate " + dir.file("server.crt") + " expired at") != std::string::npos);
    // hwfarmctl refuses it with the reason, exits 3 and does not retry or fall back to http.
    CommandResult r = acquire(httpsUrl(d), {"--cacert", ca_file});
    CHECK(r.status.code == 3);
    CHECK(r.err == "hwfarmctl: refusing " + httpsUrl(d) +
                       ": its certificate is not trusted: certificate has expired (verified against the CA file " +
                       ca_file + ")\n");
    CHECK(activeLeases(d) == 0);
  }
  SECTION("a certificate for another name") {
    RunningDaemon d(dir, httpsFleet(dir, writeIdentity(dir, ca.issue({"lab-02.example"}))));
    std::string port = portOf(httpsUrl(d));
    CommandResult by_ip = acquire("https://127.0.0.1:" + port, {"--cacert", ca_file});
    CHECK(by_ip.status.code == 3);
    CHECK(by_ip.err == "hwfarmctl: refusing https://127.0.0.1:" + port +
                           ": its certificate is not issued for that name (IP address mismatch)\n");
    CommandResult by_name = acquire("https://localhost:" + port, {"--cacert", ca_file});
    CHECK(by_name.status.code == 3);
    CHECK(by_name.err == "hwfarmctl: refusing https://localhost:" + port +
                             ": its certificate is not issued for that name (hostname mismatch)\n");
    CHECK(activeLeases(d) == 0);
  }
  SECTION("a certificate no trusted CA issued") {
    RunningDaemon d(dir, httpsFleet(dir, writeIdentity(dir, other_ca.issue({"127.0.0.1"}))));
    std::string url = httpsUrl(d);
    // Not by the system's CA store,
    CommandResult system = acquire(url);
    CHECK(system.status.code == 3);
    CHECK(system.err == "hwfarmctl: refusing " + url +
                            ": its certificate is not trusted: unable to get local issuer certificate (verified "
                            "against the system's CA store (or --cacert FILE, $HWFARM_CACERT))\n");
    // nor by a CA file of another CA.
    CommandResult wrong_ca = acquire(url, {"--cacert", ca_file});
    CHECK(wrong_ca.status.code == 3);
    CHECK(wrong_ca.err.find("its certificate is not trusted: unable to get local issuer certificate") !=
          std::string::npos);
    CHECK(activeLeases(d) == 0);
  }
  SECTION("a CA file that cannot be used") {
    RunningDaemon d(dir, httpsFleet(dir, writeIdentity(dir, ca.issue({"127.0.0.1"}))));
    CommandResult missing = acquire(httpsUrl(d), {"--cacert", dir.file("nope.crt")});
    CHECK(missing.status.code == 3);
    CHECK(missing.err == "hwfarmctl: cannot use the CA file " + dir.file("nope.crt") +
                             " (--cacert, $HWFARM_CACERT): No such file or directory\n");
    CommandResult not_pem = acquire(httpsUrl(d), {"--cacert", d.configPath()});
    CHECK(not_pem.status.code == 3);
    CHECK(not_pem.err.find("hwfarmctl: cannot use the CA file " + d.configPath() +
                           " (--cacert, $HWFARM_CACERT): no PEM certificate in it") == 0);
  }
}

TEST_CASE("plain HTTP to the https port is answered that the address serves HTTPS, and hwfarmctl says so") {
  TempDir dir;
  TestCa ca;
  RunningDaemon d(dir, httpsFleet(dir, writeIdentity(dir, ca.issue({"127.0.0.1"}))));
  std::string port = portOf(httpsUrl(d));
  std::string answer = rawExchange("http://127.0.0.1:" + port, "GET /v1/healthz HTTP/1.1\r\nHost: x\r\n\r\n");
  CHECK(answer.rfind("HTTP/1.1 400 Bad Request\r\n", 0) == 0);
  CHECK(answer.find(R"({"error":"https_required","detail":"this address serves HTTPS only: use an https:// URL"})") !=
        std::string::npos);
  CommandResult r = hwfarmctl({"--url", "http://127.0.0.1:" + port, "status"});
  CHECK(r.status.code == 1);
  CHECK(r.err == "hwfarmctl: HTTP 400: https_required: this address serves HTTPS only: use an https:// URL\n");
  // and https:// to a plain HTTP address fails the handshake, saying so.
  TempDir plain_dir;
  RunningDaemon plain(plain_dir, qemuFleet(plain_dir.file("state"), 1));
  std::string plain_port = portOf(plain.url());
  CommandResult tls_to_http = hwfarmctl({"--url", "https://127.0.0.1:" + plain_port, "status"});
  CHECK(tls_to_http.status.code == 3);
  CHECK(tls_to_http.err.find("hwfarmctl: TLS handshake with https://127.0.0.1:" + plain_port + " failed: ") == 0);
  CHECK(tls_to_http.err.find("(is it an https:// address?)") != std::string::npos);
}

TEST_CASE("the TLS key file is refused when group or others may read it, at start-up, check-config and reload") {
  TempDir dir;
  TestCa ca;
  std::string tls = writeIdentity(dir, ca.issue({"127.0.0.1"}));
  std::string key = dir.file("server.key");
  std::string config = dir.write("fleet.toml", httpsFleet(dir, tls));
  std::string refusal = "agent.tls_key " + key + ": TLS key file is open to group or others (mode 0640); only its "
                        "owner may read or write it; run: chmod go-rwx " + key;

  SECTION("check-config and start-up") {
    REQUIRE(::chmod(key.c_str(), 0640) == 0);
    CommandResult check = runCommand({HWFARMD_PATH, "--check-config", config});
    CHECK(check.status.code == 1);
    CHECK(check.err == refusal + "\nhwfarmd: " + config + ": the TLS certificate or key is not usable\n");
    CommandResult start = runCommand({HWFARMD_PATH, "--config", config}, {{"NOTIFY_SOCKET", ""}}, 20s);
    CHECK(start.status.code == 1);
    CHECK(start.err.find(refusal) != std::string::npos);
    CHECK(start.err.find("the TLS certificate or key is not usable; not starting") != std::string::npos);
  }
  SECTION("a symbolic link, a key of another certificate, a certificate file without PEM") {
    std::string other_key = dir.write("other.key", ca.issue({"127.0.0.1"}).key_pem);
    REQUIRE(::chmod(other_key.c_str(), 0600) == 0);
    REQUIRE(::symlink(other_key.c_str(), dir.file("link.key").c_str()) == 0);
    auto check = [&](const std::string& cert, const std::string& key_file) {
      std::string text = std::regex_replace(httpsFleet(dir, tls), std::regex("tls_cert = \"[^\"]*\""),
                                            "tls_cert = \"" + cert + "\"");
      text = std::regex_replace(text, std::regex("tls_key = \"[^\"]*\""), "tls_key = \"" + key_file + "\"");
      return runCommand({HWFARMD_PATH, "--check-config", dir.write("check.toml", text)}).err;
    };
    CHECK(check(dir.file("server.crt"), dir.file("link.key")).rfind(
              "agent.tls_key " + dir.file("link.key") + ": TLS key file is a symbolic link", 0) == 0);
    CHECK(check(dir.file("server.crt"), other_key).rfind(
              "agent.tls_key " + other_key + ": the key does not belong to the certificate of agent.tls_cert " +
                  dir.file("server.crt"), 0) == 0);
    CHECK(check(config, key).rfind("agent.tls_cert " + config + ": no PEM certificate", 0) == 0);
  }
  SECTION("a reload keeps the certificate it has") {
    RunningDaemon d(dir, httpsFleet(dir, tls));
    REQUIRE(::chmod(key.c_str(), 0644) == 0);
    d.process().signal(SIGHUP);
    auto log = waitForText(d.logPath(), "reload failed", 10s);
    REQUIRE(log);
    CHECK(log->find(std::regex_replace(refusal, std::regex("0640"), "0644")) != std::string::npos);
    std::string ca_file = dir.write("ca.crt", ca.certPem());
    CHECK(hwfarmctl({"--url", httpsUrl(d), "--cacert", ca_file, "status"}).status.code == 0);
  }
}

TEST_CASE("config: https:// needs tls_cert and tls_key, and they need an https:// address") {
  TempDir dir;
  auto errors = [&](const std::string& text) {
    return runCommand({HWFARMD_PATH, "--check-config", dir.write("c.toml", text)}).err;
  };
  std::string base = "[agent]\nname = \"a\"\ntier = 1\n";
  std::string workers = "[[worker]]\nname = \"w\"\n";
  CHECK(errors(base + "listen = \"https://0.0.0.0:7443\"\n" + workers).find(
            "agent.listen: an https:// address needs agent.tls_cert (the certificate chain, PEM)") != std::string::npos);
  CHECK(errors(base + "listen = \"https://0.0.0.0:7443\"\n" + workers).find(
            "agent.listen: an https:// address needs agent.tls_key (the private key, PEM)") != std::string::npos);
  CHECK(errors(base + "tls_cert = \"/etc/hwfarm/x.crt\"\ntls_key = \"x.key\"\n" + workers).find(
            "agent.tls_cert: set, but no agent.listen address is https://") != std::string::npos);
  CHECK(errors(base + "tls_cert = \"/etc/hwfarm/x.crt\"\ntls_key = \"x.key\"\n" + workers).find(
            "agent.tls_key: expected an absolute path, got \"x.key\"") != std::string::npos);
  CHECK(errors(base + "listen = \"https://nowhere:1\"\n" + workers).find(
            "expected \"HOST:PORT\", \"[IPV6]:PORT\", \"https://HOST:PORT\" or \"unix:/PATH\", got "
            "\"https://nowhere:1\" (not an IPv4 address or localhost)") != std::string::npos);
}

TEST_CASE("SIGHUP with a new certificate: new connections get it and an open one goes on with the old") {
  // Given hwfarmd serving a certificate from CA 1 and a client connected,
  TempDir dir;
  TestCa ca1("CA one"), ca2("CA two");
  std::string ca1_file = dir.write("ca1.crt", ca1.certPem()), ca2_file = dir.write("ca2.crt", ca2.certPem());
  RunningDaemon d(dir, httpsFleet(dir, writeIdentity(dir, ca1.issue({"127.0.0.1"}))));
  std::string url = httpsUrl(d);
  KeptConnection kept(portOf(url), ca1.certPem());
  REQUIRE(kept.get("/v1/boards") == 200);
  REQUIRE(hwfarmctl({"--url", url, "--cacert", ca1_file, "status"}).status.code == 0);

  // when the files are replaced by a certificate from CA 2 and hwfarmd reloads,
  writeIdentity(dir, ca2.issue({"127.0.0.1"}));
  d.process().signal(SIGHUP);
  REQUIRE(waitForText(d.logPath(), "configuration generation 2 loaded", 10s));

  // new connections are served the new one (CA 1 no longer vouches for it),
  CHECK(hwfarmctl({"--url", url, "--cacert", ca2_file, "status"}).status.code == 0);
  CHECK(hwfarmctl({"--url", url, "--cacert", ca1_file, "status"}).status.code == 3);
  // and the connection open before the reload still answers.
  CHECK(kept.get("/v1/boards") == 200);
  CHECK(kept.get("/v1/queue") == 200);
}
